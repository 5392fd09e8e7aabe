#!/usr/bin/env python3
"""torch.ops.fuelvk overhead and two large ops against torch CPU, in one run.

(1) per-call cost of a tiny op (exp of 16 f32): torch.ops.fuelvk.exp (tensor in, upload, dispatch,
download, tensor out) vs fuelvk.exp on a device Array (no transfer; synchronized each call) vs
fuelvk.exp on numpy (upload + download, no torch) vs torch.exp;
(2) an [n, n] @ [n, n] f32 matmul and a decode-shaped [1, n] @ [n, n] one: torch.ops.fuelvk.matmul
with the weight cache (b stays uploaded) and without it, vs torch.matmul; (3) an [n, n] f32 softmax vs torch.softmax.
fuelvk on device Arrays (no transfers) is shown beside each, so the torch layer's cost is visible.
Wall-clock medians on the host (the numbers a torch user sees). lavapipe runs the 4096^3 matmul in
tens of seconds: --size picks n.

    PYTHONPATH=src python benches/bench_torch.py [--size 4096] [--reps 3] [--only decode,softmax] [--json f]
"""
import argparse
import functools
import json

import torch

import fuelvk as fv
import fuelvk.torch as ft
from fuelvk.bench.timing import host_measure

F = torch.ops.fuelvk


def wall(fn, reps, warmup=1):
    """Median host seconds of fn() (what a torch user sees)."""
    return host_measure(fn, warmup, reps)["median_ms"] / 1e3


def tiny(reps):
    t = torch.randn(16)
    a, h = fv.asarray(t.numpy()), t.numpy()

    def device_only():
        fv.exp(a)
        fv.synchronize()
    rows = [("torch.ops.fuelvk.exp (tensor)", wall(lambda: F.exp(t), reps)),
            ("fuelvk.exp (device Array)", wall(device_only, reps)),
            ("fuelvk.exp (numpy in/out)", wall(lambda: fv.exp(h), reps)),
            ("torch.exp", wall(lambda: torch.exp(t), reps))]
    return [(name, "16", s * 1e6, "us/call") for name, s in rows]


def _device(fn, *arrays):
    def run():
        fn(*arrays)
        fv.synchronize()
    return run


def matmuls(n, reps, warmup, which):
    """[n, n] @ [n, n] ("matmul") and [1, n] @ [n, n] ("decode"): cached / uncached / device / torch."""
    g = torch.Generator().manual_seed(0)
    b = ft.keep_uploaded(torch.randn(n, n, generator=g))   # the weight (nn.Parameters need no mark)
    db = fv.asarray(b.numpy())
    ft.WEIGHTS.MIN_BYTES = 0
    shapes = {"matmul": ((n, n), lambda s: f"ms  {2.0 * n ** 3 / s / 1e9:.2f} GFLOP/s"),
              "decode": ((1, n), lambda s: f"ms  {4 * n * n / s / 1e9:.2f} GB/s of weight")}
    out = []
    for key in which:
        shape, unit = shapes[key]
        lhs = torch.randn(shape, generator=g)
        dlhs = fv.asarray(lhs.numpy())
        for name, fn, cache in (("torch.ops.fuelvk.matmul (weight cached)", functools.partial(F.matmul, lhs, b), True),
                                ("torch.ops.fuelvk.matmul (no cache)", functools.partial(F.matmul, lhs, b), False),
                                ("fuelvk.matmul (device Arrays)", _device(fv.matmul, dlhs, db), True),
                                ("torch.matmul", functools.partial(torch.matmul, lhs, b), True)):
            ft.WEIGHTS.enabled = cache
            ft.clear_cache()
            s = wall(fn, reps, warmup)
            out.append((name, "x".join(map(str, shape)) + f"x{n}", s * 1e3, unit(s)))
    ft.WEIGHTS.enabled = True
    return out


def softmax(n, reps, warmup):
    x = torch.randn(n, n, generator=torch.Generator().manual_seed(1))
    dx = fv.asarray(x.numpy())
    out = []
    for name, fn in (("torch.ops.fuelvk.softmax", functools.partial(F.softmax, x, -1)),
                     ("fuelvk.softmax (device Array)", _device(fv.softmax, dx)),
                     ("torch.softmax", functools.partial(torch.softmax, x, -1))):
        s = wall(fn, reps, warmup)
        out.append((name, f"{n}x{n}", s * 1e3, f"ms  {2 * 4 * n * n / s / 1e9:.2f} GB/s (read + write)"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4096, help="n of the [n, n] matmul and softmax (default 4096)")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions of the large ops (median)")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls of each large op first (pipelines)")
    p.add_argument("--tiny-reps", type=int, default=200, help="timed repetitions of the tiny op")
    p.add_argument("--only", default="tiny,matmul,decode,softmax",
                   help="comma-separated subset of tiny,matmul,decode,softmax (default: all)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    info = fv.device_info()
    print(f"device: {info.get('name', info) if isinstance(info, dict) else info}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    only = args.only.split(",")
    rows = tiny(args.tiny_reps) if "tiny" in only else []
    rows += matmuls(args.size, args.reps, args.warmup, [k for k in ("matmul", "decode") if k in only])
    rows += softmax(args.size, args.reps, args.warmup) if "softmax" in only else []
    print(f"{'op':42} {'shape':>16} {'median':>12}")
    for name, shape, v, unit in rows:
        print(f"{name:42} {shape:>16} {v:12.2f} {unit}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"op": r[0], "shape": r[1], "median": r[2], "unit": r[3]} for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
