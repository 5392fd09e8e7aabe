#!/usr/bin/env python3
"""A tiny random-init HF transformers Llama (hidden 256) on the "fuelvk" PyTorch device beside torch CPU:
forward and forward+backward milliseconds on the same inputs, and the CPU fallbacks counted (0 expected).

Device rows end with a synchronize (the device queue drained), so they time the work, not its queuing.
Per step they also say where the time can go: process CPU ms (the host's Python and lavapipe's worker
threads together, steadier than wall time on a shared machine), device dispatches and barriers recorded,
host waits (synchronizes: a forward should wait once, at its end), and the dispatch floor: the same
number of 16-element dependent adds, recorded and run in one batch -- what the step would cost if each
dispatch did no work.

    PYTHONPATH=src python benches/bench_torch_llama.py [--reps 5] [--hidden 256] [--seq 32] [--json f]
"""
import argparse
import copy
import json
import time

import numpy as np
import torch

import fuelvk as fv
import fuelvk.torch as ft
from fuelvk import runtime


def timed(fn, reps, sync):
    """(best wall ms, best process CPU ms) over reps calls, each ended by sync()."""
    fn()
    sync()
    wall = cpu = float("inf")
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fn()
        sync()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall * 1e3, cpu * 1e3


def counted(fn):
    """(dispatches, barriers, host waits) of one fn() on the device stream."""
    stream = runtime.get().stream
    waits = [0]
    flush = stream.flush

    def counting_flush(wait=False):
        waits[0] += bool(wait)
        return flush(wait)
    fv.synchronize()
    d0, b0 = stream.dispatches, stream.barriers
    stream.flush = counting_flush
    try:
        fn()
        fv.synchronize()
    finally:
        del stream.flush
    return stream.dispatches - d0, stream.barriers - b0, waits[0] - 1   # the last wait is ours


def dispatch_floor(n, reps):
    """Wall ms of n dependent 16-element adds recorded into one batch and run."""
    x = fv.asarray(np.ones(16, np.float32))

    def chain():
        y = x
        for _ in range(n):
            y = fv.add(y, x)
    return timed(chain, reps, fv.synchronize)[0]


def main():
    from transformers import LlamaConfig, LlamaForCausalLM
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    h = args.hidden
    cfg = LlamaConfig(vocab_size=512, hidden_size=h, intermediate_size=2 * h + h // 2, num_hidden_layers=args.layers,
                      num_attention_heads=max(h // 64, 1), num_key_value_heads=max(h // 128, 1),
                      max_position_embeddings=256)
    cpu = LlamaForCausalLM(cfg).eval()
    dev = copy.deepcopy(cpu).to("fuelvk")
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq))
    idd = ids.to("fuelvk")
    ft.reset_fallback_stats()
    rows = []

    def fwd(model, x):
        with torch.no_grad():
            return model(x).logits

    def fwd_bwd(model, x):
        model.zero_grad(set_to_none=True)
        model(x, labels=x).loss.backward()

    for name, fn in (("forward", fwd), ("forward+backward", fwd_bwd)):
        c, c_cpu = timed(lambda: fn(cpu, ids), args.reps, lambda: None)
        d, d_cpu = timed(lambda: fn(dev, idd), args.reps, fv.synchronize)
        n, barriers, waits = counted(lambda: fn(dev, idd))
        floor = dispatch_floor(n, args.reps)
        rows.append({"what": name, "torch_cpu_ms": round(c, 2), "fuelvk_ms": round(d, 2), "ratio": round(d / c, 2),
                     "torch_cpu_process_ms": round(c_cpu, 2), "fuelvk_process_ms": round(d_cpu, 2),
                     "dispatches": n, "barriers": barriers, "host_waits": waits,
                     "dispatch_floor_ms": round(floor, 2)})
        print(f"{name:18s} torch CPU {c:8.2f} ms   fuelvk device {d:8.2f} ms ({d / c:.1f}x)   process CPU "
              f"{c_cpu:.1f} vs {d_cpu:.1f} ms   {n} dispatches, {barriers} barriers, {waits} host waits inside; "
              f"{n} empty dispatches: {floor:.2f} ms")
    stats = ft.fallback_stats()
    print("CPU fallbacks:", stats or "none")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows, "fallbacks": stats}, f, indent=1)


if __name__ == "__main__":
    main()
