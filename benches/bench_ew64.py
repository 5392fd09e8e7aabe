#!/usr/bin/env python3
"""Contiguous elementwise throughput: 64-bit-word LINEAR path (the *_w64 twins) vs the T4 fallback.

Both paths, and a vkCmdCopyBuffer of the output's bytes, are measured in the same run, interleaved
per case (the fallback is forced by hiding shaderInt64 from the op dispatch, as a device without it
would). GB/s counts bytes read + written. Rerun on a quiet machine: `PYTHONPATH=src python
benches/bench_ew64.py` (add --n 16777216 for bigger buffers).
"""
import argparse

import numpy as np

import fuelvk as fv
from fuelvk import runtime
from fuelvk.bench.roofs import copy_gbps
from fuelvk.bench.timing import measure

CASES = [("add", 2, lambda a, b: fv.add(a, b)), ("multiply_scalar", 1, lambda a, b: fv.multiply(a, 2.0)),
         ("silu", 1, lambda a, b: fv.silu(a)), ("affine", 1, lambda a, b: fv.affine(a, 2.0, 1.0))]
DTYPES = [("f32", np.float32), ("f16", np.float16), ("bf16", fv.bfloat16)]


def run(fn, features, reps):
    dev = runtime.get().device
    saved = dev.features
    dev.features = features
    try:
        return measure(fn, warmup=1, repeats=reps)["median_ms"]
    finally:
        dev.features = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1 << 22, help="elements per operand")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    n, reps = args.n, args.repeats
    dev = runtime.get().device
    wide = set(dev.features)
    narrow = wide - {"int64"}
    print(f"device: {fv.device_info()['name']}, n = {n}, shaderInt64: {'int64' in wide}")
    print(f"{'case':<22}{'T4 GB/s':>9}{'w64 GB/s':>10}{'speedup':>9}{'copy GB/s':>11}{'T4 %copy':>10}{'w64 %copy':>10}")
    rng = np.random.default_rng(0)
    for dname, dt in DTYPES:
        h = rng.standard_normal((2, n)).astype(np.float32).astype(dt)
        a, b = fv.asarray(h[0]), fv.asarray(h[1])
        nbytes = n * h.itemsize
        for name, nin, fn in CASES:
            f = (lambda fn=fn: fn(a, b))
            t4 = run(f, narrow, reps)
            w = run(f, wide, reps)
            copy = copy_gbps(nbytes, repeats=reps)
            moved = (nin + 1) * nbytes / 1e6
            g4, gw = moved / t4, moved / w
            print(f"{name + ' ' + dname:<22}{g4:9.2f}{gw:10.2f}{t4 / w:8.2f}x{copy:11.2f}"
                  f"{100 * g4 / copy:9.0f}%{100 * gw / copy:9.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
