"""Reductions (numpy names): sum, prod, max, min, mean over any axis or tuple of axes; argmax, argmin.

Layout choice (`strided_plan`): when the kept axes collapse to at most two dims and the reduced ones
to one, the input is read in place as an [outer, d, inner] strided view. Leading / middle axes (a
reduced dim of stride other than +-1) and contiguous rows (any length for the value reductions,
VALUE_ROW_MAX; up to SHORT_ROW_MAX for argmax / argmin) run the strided kernels: one invocation per
output element and chunk of d (coalesced across outputs, no transpose copy, no barriers; a long d in
chunks plus a final pass over the partials). Longer contiguous rows of the arg-reductions (and rows
past the strided kernels' loop budget) run the row kernels, a workgroup per row (or per chunk of a
row, plus a partials pass for 1M+ element rows). What fits neither (axes that do not collapse so,
operands larger than one binding) has its reduced axes moved last by one strided copy and runs as
rows (in blocks through windows).
Both families read x through 16-byte texel views where the runs they read are whole texels
(TEXEL_LOADS; storage-buffer loads for the rest), in the same summation order either way for the
strided kernels.

Semantics: numpy's. Results keep the input dtype (half types accumulate in f32); NaN propagates
through max/min/sum/mean/cumsum, and +-inf (an infinite input or an overflowing sum) gives +-inf, NaN
when both signs meet, as numpy (the compensated sums drop their correction once the running sum is
infinite: shaders/common/kahan.glsl); sum of an empty axis is 0, mean is NaN, max/min/argmax/argmin of an
empty axis raise ShapeError (numpy: "zero-size array to reduction operation ... has no identity").
arg-reductions return int64 (numpy/torch), the lowest index on ties and the first NaN if any.
"""
import builtins
import math

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..runtime import loadpath
from ..runtime.loadpath import TEXEL_BYTES
from ..array import Array, asarray
from ..errors import DTypeError, FuelVKMemoryError, ShapeError
from ..kernels import kernel
from ..kernels.registry import occupying_wg, parallel_groups
from ..kernels.movement_core import copy_variant
from ..kernels.reduction import (ARG_OPS, CHUNK_PER_INVOCATION, CUMSUM_MAX_RANK, CUMSUM_TEXELS, MODE_DIRECT,
                                 MODE_FINAL, MODE_PARTIAL, REDUCE_OPS, SHORT_ROW_MAX, ANY_DIM_INVOCATIONS,
                                 any_dim_chunks, row_wg)
from ._core import (binding_limit, blocks, contiguous, device_args, fits, launch_strided, new_like, result, rowwise,
                    spans, windowed)
from .casts import astype
from .movement import launch_write
from .movement_core import ascontiguousarray

# The public sum/max/min shadow the builtins in this module: internal code uses builtins.max etc.
__all__ = ["sum", "prod", "max", "min", "mean", "argmax", "argmin", "cumsum"]


