"""python -m fuelvk {info, kernels, specs, bench, definitions}"""
import argparse
import json
import sys


def _info(args):
    import fuelvk
    info = fuelvk.device_info()
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"device   : {info['name']} ({info['type']}, index {info['index']})")
    print(f"driver   : {info['driver']}, Vulkan {info['api_version']}")
    print(f"subgroup : {info['subgroup_size']}")
    cap = info["loop_cap"]
    probed = "FUELVK_LOOP_BUDGET" if cap is None else (
        "no cap found" if cap["cap"] is None else f"cap {cap['cap']} per {cap['scope']}")
    budget = info["loop_budget"] or "none (nothing split)"
    print(f"loops    : budget {budget} iterations per invocation ({probed})")
    for k, v in info["limits"].items():
        print(f"  {k:32s} {v}")
    prof = info["limits_profile"]
    print("limits   : " + (f"profile {prof['name']!r} (FUELVK_LIMITS): " + ", ".join(
        f"{k} {v}" for k, v in prof["overrides"].items()) if prof else "the device's own (FUELVK_LIMITS unset)"))
    mem, desc = info["memory"], info["descriptors"]
    kind = "mapped (host-visible) arrays" if mem["direct_mapped"] else "device-local arrays + staging copies"
    print(f"memory   : {kind}, {mem['why']}")
    print(f"binding  : {desc['path']}, {desc['why']}")
    lp = info["load_path"]
    print(f"loads    : matmul {lp['matmul']}; other kernels {lp['other kernels']} "
          f"(maxTexelBufferElements {lp['maxTexelBufferElements']})")
    hc = info["half_conversions"]
    print(f"f16      : widen {hc['widen']}, narrow {hc['narrow']} "
          f"({'probed' if hc['probe'] is not None else 'FUELVK_HALF_NATIVE'})")
    huge = info["memory"].get("huge_pages")
    if huge is not None:
        print(f"huge pages: {'yes (THP-eligible)' if huge else 'no (madvise had no effect: shared mapping or THP off)'}")
    print(f"features : {', '.join(info['features'])}")
    print(f"extensions: {', '.join(info['extensions']) or '-'}")
    for op, routes in info["routes"].items():
        print(f"routes   : {op}: {', '.join(routes)}")
    return 0


def _kernels(args):
    from fuelvk.kernels import VARIANTS
    rows = [{"name": name, "family": v.family, "tag": v.tag, "spv": v.spv, "id": v.id}
            for v in VARIANTS.values() for name in v.names]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['id']:32s} {r['name']:36s} {r['spv']}")
    return 0


def _specs(rest):
    from fuelvk.specs import cli
    return cli.main(rest)


def _definitions(rest):
    from fuelvk.definitions import cli
    return cli.main(rest)


def _bench(rest):
    from fuelvk.bench import main
    return main(rest)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "specs":
        return _specs(argv[1:])
    if argv and argv[0] == "bench":
        return _bench(argv[1:])
    if argv and argv[0] == "definitions":
        return _definitions(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m fuelvk")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info", help="device, driver, limits, features, routes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_info)
    p = sub.add_parser("kernels", help="every kernel variant in the registry")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_kernels)
    sub.add_parser("specs", help="op specs: validate (see `specs --help`)")
    sub.add_parser("bench", help="benchmarks (see `bench --help`)")
    sub.add_parser("definitions", help="FlashInfer-Bench Definitions: export, run (see `definitions --help`)")
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
