#!/usr/bin/env python3
"""Dispatch overhead and elementwise throughput (foundation issue benchmarks).

(a) a tiny add (16 elements) with its own submit + wait, (b) 1000 tiny adds recorded into one
submission (host time per op), (c) --breakdown: where one batched tiny add's host time goes (the
op layers: fv.add, the ops layer's _binary, its cached whole-op plan (cached_new), launch_strided with
the output given; the stream's recording, pool allocation) and what the driver itself costs per vkCmdDispatch
and per descriptor binding (push descriptors, or a bound descriptor set under
FUELVK_NO_PUSH_DESCRIPTOR=1: run it both ways), and the throughput of a 16M-element f32 add beside a device buffer
copy of the same bytes (vkCmdCopyBuffer) and numpy, in the same run.
"""
import argparse
import json
import time

import numpy as np

import fuelvk as fv
from fuelvk.bench.roofs import copy_gbps
from fuelvk.bench.timing import host_measure, host_ms, measure


def per_op_single(a, b, reps):
    def one():
        fv.add(a, b)
        fv.synchronize()
    return host_measure(one, 0, reps)["median_ms"] * 1e3


def per_op_batched(a, b, n_ops, reps):
    """(wall us per op while recording, wall us per op until the device finished, this thread's CPU us per
    op while recording, the process's CPU us per op until the device finished), best of reps. The last
    counts recording and a CPU driver's execution (its worker threads are this process's) and, unlike
    wall time, not what other processes take of a shared host."""
    ts = []
    for _ in range(reps):
        fv.synchronize()
        t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
        for _ in range(n_ops):
            fv.add(a, b)
        rec, cpu = time.perf_counter() - t, time.thread_time() - c
        fv.synchronize()
        ts.append((rec, time.perf_counter() - t, cpu, time.process_time() - p))
    return tuple(min(x[i] for x in ts) / n_ops * 1e6 for i in range(4))


def _per_call_us(fn, n, reps):
    """Best of reps: CPU microseconds of this thread per fn(i) over i < n, one synchronize after each round
    (not timed). Thread CPU time, not wall time: on a loaded host (or lavapipe, whose worker threads run
    the submitted batches on the same cores) wall time mostly measures who else got the CPU."""
    best = float("inf")
    for _ in range(reps):
        fv.synchronize()
        t = time.thread_time()
        for i in range(n):
            fn(i)
        best = min(best, time.thread_time() - t)
    fv.synchronize()
    return best / n * 1e6


def breakdown(a, b, n_ops, reps):
    """Host microseconds per batched tiny add, split by layer (best of reps rounds of n_ops calls):
    the whole op, the ops layer's _binary, the cached whole-op plan run again (cached_new: allocation
    and dispatch), launch_strided with the output given, Stream.dispatch of the cached plan, one pool
    allocation; then the driver's own cost per command recorded into an open command buffer: a bare
    vkCmdDispatch, the descriptor binding (vkCmdPushDescriptorSetKHR, or vkCmdBindDescriptorSets of one
    written set), vkCmdPushConstants; and the wall time per bare dispatch for the driver to execute a batch
    (on lavapipe this, not recording, sets the floor of the batched total)."""
    from fuelvk import runtime
    from fuelvk.ops import _core
    from fuelvk.ops._core import cached_new, launch_strided, new_like
    from fuelvk.ops.elementwise import _binary
    from fuelvk.runtime.commands import COMPUTE, STAGE_COMPUTE
    from fuelvk.runtime.vk import ffi, lib
    ctx = runtime.get()
    stream = ctx.stream
    fv.add(a, b)
    fv.synchronize()
    # the tiny add's cached whole-op plan (ops/_core.launch_new): output slot size, shape, strides, dtype
    # and the launch plan (pipelines, writes, which buffer binds where)
    op_key = ("add", a.dtype)
    _, _, _, _, plan = ctx.plans[_core._fresh_key(ctx, op_key, (a, b))]
    (pipe, groups, push), = plan[0]
    writes, bind, stub = plan[1:]
    variant = pipe.variant
    out = fv.add(a, b)
    from fuelvk.kernels.elementwise import BINARY
    spec = {"OP": BINARY["add"]}
    bufs = bind((out.buffer, a.buffer, b.buffer, stub))
    outs = [new_like((16,), a.dtype) for _ in range(n_ops)]   # a fresh output each call: no barriers, as in fv.add
    res = {"descriptor_path": ctx.device.descriptor_path[0],
           "op_us": _per_call_us(lambda i: fv.add(a, b), n_ops, reps),
           "ops_binary_us": _per_call_us(lambda i: _binary("add", a, b), n_ops, reps),
           "cached_new_us": _per_call_us(lambda i: cached_new(op_key, (a, b)), n_ops, reps),
           "launch_strided_us": _per_call_us(lambda i: launch_strided(variant, outs[i], [a, b], spec), n_ops, reps),
           "stream_dispatch_us": _per_call_us(
               lambda i: stream.dispatch(pipe, groups, bind((outs[i].buffer, a.buffer, b.buffer, stub)), writes, push),
               n_ops, reps),
           "new_like_us": _per_call_us(lambda i: new_like((16,), a.dtype), n_ops, reps)}

    def driver(fn):
        """us per fn(cb) recorded n_ops times into the stream's open command buffer."""
        best = float("inf")
        for _ in range(reps):
            with stream.lock:
                stream.dispatch(pipe, groups, bufs, writes, push)   # opens the batch, binds everything
                cb = stream.cb
                t = time.thread_time()
                for _ in range(n_ops):
                    fn(cb)
                best = min(best, time.thread_time() - t)
                fv.synchronize()
        return best / n_ops * 1e6

    g0, g1, g2 = groups
    res["vkCmdDispatch_us"] = driver(lambda cb: lib.vkCmdDispatch(cb, g0, g1, g2))
    # The device side: wall time per dispatch to execute n_ops recorded bare dispatches (the floor of
    # the batched total wherever recording and execution do not overlap).
    best = float("inf")
    for _ in range(reps):
        with stream.lock:
            stream.dispatch(pipe, groups, bufs, writes, push)
            cb = stream.cb
            for _ in range(n_ops):
                lib.vkCmdDispatch(cb, g0, g1, g2)
            t = time.perf_counter()
            fv.synchronize()
            best = min(best, time.perf_counter() - t)
    res["execute_wall_us"] = best / n_ops * 1e6
    res["vkCmdPushConstants_us"] = driver(lambda cb: lib.vkCmdPushConstants(cb, pipe.layout, STAGE_COMPUTE, 0,
                                                                            len(push), push))
    if stream.push_descriptor is not None:
        pd = stream.push_descriptor
        res["bind_descriptors_us"] = driver(lambda cb: pd(cb, COMPUTE, pipe.layout, 0, pipe.n_bindings, pipe.writes))
    else:
        sets = ffi.new("VkDescriptorSet[1]")

        def bind(cb):
            lib.vkCmdBindDescriptorSets(cb, COMPUTE, pipe.layout, 0, 1, sets, 0, ffi.NULL)
        with stream.lock:
            stream.dispatch(pipe, groups, bufs, writes, push)
            sets[0] = next(iter(stream.sets.values()))
            res["bind_descriptors_us"] = driver(bind)
    return res


