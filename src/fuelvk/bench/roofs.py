"""The device's roofs, measured once per run with calibration kernels (kernels/calibrate.py).

Bandwidth: vkCmdCopyBuffer and the calibrate copy shader (16-byte loads + stores), bytes read +
written; the roof is the higher of the two (what the device's memory system can be made to do).
Arithmetic: FMA throughput of 16 independent chains per invocation, per arithmetic dtype (f32, and
f16 where the device has shaderFloat16), 2 FLOPs per FMA. Each measurement grows its size until
the median takes at least `min_ms`, so timer resolution and launch overhead do not set the roof.
"""
from __future__ import annotations

import numpy as np

from .. import runtime
from ..kernels import calibrate
from ..kernels import kernel
from .timing import cpu_ms, measure


def _grow(run, size, limit, min_ms, repeats):
    """measure(run(size)) doubling size until it takes min_ms (or size reaches limit)."""
    while True:
        m = measure(run(size), warmup=1, repeats=repeats)
        if m["median_ms"] >= min_ms or size * 2 > limit:
            return size, m
        size *= 2


def copy_roofs(repeats=5, min_ms=5.0, max_bytes=256 << 20):
    import fuelvk as fv
    ctx = runtime.get()
    cap = min(max_bytes, ctx.device.limits.maxStorageBufferRange) // 16 * 16
    a, b = fv.empty((cap // 4,), np.float32), fv.empty((cap // 4,), np.float32)
    a_buf, b_buf = a.buffer, b.buffer
    nb, m = _grow(lambda n: lambda: ctx.stream.copy(a_buf, b_buf, n), 1 << 20, cap, min_ms, repeats)
    cmd = 2 * nb / m["median_ms"] / 1e6
    v = kernel("calibrate", "f32")

    def shader(n):
        vec = n // 16
        groups = ctx.groups(-(-vec // calibrate.CALIB_WG))
        return lambda: ctx.launch(v, groups, dst=b_buf, src=a_buf, n=vec, iters=0, MODE=calibrate.MODE_COPY)

    ns, ms = _grow(shader, 1 << 20, cap, min_ms, repeats)
    sh = 2 * ns / ms["median_ms"] / 1e6
    return {"copy_cmd_GBps": cmd, "copy_shader_GBps": sh, "bandwidth_GBps": max(cmd, sh),
            "copy_bytes": int(max(nb, ns))}


def copy_gbps(nbytes, warmup=1, repeats=5):
    """GB/s (read + write) of one vkCmdCopyBuffer of nbytes: the device copy of a case's own traffic."""
    import fuelvk as fv
    ctx = runtime.get()
    n = -(-nbytes // 4)
    a, b = fv.empty((n,), np.float32), fv.empty((n,), np.float32)
    m = measure(lambda: ctx.stream.copy(a.buffer, b.buffer, nbytes), warmup, repeats)
    return 2 * nbytes / m["median_ms"] / 1e6


def _fma_run(tag):
    """(n invocations, iters -> launch of the calibrate FMA kernel in arithmetic dtype `tag`)."""
    import fuelvk as fv
    ctx = runtime.get()
    n = 256 * 64
    out = fv.empty((4 * n,), np.float32)
    v = kernel("calibrate", tag)
    groups = ctx.groups(n // calibrate.CALIB_WG)
    return n, lambda iters: lambda: ctx.launch(v, groups, dst=out, src=out, n=n, iters=iters, MODE=calibrate.MODE_FMA)


def fma_roof(tag, repeats=5, min_ms=5.0):
    """GFLOP/s of the calibrate FMA kernel in arithmetic dtype `tag` ('f32' or 'f16')."""
    n, run = _fma_run(tag)
    iters, m = _grow(run, 64, 1 << 20, min_ms, repeats)
    return 2 * calibrate.CALIB_FMAS_PER_ITER * n * iters / m["median_ms"] / 1e6


def fma_per_cpu_second(tag, repeats=3, iters=2048):
    """GFLOP per second of process CPU of the calibrate FMA kernel (timing.cpu_ms): on a CPU device the
    arithmetic roof per core-second, which does not move with how many cores the driver's threads got."""
    n, run = _fma_run(tag)
    return 2 * calibrate.CALIB_FMAS_PER_ITER * n * iters / cpu_ms(run(iters), 1, repeats) / 1e6


def measure_roofs(repeats=5, min_ms=5.0):
    """{bandwidth_GBps, copy_cmd_GBps, copy_shader_GBps, copy_bytes, fma_GFLOPs: {dtype: GFLOP/s}}."""
    dev = runtime.get().device
    out = copy_roofs(repeats, min_ms)
    out["fma_GFLOPs"] = {"float32": fma_roof("f32", repeats, min_ms)}
    if "float16" in dev.features:
        out["fma_GFLOPs"]["float16"] = fma_roof("f16", repeats, min_ms)
    return out


def peak_for(roofs, dtypes):
    """The FMA peak that bounds a case: f16 arithmetic when every float input is float16 and the device
    measured it; f32 otherwise (fuelvk computes bf16 and f16-mixed cases in f32)."""
    peaks = roofs["fma_GFLOPs"]
    floats = [d for d in dtypes if d in ("float16", "bfloat16", "float32", "float64")]
    if floats and all(d == "float16" for d in floats) and "float16" in peaks:
        return "float16", peaks["float16"]
    return "float32", peaks["float32"]


def attainable(roofs, flops, nbytes, peak):
    """(speed-of-light ms, binding roof): max(bytes / bandwidth, flops / peak), TileOPs' speed of light;
    the roof is "memory" or "compute", whichever term is larger."""
    t_mem = nbytes / roofs["bandwidth_GBps"] / 1e6
    t_fma = flops / peak / 1e6
    return max(t_mem, t_fma), ("memory" if t_mem >= t_fma else "compute")