def normalize_axes(op, axis, rank):
    """A sorted tuple of distinct axes (None = all); ShapeError on bad or repeated axes."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (tuple, list)):
        axes = tuple(layout.normalize_axis(op, a, rank) for a in axis)
    else:
        axes = (layout.normalize_axis(op, axis, rank),)
    if rank == 0:
        return ()
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{op}: repeated axis in {axis!r} for an array of rank {rank}")
    return tuple(sorted(axes))


# Read x through a 16-byte (rgba32ui) texel view where the kernel can (measured on lavapipe: ~20x the
# read throughput of storage-buffer loads, benches/bench_load_paths.py); tests switch it off to run
# the storage-buffer path.
TEXEL_LOADS = True


def texel_source(x, whole=True, store=False):
    """(buffer for the kernel's texel view of x, TEX spec constant): x's slot and 1 when the device
    reads (store: writes) faster through texel views (loadpath.texel_paths: the probe, or
    FUELVK_TEXEL_LOADS), TEXEL_LOADS is on, `whole` (the kernel's runs of x are whole texels) and the
    slot is within the device's maxTexelBufferElements; else a 16-byte stub view and 0 (storage-buffer
    loads)."""
    ctx = runtime.get()
    pool = ctx.pool
    on = loadpath.texel_paths(ctx)[1 if store else 0]
    if TEXEL_LOADS and on and whole and x.buffer.size // TEXEL_BYTES <= pool.device.limits.maxTexelBufferElements:
        return x.buffer, 1
    return loadpath.stub(pool), 0


def texel_views(bits, loads, stores=None):
    """The row kernels' texel views (softmax, norms, rope, cumsum: shaders/common/rowchunks.glsl):
    ({view binding: buffer}, TEX). loads / stores map an operand's key in `bits` (x, g, ...; its view
    binding is <key>_t, its bit in TEX bits[key]) to the Array it shows, or to None for an operand
    the launch does not have. Each view shows its array's slot where texel_source allows, else the
    stub (bit clear)."""
    views, tex = {}, 0
    for table, store in ((loads, False), (stores or {}, True)):
        for key, a in table.items():
            buf, on = texel_source(a, True, store) if a is not None else (loadpath.stub(runtime.get().pool), 0)
            views[f"{key}_t"] = buf
            tex |= bits[key] if on else 0
    return views, tex


def whole_rows(bits, operands, n, grid="x"):
    """The row kernels' ALIGN spec constant (shaders/common/rowchunks.glsl): the bits (from `bits`) of
    the operands (key -> Array, or None: not in the launch) whose every chunk is one whole aligned
    16-byte texel, i.e. rows of n elements each start on a texel: n and the operand's element offset
    are multiples of the elements per texel. The kernels cut every operand's row at the texels of
    operands[grid], so none is whole unless that one is. Those operands skip the element-by-element
    path, which SIMD CPU drivers otherwise run under a mask beside every whole chunk."""
    g = operands[grid]
    if n % (TEXEL_BYTES // g.dtype.itemsize) or g.offset % (TEXEL_BYTES // g.dtype.itemsize):
        return 0
    out = 0
    for key, a in operands.items():
        if a is not None:
            per = TEXEL_BYTES // a.dtype.itemsize
            out |= bits[key] if n % per == 0 and a.offset % per == 0 else 0
    return out


def accum_dtype(dt):
    return _dt.float64 if dt == _dt.float64 else _dt.float32


def rows_view(x, axes):
    """x as a contiguous [rows, cols] array whose rows run over the kept axes, cols over `axes`."""
    kept = [a for a in range(x.ndim) if a not in axes]
    v = x.transpose(kept + list(axes)) if x.ndim else x
    v = contiguous(v)
    cols = math.prod(x.shape[a] for a in axes)
    rows = math.prod(x.shape[a] for a in kept)
    return v, rows, cols


def strided_plan(x, axes):
    """x reduced over `axes` as an [outer, d, inner] strided view: (outer, d, inner, s_outer, s_d,
    s_inner) in elements, or None when the kept axes do not collapse to two dims or the reduced ones
    to one. The reduced axes are taken outermost-stride first (a sum's order is free), so
    axis=(0, 2) of a transposed view collapses whenever memory allows."""
    kept = [a for a in range(x.ndim) if a not in axes]
    red = sorted(axes, key=lambda a: -abs(x.strides[a]))
    ds, (sd,) = layout.collapse([x.shape[a] for a in red], [x.strides[a] for a in red])
    ks, (sk,) = layout.collapse([x.shape[a] for a in kept], [x.strides[a] for a in kept])
    if len(ds) > 1 or len(ks) > 2:
        return None
    d, s_d = (ds[0], sd[0]) if ds else (1, 0)
    ks, sk = (1,) * (2 - len(ks)) + tuple(ks), (0,) * (2 - len(sk)) + tuple(sk)
    return ks[0], d, ks[1], sk[0], s_d, sk[1]


# Contiguous rows longer than this take the row kernels (a workgroup per chunk, trees) in the value
# reductions; None: rows of any length take the strided kernel (kernels/reduction.py: measured faster).
# Tests set it to SHORT_ROW_MAX to run the row kernels on long rows.
VALUE_ROW_MAX = None


def _strided_route(x, axes, row_max=SHORT_ROW_MAX):
    """The [outer, d, inner] plan when the strided kernels should reduce x over axes, else None."""
    plan = strided_plan(x, axes) if fits(x) else None
    if plan is None or (abs(plan[4]) == 1 and row_max is not None and plan[1] > row_max):   # long rows
        return None
    return plan


def _texel_mode(x, plan):
    """The strided kernels' TEX mode for x's [outer, d, inner] view: 1 when PER adjacent output columns
    are one texel (unit inner stride), 2 when each output's run along d is whole texels (unit d
    stride), 3 when the rows are consecutive and d divides PER (several whole rows per texel), else
    0. All need the offset, and 1 and 2 every other stride (of a dim with more than one index), to be
    multiples of PER."""
    outer, d, inner, s_outer, s_d, s_inner = plan
    per = TEXEL_BYTES // x.dtype.itemsize
    if x.offset % per:
        return 0

    def whole(unit, n, others):
        return unit == 1 and n % per == 0 and all(s % per == 0 for m, s in others if m > 1)
    if whole(s_inner, inner, ((outer, s_outer), (d, s_d))):
        return 1
    if whole(s_d, d, ((outer, s_outer), (inner, s_inner))):
        return 2
    rows_follow = (outer == 1 or s_outer == inner * d) and (inner == 1 or s_inner == d)
    return 3 if s_d == 1 and d < per and per % d == 0 and rows_follow else 0


def _texel_plan(x, plan, chunk):
    """(x_t buffer, TEX, outputs per invocation) for the strided kernels."""
    d = plan[1]
    per = TEXEL_BYTES // x.dtype.itemsize
    mode = _texel_mode(x, plan)
    if (mode == 2 and chunk % per) or (mode == 3 and chunk < d):     # (a loop budget under 8 elements)
        mode = 0
    x_t, tex = texel_source(x, mode != 0)
    tex *= mode
    return x_t, tex, {1: per, 3: per // d}.get(tex, 1)


def launch_reduce_strided(tag, op_id, x, plan, out, off_out=None, chunk_outputs=None):
    """Reduce x's [outer, d, inner] view `plan` into the contiguous `out` (reduce_any_dim): one pass,
    or chunks of d into accumulator-type partials [n_chunks, n_out] and a final pass over them.
    chunk_outputs: the output count that sets the chunk (the whole reduction's, when this launch is
    one block of it, so that every block sums in the same order). Returns False (nothing launched)
    when Device.loop_budget cannot hold the chunks."""
    ctx = runtime.get()
    outer, d, inner, s_outer, s_d, s_inner = plan
    n_out = outer * inner
    chunks = any_dim_chunks(ctx, chunk_outputs or n_out, d)
    if chunks is None:
        return False
    chunk, n_chunks = chunks
    x_t, tex, width = _texel_plan(x, plan, chunk)
    v, wg = kernel("reduce_any_dim", tag), row_wg(ctx)
    off_out = out.offset if off_out is None else off_out
    args = {"n_out": n_out, "denom": d, "WG": wg, "OP": op_id}
    view = {"n_inner": inner, "d": d, "off_in": x.offset, "s_outer": s_outer, "s_d": s_d, "s_inner": s_inner,
            "chunk": chunk, "n_chunks": n_chunks}
    if n_chunks == 1:
        ctx.launch(v, ctx.groups(-(-n_out // width // wg)), out=out, x=x, part=out, x_t=x_t, off_out=off_out,
                   **view, **args, MODE=MODE_DIRECT, TEX=tex)
        return True
    part = new_like((n_chunks * n_out,), accum_dtype(x.dtype))
    ctx.launch(v, ctx.groups(-(-n_chunks * n_out // width // wg)), out=part, x=x, part=part, x_t=x_t, off_out=0,
               **view, **args, MODE=MODE_PARTIAL, TEX=tex)
    ctx.launch(v, ctx.groups(-(-n_out // wg)), out=out, x=out, part=part, x_t=texel_source(out, False)[0],
               off_out=off_out, n_inner=n_out, d=n_chunks, off_in=0, s_outer=0, s_d=n_out, s_inner=1,
               chunk=n_chunks, n_chunks=1, **args, MODE=MODE_FINAL, TEX=0)
    return True


def sum_over_groups(part, n_groups, dtype):
    """The column sums of the accumulator-type partials part [n_groups, n] (e.g. the norms' weight
    gradients per row group), rounded once to dtype: reduce_any_dim over part's columns (one invocation
    per column reading rows coalesced, long columns in chunks within Device.loop_budget)."""
    n = part.size // n_groups
    out = new_like((n,), part.dtype)
    if not launch_reduce_strided(_dt.float_tag("sum", part.dtype), REDUCE_OPS["sum"], part,
                                 (1, n_groups, n, 0, n, 1), out):
        raise ShapeError(f"sum: {n_groups} partial rows exceed what kernel reduce_any_dim can sum on this device "
                         "(its per-invocation loop limit); use fewer rows at once")
    return out if out.dtype == dtype else astype(out, dtype)


def launch_reduce(fam, tag, op_id, src, rows, cols, out, out_offset=None, all_rows=None):
    """Reduce each row of the contiguous [rows, cols] `src` into out[row] (one or two passes): the
    strided kernel (rows up to VALUE_ROW_MAX, if set), else (or past its loop budget) a workgroup each.

    all_rows: the whole reduction's row count when this call is a block of it (the strided kernel's
    chunks, hence the summation order, follow it).
    """
    ctx = runtime.get()
    off_out = out.offset if out_offset is None else out_offset
    if not fits(src, out):
        return _reduce_split(fam, tag, op_id, src, rows, cols, out, off_out)
    if (VALUE_ROW_MAX is None or cols <= VALUE_ROW_MAX) and launch_reduce_strided(
            tag, op_id, src, (1, cols, rows, 0, 1, cols), out, off_out, all_rows or rows):
        return
    v = kernel(fam, tag)
    wg = row_wg(ctx)
    chunk = wg * CHUNK_PER_INVOCATION
    n_chunks = -(-cols // chunk)
    # Bindings a mode leaves unused get a buffer the dispatch writes anyway (no extra hazard).
    stub = texel_source(out, False)[0]       # MODE_FINAL reads the partials (storage buffer)
    x_t, tex = texel_source(src)             # whole texels of each row; the unaligned ends from x
    if n_chunks <= 1:
        ctx.launch(v, ctx.groups(rows), out=out, x=src, part=out, x_t=x_t, n_rows=rows, n_cols=cols,
                   chunk=builtins.max(cols, 1), n_chunks=1, off_in=src.offset, off_out=off_out, denom=cols, pad=0,
                   WG=wg, OP=op_id, MODE=MODE_DIRECT, TEX=tex)
        return
    part = new_like((rows * n_chunks,), accum_dtype(src.dtype))
    ctx.launch(v, ctx.groups(rows * n_chunks), out=part, x=src, part=part, x_t=x_t, n_rows=rows, n_cols=cols,
               chunk=chunk, n_chunks=n_chunks, off_in=src.offset, off_out=0, denom=cols, pad=0, WG=wg, OP=op_id,
               MODE=MODE_PARTIAL, TEX=tex)
    ctx.launch(v, ctx.groups(rows), out=out, x=out, part=part, x_t=stub, n_rows=rows, n_cols=n_chunks,
               chunk=n_chunks, n_chunks=1, off_in=0, off_out=off_out, denom=cols, pad=0, WG=wg, OP=op_id,
               MODE=MODE_FINAL, TEX=0)


def _long_rows_strided(tag, op_id, s2, rows, cols, o1, lim):
    """Rows longer than one binding on the strided kernel, as the unsplit launch would run them (the
    same chunks of each row, any_dim_chunks(rows, cols), hence the same bits): the chunks' partials of
    each window of whole chunks are gathered in one [rows, chunks] array and combined by one final
    pass. False (nothing launched) when the row kernels take these rows (VALUE_ROW_MAX, loop budget)."""
    ctx = runtime.get()
    chunks = any_dim_chunks(ctx, rows, cols) if VALUE_ROW_MAX is None else None
    if chunks is None:
        return False
    chunk, total = chunks
    span = (lim - 512) // s2.dtype.itemsize // chunk * chunk     # columns per window: whole chunks
    ow = windowed(o1)
    acc = accum_dtype(s2.dtype)
    if not span or ow is None or rows * total * acc.itemsize + 512 > lim:
        return False
    v, wg = kernel("reduce_any_dim", tag), row_wg(ctx)
    part = new_like((rows, total), acc)
    copy = copy_variant(_dt.width_tag(acc), ctx.device.features)
    args = dict(n_out=1, denom=cols, WG=wg, OP=op_id, n_inner=1, s_outer=0, s_d=1, s_inner=0, off_out=0,
                chunk=chunk, MODE=MODE_PARTIAL)
    for r in range(rows):
        for c0 in range(0, cols, span):
            sw = windowed(s2[r, c0:builtins.min(c0 + span, cols)])
            nc = -(-sw.size // chunk)
            x_t, tex, width = _texel_plan(sw, (1, sw.size, 1, 0, 1, sw.size), chunk)
            tmp = new_like((nc,), acc)
            ctx.launch(v, ctx.groups(-(-nc // width // wg)), out=tmp, x=sw, part=tmp, x_t=x_t, d=sw.size,
                       off_in=sw.offset, n_chunks=nc, TEX=tex, **args)
            launch_strided(copy, part[r, c0 // chunk:c0 // chunk + nc], [tmp])
    ctx.launch(v, ctx.groups(-(-rows // wg)), out=ow, x=ow, part=part, x_t=texel_source(ow, False)[0],
               **dict(args, n_out=rows, d=total, off_in=0, s_outer=total, chunk=total, n_chunks=1, off_out=ow.offset,
                      MODE=MODE_FINAL, TEX=0))
    return True


def _reduce_split(fam, tag, op_id, src, rows, cols, out, off_out):
    """launch_reduce over operands larger than one binding: blocks of whole rows through windows; a row
    larger than one binding is summed as column blocks whose workgroup partials (accumulator dtype) are
    gathered in one array and combined by one final pass (so mean still divides once, by cols)."""
    ctx = runtime.get()
    s2 = Array(src.buffer, (rows, cols), (cols, 1), src.offset, src.dtype)
    o1 = Array(out.buffer, (rows,), (1,), off_out, out.dtype)
    lim = binding_limit()
    if cols * src.dtype.itemsize + 512 <= lim:
        for sw, ow in blocks([s2, o1], axes=1, op="reduce"):
            launch_reduce(fam, tag, op_id, sw, ow.size, cols, ow, all_rows=rows)
        return
    if _long_rows_strided(tag, op_id, s2, rows, cols, o1, lim):
        return
    v = kernel(fam, tag)
    wg = row_wg(ctx)
    chunk = wg * CHUNK_PER_INVOCATION
    span = (lim - 512) // src.dtype.itemsize // chunk * chunk   # columns per block: whole chunks
    if span == 0:    # (below any conformant device's maxStorageBufferRange, 2^27; tests shrink the limit)
        raise FuelVKMemoryError(f"reduce: one {chunk}-element chunk of kernel {fam}.{tag} ({chunk * src.dtype.itemsize} "
                                f"bytes) is larger than one binding (maxStorageBufferRange = {lim} bytes)")
    acc = accum_dtype(src.dtype)
    n_chunks = [-(-(builtins.min(c0 + span, cols) - c0) // chunk) for c0 in range(0, cols, span)]
    total = builtins.sum(n_chunks)
    part = new_like((rows, total), acc)
    copy = copy_variant(_dt.width_tag(acc), ctx.device.features)
    for r in range(rows):
        at = 0
        for c0, nc in zip(range(0, cols, span), n_chunks):
            sw = windowed(s2[r, c0:builtins.min(c0 + span, cols)])
            tmp = new_like((nc,), acc)
            x_t, tex = texel_source(sw)
            ctx.launch(v, ctx.groups(nc), out=tmp, x=sw, part=tmp, x_t=x_t, n_rows=1, n_cols=sw.size, chunk=chunk,
                       n_chunks=nc, off_in=sw.offset, off_out=0, denom=sw.size, pad=0, WG=wg, OP=op_id,
                       MODE=MODE_PARTIAL, TEX=tex)
            launch_strided(copy, part[r, at:at + nc], [tmp])
            at += nc
    ow = windowed(o1)
    if ow is None or not fits(part):
        raise FuelVKMemoryError(f"reduce: {rows} rows of {cols} elements need partials or results larger than "
                                f"one binding (maxStorageBufferRange = {lim} bytes); reduce fewer rows at once")
    ctx.launch(v, ctx.groups(rows), out=ow, x=ow, part=part, x_t=texel_source(ow, False)[0], n_rows=rows,
               n_cols=total, chunk=total, n_chunks=1, off_in=0, off_out=ow.offset, denom=cols, pad=0, WG=wg,
               OP=op_id, MODE=MODE_FINAL, TEX=0)


def _fill(shape, dt, value):
    return asarray(np.full(shape, value, dtype=dt))


def _int_reduce(op, x, axis, keepdims, dtype):
    """sum / max / min of a bool or <= 32-bit integer array, exactly: the values are cast to float64
    (exact), reduced, and cast back. A sum is exact while every partial sum stays below 2^53, which
    the element count guarantees here (else DTypeError); its dtype is int64 (uint64 for unsigned),
    numpy's."""
    axes = normalize_axes(op, axis, x.ndim)
    cols = math.prod(x.shape[a] for a in axes)
    bits = 1 if x.dtype == _dt.bool_ else x.dtype.itemsize * 8
    if op == "sum" and cols * 2.0 ** bits >= 2.0 ** 53:
        raise DTypeError(f"{op}: {cols} {x.dtype} elements may sum beyond 2^53, where fuelvk's float64 route is "
                         "no longer exact; reduce in parts")
    if op == "sum":
        out_dt = _dt.dtype(dtype) if dtype is not None else (_dt.uint64 if x.dtype.kind == "u" else _dt.int64)
    else:
        out_dt = x.dtype
    r = _reduce(op, astype(x, _dt.float64), axis, keepdims)
    return astype(r, out_dt)


