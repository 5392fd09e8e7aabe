#!/usr/bin/env python3
"""Quantized matmul, conv2d and RoPE (issue 6 benchmarks), side by side in one run.

(a) qmatmul q4_0 M=1 N=K=4096 (fused qmatvec) beside dequantize + f32 matvec and beside an f32
    matvec of the same shape; effective GB/s counts the weight bytes each variant reads.
(b) conv2d [8,64,56,56] x [64,64,3,3] pad 1 beside torch CPU (same inputs, same run).
(c) rope on [1,32,2048,128] f32 beside a device copy of the same bytes.
(d) per GGML kind (issue 18): dequantize and qmatvec (M=1) on each load path (FUELVK_TEXEL_LOADS=1:
    blocks through texel views, 0: storage buffers), % of the copy roof (vkCmdCopyBuffer of the
    op's own bytes, same run), beside numpy (gguf.quants.dequantize; x @ W.T on the dequantized f32
    weight) and torch CPU (x @ W.T on the f32 weight); ratio = baseline ms / fuelvk ms.
(e) qmatmul's routes per M (issue 18): one fused qmatvec per row ("matvec"), dequantize to f32 +
    f32 matmul ("dequant"), the fused tiled kernel ("tiled", only up to M=16: it is seconds above),
    and the route qmatmul picks (DEQUANT_MIN_M: where the measured crossover lies).
--small scales every shape down (for a quick check on a busy machine); --only q4_0,q8_0 runs (d) alone for those kinds,
--routes (e) alone.
"""
import argparse
import json
import os

import numpy as np

import fuelvk as fv
from fuelvk.bench.report import table
from fuelvk.bench.roofs import copy_gbps
from fuelvk.bench.timing import host_ms, measure
from fuelvk.ops import quant as fq
from fuelvk.ops.conv import conv2d
from fuelvk.ops.matmul import matmul
from fuelvk.ops.rope import rope


def bench_qmatmul(n, k, reps):
    import gguf
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k)).astype(np.float32)
    blocks = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_0)
    qw = fq.QuantTensor(fv.asarray(blocks.reshape(-1)), "q4_0", (n, k))
    wf = fv.asarray(gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_0))
    x = fv.asarray(rng.standard_normal((1, k)).astype(np.float32))
    fused = measure(lambda: fq.qmatmul(x, qw), repeats=reps)
    deq = measure(lambda: matmul(x, fq.dequantize(qw).T), repeats=reps)
    f32 = measure(lambda: matmul(x, wf.T), repeats=reps)
    qbytes, fbytes = blocks.nbytes, 4 * n * k
    xn, wn = x.numpy(), wf.numpy()
    np_ms = host_ms(lambda: xn @ wn.T, reps)
    return {"shape": f"M=1 N={n} K={k}", "q4_0_bytes": qbytes, "f32_bytes": fbytes,
            "qmatvec_ms": fused["median_ms"], "qmatvec_GBps": qbytes / fused["median_ms"] / 1e6,
            "dequant_then_matvec_ms": deq["median_ms"],
            "f32_matvec_ms": f32["median_ms"], "f32_matvec_GBps": fbytes / f32["median_ms"] / 1e6,
            "numpy_f32_matvec_ms": np_ms}


def bench_conv(shape, wshape, reps):
    import torch
    import torch.nn.functional as F
    rng = np.random.default_rng(1)
    xn = rng.standard_normal(shape).astype(np.float32)
    wn = (rng.standard_normal(wshape) / 24).astype(np.float32)
    x, w = fv.asarray(xn), fv.asarray(wn)
    dev = measure(lambda: conv2d(x, w, padding=1), warmup=1, repeats=reps)
    xt, wt = torch.from_numpy(xn), torch.from_numpy(wn)
    torch_ms = host_ms(lambda: F.conv2d(xt, wt, padding=1), reps)
    b, c, h, wd = shape
    flops = 2 * b * wshape[0] * h * wd * c * wshape[2] * wshape[3]
    return {"shape": f"{list(shape)} x {list(wshape)} pad 1", "fuelvk_ms": dev["median_ms"],
            "fuelvk_GFLOPs": flops / dev["median_ms"] / 1e6, "torch_cpu_ms": torch_ms,
            "torch_GFLOPs": flops / torch_ms / 1e6, "torch_threads": torch.get_num_threads()}


def bench_rope(shape, reps):
    rng = np.random.default_rng(2)
    x = fv.asarray(rng.standard_normal(shape).astype(np.float32))
    ang = rng.uniform(0, 6.3, shape[-2:])
    cos, sin = fv.asarray(np.cos(ang).astype(np.float32)), fv.asarray(np.sin(ang).astype(np.float32))
    nbytes = x.nbytes
    r = measure(lambda: rope(x, cos, sin), repeats=reps)
    return {"shape": list(shape), "rope_ms": r["median_ms"], "rope_GBps": 2 * nbytes / r["median_ms"] / 1e6,
            "copy_GBps": copy_gbps(nbytes, repeats=reps)}


