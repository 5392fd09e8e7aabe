"""python -m fuelvk definitions {export, run}: FlashInfer-Bench Definitions and fuelvk's Traces."""
import argparse
import difflib
import sys
from pathlib import Path

_PATTERN = {"definitions": "*.json files", "workloads": "*.jsonl files"}


def _count(path, pattern):
    """How many files of the pattern a path is or holds (folders searched recursively, as the loaders do)."""
    p = Path(path)
    return sum(1 for _ in p.rglob(pattern)) if p.is_dir() else int(p.match(pattern))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fuelvk definitions")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("export", help="write DIR/definitions/*.json and DIR/workloads/*.jsonl, one per op")
    p.add_argument("dir")
    p.add_argument("--small", action="store_true",
                   help="cap every dimension at 8 (quick checks; the names carry the smaller constants)")
    p = sub.add_parser("workloads", help="write ROOT/workloads/*.jsonl (+ ROOT/blob/) for the Definitions of the "
                                          "dataset's kinds that ship no workloads, at their own constants")
    p.add_argument("definitions", help="a Definition .json or a folder of them")
    p.add_argument("root", help="the dataset root to write workloads/ and blob/ under")
    p = sub.add_parser("run", help="evaluate fuelvk on Definitions + workload JSONL, write Trace JSONL")
    p.add_argument("definitions", help="a Definition .json or a folder of them")
    p.add_argument("workloads", help="a workload .jsonl or a folder of them")
    p.add_argument("-o", "--output", help="Trace JSONL to write (default: none, progress only)")
    p.add_argument("--max-workloads", type=int, help="evaluate at most N rows per Definition")
    p.add_argument("--max-elements", type=float,
                   help="skip rows whose input+output tensors hold more elements (e.g. 2e7 on lavapipe)")
    p.add_argument("--only", action="append", help="Definition name to evaluate (repeatable)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per side (after one warm-up)")
    p.add_argument("--dataset-root",
                   help="folder that safetensors input paths are relative to, as FlashInfer-Bench's "
                        "TraceSet root (default: the nearest folder holding definitions/ and workloads/)")
    for key, what in (("validation_trials", "calls whose samples must all lie in the valid mask"),
                      ("batch_rows", "rows the batch is repeated to for the frequency count"),
                      ("draws", "samples per row for the frequency count")):
        p.add_argument(f"--sampling-{key.split('_')[-1]}", dest=key, type=int,
                       help=f"sampling check: {what} (default FlashInfer-Bench's; smaller is a weaker check, "
                            "for CPU devices)")
    p = sub.add_parser("report", help="Markdown per op_type from a run's Trace JSONL (report.py)")
    p.add_argument("definitions")
    p.add_argument("traces")
    p.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    for what in ("definitions", "workloads", "traces", "root"):   # inputs that must exist (root is written)
        path = getattr(args, what, None)
        if path is not None and what != "root" and not Path(path).exists():
            ap.error(f"{args.cmd}: {what} {path!r} does not exist")
    if args.cmd in ("run", "workloads", "report"):
        found = {"definitions": _count(args.definitions, "*.json")}
        if args.cmd == "run":
            found["workloads"] = _count(args.workloads, "*.jsonl")
        empty = [w for w, n in found.items() if not n]
        if empty:
            ap.error(f"{args.cmd}: no {' and no '.join(f'{w} ({_PATTERN[w]})' for w in empty)} under "
                     + ", ".join(repr(getattr(args, w)) for w in empty)
                     + (" (the order is DEFINITIONS WORKLOADS)" if args.cmd == "run" else ""))
    if args.cmd == "report":
        from .report import report
        print(report(args.definitions, args.traces, args.output), end="")
        return 0
    if args.cmd == "export":
        from .export import export
        export(args.dir, small=args.small)
        return 0
    if args.cmd == "workloads":
        from .workloads import write_workloads
        names = write_workloads(args.definitions, args.root)
        print(f"{len(names)} workload files written under {args.root}/workloads", file=sys.stderr)
        return 0
    from .run import INPUT_UNAVAILABLE, NO_SOLUTION, TOLERANCES, load_definitions, run
    if args.only:   # a misspelt name would otherwise skip every row and print an empty table
        names = load_definitions(args.definitions)
        unknown = [n for n in args.only if n not in names]
        if unknown:
            near = {n: difflib.get_close_matches(n, names, n=3) for n in unknown}
            ap.error("--only: no Definition named " + "; ".join(
                f"{n!r}" + (f" (did you mean {', '.join(near[n])}?)" if near[n] else "") for n in unknown)
                + f" in {args.definitions} ({len(names)} Definitions)")
    TOLERANCES["sampling"].update({k: getattr(args, k) for k in ("validation_trials", "batch_rows", "draws")
                                   if getattr(args, k) is not None})
    traces = run(args.definitions, args.workloads, args.output, args.max_workloads,
                 None if args.max_elements is None else int(args.max_elements), args.only,
                 repeats=args.repeats, dataset_root=args.dataset_root, table=sys.stdout)
    counts = {}
    for t in traces:
        counts[t["evaluation"]["status"]] = counts.get(t["evaluation"]["status"], 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing run"
    print(f"summary: {summary}", file=sys.stderr)
    # Exit 1 when no row passed or a row failed; a blob we could not load and a Definition fuelvk
    # has no solution for are reported (status, table), not failures.
    ok = ("PASSED", INPUT_UNAVAILABLE, NO_SOLUTION)
    passed = any(t["evaluation"]["status"] == "PASSED" for t in traces)
    return 0 if passed and all(t["evaluation"]["status"] in ok for t in traces) else 1
