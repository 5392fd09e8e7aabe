#!/usr/bin/env python3
"""Attention on the device (single-pass vs tiled FlashAttention-2 vs flash-decoding) vs torch CPU SDPA, one run.

    python benches/bench_attention.py              # issue 7's shapes
    python benches/bench_attention.py --repeats 5  # more repeats on a quiet machine

Shapes: B=1, H=8, S=1024, D=64, causal and not, f32 and f16; decode Sq=1, Sk=4096, Hq=32, Hkv=8,
D=128 (causal, i.e. the one row sees every key), and the same without GQA (Hq=Hkv=8); a small GQA
prefill (FlashInfer-Bench's gqa_ragged h32_kv16 at 40 queries / 70 keys). Each route runs where it
applies (single: Sk <= 4096; decode takes any rows per kv head, auto picks it for every prefill on a
CPU device). GFLOP/s use the TileOPs attention count of the
matmul work on visible scores only: 4 * D per visible (query, key) pair (QK^T and PV). Device
times are timestamp-query medians (fuelvk.bench.timing); torch runs float32 SDPA on the CPU
(GQA by repeating k/v heads, outside the timed region) with its own thread count.
"""
import argparse
import time

import numpy as np
import torch

import fuelvk as fv
from fuelvk.bench.timing import measure
from fuelvk.ops.attention import attention_route, scaled_dot_product_attention

CASES = [  # (label, B, Hq, Hkv, Sq, Sk, D, causal)
    ("prefill", 1, 8, 8, 1024, 1024, 64, False),
    ("prefill causal", 1, 8, 8, 1024, 1024, 64, True),
    ("decode gqa", 1, 32, 8, 1, 4096, 128, True),
    ("decode", 1, 8, 8, 1, 4096, 128, True),
    ("prefill gqa small", 1, 32, 16, 40, 70, 128, True),
]


def visible_pairs(Sq, Sk, causal):
    """Visible (i, j) pairs of one head, causal bottom-right aligned."""
    if not causal:
        return Sq * Sk
    return sum(max(0, min(Sk, i + 1 + Sk - Sq)) for i in range(Sq))


def torch_time(q, k, v, causal, repeats):
    G = q.shape[1] // k.shape[1]
    tq, tk, tv = (torch.from_numpy(x.astype(np.float32)) for x in (q, k, v))
    tk, tv = tk.repeat_interleave(G, 1).contiguous(), tv.repeat_interleave(G, 1).contiguous()
    # torch's is_causal is top-left aligned; pass the bottom-right mask explicitly when Sq != Sk.
    mask = None
    if causal and q.shape[2] != k.shape[2]:
        Sq, Sk = q.shape[2], k.shape[2]
        mask = torch.arange(Sk)[None, :] <= torch.arange(Sq)[:, None] + (Sk - Sq)
    kw = {"attn_mask": mask} if mask is not None else {"is_causal": causal}
    F = torch.nn.functional.scaled_dot_product_attention
    F(tq, tk, tv, **kw)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        F(tq, tk, tv, **kw)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--filter", default="", help="run only the cases whose label contains this text")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, B, Hq, Hkv, Sq, Sk, D, causal in CASES:
        if args.filter not in label:
            continue
        flops = 4 * D * B * Hq * visible_pairs(Sq, Sk, causal)
        for dt in (np.float32, np.float16):
            host = [rng.standard_normal(s).astype(dt) for s in ((B, Hq, Sq, D), (B, Hkv, Sk, D), (B, Hkv, Sk, D))]
            q, k, v = (fv.asarray(x) for x in host)
            auto = attention_route(q, k)
            for route in ("single", "tiled", "decode"):
                def run(q=q, k=k, v=v, causal=causal, route=route):
                    return scaled_dot_product_attention(q, k, v, is_causal=causal, route=route,
                                                        causal_alignment="bottom_right")
                r = measure(run, warmup=1, repeats=args.repeats)
                rows.append((label, np.dtype(dt).name, route + ("*" if route == auto else ""), r["median_ms"],
                             flops / r["median_ms"] / 1e6))
            if dt == np.float32:
                t = torch_time(*host, causal, args.repeats)
                rows.append((label, "float32", f"torch cpu ({torch.get_num_threads()} thr)", t, flops / t / 1e6))
    print(f"device: {fv.runtime.get().device.name}   (* = the route auto picks)")
    print(f"{'case':<19}{'dtype':<9}{'route':<20}{'ms':>10}{'GFLOP/s':>10}")
    for label, dt, route, ms, gf in rows:
        print(f"{label:<19}{dt:<9}{route:<20}{ms:>10.1f}{gf:>10.3f}")


if __name__ == "__main__":
    main()
