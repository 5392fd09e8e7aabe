"""`python -m fuelvk specs ...`: validate spec files, list ops, show workload cases and rooflines."""
from __future__ import annotations

import argparse
import sys

import yaml

from .api import eval_roofline, load_specs, workloads
from .model import SpecError
from .validate import validate


def _parser():
    p = argparse.ArgumentParser(prog="python -m fuelvk specs", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="check spec files (default: fuelvk's own)")
    v.add_argument("files", nargs="*")
    v.add_argument("--tileops", action="store_true", help="plain TileOPs files: no fuelvk_* fields, no code checks")
    v.add_argument("--no-impl", action="store_true", help="skip the checks against fuelvk's functions")
    v.add_argument("--no-ref-api", action="store_true", help="do not import ref_api modules to check names")
    sub.add_parser("list", help="every op with its status and fuelvk function")
    w = sub.add_parser("workloads", help="the cases of an op's workload rows, with FLOPs and bytes")
    w.add_argument("op")
    r = sub.add_parser("roofline", help="FLOPs and bytes of one call: roofline OP NAME=VALUE ...")
    r.add_argument("op")
    r.add_argument("bindings", nargs="*", metavar="NAME=VALUE", help="values are YAML: S=[2048,4096] T=float16")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.cmd == "validate":
            problems = validate(args.files or None, fuelvk=not args.tileops,
                                check_impl=not (args.no_impl or args.tileops), check_ref_api=not args.no_ref_api)
            for p in problems:
                print(p)
            errors = sum(p.severity == "error" for p in problems)
            print(f"{errors} error(s), {len(problems) - errors} warning(s)")
            return 1 if errors else 0
        if args.cmd == "list":
            for name, s in load_specs().items():
                print(f"{name:32} {s.status:12} {s.family:12} fuelvk.{s.fuelvk_api}")
            return 0
        if args.cmd == "workloads":
            for c in workloads(args.op):
                shapes = ", ".join(f"{n}{tuple(v[0]) if isinstance(v, tuple) else [x[0] for x in v]}"
                                   for n, v in c["inputs"].items())
                print(f"{c['case_id']:48} {shapes}  flops={c['flops']} bytes={c['bytes']}")
            return 0
        bindings = {}
        for b in args.bindings:
            name, sep, value = b.partition("=")
            if not sep:
                print(f"error: {b!r} is not NAME=VALUE", file=sys.stderr)
                return 2
            bindings[name] = _number(yaml.safe_load(value))
        try:
            flops, nbytes = eval_roofline(args.op, **bindings)
        except SpecError as e:   # most often a binding left out: show a whole call, from the spec's first row
            case = next(workloads(args.op), None)
            if case is None:
                raise
            example = " ".join(f"{k}={_yaml(v)}" for k, v in {**case["indices"], **case["params"]}.items()
                               if v is not None)
            some = f" some={_yaml(case['some'])}" if case["some"] else ""
            raise SpecError(f"{e}\n  e.g. (its first workload row): python -m fuelvk specs roofline {args.op} "
                            f"{example}{some}") from None
        print(f"flops={flops} bytes={nbytes}")
        return 0
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _number(v):
    """YAML 1.1 reads 1e-6 (no dot) as a string: a string Python reads as a number is that number."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    return v


def _yaml(v):
    """A binding value as the command line takes it (YAML flow style: [2048], float16)."""
    return yaml.safe_dump(list(v) if isinstance(v, tuple) else v, default_flow_style=True).strip().removesuffix(
        "\n...").strip()


if __name__ == "__main__":
    sys.exit(main())
