"""python -m fuelvk {info, settings, kernels, specs, bench, definitions}"""
import argparse
import json
import os
import sys

DESCRIPTION = """fuelvk's command line. Start with `info` (which device fuelvk picked, and why), then
`bench --quick`; `settings` shows the FUELVK_* environment variables and their values now."""


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
    print(f"loads    : matmul {lp['matmul']}; {lp['other kernels']} "
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


def _settings(args):
    from fuelvk import config
    from fuelvk.errors import DeviceError
    if args.markdown:
        print(config.markdown_table(), end="")
        return 0
    bad = 0
    for name, s in config.SETTINGS.items():
        try:
            value = config.get(name)
            default = config.shown_default(s)
            shown = repr(value) if config.is_set(name) else "(unset" + (f": {default})" if default else ")")
        except DeviceError as e:   # naming the variable and what it accepts
            shown, bad = f"BAD: {e}", bad + 1
        print(f"{name:26s} {shown}")
    for name, near in config.unknown_variables():
        print(f"{name:26s} not a fuelvk setting (ignored)" + (f"; did you mean {near}?" if near else ""))
    return 1 if bad else 0


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
    from fuelvk.errors import FuelVKError
    try:
        return _main(argv)
    except FuelVKError as e:   # typed and self-explaining (a setting, no driver, ...): its message, no traceback
        print(f"python -m fuelvk: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:   # `python -m fuelvk kernels | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "specs":
        return _specs(argv[1:])
    if argv and argv[0] == "bench":
        return _bench(argv[1:])
    if argv and argv[0] == "definitions":
        return _definitions(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m fuelvk", description=DESCRIPTION)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="command")
    p = sub.add_parser("info", help="device, driver, limits, features, routes, and why each was picked")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_info)
    p = sub.add_parser("settings", help="the FUELVK_* environment variables: each one's value now, bad "
                                        "values and unknown FUELVK_ names (exit 1 on a bad value)")
    p.add_argument("--markdown", action="store_true", help="README.md's settings table (generated from config.py)")
    p.set_defaults(fn=_settings)
    p = sub.add_parser("kernels", help="every kernel variant in the registry")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_kernels)
    sub.add_parser("specs", help="op specs: validate, list, workloads, roofline (see `specs --help`)")
    sub.add_parser("bench", help="time ops against the device's roofs, numpy and torch CPU (see `bench --help`)")
    sub.add_parser("definitions", help="FlashInfer-Bench Definitions: export, workloads, run, report "
                                       "(see `definitions --help`)")
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
