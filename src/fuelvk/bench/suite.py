"""`python -m fuelvk bench`: the benchmark suite on the default device.

--quick (the README's main job) finishes in well under two minutes on lavapipe: the device's copy
roof, dispatch overhead, and elementwise throughput beside numpy, printed as a Markdown table.
"""
import argparse
import json
import sys
import time

import numpy as np


def _progress(i, n, label):
    sys.stderr.write(f"\r[{'#' * (20 * i // n):20s}] {i}/{n} {label:40s}")
    sys.stderr.flush()
    if i == n:
        sys.stderr.write("\n")


def run_cases(quick):
    import fuelvk as fv
    from fuelvk import runtime
    from fuelvk.bench.timing import measure
    ctx = runtime.get()
    n = 1 << 22 if quick else 1 << 24
    reps = 3 if quick else 10
    rng = np.random.default_rng(0)
    ha, hb = rng.standard_normal((2, n), dtype=np.float32)
    a, b = fv.asarray(ha), fv.asarray(hb)
    dst = fv.empty(n)
    cases = [
        ("copy (vkCmdCopyBuffer)", 8 * n, 0, lambda: ctx.stream.copy(a.buffer, dst.buffer, 4 * n), None),
        ("add f32", 12 * n, n, lambda: fv.add(a, b), lambda: np.add(ha, hb)),
        ("exp f32", 8 * n, n, lambda: fv.exp(a), lambda: np.exp(ha)),
        ("add f32 strided (a[::-1])", 12 * n, n, lambda: fv.add(a[::-1], b), lambda: np.add(ha[::-1], hb)),
        ("ascontiguousarray(a.T) f32", 8 * n, 0, lambda: fv.ascontiguousarray(a.reshape(2048, -1).T),
         lambda: np.ascontiguousarray(ha.reshape(2048, -1).T)),
    ]
    rows = []
    for i, (name, nbytes, flops, fn, ref) in enumerate(cases):
        _progress(i, len(cases), name)
        m = measure(fn, warmup=1, repeats=reps)
        row = {"case": name, "ms": m["median_ms"], "p10_ms": m["p10_ms"], "p90_ms": m["p90_ms"],
               "GBps": nbytes / m["median_ms"] / 1e6, "GFLOPs": flops / m["median_ms"] / 1e6}
        if ref is not None:
            ts = []
            for _ in range(reps):
                t = time.perf_counter()
                ref()
                ts.append((time.perf_counter() - t) * 1e3)
            row["numpy_ms"] = sorted(ts)[len(ts) // 2]
            row["ratio_vs_numpy"] = row["numpy_ms"] / row["ms"]
        rows.append(row)
    _progress(len(cases), len(cases), "done")
    roof = rows[0]["GBps"]
    for r in rows:
        r["pct_of_copy_roof"] = 100 * r["GBps"] / roof
    return rows


def markdown(rows):
    out = ["| case | ms (p10-p90) | GB/s | % of copy roof | numpy ms | speed vs numpy |", "|---|---|---|---|---|---|"]
    for r in rows:
        np_ms = f"{r['numpy_ms']:.2f}" if "numpy_ms" in r else "-"
        ratio = f"{r['ratio_vs_numpy']:.2f}x" if "ratio_vs_numpy" in r else "-"
        out.append(f"| {r['case']} | {r['ms']:.2f} ({r['p10_ms']:.2f}-{r['p90_ms']:.2f}) | {r['GBps']:.2f} | "
                   f"{r['pct_of_copy_roof']:.0f}% | {np_ms} | {ratio} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fuelvk bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats (< 2 min on lavapipe)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    import fuelvk as fv
    print(f"device: {fv.device_info()['name']}")
    rows = run_cases(args.quick)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
