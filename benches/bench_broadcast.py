#!/usr/bin/env python3
"""Broadcast elementwise operands (ROW: w [H] against x [T, H]; COL: v [T, 1]) against the contiguous
x * y of the same shape: device median ms per op (and wall), f32 / f16 / bf16. Run the same script under
two checkouts' PYTHONPATH, interleaved, to compare: `PYTHONPATH=src python benches/bench_broadcast.py`.
"""
import argparse

import numpy as np

import fuelvk as fv
from fuelvk.bench.timing import measure


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", default="256x1024", help="T x H of x")
    ap.add_argument("--dtypes", default="f32", help="comma-separated: f32, f16, bf16")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    T, H = map(int, args.shape.split("x"))
    rng = np.random.default_rng(0)
    for tag in args.dtypes.split(","):
        dt = {"f32": np.float32, "f16": np.float16, "bf16": fv.bfloat16}[tag]
        x, y = (fv.asarray(rng.standard_normal((T, H)).astype(dt)) for _ in range(2))
        w = fv.asarray(rng.standard_normal(H).astype(dt))
        v = fv.asarray(rng.standard_normal((T, 1)).astype(dt))
        cases = {"x*y": (x, y), "x*w (row)": (x, w), "x*v (col)": (x, v), "w*x": (w, x), "v*x": (v, x)}
        for name, (a, b) in cases.items():
            m = measure(lambda: fv.multiply(a, b), warmup=2, repeats=args.repeats)
            print(f"{tag:5s}{T}x{H:<6d}{name:11s} device {m['median_ms'] * 1e3:9.1f} us   wall "
                  f"{m['wall_median_ms'] * 1e3:9.1f} us")


if __name__ == "__main__":
    main()