def throughput(n, reps):
    ha, hb = np.random.default_rng(0).standard_normal((2, n), dtype=np.float32)
    a, b = fv.asarray(ha), fv.asarray(hb)
    add = measure(lambda: fv.add(a, b), warmup=1, repeats=reps)
    out = np.empty_like(ha)
    np_ms = host_ms(lambda: np.add(ha, hb, out=out), reps)
    copy = copy_gbps(4 * n, repeats=reps)
    add_gbs = 3 * 4 * n / add["median_ms"] / 1e6
    return {"n": n, "copy_GBps": copy, "add_ms": add["median_ms"], "add_GBps": add_gbs,
            "add_pct_of_copy": 100 * add_gbs / copy, "numpy_add_ms": np_ms, "numpy_add_GBps": 3 * 4 * n / np_ms / 1e6}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and 4M elements")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="only the per-layer host time of a batched tiny add")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 7
    a = fv.asarray(np.ones(16, np.float32))
    b = fv.asarray(np.ones(16, np.float32))
    fv.add(a, b)
    fv.synchronize()
    if args.breakdown:
        res = breakdown(a, b, 1000, reps)
        print(json.dumps(res) if args.json else "\n".join(f"{k:22s} {v:8.2f}" if isinstance(v, float) else
                                                            f"{k:22s} {v}" for k, v in res.items()))
        return 0
    res = {"device": fv.device_info()["name"], "single_op_us": per_op_single(a, b, 50 if args.quick else 200)}
    (res["batched_record_us_per_op"], res["batched_total_us_per_op"], res["batched_record_cpu_us_per_op"],
     res["batched_process_cpu_us_per_op"]) = per_op_batched(a, b, 1000, reps)
    res["throughput"] = throughput(1 << 22 if args.quick else 1 << 24, reps)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        t = res["throughput"]
        print(f"device: {res['device']}")
        print(f"(a) tiny add, own submit+wait : {res['single_op_us']:8.1f} us/op (target <= 200)")
        print(f"(b) 1000 tiny adds, one submit: {res['batched_total_us_per_op']:8.1f} us/op total, "
              f"{res['batched_record_us_per_op']:.1f} us/op host recording (target <= 15), "
              f"{res['batched_record_cpu_us_per_op']:.1f} us/op of recording thread CPU, "
              f"{res['batched_process_cpu_us_per_op']:.1f} us/op of process CPU in all")
        print(f"add f32 n={t['n']}: {t['add_ms']:.2f} ms = {t['add_GBps']:.2f} GB/s "
              f"({t['add_pct_of_copy']:.0f}% of vkCmdCopyBuffer {t['copy_GBps']:.2f} GB/s); "
              f"numpy {t['numpy_add_ms']:.2f} ms = {t['numpy_add_GBps']:.2f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