def _kind_blocks(kind, n, k, rng):
    """(block bytes [n, ...], gguf type): q4_0 / q8_0 quantized from normal data, k-quants random
    bytes with small finite f16 scales (fuelvk has no k-quant quantizer)."""
    import gguf
    qt = getattr(gguf.GGMLQuantizationType, kind.upper())
    if kind in ("q4_0", "q8_0"):
        return gguf.quants.quantize(rng.standard_normal((n, k)).astype(np.float32), qt), qt
    qk, bs = gguf.GGML_QUANT_SIZES[qt]
    b = rng.integers(0, 256, (n, k // qk, bs), dtype=np.uint8)
    at = slice(208, 210) if kind == "q6_k" else slice(0, 4)
    b[..., at] = rng.uniform(-0.02, 0.02, b.shape[:2] + (2,)).astype(np.float16).view(np.uint8)[..., : at.stop - at.start]
    return b.reshape(n, -1), qt


def bench_kinds(n, k, reps, kinds=("q4_0", "q8_0", "q4_k", "q6_k"), paths=("1", "0")):
    """Rows of (d): dequantize and qmatvec per kind and load path, with the copy roof of the same
    bytes and the numpy / torch baselines (timed once per kind, shared by both paths' rows)."""
    import gguf
    import torch
    rng = np.random.default_rng(3)
    rows = []
    for kind in kinds:
        blocks, qt = _kind_blocks(kind, n, k, rng)
        wq = fq.QuantTensor(fv.asarray(blocks.reshape(-1)), kind, (n, k))
        xn = rng.standard_normal((1, k)).astype(np.float32)
        x = fv.asarray(xn)
        wn = gguf.quants.dequantize(blocks, qt)
        xt, wt = torch.from_numpy(xn), torch.from_numpy(wn)
        base = {"dequantize": {"numpy": host_ms(lambda: gguf.quants.dequantize(blocks, qt), reps)},
                "qmatvec": {"numpy": host_ms(lambda: xn @ wn.T, reps), "torch": host_ms(lambda: xt @ wt.T, reps)}}
        nbytes = {"dequantize": blocks.nbytes + 4 * n * k, "qmatvec": blocks.nbytes + 4 * k + 4 * n}
        for path in paths:
            os.environ["FUELVK_TEXEL_LOADS"] = path
            for op, fn in (("dequantize", lambda: fq.dequantize(wq)), ("qmatvec", lambda: fq.qmatmul(x, wq))):
                ms = measure(fn, repeats=reps)["median_ms"]
                roof = copy_gbps(nbytes[op], repeats=reps)
                r = {"kind": kind, "op": op, "shape": f"N={n} K={k}", "path": "texel" if path == "1" else "ssbo",
                     "ms": ms, "GBps": nbytes[op] / ms / 1e6, "copy_GBps": roof,
                     "pct_copy_roof": 100 * nbytes[op] / ms / 1e6 / roof}
                for lib, t in base[op].items():
                    r[f"{lib}_ms"], r[f"{lib}_ratio"] = t, t / ms
                rows.append(r)
        os.environ.pop("FUELVK_TEXEL_LOADS", None)
    return rows


def bench_routes(n, k, reps, kinds=("q4_0", "q4_k"), ms=(1, 2, 4, 8, 16, 64), tiled_max_m=16):
    """Rows of (e): device ms of each qmatmul route per M (the crossover behind DEQUANT_MIN_M)."""
    rng = np.random.default_rng(4)
    rows = []
    for kind in kinds:
        blocks, _ = _kind_blocks(kind, n, k, rng)
        wq = fq.QuantTensor(fv.asarray(blocks.reshape(-1)), kind, (n, k))
        for m in ms:
            x = fv.asarray(rng.standard_normal((m, k)).astype(np.float32))
            r = {"kind": kind, "shape": f"M={m} N={n} K={k}", "picked": fq.qmatmul_route(x, wq)}
            for route in fq.ROUTES:
                if route == "tiled" and m > tiled_max_m:
                    continue
                r[f"{route}_ms"] = measure(lambda: fq.qmatmul(x, wq, route=route), warmup=1, repeats=reps)["median_ms"]
            rows.append(r)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated GGML kinds: run (d) alone for them")
    ap.add_argument("--routes", action="store_true", help="run (e) alone")
    args = ap.parse_args()
    s = 4 if args.small else 1
    if args.routes:
        rows = bench_routes(1024 // s, 4096 // s, args.reps)
        print(json.dumps(rows, indent=1) if args.json else f"device: {fv.device_info()['name']}\n" + table(rows))
        return
    if args.only:
        rows = bench_kinds(4096 // s, 4096 // s, args.reps, tuple(args.only.split(",")))
        print(json.dumps(rows, indent=1) if args.json else f"device: {fv.device_info()['name']}\n" + table(rows))
        return
    res = {"device": fv.device_info()["name"],
           "qmatmul_q4_0": bench_qmatmul(4096 // s, 4096 // s, args.reps),
           "conv2d": bench_conv((8 // s, 64, 56 // s, 56 // s), (64, 64, 3, 3), max(2, args.reps // 2)),
           "rope": bench_rope((1, 32 // s, 2048 // s, 128), args.reps),
           "kinds": bench_kinds(4096 // s, 4096 // s, args.reps),
           "routes": bench_routes(1024 // s, 4096 // s, args.reps)}
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"device: {res.pop('device')}")
    for name, r in res.items():
        print(f"\n{name}\n" + table(r if isinstance(r, list) else [r]))


if __name__ == "__main__":
    main()
