#!/usr/bin/env python3
"""A tiny random-init HF transformers Llama (hidden 256) on the "fuelvk" PyTorch device beside torch CPU:
forward and forward+backward milliseconds on the same inputs, and the CPU fallbacks counted (0 expected).

Device rows end with a synchronize (the device queue drained), so they time the work, not its queuing.

    PYTHONPATH=src python benches/bench_torch_llama.py [--reps 5] [--hidden 256] [--seq 32] [--json f]
"""
import argparse
import copy
import json
import time

import torch

import fuelvk as fv
import fuelvk.torch as ft


def timed(fn, reps, sync):
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


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
        c = timed(lambda: fn(cpu, ids), args.reps, lambda: None)
        d = timed(lambda: fn(dev, idd), args.reps, fv.synchronize)
        rows.append({"what": name, "torch_cpu_ms": round(c, 2), "fuelvk_ms": round(d, 2), "ratio": round(d / c, 2)})
        print(f"{name:18s} torch CPU {c:9.2f} ms   fuelvk device {d:9.2f} ms   ({d / c:.1f}x)")
    stats = ft.fallback_stats()
    print("CPU fallbacks:", stats or "none")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows, "fallbacks": stats}, f, indent=1)


if __name__ == "__main__":
    main()
