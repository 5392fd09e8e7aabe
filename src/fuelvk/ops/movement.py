"""Data movement (numpy names): flip, roll, triu, tril, concatenate, masked_fill (torch's), where, slice
assignment ``a[index] = b`` (setitem) and the in-place ``add_assign_scaled(dst, src, scale)``.

Every kernel here reads any view (strided, negative steps, broadcast, offset) directly, so nothing is
contiguized first; outputs are contiguous, except the in-place writes, which go through the view.
Moves are raw words of the element's width, bit-exact for every dtype (NaN payloads included).
"""
import math
import numbers
import operator

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import Array, asarray, complex_part
from ..errors import DTypeError, FuelVKIndexError, ShapeError
from ..kernels import kernel
from ..kernels.registry import storage_twin
from ..kernels.movement import CONCAT_PIECES, EPT, MAX_RANK, TRANSPOSE_WG, WORDS as REMAP_WORDS, WG, WRITE_FLAGS
from ._core import (blocks, contiguous, device_args, divider, element_words, fits, launch_strided, new_like,
                    result, spans, tiles, windowed)
from ..kernels.movement_core import copy_variant
from . import complex as _cx
from .casts import astype
from ..runtime import loadpath
from ..runtime.loadpath import TEXEL_BYTES

__all__ = ["flip", "roll", "triu", "tril", "concatenate", "masked_fill", "where", "add_assign_scaled", "setitem"]

_PER_GROUP = WG * EPT


# -- launchers ------------------------------------------------------------------------------------
def _check_scalar(op, value):
    if isinstance(value, Array):
        if value.size != 1:
            raise ShapeError(f"{op}: the fill value must be a scalar, got an array of shape {value.shape}")
        value = value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not (isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, complex)):
        raise DTypeError(f"{op}: the fill value must be a real scalar, got {type(value).__name__}")
    return value


