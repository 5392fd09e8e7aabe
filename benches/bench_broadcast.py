#!/usr/bin/env python3
"""Broadcast elementwise operands against the contiguous x * y of the same shape: device median us per
op (timestamps), wall, and process CPU per call (lavapipe's threads included: the device's work on this
host), f32 / f16 / bf16.

--kind rowcol: ROW (w [H] against x [T, H]) and COL (v [T, 1]) operands, --shape T x H.
--kind mid: middle-dim broadcasts, --shape B x H x S x D: the rotary `q * cos` with q [B, H, S, D] and
cos [B, 1, S, D] (cos [1, 1, S, D] for B = 1 is a ROW operand), a transposed q ([B, S, H, D] viewed
[B, H, S, D]), and transformers Llama's [B, S, D] against [B, 1, D]; and the two-level ones (stride-0 dims
in two places): x [1, H, 1, D] (ROW + MID) and m [B, 1, S, 1] (COL + MID) against q.

Run the same script under two checkouts' PYTHONPATH, interleaved, to compare:
`PYTHONPATH=src python benches/bench_broadcast.py --kind mid`.
"""
import argparse
import time

import numpy as np

import fuelvk as fv
from fuelvk import runtime
from fuelvk.bench.timing import measure


def cpu_us(fn, calls):
    """Process CPU per call (us) over `calls` calls and the final synchronisation."""
    ctx = runtime.get()
    fn()
    ctx.stream.synchronize()
    t = time.process_time()
    for _ in range(calls):
        fn()
    ctx.stream.synchronize()
    return (time.process_time() - t) / calls * 1e6


def rowcol_cases(shape, dt, rng):
    T, H = shape
    x, y = (fv.asarray(rng.standard_normal((T, H)).astype(dt)) for _ in range(2))
    w = fv.asarray(rng.standard_normal(H).astype(dt))
    v = fv.asarray(rng.standard_normal((T, 1)).astype(dt))
    return {"x*y": (x, y), "x*w (row)": (x, w), "x*v (col)": (x, v), "w*x": (w, x), "v*x": (v, x)}


def mid_cases(shape, dt, rng):
    B, H, S, D = shape
    q = fv.asarray(rng.standard_normal((B, H, S, D)).astype(dt))
    q2 = fv.asarray(rng.standard_normal((B, H, S, D)).astype(dt))
    qt = fv.asarray(rng.standard_normal((B, S, H, D)).astype(dt)).transpose(0, 2, 1, 3)
    cos = fv.asarray(rng.standard_normal((B, 1, S, D)).astype(dt))
    cos1 = fv.asarray(rng.standard_normal((1, 1, S, D)).astype(dt))
    h = fv.asarray(rng.standard_normal((B, H * S, D)).astype(dt))
    g = fv.asarray(rng.standard_normal((B, 1, D)).astype(dt))
    x = fv.asarray(rng.standard_normal((1, H, 1, D)).astype(dt))
    m = fv.asarray(rng.standard_normal((B, 1, S, 1)).astype(dt))
    return {"q*q2 (same)": (q, q2), f"q*cos[{B},1,S,D]": (q, cos), "q*cos[1,1,S,D]": (q, cos1),
            f"qT*cos[{B},1,S,D]": (qt, cos), "qT*cos[1,1,S,D]": (qt, cos1), f"h*g[{B},1,D]": (h, g),
            "q*x[1,H,1,D]": (q, x), f"q*m[{B},1,S,1]": (q, m)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kind", choices=("rowcol", "mid"), default="rowcol")
    ap.add_argument("--shape", default=None, help="T x H (rowcol, default 256x1024) or B x H x S x D "
                    "(mid, default 2x8x128x64)")
    ap.add_argument("--dtypes", default="f32", help="comma-separated: f32, f16, bf16")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--calls", type=int, default=50, help="calls per process-CPU measurement")
    args = ap.parse_args(argv)
    shape = tuple(map(int, (args.shape or ("256x1024" if args.kind == "rowcol" else "2x8x128x64")).split("x")))
    rng = np.random.default_rng(0)
    for tag in args.dtypes.split(","):
        dt = {"f32": np.float32, "f16": np.float16, "bf16": fv.bfloat16}[tag]
        cases = (rowcol_cases if args.kind == "rowcol" else mid_cases)(shape, dt, rng)
        for name, (a, b) in cases.items():
            m = measure(lambda: fv.multiply(a, b), warmup=2, repeats=args.repeats)
            cpu = cpu_us(lambda: fv.multiply(a, b), args.calls)
            print(f"{tag:5s}{'x'.join(map(str, shape)):14s}{name:18s} device {m['median_ms'] * 1e3:9.1f} us   "
                  f"wall {m['wall_median_ms'] * 1e3:9.1f} us   cpu/call {cpu:9.1f} us", flush=True)


if __name__ == "__main__":
    main()
