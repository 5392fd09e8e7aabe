#!/usr/bin/env python3
"""Reductions, softmax, norms and cumsum: the bench suite on those ops' workload rows.

    python benches/bench_reduction.py [suite options: --filter float32 --max-mb 0 --json out.json ...]

Same as `python -m fuelvk bench --ops sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum`.

    python benches/bench_reduction.py --layouts [--repeats 5]

times sum / max / argmax over short rows and leading axes (issue 18 item 2: the layouts where each
short row used to get a workgroup of its own), in device time, with GB/s (bytes read + written), % of
the copy roof measured in the same run, and numpy on the same input.
"""
import sys

import numpy as np

from fuelvk.bench.suite import main

OPS = "sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum"
# (the last three: long rows over few outputs, chunks of each row over invocations + a final pass)
LAYOUTS = [((2, 64, 128), 0), ((2, 8192), 0), ((64, 128, 2), -1), ((4096, 512), 0), ((4096, 512), -1),
           ((1024, 2048), -1), ((64, 32768), -1), ((4, 128256), -1), ((1 << 20,), 0)]


def layouts(repeats=5):
    import fuelvk as fv
    from fuelvk.bench.roofs import copy_roofs
    from fuelvk.bench.timing import host_ms, measure

    roof = copy_roofs(repeats=3, min_ms=2.0)["bandwidth_GBps"]
    print(f"copy roof {roof:.2f} GB/s")
    print(f"{'op':7s} {'shape':14s} {'axis':>4s} {'ms':>9s} {'GB/s':>8s} {'%roof':>7s} {'numpy ms':>9s}")
    rng = np.random.default_rng(0)
    for shape, axis in LAYOUTS:
        x = rng.standard_normal(shape).astype(np.float32)
        a = fv.asarray(x)
        for op in ("sum", "max", "argmax"):
            f, g = getattr(fv, op), getattr(np, op)
            out_bytes = (8 if op == "argmax" else 4) * (x.size // x.shape[axis])
            nbytes = x.nbytes + out_bytes
            m = measure(lambda f=f, a=a, axis=axis: f(a, axis=axis), warmup=1, repeats=repeats)["median_ms"]
            ref = host_ms(lambda g=g, x=x, axis=axis: g(x, axis=axis))
            gbps = nbytes / m / 1e6
            print(f"{op:7s} {shape!s:14s} {axis:4d} {m:9.3f} {gbps:8.2f} {100 * gbps / roof:6.1f}% {ref:9.3f}")


if __name__ == "__main__":
    if "--layouts" in sys.argv:
        r = sys.argv.index("--repeats") + 1 if "--repeats" in sys.argv else None
        layouts(int(sys.argv[r]) if r else 5)
        sys.exit(0)
    sys.exit(main(["--ops", OPS, *sys.argv[1:]]))