def launch_remap(op, variant, out, src, sa, lo=None, dim=None, k=0, fill=(0, 0), mode="gather", fixed_tail=0):
    """Run a remap.comp / pad_backward.comp variant: out (contiguous, out.shape) gathered from src.

    sa: src strides per out dim; lo/dim: per-dim shift or left pad and source extent (mode-specific).
    Dims that are not remapped are merged wherever the strides allow; the last `fixed_tail` dims are
    never merged (triu/tril need rows and columns). Ranks above 6 loop on the host over leading dims.
    """
    shape = out.shape
    if out.size == 0:
        return
    r = len(shape)
    lo = list(lo) if lo is not None else [0] * r
    dim = list(dim) if dim is not None else list(shape)
    if not fits(out, src):
        # Larger than one binding: cut the leading dims the remap leaves alone (identity: no shift, no
        # pad, not in the fixed tail); out and src views cut alike, each block remapped through windows.
        cut = 0
        while cut < r - fixed_tail and lo[cut] == 0 and dim[cut] == shape[cut]:
            cut += 1
        sv = Array(src.buffer, tuple(dim), tuple(sa), src.offset, src.dtype)
        for ow, sw in blocks([out, sv], axes=cut, op=op):
            d = r - ow.ndim
            launch_remap(op, variant, ow, sw, sw.strides, lo[d:], dim[d:], k, fill, mode, fixed_tail)
        return
    texel = variant.texel_formats and _remap_texels(src)     # remap.comp: through a_t, else the twin
    if variant.texel_formats and not texel:
        variant = storage_twin(variant)
    dims = []   # [n, stride, lo, dim, identity]
    for d in range(r):
        ident = lo[d] == 0 and dim[d] == shape[d] and d < r - fixed_tail
        if ident and shape[d] == 1:
            continue
        if ident and dims and dims[-1][4] and dims[-1][1] == sa[d] * shape[d]:
            prev = dims[-1]
            prev[0] *= shape[d]
            prev[1] = sa[d]
            prev[3] = prev[0]
        else:
            dims.append([shape[d], sa[d], lo[d], dim[d], ident])
    ctx = runtime.get()

    def go(ds, off_o, off_a, fill_row):
        if len(ds) > MAX_RANK:
            n0, s0, lo0, dim0, _ = ds[0]
            inner = math.prod(d[0] for d in ds[1:])
            for P in range(n0):
                c, row_fill = _source_coord(mode, P, lo0, dim0)
                go(ds[1:], off_o + P * inner, off_a + (c * s0 if not row_fill else 0), fill_row or row_fill)
            return
        ds = ds or [[1, 1, 0, 1, True]]      # rank 0: one element
        m = math.prod(d[0] for d in ds)
        los = [d[2] for d in ds]
        dms = [d[3] for d in ds]
        if fill_row:       # a whole row of constant padding (rank > 6 only): force every read outside
            los[0], dms[0] = -ds[0][0], 0
        if variant.source == "remap.comp":    # an invocation per REMAP_WORDS 16-byte words of out
            vec = TEXEL_BYTES // out.dtype.itemsize
            groups = -(-(-(-(off_o % vec + m) // vec)) // (REMAP_WORDS * WG))
            # spans cross rows unless the rows are whole spans from a word boundary
            words = {"out_words": out, "TWO_ROWS": int(bool(off_o % vec or ds[-1][0] % (REMAP_WORDS * vec)))}
        else:
            groups = -(-m // _PER_GROUP)
            words = {}
        ctx.launch(variant, ctx.groups(groups), out=out, **words, a=src, **({"a_t": src} if texel else {}), n=m, rank=len(ds), off_o=off_o,
                   off_a=off_a, k=k, fill=fill, shape=[d[0] for d in ds], sa=[d[1] for d in ds], lo=los, dim=dms)

    go(dims, out.offset, src.offset, False)


def transpose_tiles(dst, src):
    """dst (contiguous from its buffer's start) <- src through transpose.comp's blocks when, after merging
    dims, src is contiguous along dst's second-to-last dim and not along its last (x.T, batched
    transposes); True when launched."""
    if dst.offset or not dst.is_contiguous:
        return False
    shape, (ss,) = layout.collapse(src.shape, src.strides)
    if len(shape) not in (2, 3) or ss[-2] != 1 or ss[-1] == 1:
        return False
    ctx = runtime.get()
    v = kernel("transpose", _width_tag("copy", src.dtype))
    texel = _remap_texels(src)
    if not texel:
        v = storage_twin(v)
    rows, cols = shape[-2], shape[-1]
    batch, sb = (shape[0], ss[0]) if len(shape) == 3 else (1, 0)
    vec = TEXEL_BYTES // src.dtype.itemsize
    blocks_r, blocks_c = -(-rows // vec), -(-cols // vec)
    ctx.launch(v, ctx.groups(-(-blocks_r * blocks_c * batch // TRANSPOSE_WG)), out=dst, out_words=dst, a=src,
               **({"a_t": src} if texel else {}), rows=rows, cols=cols, off_a=src.offset, sb=sb, sc=ss[-1],
               blocks_r=blocks_r, blocks_c=blocks_c, batch=batch)
    return True


def _remap_texels(src):
    """remap.comp reads src through a one-element-per-texel view: the device reads texels faster
    (Device.texel_loads, FUELVK_TEXEL_LOADS) and the view holds the whole buffer."""
    ctx = runtime.get()
    return loadpath.texel_paths(ctx)[0] and \
        0 < src.buffer.size // src.dtype.itemsize <= ctx.device.limits.maxTexelBufferElements


def _source_coord(mode, P, lo, dim):
    """(source coordinate, is_fill) of output coordinate P along one dim (host twin of remap.comp)."""
    if mode == "roll":
        c = P + lo
        return (c - dim if c >= dim else c), False
    if mode in ("pad_const", "pad_reflect", "pad_replicate"):
        c = P - lo
        if mode == "pad_const":
            return (c, False) if 0 <= c < dim else (0, True)
        if mode == "pad_reflect":
            c = -c if c < 0 else c
            return (2 * (dim - 1) - c if c >= dim else c), False
        return min(max(c, 0), dim - 1), False
    return P, False


def _write_chunks(shape, so, sa, off_o, off_a):
    if len(shape) <= MAX_RANK:
        yield shape, so, sa, off_o, off_a
        return
    for i in range(shape[0]):
        yield from _write_chunks(shape[1:], so[1:], sa[1:], off_o + i * so[0], off_a + i * sa[0])


def texel_runs(dst, src):
    """dst view <- src (broadcast to dst.shape) as whole 16-byte texels through copy_texels.comp, where
    _texel_plan allows. True when launched; False leaves the copy to the element-wise kernels
    (unaligned views, tails, other devices)."""
    plan = _texel_plan(dst, src)
    if plan is not None:
        _launch_texels(dst, src, plan)
    return plan is not None


def _texel_plan(dst, src):
    """copy_texels' Params for dst <- src, or None: the device reads texels faster (Device.texel_loads,
    FUELVK_TEXEL_LOADS) and both views are runs of whole texels: after collapsing dims the last is
    contiguous on both sides, and its length, every offset and every outer stride are multiples of
    the texel's element count; both buffers fit one binding and one texel view."""
    ctx = runtime.get()
    loads, stores = loadpath.texel_paths(ctx)
    isz = dst.dtype.itemsize
    if not loads or dst.size == 0 or isz != src.dtype.itemsize or TEXEL_BYTES % isz:
        return None
    per = TEXEL_BYTES // isz
    cshape, (so, sa) = layout.collapse(dst.shape, dst.strides,
                                       layout.broadcast_strides(src.shape, src.strides, dst.shape))
    if not cshape or len(cshape) > MAX_RANK or so[-1] != 1 or sa[-1] != 1 or cshape[-1] % per:
        return None
    if any(v % per for v in so[:-1] + sa[:-1] + (dst.offset, src.offset)):
        return None
    lim = ctx.device.limits
    if any(not 0 < b.size // TEXEL_BYTES <= lim.maxTexelBufferElements or b.size > lim.maxStorageBufferRange
           for b in (dst.buffer, src.buffer)):
        return None
    shape = cshape[:-1] + (cshape[-1] // per,)
    n = math.prod(shape)
    magic, shift = divider(shape[-1], n)
    return dict(n=n, rank=len(shape), off_o=dst.offset // per, off_a=src.offset // per, run_magic=magic,
                run_shift=shift, shape=shape, sa=[s // per for s in sa[:-1]] + [1],
                so=[s // per for s in so[:-1]] + [1], TEXW=int(stores))


def _launch_texels(dst, src, plan):
    ctx = runtime.get()
    ctx.launch(kernel("copy_texels", "x16"), ctx.groups(-(-plan["n"] // _PER_GROUP)), out=dst, a_t=src, o_t=dst,
               **plan)


_MOVES = ("write_slice", "concat_along_dim")   # write.comp's plain moves (texel_runs may take them)


def launch_write(variant, dst, src, scale=0.0):
    """Run a write.comp / add_assign_scaled.comp variant: the dst view <- src broadcast to dst.shape."""
    shape = dst.shape
    if dst.size == 0:
        return
    if variant.family in _MOVES and texel_runs(dst, src):
        return
    if not fits(dst, src):    # larger than one binding: tiles of dst and src through windows
        for dw, sw in tiles([dst, src.broadcast_to(shape)], op="write"):
            launch_write(variant, dw, sw, scale)
        return
    ss = layout.broadcast_strides(src.shape, src.strides, shape)
    cshape, (cso, csa) = layout.collapse(shape, dst.strides, ss)
    if variant.family in _MOVES and cshape and cso[-1] == 1 and len(cshape) <= MAX_RANK + 1:
        _launch_rows(dst, src, cshape, cso, csa)
        return
    ctx = runtime.get()
    for sub, so, sa, oo, oa in _write_chunks(cshape, cso, csa, dst.offset, src.offset):
        m = math.prod(sub)
        contig = layout.contiguous_strides(sub)
        flags = ((_SRC_CONTIGUOUS if tuple(sa) == contig else 0) | (_SRC_CONSTANT if not any(sa) else 0)
                 | (_DST_CONTIGUOUS if tuple(so) == contig else 0))
        ctx.launch(variant, ctx.groups(-(-m // _PER_GROUP)), out=dst, a=src, n=m, rank=len(sub), flags=flags,
                   off_o=oo, off_a=oa, scale=scale, shape=sub, sa=sa, so=so)


def _launch_rows(dst, src, shape, so, sa):
    """dst <- src through write.comp's ROWS variant: dst's (collapsed) last dim is contiguous, so its rows
    are stored as whole 16-byte words, the ragged first / last word of each row element by element."""
    ctx = runtime.get()
    v = kernel("write_rows", _dt.width_tag(dst.dtype))
    texel = _remap_texels(src)
    if not texel:
        v = storage_twin(v)
    vec = TEXEL_BYTES // dst.dtype.itemsize
    n = shape[-1]
    chunks = -(-(-(-(n + vec - 1) // vec)) // REMAP_WORDS)
    rows = math.prod(shape[:-1])
    ctx.launch(v, ctx.groups(-(-rows * chunks // WG)), out=dst, out_words=dst, a=src, **({"a_t": src} if texel else {}),
               rows=rows, rank=len(shape) - 1, len=n, chunks=chunks, off_o=dst.offset, off_a=src.offset,
               sa_last=sa[-1], shape=shape[:-1], sa=sa[:-1], so=so[:-1])


_SRC_CONTIGUOUS, _SRC_CONSTANT, _DST_CONTIGUOUS = (WRITE_FLAGS[f] for f in ("src_contiguous", "src_constant",
                                                                             "dst_contiguous"))


def _width_tag(op, dt, accepted=("b1", "b2", "b4", "b8")):
    tag = _dt.width_tag(dt)
    if tag not in accepted:
        raise DTypeError(f"{op}: dtype {dt} ({dt.itemsize} bytes) is not supported; accepted element widths: "
                         + ", ".join(f"{t[1:]} bytes" for t in accepted))
    return tag


def _axes(op, axis, ndim):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = [layout.normalize_axis(op, a, ndim) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {tuple(axes)}")
    return out


# -- flip / roll / triu / tril --------------------------------------------------------------------
def flip(x, axis=None):
    """numpy.flip as a new contiguous array (any dtype; axis None flips every axis)."""
    (xa,), numpy_out = device_args("flip", x)
    axes = range(xa.ndim) if axis is None else _axes("flip", axis, xa.ndim)
    if xa.dtype.kind == "c":     # complex: the (re, im) float pairs view flipped on the same axes
        return result(_cx.from_pairs(flip(_cx.as_pairs(xa), tuple(axes))), numpy_out)
    v = xa.flip(tuple(axes)) if xa.ndim else xa
    out = new_like(xa.shape, xa.dtype)
    if texel_runs(out, v):    # no flip of the last axis: whole-texel rows copied in reverse order
        return result(out, numpy_out)
    launch_remap("flip", kernel("flip", _width_tag("flip", xa.dtype)), out, v, v.strides)
    return result(out, numpy_out)


def roll(x, shift, axis=None):
    """numpy.roll: elements shifted cyclically along axis (axis None: over the flattened array)."""
    (xa,), numpy_out = device_args("roll", x)
    if axis is None:             # numpy: the flattened array rolled by every shift in turn (their sum)
        try:
            shift = sum(operator.index(s) for s in shift) if isinstance(shift, (tuple, list)) else operator.index(shift)
        except TypeError:
            raise ShapeError(f"roll: shifts must be integers, got {shift!r}") from None
    if xa.dtype.kind == "c":     # complex: the (re, im) float pairs view rolled on the same axes
        if axis is None:
            flat = _cx.as_pairs(xa).reshape(-1, 2)
            return result(_cx.from_pairs(roll(flat, shift, 0)).reshape(xa.shape), numpy_out)
        axes = tuple(_axes_allow_repeat("roll", axis, xa.ndim))
        return result(_cx.from_pairs(roll(_cx.as_pairs(xa), shift, axes)), numpy_out)
    tag = _width_tag("roll", xa.dtype)
    if axis is None:
        s = shift
        flat = xa.reshape(-1)
        if not fits(flat):
            return result(_roll_by_writes(contiguous(flat), [s]).reshape(xa.shape), numpy_out)
        out = new_like(flat.shape, xa.dtype)
        if flat.size:
            launch_remap("roll", kernel("roll", tag), out, flat, flat.strides, [(-s) % flat.size], list(flat.shape),
                         mode="roll")
        out = out.reshape(xa.shape)
        return result(out, numpy_out)
    axes = _axes_allow_repeat("roll", axis, xa.ndim)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    try:
        shifts = [operator.index(s) for s in shifts]
    except TypeError:
        raise ShapeError(f"roll: shifts must be integers, got {shift!r}") from None
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ShapeError(f"roll: shift {shift!r} and axis {axis!r} must have the same length (or one of them be "
                         "a scalar)")
    total = [0] * xa.ndim
    for s, a in zip(shifts, axes):
        total[a] += s
    if not fits(xa):
        return result(_roll_by_writes(xa, total), numpy_out)
    lo = [(-t) % n if n else 0 for t, n in zip(total, xa.shape)]
    out = new_like(xa.shape, xa.dtype)
    if _roll_texels(out, xa, lo):
        return result(out, numpy_out)
    launch_remap("roll", kernel("roll", tag), out, xa, xa.strides, lo, list(xa.shape), mode="roll")
    return result(out, numpy_out)


def _roll_texels(out, x, lo):
    """roll as whole-texel copies (copy_texels) of its pieces: per rolled axis (source start lo[a] != 0)
    the two ranges out[:n - lo] <- x[lo:] and out[n - lo:] <- x[:lo]; True when every piece is texel
    runs (at most _ROLL_PIECES of them) and they were launched, else nothing is launched."""
    rolled = [a for a, s in enumerate(lo) if s]
    if not rolled or 2 ** len(rolled) > _ROLL_PIECES or out.size == 0:
        return False
    pieces = [((), ())]
    for a in range(x.ndim):
        n, s = x.shape[a], lo[a]
        cuts = [(slice(0, n - s), slice(s, n)), (slice(n - s, n), slice(0, s))] if s else [(slice(None),) * 2]
        pieces = [(po + (co,), px + (cx,)) for po, px in pieces for co, cx in cuts]
    views = [(out[po], x[px]) for po, px in pieces]
    plans = [_texel_plan(o, v) for o, v in views]
    if any(p is None for p in plans):
        return False
    for (o, v), p in zip(views, plans):
        _launch_texels(o, v, p)
    return True


_ROLL_PIECES = 4   # rolls over more axes than two stay one remap launch


def _roll_by_writes(x, total):
    """roll of an array larger than one binding: per rolled axis, the two halves written in place
    (launch_write splits them into windows), instead of the one remap launch."""
    v = kernel("write_slice", _width_tag("roll", x.dtype))
    for a, t in enumerate(total):
        n = x.shape[a]
        if n == 0 or t % n == 0:
            continue
        t %= n
        out = new_like(x.shape, x.dtype)
        head = (slice(None),) * a
        launch_write(v, out[head + (slice(t, n),)], x[head + (slice(0, n - t),)])
        launch_write(v, out[head + (slice(0, t),)], x[head + (slice(n - t, n),)])
        x = out
    if x.offset or not x.is_contiguous or all(t % max(n, 1) == 0 for t, n in zip(total, x.shape)):
        x = x.copy()
    return x


def _axes_allow_repeat(op, axis, ndim):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return [layout.normalize_axis(op, a, ndim) for a in axes]


def _triangle(op, x, k):
    (xa,), numpy_out = device_args(op, x)
    try:
        k = operator.index(k)
    except TypeError:
        raise DTypeError(f"{op}: the diagonal offset k must be an integer, got {k!r}") from None
    if xa.ndim == 0:
        raise ShapeError(f"{op}: input must be at least 1-D, got a 0-d array")
    if xa.ndim == 1:                     # numpy: a 1-D input is broadcast to a square matrix
        xa = xa.broadcast_to((xa.shape[0], xa.shape[0]))
    k = max(min(k, 2**31 - 1), -2**31)
    out = new_like(xa.shape, xa.dtype)
    if xa.dtype.itemsize > 8:            # complex128: each float64 component view (no 16-byte move kernel)
        from ..array import complex_part as component
        for part in (0, 1):
            component(out, part)[...] = _triangle(op, component(xa, part), k)
        return result(out, numpy_out)
    first = (0,) * (xa.ndim - 2)
    if out.size and not (fits(xa, out) or windowed(xa[first]) is not None and windowed(out[first]) is not None):
        # one matrix larger than a binding: blocks of rows r0.. are triangles with diagonal k + r0
        write = kernel("write_slice", _width_tag(op, xa.dtype))
        for idx in np.ndindex(*xa.shape[:-2]):
            m, o = xa[idx] if idx else xa, out[idx] if idx else out
            for r0, r1 in spans(op, "matrix row", m.shape[0], lambda a, b: windowed(m[a:b]) is not None
                                and windowed(o[a:b]) is not None):
                launch_write(write, windowed(o[r0:r1]), _triangle(op, windowed(m[r0:r1]), max(min(k + r0, 2**31 - 1),
                                                                                               -2**31)))
        return result(out, numpy_out)
    launch_remap(op, kernel(op, _width_tag(op, xa.dtype)), out, xa, xa.strides, k=k, fixed_tail=2)
    return result(out, numpy_out)


def triu(x, k=0):
    """numpy.triu: zero below the k-th diagonal of the last two dims (any dtype; 1-D input -> square)."""
    return _triangle("triu", x, k)


def tril(x, k=0):
    """numpy.tril: zero above the k-th diagonal of the last two dims (any dtype; 1-D input -> square)."""
    return _triangle("tril", x, k)


# -- concatenate ----------------------------------------------------------------------------------
def concatenate(arrays, axis=0):
    """numpy.concatenate of any number of arrays (one strided write per input, no contiguizing)."""
    if isinstance(arrays, (Array, np.ndarray)) or not hasattr(arrays, "__len__"):
        raise ShapeError("concatenate: expects a sequence of arrays")
    if len(arrays) == 0:
        raise ShapeError("concatenate: need at least one array to concatenate")
    xs, numpy_out = device_args("concatenate", *arrays)
    if axis is None:
        xs = [x.reshape(-1) for x in xs]
        axis = 0
    nd = xs[0].ndim
    if nd == 0 or any(x.ndim == 0 for x in xs):
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    if any(x.ndim != nd for x in xs):
        raise ShapeError(f"concatenate: all inputs must have the same number of dimensions, got shapes "
                         f"{[x.shape for x in xs]}")
    ax = layout.normalize_axis("concatenate", axis, nd)
    for x in xs:
        if x.shape[:ax] + x.shape[ax + 1:] != xs[0].shape[:ax] + xs[0].shape[ax + 1:]:
            raise ShapeError(f"concatenate: shapes {[x.shape for x in xs]} differ outside axis {ax}")
    dt = np.result_type(*[x.dtype for x in xs])
    if any(x.dtype != dt for x in xs):
        xs = [x if x.dtype == dt else astype(x, dt) for x in xs]
    if dt.kind == "c":   # complex: concatenated through the (re, im) float pairs views
        return result(_cx.from_pairs(concatenate([_cx.as_pairs(x) for x in xs], axis=ax)), numpy_out)
    shape = list(xs[0].shape)
    shape[ax] = sum(x.shape[ax] for x in xs)
    out = new_like(tuple(shape), dt)
    ftag = _dt.FLOAT_TAGS.get(dt)
    pieces = [x for x in xs if x.size]
    if 2 <= len(pieces) <= CONCAT_PIECES and _concat_texels(out, pieces, ax):
        return result(out, numpy_out)
    v = kernel("concat_along_dim", ftag) if ftag else kernel("write_slice", _width_tag("concatenate", dt))
    start = 0
    for x in xs:
        n = x.shape[ax]
        if n and x.size:
            key = (slice(None),) * ax + (slice(start, start + n),)
            launch_write(v, out[key], x)
        start += n
    return result(out, numpy_out)


def _run_from(x, ax):
    """Elements in x's dims from ax on where they are contiguous (x is rows of that length), else None."""
    return math.prod(x.shape[ax:]) if layout.is_contiguous(x.shape[ax:], x.strides[ax:]) else None


CONCAT_OUTER = 3   # concat_texels.comp: the collapsed dims before the axis it walks


def _concat_texels(out, pieces, ax):
    """out (fresh, contiguous) <- 2 to CONCAT_PIECES non-empty pieces along ax in one concat_texels launch
    (concatenate's piece-per-launch loop cost a dispatch each: ~25 us of lavapipe time even when tiny).
    Each piece must be rows of whole texels: contiguous from ax on, the dims before ax (collapsed for
    all pieces together) at most CONCAT_OUTER with non-negative whole-texel strides. True when launched;
    False where the device reads storage buffers faster than texels or a piece does not fit (then the
    per-piece writes)."""
    ctx = runtime.get()
    loads, stores = loadpath.texel_paths(ctx)
    isz = out.dtype.itemsize
    if not loads or TEXEL_BYTES % isz or out.offset:
        return False
    per = TEXEL_BYTES // isz
    runs = [_run_from(x, ax) for x in pieces]
    if any(r is None or r % per or x.offset % per for r, x in zip(runs, pieces)):
        return False
    outer, strides = layout.collapse(out.shape[:ax], *[x.strides[:ax] for x in pieces])
    if len(outer) > CONCAT_OUTER or any(s < 0 or s % per for st in strides for s in st):
        return False
    lim = ctx.device.limits
    if any(not 0 < b.size // TEXEL_BYTES <= lim.maxTexelBufferElements or b.size > lim.maxStorageBufferRange
           for b in [out.buffer] + [x.buffer for x in pieces]):
        return False
    pad_dims = CONCAT_OUTER - len(outer)
    outer = (1,) * pad_dims + outer                 # outermost first
    strides = [(0,) * pad_dims + tuple(s // per for s in st) for st in strides]
    row = sum(runs) // per
    n = math.prod(outer) * row
    starts = [0]
    for r in runs[:-1]:
        starts.append(starts[-1] + r // per)
    pad = CONCAT_PIECES - len(pieces)
    magic, shift = divider(row, n)
    views = {f"p{k}_t": pieces[k] if k < len(pieces) else pieces[0] for k in range(CONCAT_PIECES)}
    by_dim = {f"stride{d}": [st[CONCAT_OUTER - 1 - d] for st in strides] + [0] * pad for d in range(CONCAT_OUTER)}
    ctx.launch(kernel("concat_texels", "x16"), ctx.groups(-(-n // _PER_GROUP)), out=out, o_t=out, **views, n=n,
               row=row, row_magic=magic, row_shift=shift, outer=[outer[2], outer[1]], start=starts + [row] * pad,
               off=[x.offset // per for x in pieces] + [0] * pad, **by_dim, TEXW=int(stores), PIECES=len(pieces))
    return True


# -- masked_fill ----------------------------------------------------------------------------------
def masked_fill(x, mask, value):
    """torch.Tensor.masked_fill: value where mask is true, x elsewhere (mask bool/uint8, broadcast to x)."""
    (xa, ma), numpy_out = device_args("masked_fill", x, mask)
    if ma.dtype not in (_dt.bool_, _dt.uint8):
        raise DTypeError(f"masked_fill: mask must be bool or uint8, got {ma.dtype}")
    value = _check_scalar("masked_fill", value)
    try:
        out_shape = layout.broadcast_shapes("masked_fill", xa.shape, ma.shape)
    except ShapeError:
        out_shape = None
    if out_shape != xa.shape:
        raise ShapeError(f"masked_fill: mask of shape {ma.shape} does not broadcast to the input's shape {xa.shape}")
    out = new_like(xa.shape, xa.dtype)
    v = kernel("masked_fill", _width_tag("masked_fill", xa.dtype))
    launch_strided(v, out, [xa, ma], s0=element_words("masked_fill", value, xa.dtype))
    return result(out, numpy_out)


# -- where ----------------------------------------------------------------------------------------
def _operand(op, x, dt):
    """A where operand as an Array of dt: Arrays are cast (astype), scalars stored as dt elements."""
    if isinstance(x, Array):
        if x.dtype == dt:
            return x
        return astype(x, dt)
    if isinstance(x, (np.ndarray, list, tuple)) and np.ndim(x):
        return asarray(np.asarray(x).astype(dt))
    return asarray(_dt.scalar_as(op, _check_scalar(op, x), dt))


def _where_dtype(x1, x2):
    """numpy's result dtype of two where operands (a Python scalar is weak, NEP 50); two scalars take
    fuelvk's defaults (bool, int64, float32)."""
    def dt_of(x):
        if isinstance(x, Array):
            return x.dtype
        if isinstance(x, (np.ndarray, np.generic)):
            return x.dtype
        return None
    d1, d2 = dt_of(x1), dt_of(x2)
    if d1 is None and d2 is None:
        if isinstance(x1, float) or isinstance(x2, float):
            return _dt.float32
        if isinstance(x1, bool) and isinstance(x2, bool):
            return _dt.bool_
        return _dt.int64
    args = [d if d is not None else x for d, x in ((d1, x1), (d2, x2))]
    return _dt.dtype(np.result_type(*args))


def where(condition, x1, x2):
    """numpy.where(condition, x1, x2): x1 where condition else x2, broadcast together (scalars allowed
    for x1 / x2). Two kernels, both bit-exact moves of any dtype: x2 is copied into the output
    (strided_copy), then masked_copy writes x1 where the bool condition is set."""
    numpy_out = not any(isinstance(v, Array) for v in (condition, x1, x2))
    (c,), _ = device_args("where", condition)
    if c.dtype != _dt.bool_:
        raise DTypeError(f"where: condition must be a bool array, got {c.dtype}")
    dt = _where_dtype(x1, x2)
    a, b = _operand("where", x1, dt), _operand("where", x2, dt)
    shape = layout.broadcast_shapes("where", c.shape, a.shape, b.shape)
    if dt.itemsize > 8:      # complex128: its (re, im) float64 pairs move (no 16-byte move kernel)
        from .complex import as_pairs, from_pairs
        return result(from_pairs(where(c.reshape(c.shape + (1,)), as_pairs(a), as_pairs(b))), numpy_out)
    out = new_like(shape, dt)
    tag = _width_tag("where", dt)
    launch_strided(copy_variant(tag, runtime.get().device.features), out, [b])
    launch_strided(kernel("masked_copy", tag), out, [a, c])
    return result(out, numpy_out)


# -- in-place writes ------------------------------------------------------------------------------
def _writable(op, view):
    if view.size and any(s == 0 and n > 1 for n, s in zip(view.shape, view.strides)):   # (empty: nothing repeats)
        raise ShapeError(f"{op}: cannot write into a broadcast view (shape {view.shape}, strides {view.strides}: "
                         "stride 0 repeats one element); write into a real array or a slice of one")


def _source_for(op, dst, value):
    """value as an Array of dst's dtype that can be read while dst is written (copied if it overlaps)."""
    if isinstance(value, Array):
        runtime.check_alive(value.buffer)
        src = value
        if src.dtype != dst.dtype:
            src = astype(src, dst.dtype)
        elif src.buffer is dst.buffer and not (src.shape == dst.shape and src.strides == dst.strides
                                                and src.offset == dst.offset):
            src = src.copy()    # numpy semantics when source and destination overlap
    else:
        if not isinstance(value, (np.ndarray, list, tuple)) or np.ndim(value) == 0:
            host = _dt.scalar_as(op, _check_scalar(op, value), dst.dtype)
        else:
            try:
                host = np.asarray(value).astype(dst.dtype)
            except (TypeError, ValueError, OverflowError) as e:
                raise DTypeError(f"{op}: value cannot be stored as {dst.dtype}: {e}") from None
        src = asarray(host)
    try:
        layout.broadcast_strides(src.shape, src.strides, dst.shape)
    except ShapeError:
        raise ShapeError(f"{op}: could not broadcast a value of shape {src.shape} into a view of shape "
                         f"{dst.shape}") from None
    return src


def setitem(array, key, value):
    """array[key] = value through the view (write_slice): any basic index, value broadcast and cast."""
    if not isinstance(array, Array):
        raise DTypeError(f"setitem: expects a fuelvk.Array, got {type(array).__name__}")
    runtime.check_alive(array.buffer)
    if isinstance(key, (Array, np.ndarray, list)):
        raise FuelVKIndexError("setitem: advanced (array) indexing is not supported; use basic indices "
                               "(ints, slices, None, ...)")
    view = array.index_view(key)
    _writable("setitem", view)
    if view.dtype.itemsize == 16:    # complex128: written as its two float64 views (kernels move <= 8 bytes)
        if isinstance(value, Array):
            value = value if value.dtype == view.dtype else value.astype(view.dtype)
            parts = [complex_part(value, p) for p in (0, 1)]
        else:
            host = np.asarray(value, dtype=view.dtype)
            parts = [np.ascontiguousarray(host.real), np.ascontiguousarray(host.imag)]
        for p, v in enumerate(parts):
            setitem(complex_part(view, p), Ellipsis, v)
        return
    src = _source_for("setitem", view, value)
    launch_write(kernel("write_slice", _width_tag("setitem", view.dtype)), view, src)


def add_assign_scaled(dst, src, scale):
    """dst += src * scale in place (float32; src broadcast to dst). Returns dst.

    dst may be any non-broadcast Array view, or a numpy array (updated in place).
    """
    if not isinstance(dst, (Array, np.ndarray)):
        raise DTypeError(f"add_assign_scaled: dst must be a fuelvk.Array or numpy array, got {type(dst).__name__}")
    host_dst = dst if isinstance(dst, np.ndarray) else None
    (d, s), _ = device_args("add_assign_scaled", dst, src)
    if d.dtype != _dt.float32 or s.dtype != _dt.float32:
        raise DTypeError(f"add_assign_scaled: float32 only (kernel add_assign_scaled.f32), got dst {d.dtype} "
                         f"and src {s.dtype}")
    scale = _check_scalar("add_assign_scaled", scale)
    _writable("add_assign_scaled", d)
    s = _source_for("add_assign_scaled", d, s)
    launch_write(kernel("add_assign_scaled", "f32"), d, s, float(np.float32(scale)))
    if host_dst is not None:
        host_dst[...] = d.numpy()
        return host_dst
    return dst


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, broadcast as _broadcast, declare, same


def _tri_rule(x, k=0):
    """A 1-d x is the row broadcast over a square matrix (numpy's triu/tril)."""
    return Meta((x.shape[0], x.shape[0]) if x.ndim == 1 else tuple(x.shape), np.dtype(x.dtype))


def _concatenate_rule(arrays, axis=0):
    ax = axis % arrays[0].ndim
    shape = list(arrays[0].shape)
    shape[ax] = sum(a.shape[ax] for a in arrays)
    return Meta(tuple(shape), np.dtype(arrays[0].dtype))


def _where_rule(condition, x1, x2):
    metas = [m for m in (x1, x2) if isinstance(m, Meta)]
    return Meta(_broadcast(condition.shape, *(m.shape for m in metas)), np.result_type(*(m.dtype for m in metas)))


def _np_setitem(array, key, value):
    array[key] = value


def _torch_flip(x, axis=None):
    import torch
    return torch.flip(x, tuple(range(x.ndim)) if axis is None else (axis,))


def _torch_concatenate(arrays, axis=0):
    import torch
    return torch.cat(arrays, axis)


_TRI = "(Tensor x, int k=0) -> Tensor"
declare(
    OpDef("flip", flip, same, numpy=lambda x, axis=None: np.ascontiguousarray(np.flip(x, axis)),  # np.flip is a view
          torch=_torch_flip, reference="torch.flip(x, tuple(range(x.dim())) if axis is None else "
                                       "((axis,) if isinstance(axis, int) else tuple(axis)))",
          grad="flip", schema="(Tensor x, int[]? axis=None) -> Tensor"),
    OpDef("roll", roll, same, reference="torch.roll(x, shift) if axis is None else torch.roll(x, shift, axis)",
          grad="roll", schema="(Tensor x, int[] shift, int[]? axis=None) -> Tensor"),
    OpDef("triu", triu, _tri_rule, reference="torch.triu(x, k)", grad="triu", schema=_TRI),
    OpDef("tril", tril, _tri_rule, reference="torch.tril(x, k)", grad="tril", schema=_TRI),
    OpDef("concatenate", concatenate, _concatenate_rule, torch=_torch_concatenate, grad="concatenate",
          schema="(Tensor[] arrays, int axis=0) -> Tensor",
          export={"skip": "takes a Python list of a variable number of tensors; Definition inputs are fixed, named"}),
    OpDef("masked_fill", masked_fill, same, reference="x.masked_fill(mask.to(torch.bool), value)",
          grad="masked_fill", schema="(Tensor x, Tensor mask, float value) -> Tensor"),
    OpDef("where", where, _where_rule, reference="torch.where(condition.to(torch.bool), x1, x2)"),
    # torch: the in-place op and its functional twin add_scaled (torch/_ops.py), which has the gradient
    OpDef("add_assign_scaled", add_assign_scaled, same, reference="dst + scale * src", mutates=("dst",),
          functional="add_scaled", schema="(Tensor(a!) dst, Tensor src, float scale) -> ()"),
    # torch: slice_write_ / slice_write (torch/_ops.py) write one dim's slice, the form torch traces
    OpDef("setitem", setitem, lambda array, key, value: (), numpy=_np_setitem, mutates=("array",),
          functional="slice_write",
          adapt={"key": lambda key: tuple(slice(a, b) for a, b in key)},   # spec (start, stop) -> slice
          export={"skip": "an in-place write through a view with no output tensor; a Definition needs outputs"}),
)
