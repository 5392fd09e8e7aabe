#!/usr/bin/env python3
"""Dispatch overhead and elementwise throughput (foundation issue benchmarks).

(a) a tiny add (16 elements) with its own submit + wait, (b) 1000 tiny adds recorded into one
submission (host time per op), and the throughput of a 16M-element f32 add beside a device buffer
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
    ts = []
    for _ in range(reps):
        fv.synchronize()
        t = time.perf_counter()
        for _ in range(n_ops):
            fv.add(a, b)
        rec = time.perf_counter() - t
        fv.synchronize()
        ts.append((rec, time.perf_counter() - t))
    rec, total = min(ts)
    return rec / n_ops * 1e6, total / n_ops * 1e6


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
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 7
    a = fv.asarray(np.ones(16, np.float32))
    b = fv.asarray(np.ones(16, np.float32))
    fv.add(a, b)
    fv.synchronize()
    res = {"device": fv.device_info()["name"], "single_op_us": per_op_single(a, b, 50 if args.quick else 200)}
    res["batched_record_us_per_op"], res["batched_total_us_per_op"] = per_op_batched(a, b, 1000, reps)
    res["throughput"] = throughput(1 << 22 if args.quick else 1 << 24, reps)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        t = res["throughput"]
        print(f"device: {res['device']}")
        print(f"(a) tiny add, own submit+wait : {res['single_op_us']:8.1f} us/op (target <= 200)")
        print(f"(b) 1000 tiny adds, one submit: {res['batched_total_us_per_op']:8.1f} us/op total, "
              f"{res['batched_record_us_per_op']:.1f} us/op host recording (target <= 15)")
        print(f"add f32 n={t['n']}: {t['add_ms']:.2f} ms = {t['add_GBps']:.2f} GB/s "
              f"({t['add_pct_of_copy']:.0f}% of vkCmdCopyBuffer {t['copy_GBps']:.2f} GB/s); "
              f"numpy {t['numpy_add_ms']:.2f} ms = {t['numpy_add_GBps']:.2f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
