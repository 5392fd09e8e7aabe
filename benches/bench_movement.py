#!/usr/bin/env python3
"""Casts and data movement.

    python benches/bench_movement.py [suite options: --filter float32 --max-mb 0 --json out.json ...]
    python benches/bench_movement.py --cpu [N]

The first form is `python -m fuelvk bench --ops astype,flip,pad,concatenate,ascontiguousarray,roll,take`:
device time, GB/s, % of the measured copy roof, numpy / torch CPU on the same inputs.

`--cpu` times the remap family, non-contiguous copies, gather / scatter_add / take and im2col on
1024x1024 float32 (and a conv's image; pad / pad_backward also on short rows, as the bench's resnet
and whisper cases) as process CPU ms per call (best of N, default 5; on a CPU
driver this counts the driver's threads and is steadier than wall or device time on a loaded host),
with a whole-texel copy of the same bytes (copy_roof) and numpy's CPU ms for the same op beside.
Compare builds by running it alternately from each worktree (PYTHONPATH=<worktree>/src).
"""
import json
import sys
import time

import numpy as np

OPS = "astype,flip,pad,concatenate,ascontiguousarray,roll,take"


def cpu_cases():
    import fuelvk as fv
    from fuelvk.ops.conv import im2col
    from fuelvk.ops.indexing import _accumulate, gather_along

    rng = np.random.default_rng(0)
    h = rng.standard_normal((1024, 1024)).astype(np.float32)
    hi = rng.integers(0, 1024, (1024, 1024))
    himg = rng.standard_normal((4, 16, 64, 64)).astype(np.float32)
    himg7 = rng.standard_normal((64, 64, 7, 7)).astype(np.float32)
    htix = rng.integers(0, 1024, 1024).astype(np.int32)
    hmaps = rng.standard_normal((8, 32, 56, 56)).astype(np.float32)     # short rows: spans cross rows
    hmel = rng.standard_normal((16, 80, 1502)).astype(np.float16)
    x, idx, img, img7, tix, maps, mel = (fv.asarray(a) for a in (h, hi.astype(np.int64), himg, himg7, htix, hmaps,
                                                                   hmel))
    hw1 = ((0, 0), (0, 0), (1, 1), (1, 1))
    halves = [fv.asarray(h[:512]), fv.asarray(h[512:])]
    hparts = [np.ascontiguousarray(h[:, :511]), np.ascontiguousarray(h[:, 511:])]   # rows not word-aligned
    parts = [fv.asarray(a) for a in hparts]

    def np_im2col(a):
        b, c, hh, ww = a.shape
        p = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return np.stack([p[:, :, i:i + hh, j:j + ww] for i in range(3) for j in range(3)], 2).reshape(b, c * 9, hh * ww)

    def np_scatter(base, ids, src):
        out = base.copy()
        np.add.at(out, (np.arange(1024)[:, None], ids), src)
        return out

    # name: (fuelvk call, numpy call); gather / scatter_add time the kernels (device indices, no host
    # bounds check), take includes its bounds check of 1024 indices
    return {
        "copy_roof": (lambda: fv.ascontiguousarray(x[:, 4:1020]), lambda: np.ascontiguousarray(h[:, 4:1020])),
        "flip_last": (lambda: fv.flip(x, axis=-1), lambda: np.flip(h, -1).copy()),
        "roll_1": (lambda: fv.roll(x, 1, axis=1), lambda: np.roll(h, 1, axis=1)),
        "triu": (lambda: fv.triu(x), lambda: np.triu(h)),
        "pad1_const": (lambda: fv.pad(x, 1), lambda: np.pad(h, 1)),
        "pad3_reflect": (lambda: fv.pad(x, 3, mode="reflect"), lambda: np.pad(h, 3, mode="reflect")),
        "pad3_edge": (lambda: fv.pad(x, 3, mode="edge"), lambda: np.pad(h, 3, mode="edge")),
        "pad_bwd_const": (lambda: fv.pad_backward(x, 3), lambda: h[3:-3, 3:-3].copy()),
        "pad_bwd_reflect": (lambda: fv.pad_backward(x, 3, mode="reflect"), None),
        "pad1_hw_8x32x56x56": (lambda: fv.pad(maps, hw1), lambda: np.pad(hmaps, hw1)),
        "pad_bwd_edge_16x80x1502_f16": (lambda: fv.pad_backward(mel, ((0, 0), (0, 0), (1, 1)), mode="edge"), None),
        "T_contig": (lambda: fv.ascontiguousarray(x.T), lambda: np.ascontiguousarray(h.T)),
        "slice1_1000": (lambda: fv.ascontiguousarray(x[:, 1:1000]), lambda: np.ascontiguousarray(h[:, 1:1000])),
        "concat_ax1_odd": (lambda: fv.concatenate([x[:, :511], x[:, 511:]], axis=1),
                           lambda: np.concatenate([h[:, :511], h[:, 511:]], axis=1)),
        "concat_ax1_parts": (lambda: fv.concatenate(parts, axis=1), lambda: np.concatenate(hparts, axis=1)),
        "stack": (lambda: fv.stack(halves), lambda: np.stack([h[:512], h[512:]])),
        "take_along_i64": (lambda: gather_along(x, idx, 2, 1, "b4"), lambda: np.take_along_axis(h, hi, 1)),
        "scatter_add_i64": (lambda: _accumulate("scatter_add", "scatter_add", x, x, idx, 2, 1, x.shape, x.strides,
                                                idx.strides, False), lambda: np_scatter(h, hi, h)),
        "take_ax1": (lambda: fv.take(x, tix, 1), lambda: np.take(h, htix, 1)),
        "im2col_64x64": (lambda: im2col(img, 3, padding=1), lambda: np_im2col(himg)),
        "im2col_7x7": (lambda: im2col(img7, 3, padding=1), lambda: np_im2col(himg7)),
    }


def cpu_main(n):
    from fuelvk import runtime
    ctx = runtime.get()
    res = {}
    for name, (f, ref) in cpu_cases().items():
        row = {}
        for key, call, sync in (("fuelvk_ms", f, ctx.stream.synchronize), ("numpy_ms", ref, lambda: None)):
            if call is None:
                continue
            call()
            sync()
            best = float("inf")
            for _ in range(n):
                c0 = time.process_time()
                call()
                sync()
                best = min(best, (time.process_time() - c0) * 1e3)
            row[key] = round(best, 2)
        res[name] = row
    print(json.dumps(res))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cpu"]:
        cpu_main(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
        sys.exit(0)
    from fuelvk.bench.suite import main
    sys.exit(main(["--ops", OPS, *sys.argv[1:]]))
