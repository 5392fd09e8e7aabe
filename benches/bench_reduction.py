#!/usr/bin/env python3
"""Reductions, softmax, norms and cumsum: the bench suite on those ops' workload rows.

    python benches/bench_reduction.py [suite options: --filter float32 --max-mb 0 --json out.json ...]

Same as `python -m fuelvk bench --ops sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum`.

    python benches/bench_reduction.py --layouts [--repeats 5]

times sum / max / argmax over short rows and leading axes (issue 18 item 2: the layouts where each
short row used to get a workgroup of its own), in device time, with GB/s (bytes read + written), % of
the copy roof measured in the same run, and numpy on the same input.

    python benches/bench_reduction.py --rows [--repeats 5]

times the row kernels (softmax, rms_norm / layer_norm and their backward, cumsum, rope; f32) over
decode rows, many short rows, square-ish blocks and few long rows (the split paths), in device time
(median and p10, "best"), with GB/s (bytes read + written, at the p10) and % of the copy roof
measured in the same run.
"""
import sys

import numpy as np

from fuelvk.bench.suite import main

OPS = "sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum"
# (the last three: long rows over few outputs, chunks of each row over invocations + a final pass)
LAYOUTS = [((2, 64, 128), 0), ((2, 8192), 0), ((64, 128, 2), -1), ((4096, 512), 0), ((4096, 512), -1),
           ((1024, 2048), -1), ((64, 32768), -1), ((4, 128256), -1), ((1 << 20,), 0)]


def _roof():
    """The copy roof (GB/s) measured now, printed: every % in these tables is of it."""
    from fuelvk.bench.roofs import copy_roofs

    roof = copy_roofs(repeats=3, min_ms=2.0)["bandwidth_GBps"]
    print(f"copy roof {roof:.2f} GB/s")
    return roof


def layouts(repeats=5):
    import fuelvk as fv
    from fuelvk.bench.timing import host_ms, measure

    roof = _roof()
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


# (name, shape, op): the row kernels' shapes (issue 18: rows of whole texels compile without the
# element-by-element path; few long rows split across invocations; rows of >= 1024 a row to a subgroup)
ROWS = [("softmax", (1, 4096)), ("softmax", (32, 4096)), ("softmax", (4096, 64)), ("softmax", (512, 512)),
        ("softmax", (128, 2048)), ("softmax", (4, 128256)), ("softmax_backward", (32, 4096)),
        ("softmax_backward", (128, 2048)), ("softmax_backward", (4, 128256)), ("rms_norm_backward", (128, 2048)),
        ("layer_norm_backward", (128, 2048)),
        ("rms_norm", (1, 4096)), ("rms_norm", (512, 512)), ("rms_norm", (4, 65536)),
        ("rms_norm_backward", (512, 512)), ("rms_norm_backward", (4, 65536)), ("layer_norm", (512, 512)),
        ("layer_norm", (4, 65536)), ("layer_norm_backward", (4, 65536)), ("cumsum", (4096, 64)),
        ("cumsum", (64, 16384)), ("cumsum", (4, 128256)), ("rope", (1, 32, 128, 128))]


def rows(repeats=5):
    import fuelvk as fv
    from fuelvk.bench.timing import measure

    roof = _roof()
    print(f"{'op':20s} {'shape':18s} {'median ms':>10s} {'best ms':>9s} {'GB/s':>7s} {'%roof':>7s}")
    rng = np.random.default_rng(0)
    for op, shape in ROWS:
        def arr(*s):
            return fv.asarray(rng.standard_normal(s).astype(np.float32))
        x, cols = arr(*shape), shape[-1]
        if op == "rope":
            tab = arr(*shape[-2:])
            f, n_io = (lambda: fv.rope(x, tab, tab)), 2
        elif op == "cumsum":
            f, n_io = (lambda: fv.cumsum(x, axis=-1)), 2
        elif op.endswith("_backward"):
            g, w = arr(*shape), arr(cols)
            f = {"softmax_backward": lambda: fv.softmax_backward(x, g),
                 "rms_norm_backward": lambda: fv.rms_norm_backward(x, g, 1e-6, w),
                 "layer_norm_backward": lambda: fv.layer_norm_backward(x, g, 1e-5, w, w)}[op]
            n_io = 3
        else:
            w = arr(cols)
            f = {"softmax": lambda: fv.softmax(x), "rms_norm": lambda: fv.rms_norm(x, 1e-6, w),
                 "layer_norm": lambda: fv.layer_norm(x, 1e-5, w, w)}[op]
            n_io = 2
        r = measure(f, warmup=1, repeats=repeats)
        best = r["p10_ms"]
        gbps = n_io * x.nbytes / best / 1e6
        print(f"{op:20s} {'x'.join(map(str, shape)):18s} {r['median_ms']:10.3f} {best:9.3f} {gbps:7.2f} "
              f"{100 * gbps / roof:6.1f}%")


if __name__ == "__main__":
    if "--rows" in sys.argv:
        r = sys.argv.index("--repeats") + 1 if "--repeats" in sys.argv else None
        rows(int(sys.argv[r]) if r else 5)
        sys.exit(0)
    if "--layouts" in sys.argv:
        r = sys.argv.index("--repeats") + 1 if "--repeats" in sys.argv else None
        layouts(int(sys.argv[r]) if r else 5)
        sys.exit(0)
    sys.exit(main(["--ops", OPS, *sys.argv[1:]]))
