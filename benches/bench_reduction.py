"""Reductions / softmax / norms / cumsum vs a device buffer copy of the same bytes, numpy and torch CPU.

    python benches/bench_reduction.py [--rows 4096] [--cols 4096] [--repeats 5]

GB/s counts bytes read + written once each (the roofline convention); "% copy" is that over the
bandwidth of vkCmdCopyBuffer moving the f32 input's bytes, measured in the same run.
"""
import argparse
import time

import ml_dtypes
import numpy as np
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.bench.timing import measure


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cpu_ms(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--sum-n", type=int, default=16 << 20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    ctx = runtime.get()
    R, C, rep = a.rows, a.cols, a.repeats
    x32 = rng.standard_normal((R, C)).astype(np.float32)
    dev = {"f32": fv.asarray(x32), "bf16": fv.asarray(x32.astype(ml_dtypes.bfloat16))}
    w = {k: fv.asarray(np.ones(C, v.dtype)) for k, v in dev.items()}
    flat = fv.asarray(rng.standard_normal(a.sum_n).astype(np.float32))
    dst = fv.empty(flat.shape, np.float32)
    copy = measure(lambda: ctx.stream.copy(flat.buffer, dst.buffer, flat.nbytes), 2, rep)
    copy_gbs = 2 * flat.nbytes / copy["median_ms"] / 1e6
    print(f"device: {ctx.device.name}; copy {flat.nbytes >> 20} MiB: {copy['median_ms']:.2f} ms = "
          f"{copy_gbs:.2f} GB/s (read + write)")
    t32 = torch.tensor(x32)
    cases = [
        ("sum", "f32", f"[{a.sum_n}]", lambda: fv.sum(flat), flat.nbytes,
         lambda: np.sum(flat_host), lambda: torch.sum(flat_t)),
    ]
    flat_host = flat.numpy()
    flat_t = torch.tensor(flat_host)
    for k in ("f32", "bf16"):
        x, wk = dev[k], w[k]
        tt = t32 if k == "f32" else t32.to(torch.bfloat16)
        nb = 2 * x.nbytes
        cases += [
            ("softmax", k, f"[{R}, {C}]", lambda x=x: fv.softmax(x), nb, None if k != "f32" else
             (lambda: _np_softmax(x32)), lambda tt=tt: torch.softmax(tt, -1)),
            ("rms_norm", k, f"[{R}, {C}]", lambda x=x, wk=wk: fv.rms_norm(x, 1e-6, wk), nb, None,
             lambda tt=tt: torch.nn.functional.rms_norm(tt, (C,), eps=1e-6)),
        ]
    cases += [
        ("layer_norm", "f32", f"[{R}, {C}]", lambda: fv.layer_norm(dev["f32"], 1e-5, w["f32"]),
         2 * dev["f32"].nbytes, None, lambda: torch.nn.functional.layer_norm(t32, (C,), eps=1e-5)),
        ("cumsum", "f32", f"[{R}, {C}] axis -1", lambda: fv.cumsum(dev["f32"], -1), 2 * dev["f32"].nbytes,
         lambda: np.cumsum(x32, -1), lambda: torch.cumsum(t32, -1)),
    ]
    print(f"{'op':11s}{'dtype':6s}{'shape':22s}{'ms':>9s}{'GB/s':>8s}{'% copy':>8s}{'numpy ms':>10s}{'torch ms':>10s}")
    for name, k, shape, fn, nbytes, np_fn, t_fn in cases:
        if a.only and name not in a.only.split(","):
            continue
        r = measure(fn, 1, rep)
        gbs = nbytes / r["median_ms"] / 1e6
        npm = cpu_ms(np_fn, rep) if np_fn else float("nan")
        tm = cpu_ms(t_fn, rep) if t_fn else float("nan")
        print(f"{name:11s}{k:6s}{shape:22s}{r['median_ms']:9.2f}{gbs:8.2f}{100 * gbs / copy_gbs:7.1f}%"
              f"{npm:10.2f}{tm:10.2f}", flush=True)


if __name__ == "__main__":
    main()