def _reduce(op, x, axis, keepdims, dtype=None):
    (x,), numpy_out = device_args(op, x)
    if x.dtype.kind in "biu" and op in ("sum", "max", "min") and x.dtype.itemsize <= 4 and (
            dtype is None or _dt.dtype(dtype).kind in "iu"):
        return result(_int_reduce(op, x, axis, keepdims, dtype), numpy_out)
    if dtype is not None and _dt.dtype(dtype) != x.dtype:
        x = astype(x, dtype)     # the standard's dtype=: cast, then reduce in that dtype
    tag = _dt.float_tag(op, x.dtype)
    axes = normalize_axes(op, axis, x.ndim)
    out_shape = tuple((1 if a in axes else n) for a, n in enumerate(x.shape) if keepdims or a not in axes)
    cols = math.prod(x.shape[a] for a in axes)
    if cols == 0 or math.prod(out_shape) == 0:
        if math.prod(out_shape) != 0 and op in ("max", "min"):
            raise ShapeError(f"{op}: zero-size array to reduction operation {op} which has no identity "
                             f"(shape {x.shape}, axis {axis}); kernel reduce_last_dim.{tag}")
        return result(_fill(out_shape, x.dtype, {"mean": np.nan, "prod": 1}.get(op, 0)), numpy_out)
    out = new_like(out_shape, x.dtype)
    plan = _strided_route(x, axes, VALUE_ROW_MAX)
    if plan is not None and launch_reduce_strided(tag, REDUCE_OPS[op], x, plan, out):
        return result(out, numpy_out)
    src, rows, cols = rows_view(x, axes)
    fam = "reduce" if rows == 1 else "reduce_last_dim"
    launch_reduce(fam, tag, REDUCE_OPS[op], src, rows, cols, out)
    return result(out, numpy_out)


