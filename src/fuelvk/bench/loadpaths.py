"""Load paths: the same copy kernel reading its source through each descriptor kind
(kernels/loadpaths.py), timed next to vkCmdCopyBuffer. Run by benches/bench_load_paths.py.

Why: on lavapipe every storage-buffer load is compiled to a per-lane loop with a bounds check, so
the question is whether texel buffers (texelFetch / imageLoad) load faster.
"""
import numpy as np

from .. import runtime
from ..kernels import kernel
from ..kernels.loadpaths import LOADPATH_EPT, LOADPATH_RPT, LOADPATH_WG, LOADPATHS
from .timing import measure


def copy_through(tag, dst, src, n, off=0):
    """Record dst[:n] = src[off:off + n] in texels of path `tag` (buffers bound whole)."""
    ctx = runtime.get()
    groups = ctx.groups(-(-n // (LOADPATH_WG * LOADPATH_EPT)))
    ctx.launch(kernel("loadpath", tag), groups, dst=dst, src=src, n=n, off=off)


def read_through(tag, dst, src, n, off=0):
    """Record the READ mode: dst[q] = combination (xor; f32: sum) of src[off + ...] texels
    g*WG*RPT + lane + j*WG, j < RPT, for invocation q = g*WG + lane; returns the number of outputs."""
    ctx = runtime.get()
    groups = -(-n // (LOADPATH_WG * LOADPATH_RPT))
    ctx.launch(kernel("loadpath", tag), ctx.groups(groups), dst=dst, src=src, n=n, off=off, READ=1)
    return groups * LOADPATH_WG


def bench(nbytes=64 << 20, repeats=10, warmup=2, paths=None):
    """Rows {path, GBps and median_ms of the copy, read_GBps and read_ms of the READ mode (GB/s count
    bytes read + written), x_vs_ssbo_f32 (copy), note}; the first row is vkCmdCopyBuffer.

    Each path's copy is checked bit for bit against its input before it is timed."""
    import fuelvk as fv
    ctx = runtime.get()
    words = nbytes // 16 * 4
    # finite halves, so every path (f32 float loads, f16 texels converted to float) moves them bit for bit
    host = np.random.default_rng(0).standard_normal(2 * words).astype(np.float16).view(np.float32)
    src, dst = fv.asarray(host), fv.empty((words,), np.float32)
    nb = words * 4
    m = measure(lambda: ctx.stream.copy(src.buffer, dst.buffer, nb), warmup, repeats)
    rows = [{"path": "vkCmdCopyBuffer", "GBps": 2 * nb / m["median_ms"] / 1e6, "median_ms": m["median_ms"],
             "read_GBps": None, "read_ms": None, "note": ""}]
    limit = ctx.device.limits.maxTexelBufferElements
    for tag, (_, w, _, feats) in LOADPATHS.items():
        if paths and tag not in paths:
            continue
        n = words // w
        missing = [f for f in feats if f not in ctx.device.features]
        if missing:
            rows.append({"path": tag, "GBps": None, "median_ms": None, "read_GBps": None, "read_ms": None,
                         "note": f"device lacks {missing}"})
            continue
        if tag.startswith(("utb", "stb")) and src.buffer.size // (4 * w) > limit:
            rows.append({"path": tag, "GBps": None, "median_ms": None, "read_GBps": None, "read_ms": None,
                         "note": f"{n} texels > maxTexelBufferElements {limit}"})
            continue
        ctx.stream.fill(dst.buffer, nb, 0)
        copy_through(tag, dst.buffer, src.buffer, n)
        ok = np.array_equal(dst.numpy().view(np.uint32), host.view(np.uint32))
        m = measure(lambda t=tag, k=n: copy_through(t, dst.buffer, src.buffer, k), warmup, repeats)
        outs = read_through(tag, dst.buffer, src.buffer, n)
        r = measure(lambda t=tag, k=n: read_through(t, dst.buffer, src.buffer, k), warmup, repeats)
        rb = nb + outs * 4 * w
        rows.append({"path": tag, "GBps": 2 * nb / m["median_ms"] / 1e6, "median_ms": m["median_ms"],
                     "read_GBps": rb / r["median_ms"] / 1e6, "read_ms": r["median_ms"],
                     "note": "" if ok else "WRONG RESULT"})
    base = next((r["GBps"] for r in rows if r["path"] == "ssbo_f32"), None)
    for r in rows:
        r["x_vs_ssbo_f32"] = r["GBps"] / base if base and r["GBps"] else None
    return rows
