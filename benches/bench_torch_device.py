#!/usr/bin/env python3
"""Per-op overhead of the "fuelvk" PyTorch device: a small tensor add, batched (no sync per op).

Rows, per shape: torch CPU `x + x`; `xd + xd` on the fuelvk device (the aten dispatcher, the Python
kernel, fuelvk's launch; one synchronize after all ops); fuelvk.add on the same device Arrays (what
the torch layer adds on top is the difference); torch.ops.fuelvk.add on CPU tensors (upload +
download per op). Wall-clock µs per op and process CPU µs per op (lavapipe's worker threads count
in the CPU time).

    PYTHONPATH=src python benches/bench_torch_device.py [--n 2000] [--json f]
"""
import argparse
import json
import time

import torch

import fuelvk as fv
import fuelvk.torch  # noqa: F401  (registers the device)
from fuelvk.torch import device as D


def per_op(fn, n, sync=None):
    for _ in range(min(n, 100)):
        fn()
    if sync:
        sync()
    w, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    if sync:
        sync()
    return (time.perf_counter() - w) / n * 1e6, (time.process_time() - c) / n * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for shape in ((16,), (16, 16), (64, 64)):
        x = torch.randn(*shape)
        xd = x.to("fuelvk")
        a = D.array(xd)
        for name, fn, sync, n in (("torch CPU x + x", lambda: x + x, None, args.n),
                                  ("fuelvk device xd + xd", lambda: xd + xd, fv.synchronize, args.n),
                                  ("fuelvk.add(Array, Array)", lambda: fv.add(a, a), fv.synchronize, args.n),
                                  ("torch.ops.fuelvk.add (CPU tensors)", lambda: torch.ops.fuelvk.add(x, x), None,
                                   max(args.n // 10, 50))):
            wall, cpu = per_op(fn, n, sync)
            rows.append({"op": name, "shape": list(shape), "wall_us": round(wall, 1), "cpu_us": round(cpu, 1)})
            print(f"{name:38s} {str(shape):10s} wall {wall:8.1f} µs/op   cpu {cpu:8.1f} µs/op")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