def sum(x, axis=None, keepdims=False, *, dtype=None):  # noqa: A001 - numpy's name
    """numpy.sum over an axis, a tuple of axes or everything (f32 accumulation for half types);
    dtype= casts first (float dtypes)."""
    return _reduce("sum", x, axis, keepdims, dtype)


def prod(x, axis=None, keepdims=False, *, dtype=None):
    """numpy.prod (f32 accumulation for half types; a tree of products, so the last bits may differ
    from numpy's order; 1 for an empty reduction)."""
    return _reduce("prod", x, axis, keepdims, dtype)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """numpy.max (NaN propagates; an empty reduction raises ShapeError)."""
    return _reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """numpy.min (NaN propagates; an empty reduction raises ShapeError)."""
    return _reduce("min", x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """numpy.mean (the sum divided once by the count; NaN for an empty reduction)."""
    return _reduce("mean", x, axis, keepdims)


# -- arg-reductions ------------------------------------------------------------------------------
def _arg_strided(op, tag, x, plan, out):
    """argmax/argmin of x's [outer, d, inner] view into `out` (arg_reduce_any_dim): one pass, or the
    chunks' (value, index) winners [n_chunks, n_out] and a final pass over them. Returns False
    (nothing launched) when Device.loop_budget cannot hold the chunks."""
    ctx = runtime.get()
    outer, d, inner, s_outer, s_d, s_inner = plan
    n_out = outer * inner
    chunks = any_dim_chunks(ctx, n_out, d)
    if chunks is None:
        return False
    chunk, n_chunks = chunks
    x_t, tex, width = _texel_plan(x, plan, chunk)
    v, wg = kernel("arg_reduce_any_dim", tag), row_wg(ctx)
    args = {"n_out": n_out, "n_inner": inner, "off_in": x.offset, "off_out": 0, "s_outer": s_outer, "s_d": s_d,
            "s_inner": s_inner, "WG": wg, "OP": ARG_OPS[op], "OUT64": 1}
    if n_chunks == 1:
        ctx.launch(v, ctx.groups(-(-n_out // width // wg)), out=out, x=x, part_v=out, part_i=out, x_t=x_t, d=d,
                   chunk=d, n_chunks=1, **args, MODE=MODE_DIRECT, TEX=tex)
        return True
    pv = new_like((n_chunks * n_out,), accum_dtype(x.dtype))
    pi = new_like((n_chunks * n_out,), _dt.uint32)
    ctx.launch(v, ctx.groups(-(-n_chunks * n_out // width // wg)), out=pv, x=x, part_v=pv, part_i=pi, x_t=x_t, d=d,
               chunk=chunk, n_chunks=n_chunks, **args, MODE=MODE_PARTIAL, TEX=tex)
    ctx.launch(v, ctx.groups(-(-n_out // wg)), out=out, x=x, part_v=pv, part_i=pi, x_t=texel_source(x, False)[0],
               d=n_chunks, chunk=n_chunks, n_chunks=1, **args, MODE=MODE_FINAL, TEX=0)
    return True



def _single_dim(shape, strides):
    """(n, stride) when the dims walk memory as one strided dim, else None."""
    cs, (st,) = layout.collapse(shape, strides)
    if len(cs) == 0:
        return 1, 0
    if len(cs) == 1:
        return cs[0], st[0]
    return None


def _arg(op, x, axis, keepdims=False):
    out = _arg1(op, x, axis)
    if not keepdims:
        return out
    nd = np.ndim(x) if not hasattr(x, "ndim") else x.ndim
    shape = (1,) * nd if axis is None else tuple(
        1 if a == layout.normalize_axis(op, axis, nd) else n for a, n in enumerate(np.shape(x) if not hasattr(x, "shape") else x.shape))
    return out.reshape(shape)


def _arg1(op, x, axis):
    (x,), numpy_out = device_args(op, x)
    if x.dtype.kind in "biu" and x.dtype.itemsize <= 4:
        x = astype(x, _dt.float64)      # exact for bool and <= 32-bit integers: the same arg
    tag = _dt.float_tag(op, x.dtype)
    if axis is None:
        x = contiguous(x).reshape(-1) if x.ndim != 1 else x
        ax, out_shape = 0, ()
    else:
        ax = layout.normalize_axis(op, axis, x.ndim)
        out_shape = x.shape[:ax] + x.shape[ax + 1:]
        if x.ndim == 0:
            x = x.reshape(1)
    d = x.shape[ax]
    if d and x.size and not fits(x):
        return result(_arg_big(op, x, ax), numpy_out)
    if d == 0:
        raise ShapeError(f"{op}: attempt to get {op} of an empty sequence (shape {x.shape}, axis {axis}); "
                         f"kernel arg_reduce_last_dim_{tag}")
    out = new_like(out_shape, _dt.int64)
    n_out = math.prod(out_shape)
    if n_out == 0:
        return result(out, numpy_out)
    ctx = runtime.get()
    plan = _strided_route(x, (ax,))
    if plan is not None and _arg_strided(op, tag, x, plan, out):
        return result(out, numpy_out)
    outer = _single_dim(x.shape[:ax], x.strides[:ax])
    s_d = x.strides[ax]
    if outer is None or _single_dim(x.shape[ax + 1:], x.strides[ax + 1:]) != (1, 0):
        # Not rows of a [outer, d] view: copy the reduced axis last (whole workgroups per output).
        kept = [a for a in range(x.ndim) if a != ax]
        x = contiguous(x.transpose(kept + [ax]))
        outer, s_d = (n_out, d), 1
    wg = row_wg(ctx)
    # int64 output; unused partials bindings get `out`, which the dispatch writes anyway.
    args = dict(out=out, x=x, n_out=n_out, off_in=x.offset, off_out=0, s_outer=outer[1], s_d=s_d,
                WG=wg, OP=ARG_OPS[op], OUT64=1)
    # Whole workgroups per output row; rows longer than a chunk go workgroup-per-chunk + a final pass.
    v = kernel("arg_reduce_last_dim", tag)
    chunk = wg * CHUNK_PER_INVOCATION * 16
    n_chunks = -(-d // chunk)
    x_t, tex = texel_source(x, s_d == 1)      # a row's whole texels; its unaligned ends from x
    args.update(n_inner=1, s_inner=0, x_t=x_t)
    if n_chunks == 1:
        ctx.launch(v, ctx.groups(n_out), **args, part_v=out, part_i=out, d=d, chunk=d, n_chunks=1, MODE=MODE_DIRECT,
                   TEX=tex)
        return result(out, numpy_out)
    pv = new_like((n_out * n_chunks,), accum_dtype(x.dtype))
    pi = new_like((n_out * n_chunks,), _dt.uint32)
    ctx.launch(v, ctx.groups(n_out * n_chunks), **dict(args, out=pv), part_v=pv, part_i=pi, d=d, chunk=chunk,
               n_chunks=n_chunks, MODE=MODE_PARTIAL, TEX=tex)
    ctx.launch(v, ctx.groups(n_out), **dict(args, off_in=0, s_outer=0, s_d=1, x_t=texel_source(x, False)[0]),
               part_v=pv, part_i=pi, d=n_chunks, chunk=n_chunks, n_chunks=1, MODE=MODE_FINAL, TEX=0)
    return result(out, numpy_out)


def _axis_last(x, ax):
    """x with axis ax moved last (a view) and the permutation that undoes it."""
    perm = [a for a in range(x.ndim) if a != ax] + [ax]
    return x.transpose(perm), [perm.index(a) for a in range(x.ndim)]


def _long_rows(x):
    """True when one row (last axis) of x is longer than one binding can hold."""
    return x.shape[-1] * x.dtype.itemsize + 512 > binding_limit()


def _col_spans(op, row):
    return spans(op, "element", row.shape[0], lambda c0, c1: windowed(row[c0:c1]) is not None)


def _arg_big(op, x, ax):
    """argmax/argmin over an x larger than one binding: rows (the axis moved last) in blocks through
    windows; a row longer than one binding as spans whose extreme values pick the span on the host
    (numpy's rule on the span extremes: the first NaN, else the first extreme, so ties stay lowest)."""
    v = x.transpose([a for a in range(x.ndim) if a != ax] + [ax])
    if not _long_rows(v):
        return rowwise(op, lambda xb: _arg(op, xb, -1), [v], tail=(), dtype=_dt.int64)
    ext = max if op == "argmax" else min
    rows = v.reshape(-1, v.shape[-1]) if v.ndim != 2 else v
    found = []
    for r in range(rows.shape[0]):
        row = rows[r]
        cs = _col_spans(op, row)
        vals = [ext(windowed(row[c0:c1])).numpy().astype(np.float64) for c0, c1 in cs]
        idx = [_arg(op, windowed(row[c0:c1]), None).numpy() for c0, c1 in cs]
        i = int(np.argmax(vals) if op == "argmax" else np.argmin(vals))
        found.append(cs[i][0] + int(idx[i]))
    return asarray(np.array(found, np.int64).reshape(v.shape[:-1]))


def _cumsum_big(x, ax):
    """cumsum over an x larger than one binding: the axis moved last, rows in blocks through windows; a
    row longer than one binding as spans, each span's running sum plus the previous span's last value."""
    if ax != x.ndim - 1:
        v, inv = _axis_last(x, ax)
        return ascontiguousarray(_cumsum_big(v, x.ndim - 1).transpose(inv))
    if not _long_rows(x):
        return rowwise("cumsum", lambda xb: cumsum(xb, axis=-1), [x])
    out = new_like(x.shape, x.dtype)
    write = kernel("write_slice", _dt.width_tag(x.dtype))
    for idx in np.ndindex(*x.shape[:-1]):
        row, orow = x[idx] if idx else x, out[idx] if idx else out
        carry = None
        for c0, c1 in _col_spans("cumsum", row):
            r = cumsum(windowed(row[c0:c1]))
            if carry is not None:
                r = r + carry
            launch_write(write, windowed(orow[c0:c1]), r)
            carry = r[c1 - c0 - 1]
    return out


def argmax(x, axis=None, keepdims=False):
    """numpy.argmax: int64 indices, lowest index on ties, the first NaN wins (torch agrees)."""
    return _arg("argmax", x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """numpy.argmin: int64 indices, lowest index on ties, the first NaN wins (torch agrees)."""
    return _arg("argmin", x, axis, keepdims)



# -- cumsum ----------------------------------------------------------------------------------------
_CUMSUM_WG = 64
# Longer axes (or few slices) use one workgroup per slice (SCAN) instead of one invocation.
_CUMSUM_SERIAL_MAX_D = 16384


# Long axes over few slices (what would take a workgroup per slice, SCAN) run split: each slice in
# `parts` segments of at least _CUMSUM_SPLIT_MIN elements, one invocation each (SPLIT 1: segment
# totals; SPLIT 2: each segment from its slice's earlier totals), parts a power of two up to
# _CUMSUM_SPLIT_MAX_PARTS (SPLIT 2 sums up to parts totals per invocation) and no more than needed for
# ANY_DIM_INVOCATIONS invocations in all: from the axis length and the device-filling count, never the
# device's name. Measured on lavapipe (f32, ms, a workgroup per slice -> split): [4, 128256] 2.9 ->
# 2.3 (16 parts), [64, 16384] 8.3 -> 2.5 (4 parts; 16 parts of 1024: 4.4, 64 parts: 9.6).
_CUMSUM_SPLIT_MIN = 4096
# Slices of whole texels (ALIGN both) take PEEL's loop (whole steps without the per-step tests of the last
# one) from this many elements; shorter ones lose by it. Lavapipe, driver CPU ms, PEEL off -> on: f32
# [4, 128256] 0.91 -> 0.85, bf16 [64, 32768] 3.43 -> 3.11, f32 [300, 1032] 0.44 -> 0.41, f16 [256, 1024]
# 0.72 -> 0.72; f16 [1024, 256] 0.76 -> 0.81, f16 [4096, 64] 0.89 -> 1.12. Slices not of whole texels take
# it at any length (f32 [4096, 63] 1.13 -> 0.84, f16 2.39 -> 1.93).
_CUMSUM_PEEL_MIN_ALIGNED = 1024
_CUMSUM_SPLIT_MAX_PARTS = 64
_CUMSUM_SPLIT_WG = 8


def _cumsum_parts(n_slices, d, budget):
    """Segments per slice for the split scan (>= 2), or 0 (one workgroup per slice)."""
    cap = builtins.min(d // _CUMSUM_SPLIT_MIN, _CUMSUM_SPLIT_MAX_PARTS, -(-ANY_DIM_INVOCATIONS // n_slices))
    if cap < 2:
        return 0
    parts = 1 << (cap.bit_length() - 1)
    per = -(-d // parts) + TEXEL_BYTES
    return parts if budget is None or (per <= budget // 2 and parts <= budget) else 0


def _cumsum_serial_wg(device, n_slices, d):
    """The workgroup size of the serial walk (one invocation per slice, one pass), or None where slices are
    too few for it: many slices or short ones take _CUMSUM_WG; on a CPU device, whose workgroups run one
    per core, also as few as _CUMSUM_SPLIT_WG slices per core, in workgroups of _CUMSUM_SPLIT_WG (the split
    route reads every element twice; lavapipe [64, 16384] f32, one thread, device ms: split 1.95-2.1 ->
    serial 1.56-1.77, both with a plain-blocked walk; 1.40-1.42 now, 2.6-2.7 before either change)."""
    if n_slices >= 256 or d < 1024:
        return _CUMSUM_WG
    if device.device_type == "cpu" and n_slices >= _CUMSUM_SPLIT_WG * parallel_groups(device):
        return _CUMSUM_SPLIT_WG
    return None


def _cols_wg(device, n_inv):
    """The COLS route's workgroup size for n_inv invocations: _CUMSUM_WG, halved (not below a subgroup,
    or _CUMSUM_SPLIT_WG where the device reports none) until the launch has parallel_groups(device)
    workgroups: few slices (lavapipe [4096, 64] f32 along axis 0: 16 invocations) otherwise run in one
    workgroup, on one core of a CPU device."""
    return occupying_wg(device, n_inv, _CUMSUM_WG, getattr(device, "subgroup_size", 0) or _CUMSUM_SPLIT_WG)


def _adjacent_slices(x, out, ax, shape, s_in, s_out):
    """True when cumsum's slices come in runs of whole 16-byte texels of x and out (COLS): the innermost
    collapsed outer dim has unit strides and a multiple of PER elements, and the offsets, the axis
    strides and every other outer stride are multiples of PER."""
    per = TEXEL_BYTES // x.dtype.itemsize
    if not shape or shape[-1] % per or s_in[-1] != 1 or s_out[-1] != 1:
        return False
    steps = [x.offset, out.offset, x.strides[ax], out.strides[ax]] + [
        s for n, si, so in zip(shape[:-1], s_in[:-1], s_out[:-1]) if n > 1 for s in (si, so)]
    return all(s % per == 0 for s in steps)


def cumsum(x, axis=None):
    """numpy.cumsum (axis=None: over the flattened array). Any view; compensated f32/f64 running sum."""
    return _cumulative("cumsum", x, axis, 0)


def cumulative_prod_along(x, axis):
    """Running products along axis (the array API's cumulative_prod; the cumsum kernel's PROD mode)."""
    return _cumulative("cumulative_prod", x, axis, 1)


def _cumulative(op, x, axis, prod):
    (x,), numpy_out = device_args(op, x)
    tag = _dt.float_tag(op, x.dtype)
    if axis is None or x.ndim == 0:
        if axis is not None:
            layout.normalize_axis(op, axis, 0)
        x = x.reshape(-1) if x.ndim != 1 else x
        ax = 0
    else:
        ax = layout.normalize_axis(op, axis, x.ndim)
    if x.size and not fits(x):
        if prod:
            raise FuelVKMemoryError(f"{op}: an array of {x.nbytes} bytes is larger than one binding "
                                    f"(maxStorageBufferRange = {binding_limit()} bytes); only cumsum is split")
        return result(_cumsum_big(x, ax), numpy_out)
    d = x.shape[ax]
    out = new_like(x.shape, x.dtype)
    if out.size == 0:
        return result(out, numpy_out)

    def outer_dims(v):
        keep = [a for a in range(v.ndim) if a != ax]
        return layout.collapse([v.shape[a] for a in keep], [v.strides[a] for a in keep],
                          [out.strides[a] for a in keep])

    shape, (s_in, s_out) = outer_dims(x)
    if len(shape) > CUMSUM_MAX_RANK:
        x = contiguous(x)
        shape, (s_in, s_out) = outer_dims(x)
    ctx = runtime.get()
    n_slices = out.size // d
    budget = ctx.device.loop_budget
    serial_ok = d <= _CUMSUM_SERIAL_MAX_D and (budget is None or d <= budget // 2)
    rows = x.strides[ax] == 1 and out.strides[ax] == 1       # the slices' elements adjacent: 16-byte chunks
    cols = serial_ok and not rows and _adjacent_slices(x, out, ax, shape, s_in, s_out)
    views, tex = texel_views(CUMSUM_TEXELS, {"x": x if rows or cols else None}, {"o": out if rows or cols else None})
    per = TEXEL_BYTES // x.dtype.itemsize
    # ALIGN (rowchunks.glsl): every chunk whole. COLS: checked above; ROWS: each slice starts on a texel
    # (offset and every outer stride) and holds whole texels (d; segments are whole chunks of it).
    # The slices are cut at x's texels, so out's chunks are whole only where x's are.
    align = 0
    for key, a, strides in (("x", x, s_in), ("o", out, s_out)):
        if cols or (rows and d % per == 0 and all(t % per == 0 for n, t in zip(shape, strides) if n > 1)
                    and a.offset % per == 0 and (key == "x" or align)):
            align |= CUMSUM_TEXELS[key]
    # PEEL (rows): x's and out's chunks coincide in every slice, so steps inside a slice skip the element path;
    # slices of whole texels (ALIGN) have no element path to skip and take it only from _CUMSUM_PEEL_MIN_ALIGNED
    peel = rows and (out.offset - x.offset) % per == 0 and all((si - so) % per == 0 for n, si, so in
                                                                zip(shape, s_in, s_out) if n > 1)
    peel = peel and (align != CUMSUM_TEXELS["x"] | CUMSUM_TEXELS["o"] or d >= _CUMSUM_PEEL_MIN_ALIGNED)
    args = dict(out=out, x=x, n_slices=n_slices, d=d, rank=len(shape), off_in=x.offset, off_out=out.offset,
                s_ax=x.strides[ax], so_ax=out.strides[ax], shape=shape, s_in=s_in, s_out=s_out, PROD=prod,
                ROWS=int(rows), COLS=int(cols), TEX=tex, ALIGN=align, PEEL=int(peel), **views)
    serial_wg = _cumsum_serial_wg(ctx.device, n_slices, d) if serial_ok else None
    parts = 0 if cols or serial_wg else _cumsum_parts(n_slices, d, budget)
    if parts:         # long axes, few slices: segments of each slice over invocations, two passes
        part = new_like((n_slices * parts,), accum_dtype(x.dtype))
        for split in (1, 2):
            ctx.launch(kernel("cumsum", tag), ctx.groups(-(-n_slices * parts // _CUMSUM_SPLIT_WG)), **args, part=part,
                       parts=parts, WG=_CUMSUM_SPLIT_WG, SCAN=0, SPLIT=split)
        return result(out, numpy_out)
    args.update(part=out, parts=0, SPLIT=0)
    if cols:          # PER slices per invocation, no barriers (a workgroup per slice is barrier-bound)
        wg = _cols_wg(ctx.device, n_slices // per)
        ctx.launch(kernel("cumsum", tag), ctx.groups(-(-n_slices // per // wg)), **args, WG=wg, SCAN=0)
    elif serial_wg:
        ctx.launch(kernel("cumsum", tag), ctx.groups(-(-n_slices // serial_wg)), **args, WG=serial_wg, SCAN=0)
    else:
        wg = row_wg(ctx, d, 2)
        if wg is None:
            raise ShapeError(f"cumsum: an axis of {d} elements exceeds what kernel cumsum_{tag} can scan on "
                             f"{ctx.device.name} (its per-invocation loop limit); split the axis")
        ctx.launch(kernel("cumsum", tag), ctx.groups(n_slices), **args, WG=wg, SCAN=1)
    return result(out, numpy_out)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare, numel, reduced
from .casts import _torch_dtype


def _reduce_rule(op):
    def rule(x, axis=None, keepdims=False, dtype=None):
        dt = np.dtype(x.dtype)
        if dtype is not None:
            dt = _dt.dtype(dtype)
        elif op == "sum" and dt.kind in "biu":      # numpy's exact integer sum
            dt = _dt.uint64 if dt.kind == "u" else _dt.int64
        return Meta(reduced(x.shape, axis, keepdims), dt)
    return rule


def _torch_reduce(name):
    def run(x, axis=None, keepdims=False, dtype=None):
        import torch
        f = getattr(torch, name)
        if dtype is not None:
            x = x.to(_torch_dtype(dtype))
        return f(x) if axis is None else f(x, axis, keepdims)
    return run


def _torch_arg(name):
    def run(x, axis=None, keepdims=False):
        import torch
        return getattr(torch, name)(x, axis, keepdims)
    return run


def _torch_cumsum(x, axis=None):
    import torch
    return torch.cumsum(x.reshape(-1) if axis is None else x, 0 if axis is None else axis)


_REF_DIMS = "dims = tuple(range(x.dim())) if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))"
_REDUCE_SCHEMA = "(Tensor x, int[]? axis=None, bool keepdims=False) -> Tensor"
declare(
    *(OpDef(_n, globals()[_n], _reduce_rule(_n), torch=_torch_reduce(_t),
            reference=("", f"{_REF_DIMS}\noutput = torch.{_t}(x, dim=dims, keepdim=keepdims)"), grad=_n,
            schema=_REDUCE_SCHEMA)
      for _n, _t in (("sum", "sum"), ("mean", "mean"), ("max", "amax"), ("min", "amin"))),
    OpDef("prod", prod, _reduce_rule("prod"), reference=("", f"""{_REF_DIMS}
output = x
for d in sorted((d % max(x.dim(), 1) for d in dims), reverse=True):   # torch.prod takes one dim
    output = torch.prod(output, d, keepdim=keepdims)""")),
    *(OpDef(_n, globals()[_n], lambda x, axis=None, keepdims=False: Meta(
              reduced(x.shape, axis, keepdims), np.dtype(np.int64)), torch=_torch_arg(_n),
            reference=f"x.reshape(-1).{_n}() if axis is None else x.{_n}(axis)",   # first index on ties
            schema="(Tensor x, int? axis=None) -> Tensor") for _n in ("argmax", "argmin")),
    OpDef("cumsum", cumsum, lambda x, axis=None: Meta((numel(x.shape),) if axis is None else tuple(x.shape),
                                                      np.dtype(x.dtype)),
          torch=_torch_cumsum, reference="x.reshape(-1).cumsum(0) if axis is None else x.cumsum(axis)", grad="cumsum",
          schema="(Tensor x, int? axis=None) -> Tensor"),
)
