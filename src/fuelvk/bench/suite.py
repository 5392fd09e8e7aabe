"""`python -m fuelvk bench`: op specs' workload rows timed on the device against the device's roofs.

Each case is one workload row's dtype case (its TileOPs case id), scaled down on CPU devices (see
fuelvk.bench.cases), timed with device timestamp queries (warm-up, repeats; median and p10/p90),
and reported with GB/s and GFLOP/s from the spec's roofline, % of roof (speed of light =
max(bytes / copy bandwidth, FLOPs / FMA peak), each the higher of two calibrations, at the start and at the end
of the run), the route fuelvk took, and numpy / torch CPU on the same inputs in the same run
(ratio = their time / fuelvk's).

    python -m fuelvk bench --quick                       # representative set, < 2 min on lavapipe
    python -m fuelvk bench --ops rms_norm,softmax --filter float32 --json out.json --plot roof.png
    python -m fuelvk bench --list --ops matmul           # the cases, without running them
"""
from __future__ import annotations

import argparse
import sys
import time

from . import cases
from . import report
from .roofs import attainable, measure_roofs, peak_for
from .timing import host_measure, measure


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, n, stream=None):
        self.n, self.t0, self.stream = n, time.perf_counter(), stream or sys.stderr

    def show(self, i, label):
        bar = "#" * (24 * i // max(self.n, 1))
        self.stream.write(f"\r[{bar:24s}] {i}/{self.n} {time.perf_counter() - self.t0:6.1f}s {label[:60]:60s}")
        if i == self.n:
            self.stream.write("\n")
        self.stream.flush()


def _dtypes(call):
    return [dt for v in call["inputs"].values() for _, dt in (v if isinstance(v, list) else [v])]


def run_case(case, roofs, warmup, repeats, baselines, seed=0):
    """One row of the result: the fuelvk timing, throughput, roof, route and the baselines."""
    import fuelvk as fv
    row = {"op": case.op, "case_id": case.case_id, "shape": case.shape, "full_shape": case.full_shape,
           "scale": case.scale, "dtypes": _dtypes(case.call), "flops": case.flops, "bytes": case.bytes,
           "route": None, "error": None, "note": None}
    try:
        host, params = cases.make_inputs(case, seed), cases.call_params(case)
        dev = {k: [fv.asarray(x) for x in v] if isinstance(v, list) else fv.asarray(v) for k, v in host.items()}
        row["route"] = cases.route_of(case, dev, params)
        m = measure(cases.fuelvk_fn(case, dev, params), warmup, repeats)
    except Exception as e:  # noqa: BLE001 - the run goes on; the case reports the error (and the exit status is 1)
        row["error"] = f"{type(e).__name__}: {e}"
        return row
    ms = m["median_ms"]
    row["fuelvk"] = {k: m[k] for k in ("median_ms", "p10_ms", "p90_ms", "repeats", "device_timestamps")}
    row["GBps"] = case.bytes / ms / 1e6
    row["GFLOPs"] = case.flops / ms / 1e6
    row["intensity"] = case.flops / case.bytes if case.bytes else None
    if roofs is not None:
        against_roofs(row, roofs)
    for impl in baselines:
        try:
            fn = cases.reference(impl, case, host, params)
            if fn is None:
                row[impl] = None
                continue
            r = host_measure(fn, 1, repeats)
            row[impl] = {"median_ms": r["median_ms"], "p10_ms": r["p10_ms"], "p90_ms": r["p90_ms"],
                         "ratio": r["median_ms"] / ms}
        except Exception as e:  # noqa: BLE001 - e.g. a dtype the library lacks: reported, not fatal
            row[impl] = {"error": f"{type(e).__name__}: {e}"}
    return row


def against_roofs(row, roofs):
    """Fill a timed row's speed of light, binding roof and % of roof from `roofs`."""
    row["peak_dtype"], peak = peak_for(roofs, row["dtypes"])
    row["sol_ms"], row["bound"] = attainable(roofs, row["flops"], row["bytes"], peak)
    row["pct_of_roof"] = 100 * row["sol_ms"] / row["fuelvk"]["median_ms"]
    if row["pct_of_roof"] > 100:
        row["note"] = ("above the roof: the call did less work than the spec's roofline counts "
                       "(e.g. a no-op on an already contiguous input), or the roofs were measured low")


def higher_roofs(a, b):
    """Each roof the higher of two calibrations: on a shared host (lavapipe's worker threads get one or
    two cores of a 2-vCPU VM, in runs of calls) a calibration can land in the slow mode, and a case timed
    in the fast one would read above 100%; the higher roof is the one the device showed it can reach."""
    out = {k: max(a[k], b[k]) for k in ("copy_cmd_GBps", "copy_shader_GBps", "bandwidth_GBps", "copy_bytes")}
    out["fma_GFLOPs"] = {k: max(v, b["fma_GFLOPs"].get(k, v)) for k, v in a["fma_GFLOPs"].items()}
    return out


def run(ops=None, pattern=None, quick=False, warmup=None, repeats=None, max_bytes="auto", max_flops="auto",
        baselines=report.BASELINES, progress=True, roofs=None):
    """Run the selected cases; returns the result dict (device, settings, roofs, cases, wall_s).

    max_bytes / max_flops: the per-case scale-down budget; "auto" = cases.CPU_MAX_* on CPU devices and
    no limit elsewhere, None = no limit. Raises ValueError for a selection that matches nothing."""
    import fuelvk as fv

    from .. import runtime
    t0 = time.perf_counter()
    warmup = (1 if quick else 2) if warmup is None else warmup
    repeats = (5 if quick else 10) if repeats is None else repeats
    if repeats < 1 or warmup < 0:
        raise ValueError(f"bench: repeats must be >= 1 and warmup >= 0, got repeats={repeats} warmup={warmup}")
    bad = [b for b in baselines if b not in report.BASELINES]
    if bad:
        raise ValueError(f"bench: unknown baseline(s) {bad}; accepted: {', '.join(report.BASELINES)}")
    import importlib.util
    missing = [b for b in baselines if importlib.util.find_spec(b) is None]   # e.g. no torch installed
    baselines = tuple(b for b in baselines if b not in missing)
    selected = cases.select(ops, pattern, quick)
    info = fv.device_info()
    cpu = runtime.get().device.device_type == "cpu"
    if max_bytes == "auto":
        max_bytes = cases.CPU_MAX_BYTES if cpu else None
    if max_flops == "auto":
        max_flops = cases.CPU_MAX_FLOPS if cpu else None
    for case in selected:
        cases.prepare(case, max_bytes, max_flops)
    bar = Progress(len(selected) + 1) if progress else None
    if bar:
        bar.show(0, "calibrating roofs (copy bandwidth, FMA peak)")
    given = roofs is not None
    if not given:
        roofs = measure_roofs(repeats=max(3, min(repeats, 5)))
    rows = []
    for i, case in enumerate(selected):
        if bar:
            bar.show(i + 1, f"{case.op} {case.case_id}")
        rows.append(run_case(case, None, warmup, repeats, baselines))
    if bar:
        bar.show(len(selected) + 1, "calibrating roofs again")
    if not given:
        roofs = higher_roofs(roofs, measure_roofs(repeats=max(3, min(repeats, 5))))
    for row in rows:
        if row["error"] is None:
            against_roofs(row, roofs)
    if bar:
        bar.show(len(selected) + 1, "done")
    rule = ("none" if max_bytes is None and max_flops is None else
            f"largest dims halved until <= {(max_bytes or 0) / 2**20:g} MiB and <= {(max_flops or 0) / 1e9:g} GFLOP per case")
    return {"device": {"name": info["name"], "type": info["type"], "driver": info["driver"]},
            "settings": {"quick": quick, "ops": ops, "filter": pattern, "warmup": warmup, "repeats": repeats,
                         "max_bytes": max_bytes, "max_flops": max_flops, "scale_rule": rule,
                         "baselines": list(baselines), "baselines_not_installed": missing},
            "roofs": roofs, "cases": rows, "wall_s": time.perf_counter() - t0}


def parser():
    ap = argparse.ArgumentParser(prog="python -m fuelvk bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one representative case per op (< 2 min on lavapipe)")
    ap.add_argument("--ops", help="comma-separated ops (fuelvk name, spec name or family); default: all implemented")
    ap.add_argument("--filter", help="regex searched in '<op> <case id>', e.g. float32 or 'matmul .*decode'")
    ap.add_argument("--list", action="store_true", help="print the selected cases (scaled shapes) and exit")
    ap.add_argument("--repeats", type=int, help="timed repeats per case (default 10, --quick 5)")
    ap.add_argument("--warmup", type=int, help="untimed calls first (default 2, --quick 1)")
    ap.add_argument("--max-mb", type=float, help="scale-down budget per case in MiB (0: none; default 8 on CPU devices)")
    ap.add_argument("--max-gflop", type=float, help="scale-down budget per case in GFLOP (0: none; default 0.5 on CPU)")
    ap.add_argument("--baselines", default="numpy,torch", help="CPU baselines to time beside fuelvk ('' for none)")
    ap.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    ap.add_argument("--junit", metavar="FILE", help="write pytest-JUnit-style XML (TileOPs property names)")
    ap.add_argument("--plot", metavar="FILE.png", help="write the roofline plot (needs matplotlib)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return ap


def _budget(v, unit):
    return "auto" if v is None else (None if v == 0 else v * unit)


def main(argv=None):
    ap = parser()
    a = ap.parse_args(argv)
    if a.quick and (a.ops or a.filter):
        ap.error("--quick picks its own cases; use --ops/--filter without --quick")
    if a.plot:
        if not a.plot.lower().endswith(".png"):
            ap.error(f"--plot writes a PNG; give a file name ending in .png, got {a.plot!r}")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            ap.error("--plot needs matplotlib, which is not installed (pip install 'fuelvk[bench]')")
    for name, v in (("--max-mb", a.max_mb), ("--max-gflop", a.max_gflop)):
        if v is not None and v < 0:
            ap.error(f"{name} must be >= 0, got {v}")
    ops = [o.strip() for o in a.ops.split(",") if o.strip()] if a.ops else None
    baselines = tuple(b.strip() for b in a.baselines.split(",") if b.strip())
    max_bytes, max_flops = _budget(a.max_mb, 2 ** 20), _budget(a.max_gflop, 1e9)
    try:
        if a.list:
            from .. import runtime
            cpu = runtime.get().device.device_type == "cpu"
            mb = (cases.CPU_MAX_BYTES if cpu else None) if max_bytes == "auto" else max_bytes
            mf = (cases.CPU_MAX_FLOPS if cpu else None) if max_flops == "auto" else max_flops
            for case in cases.select(ops, a.filter, a.quick):
                cases.prepare(case, mb, mf)
                print(f"{case.op:28s} {case.case_id:44s} {case.shape} (1/{case.scale:.0f})")
            return 0
        res = run(ops, a.filter, a.quick, a.warmup, a.repeats, max_bytes, max_flops, baselines,
                  progress=not a.no_progress)
    except ValueError as e:
        ap.error(str(e))
    print(report.markdown(res))
    print(f"\n{len(res['cases'])} case(s) in {res['wall_s']:.1f} s")
    if a.json:
        report.write_json(res, a.json)
    if a.junit:
        report.write_junit(res, a.junit)
    if a.plot:
        report.plot(res, a.plot)
    return 1 if any(c.get("error") for c in res["cases"]) else 0
