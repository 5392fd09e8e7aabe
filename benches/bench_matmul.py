#!/usr/bin/env python3
"""matmul GFLOP/s on the device vs numpy (OpenBLAS) and torch CPU, on the same inputs, in one run.

    python benches/bench_matmul.py            # the issue's shapes (slow on lavapipe: ~1-2 min)
    python benches/bench_matmul.py --quick    # shapes scaled down (1024 -> 512, 4096 -> 2048)
    python benches/bench_matmul.py --json out.json

Roofs, measured here by fuelvk.bench.roofs (the suite's calibration kernels), best of three: FMA
throughput (16 independent FMA chains per invocation), copy bandwidth (vkCmdCopyBuffer, and a copy shader, i.e.
what a kernel's loads + stores reach). Device times come from timestamp queries (fuelvk.bench.timing).
On CPU devices %cpu is the case's GFLOP per second of process CPU against the FMA kernel's (both
threads-count independent; the host's other work still slows both).
"""
import argparse
import json
import os
import sys

import ml_dtypes
import numpy as np

import fuelvk as fv
from fuelvk.bench.roofs import copy_roofs, fma_per_cpu_second, fma_roof
from fuelvk.bench.timing import cpu_ms, host_ms, measure

BF16 = np.dtype(ml_dtypes.bfloat16)


def cases(quick):
    big, wide = (512, 2048) if quick else (1024, 4096)
    # last field: "T" = B given as W.T of a contiguous (N, K) W (a linear layer's weight layout)
    return [
        ("f32 square", big, big, big, np.float32, np.float32, ""),
        ("f32 matvec", 1, wide, wide, np.float32, np.float32, ""),
        ("f32 matvec x@W.T", 1, wide, wide, np.float32, np.float32, "T"),
        ("f32 x bf16 matvec", 1, wide, wide, np.float32, BF16, ""),
        ("f32 x bf16 x@W.T", 1, wide, wide, np.float32, BF16, "T"),
        ("f16 square", big, big, big, np.float16, np.float16, ""),
        ("bf16 square", big, big, big, BF16, BF16, ""),
        ("f32 prefill", big // 2, wide, wide, np.float32, np.float32, ""),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        torch = None
    info = fv.device_info()
    # Roofs are measured right before and after every case and the case is compared with the higher
    # of the two: on a shared host (lavapipe in a VM) throughput drifts by tens of percent over minutes.
    def roofs():
        bw = copy_roofs(args.repeats, min_ms=20)
        return fma_roof("f32", args.repeats, min_ms=20), bw["copy_cmd_GBps"], bw["copy_shader_GBps"]

    # On a CPU device the driver's threads get one or two of a shared host's cores, in runs of calls,
    # so a case and the roof measured moments apart can run at 2x different speeds; GFLOP per second of
    # process CPU does not move with that: %cpu compares the case and the FMA kernel that way.
    cpu_dev = info["type"] == "cpu"
    fma_cpu = fma_per_cpu_second("f32", args.repeats) if cpu_dev else None
    before = roofs()
    print(f"device: {info['name']} ({info['driver']}); routes: {', '.join(info['routes']['matmul'])}")
    print(f"roofs at start: FMA {before[0]:.1f} GFLOP/s (calibration kernel); copy {before[1]:.2f} GB/s "
          f"(vkCmdCopyBuffer), {before[2]:.2f} GB/s (copy shader); per case: the higher of the roofs "
          f"measured just before and after it (columns peak, copy)")
    rows = []
    rng = np.random.default_rng(0)
    hdr = f"{'case':20s} {'M':>5s} {'N':>5s} {'K':>5s} {'route':15s} {'ms':>9s} {'GFLOP/s':>8s} {'%FMA':>5s} " \
          f"{'GB/s':>6s} {'%copy':>5s} {'%cpu':>5s} {'numpy':>8s} {'torch':>8s} {'peak':>6s} {'copy':>6s}"
    print(hdr)
    for name, M, N, K, adt, bdt, lay in cases(args.quick):
        a_h = rng.uniform(-1, 1, (M, K)).astype(adt)
        b_h = rng.uniform(-1, 1, (N, K)).astype(bdt).T if lay == "T" else rng.uniform(-1, 1, (K, N)).astype(bdt)
        a, b = fv.asarray(a_h), fv.asarray(np.ascontiguousarray(b_h.T)).T if lay == "T" else fv.asarray(b_h)
        route = fv.matmul_route(a, b)
        reps = args.repeats
        r = measure(lambda: fv.matmul(a, b), warmup=1, repeats=reps)
        flops = 2 * M * N * K
        ms = r["median_ms"]
        pct_cpu = 100 * flops / cpu_ms(lambda: fv.matmul(a, b), 0, reps) / 1e6 / fma_cpu if cpu_dev else None
        nbytes = a_h.nbytes + b_h.nbytes + M * N * (4 if adt == np.float32 else a_h.itemsize)
        # numpy / torch on the same values: f32 compute where their CPU kernels lack the dtype
        a32, b32 = a_h.astype(np.float32), b_h.astype(np.float32)
        np_a, np_b = a32, b32   # numpy has no BLAS for f16 (and no bf16): f32 GEMM on the same values
        t_np = host_ms(lambda: np_a @ np_b, reps)
        t_torch = None
        if torch is not None:
            ta = torch.from_numpy(a32).to(torch.bfloat16 if adt == BF16 else torch.float16 if adt == np.float16
                                          else torch.float32)
            tb = torch.from_numpy(b32).to(ta.dtype if adt == bdt else torch.bfloat16)
            if adt != bdt:
                ta = ta.to(torch.bfloat16)  # torch CPU: both operands in one dtype
            t_torch = host_ms(lambda: ta @ tb, reps)
        after = roofs()
        peak, cmd_bw, shader_bw = (max(x, y) for x, y in zip(before, after))
        before = after
        row = {"case": name, "M": M, "N": N, "K": K, "route": route, "ms": ms, "gflops": flops / ms / 1e6,
               "pct_fma_peak": 100 * flops / ms / 1e6 / peak, "gbs": nbytes / ms / 1e6,
               "pct_copy": 100 * nbytes / ms / 1e6 / cmd_bw, "pct_fma_per_cpu_second": pct_cpu,
               "fma_peak_gflops": peak, "copy_gbs": cmd_bw, "shader_copy_gbs": shader_bw,
               "numpy_gflops": flops / t_np / 1e6, "torch_gflops": flops / t_torch / 1e6 if t_torch else None}
        rows.append(row)
        tg = f"{row['torch_gflops']:8.1f}" if t_torch else "       -"
        print(f"{name:20s} {M:5d} {N:5d} {K:5d} {route:15s} {ms:9.1f} {row['gflops']:8.2f} "
              f"{row['pct_fma_peak']:5.1f} {row['gbs']:6.2f} {row['pct_copy']:5.1f} {pct_cpu or 0:5.1f} {row['numpy_gflops']:8.1f} {tg} {peak:6.1f} {cmd_bw:6.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": info["name"], "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
