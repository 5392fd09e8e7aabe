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

--profile: instead, one forward and one forward+backward with a device timestamp around every dispatch:
device ms and dispatches per kernel family and per aten op (where the time goes), then exits.
"""
import argparse
import collections
import copy
import json
import sys
import time

import numpy as np
import torch

import fuelvk as fv
import fuelvk.torch as ft
from fuelvk import runtime


def timed(fn, reps, sync):
    """(best wall ms, best process CPU ms, best main-thread CPU ms) over reps calls, each ended by sync().
    Main-thread CPU is the host side (Python, recording); process CPU adds the driver's worker threads
    (on lavapipe: the kernels themselves)."""
    fn()
    sync()
    wall = cpu = main = float("inf")
    for _ in range(reps):
        t, c, m = time.perf_counter(), time.process_time(), time.thread_time()
        fn()
        sync()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
        main = min(main, time.thread_time() - m)
    return wall * 1e3, cpu * 1e3, main * 1e3


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


def profiled(fn, reps=3, top=25):
    """Run fn() reps times with a device timestamp before and after each dispatch; print device ms
    (each dispatch's least over the runs: the machine is shared) and dispatch counts per kernel family
    (variant name) and per aten op (the fuelvk kernel that launched it)."""
    from fuelvk.runtime.vk import consts, ffi, lib
    ctx = runtime.get()
    stream, dev = ctx.stream, ctx.device
    n_max = 1 << 14
    info = ffi.new("VkQueryPoolCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                              "queryType": consts.VK_QUERY_TYPE_TIMESTAMP, "queryCount": n_max})
    qp = ffi.new("VkQueryPool*")
    lib.vkCreateQueryPool(dev.handle, info, ffi.NULL, qp)
    dispatch = stream.dispatch

    def aten_op():
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_name == "k" and "op" in f.f_locals and f.f_code.co_filename.endswith("_aten.py"):
                return str(f.f_locals["op"]).replace("aten.", "")
            f = f.f_back
        return "?"

    best = None
    for _ in range(reps):
        tags = []

        def timed_dispatch(pipe, groups, buffers, writes, push):
            i = len(tags)
            stream.timestamp(qp[0], 2 * i)
            dispatch(pipe, groups, buffers, writes, push)
            stream.timestamp(qp[0], 2 * i + 1)
            tags.append((str(pipe.variant.name), aten_op()))
        fv.synchronize()
        stream.dispatch = timed_dispatch
        try:
            fn()
            fv.synchronize()
        finally:
            del stream.dispatch
        data = ffi.new("uint64_t[]", 2 * len(tags))
        lib.vkGetQueryPoolResults(dev.handle, qp[0], 0, 2 * len(tags), 16 * len(tags), data, 8,
                                  consts.VK_QUERY_RESULT_64_BIT | consts.VK_QUERY_RESULT_WAIT_BIT)
        ms = [(data[2 * i + 1] - data[2 * i]) * dev.timestamp_period_ns / 1e6 for i in range(len(tags))]
        best = ms if best is None else [min(a, b) for a, b in zip(best, ms)]
    lib.vkDestroyQueryPool(dev.handle, qp[0], ffi.NULL)
    total = sum(best)
    print(f"  {len(tags)} dispatches, {total:.2f} device ms (each dispatch's best of {reps})")
    for k, what in ((0, "kernel family"), (1, "aten op")):
        agg = collections.defaultdict(lambda: [0.0, 0])
        for t, m in zip(tags, best):
            agg[t[k]][0] += m
            agg[t[k]][1] += 1
        print(f"  by {what}:")
        for name, (m, c) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"    {name:40s} {m:8.2f} ms {100 * m / total:5.1f}%  {c:4d} dispatches")


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
    ap.add_argument("--profile", action="store_true", help="device ms per kernel family and aten op")
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

    if args.profile:
        for name, fn in (("forward", fwd), ("forward+backward", fwd_bwd)):
            fn(dev, idd)
            print(name)
            profiled(lambda: fn(dev, idd), args.reps)
        return
    for name, fn in (("forward", fwd), ("forward+backward", fwd_bwd)):
        c, c_cpu, _ = timed(lambda: fn(cpu, ids), args.reps, lambda: None)
        d, d_cpu, d_main = timed(lambda: fn(dev, idd), args.reps, fv.synchronize)
        n, barriers, waits = counted(lambda: fn(dev, idd))
        floor = dispatch_floor(n, args.reps)
        rows.append({"what": name, "torch_cpu_ms": round(c, 2), "fuelvk_ms": round(d, 2), "ratio": round(d / c, 2),
                     "torch_cpu_process_ms": round(c_cpu, 2), "fuelvk_process_ms": round(d_cpu, 2),
                     "fuelvk_main_thread_ms": round(d_main, 2),
                     "dispatches": n, "barriers": barriers, "host_waits": waits,
                     "dispatch_floor_ms": round(floor, 2)})
        print(f"{name:18s} torch CPU {c:8.2f} ms   fuelvk device {d:8.2f} ms ({d / c:.1f}x)   process CPU "
              f"{c_cpu:.1f} vs {d_cpu:.1f} ms (main thread {d_main:.1f})   {n} dispatches, {barriers} barriers, {waits} host waits inside; "
              f"{n} empty dispatches: {floor:.2f} ms")
    stats = ft.fallback_stats()
    print("CPU fallbacks:", stats or "none")
    print("aten launch plans (fuelvk/torch/_plans.py):", ft._plans.stats)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows, "fallbacks": stats}, f, indent=1)


if __name__ == "__main__":
    main()
