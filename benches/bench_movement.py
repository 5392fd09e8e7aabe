"""Casts and data movement at >= 16M elements on the device, beside a device buffer copy of the
same bytes (vkCmdCopyBuffer, the bandwidth roof) and numpy / torch CPU on the same inputs.

    python benches/bench_movement.py [--n 16777216] [--repeats 5]

GB/s counts bytes read + written once; "% copy" is the op's GB/s over the device copy's GB/s.
"""
import argparse
import time

import ml_dtypes
import numpy as np
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.bench.timing import measure


def host_ms(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=16 * 1024 * 1024, help="elements per case (a square side is sqrt(n))")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    side = int(round(args.n ** 0.5))
    n = side * side
    rng = np.random.default_rng(0)
    x = rng.standard_normal((side, side)).astype(np.float32)
    half = np.ascontiguousarray(x[:, : side // 2])
    d, dh = fv.asarray(x), fv.asarray(half)
    tx, th = torch.from_numpy(x), torch.from_numpy(half)
    ctx = runtime.get()
    scratch = fv.empty((2 * n,), np.float32)

    def roof(nbytes_read, nbytes_written):
        """Device copy of the same traffic: copy (read + write) / 2 bytes."""
        nb = (nbytes_read + nbytes_written) // 2
        r = measure(lambda: ctx.stream.copy(d.buffer, scratch.buffer, nb), warmup=1, repeats=args.repeats)
        return (nbytes_read + nbytes_written) / r["median_ms"] / 1e6

    pad_w = ((0, 0), (8, 8))
    cases = [
        ("astype f32->f16", lambda: fv.astype(d, np.float16), lambda: x.astype(np.float16),
         lambda: tx.to(torch.float16), 4 * n, 2 * n),
        ("astype f32->bf16", lambda: fv.astype(d, ml_dtypes.bfloat16), lambda: x.astype(ml_dtypes.bfloat16),
         lambda: tx.to(torch.bfloat16), 4 * n, 2 * n),
        ("flip axis 1", lambda: fv.flip(d, 1), lambda: np.ascontiguousarray(np.flip(x, 1)),
         lambda: torch.flip(tx, (1,)), 4 * n, 4 * n),
        ("pad constant", lambda: fv.pad(d, pad_w), lambda: np.pad(x, pad_w),
         lambda: torch.nn.functional.pad(tx, (8, 8)), 4 * n, 4 * (n + 16 * side)),
        ("concatenate axis 1", lambda: fv.concatenate([dh, dh], 1), lambda: np.concatenate([half, half], 1),
         lambda: torch.cat([th, th], 1), 4 * n, 4 * n),
        ("transpose -> contiguous", lambda: fv.ascontiguousarray(d.T), lambda: np.ascontiguousarray(x.T),
         lambda: tx.T.contiguous(), 4 * n, 4 * n),
    ]
    print(f"device: {fv.device_info()['name']}; {n} elements ({side} x {side}) per case; median of {args.repeats}")
    print(f"{'case':26s} {'fuelvk ms':>10s} {'GB/s':>7s} {'copy GB/s':>9s} {'% copy':>7s} {'numpy ms':>9s} "
          f"{'torch ms':>9s}")
    for name, f, npf, tf, rd, wr in cases:
        r = measure(f, warmup=1, repeats=args.repeats)
        gbs = (rd + wr) / r["median_ms"] / 1e6
        c = roof(rd, wr)
        print(f"{name:26s} {r['median_ms']:10.2f} {gbs:7.2f} {c:9.2f} {100 * gbs / c:6.1f}% "
              f"{host_ms(npf, args.repeats):9.2f} {host_ms(tf, args.repeats):9.2f}", flush=True)


if __name__ == "__main__":
    main()
