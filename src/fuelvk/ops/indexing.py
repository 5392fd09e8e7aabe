"""Indexing (numpy names, torch semantics where numpy has none): take, take_along_axis, scatter_add,
index_add.

Indices: any integer numpy array / list (checked and normalized on the host, uploaded as u32), or
a device Array of int32 / uint32 / int64 (read by the kernels as is). take / take_along_axis accept
negative indices (numpy); scatter_add / index_add accept 0 <= i < n only (torch). Out-of-range
indices raise FuelVKIndexError (an IndexError) before anything is launched; device-resident indices
are checked on the device, without a host wait, and the error is raised at the next synchronize, before
any result reaches the host (see _bounds); set CHECK_DEVICE_INDICES = False to skip it,
and then the kernels' own guard applies: take / take_along_axis clamp an out-of-range index into
the axis (and wrap negatives), scatter_add / index_add skip it — no kernel ever reads or writes
outside a buffer.

scatter_add / index_add are out of place (the result starts as a copy of base) and accumulate
atomically without ever dropping a value: native float atomics where the device has them, else an
unbounded compare-and-swap loop (ATOMICS = "cas" / "native" forces one). f16/bf16 accumulate in an
f32 scratch and are rounded once at the end (torch's CPU kernel rounds after every addition).
"""
import math

import numpy as np

from .. import config
from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import Array, asarray, complex_part, empty
from ..errors import DTypeError, FuelVKIndexError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.indexing import (BOUNDS_PER, BOUNDS_WG, GATHER_WG, GATHER_WORDS, INDEX_KINDS, NATIVE_FEATURE,
                                SCATTER_MODES, SCATTER_RUN, SCATTER_WG)
from ..kernels.registry import storage_twin
from ..runtime import loadpath
from ..runtime.loadpath import TEXEL_BYTES
from ._core import binding_limit, blockwise, contiguous, device_args, divider, fits, new_like, result, spans, windowed
from .movement import launch_write
from .movement_core import copy

__all__ = ["take", "take_along_axis", "scatter_add", "index_add"]

CHECK_DEVICE_INDICES = True
ATOMICS = config.get("FUELVK_ATOMICS")  # None: native where available; "cas"; "native"
MAX_RANK = 6
_WG = 128
_SEL_TAGS = {1: "b1", 2: "f16", 4: "f32", 8: "f64"}
_DEVICE_INDEX_DTYPES = (_dt.int32, _dt.uint32, _dt.int64)
_I32 = np.iinfo(np.int32)
# index_bounds' slot before its launch: no bad index, smallest bad = INT_MAX, largest bad = INT_MIN.
_FOUND = np.array([0, _I32.max, _I32.min], np.int32)


def _indices(op, fam, idx, n, negative_ok, ignore=None):
    """(index Array, IDX kind) after the bounds check against an axis of length n (entries equal to
    `ignore` pass)."""
    lo = -n if negative_ok else 0
    accepted = f"[{lo}, {n})" + (f" or {ignore} (ignored)" if ignore is not None else "")
    if isinstance(idx, Array):
        if idx.dtype not in _DEVICE_INDEX_DTYPES:
            raise DTypeError(f"{op}: device indices must be int32, uint32 or int64, got {idx.dtype} "
                             f"(kernel {fam}); cast them first or pass a numpy array")
        runtime.check_alive(idx.buffer)
        if CHECK_DEVICE_INDICES and idx.size:
            _bounds(op, fam, idx, lo, n, accepted, ignore)
        return idx, INDEX_KINDS[idx.dtype.name]
    host = np.asarray(idx)
    if host.dtype == np.bool_ or host.dtype.kind not in "iu":
        if not (host.size == 0 and host.dtype.kind == "f"):
            raise DTypeError(f"{op}: indices must be integers, got dtype {host.dtype} (kernel {fam})")
        host = host.astype(np.int64)
    if host.size:
        _bounds(op, fam, host, lo, n, accepted, ignore)
    host = np.where(host < 0, host + n, host).astype(np.uint32) if host.dtype.kind == "i" else host.astype(np.uint32)
    return asarray(host), 0


def _bounds(op, fam, host, lo, n, accepted, ignore=None):
    """Raise FuelVKIndexError when an index is outside [lo, n) and not equal to `ignore`.

    host: a numpy array (checked now), or a device Array, checked without a host wait (a device-side
    assert): one launch (index_bounds) tests every index on the device and records the bad ones (count,
    smallest, largest) into a host-visible slot; the verdict is deferred to the stream's next synchronize
    (Stream.defer_check). Contract: every host read of device memory (Array.numpy/item, downloads,
    torch's .cpu()) synchronizes first, so the error is raised there, before any result derived from
    the bad indices reaches the host; meanwhile the kernel has clamped (take) or skipped (scatter_add /
    index_add) the bad indices, so no memory outside a buffer is touched, and the arrays computed from
    them must be discarded (as after a CUDA device assert). Indices over one binding, or an axis of
    2^32 or more, are checked on the host (a wait). The error names the op, the offending extreme and
    the accepted range."""
    if not isinstance(host, Array):
        bad = (host < lo) | (host >= n)
        if ignore is not None:
            bad &= host != ignore
        if bad.any():
            first = host.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
            raise FuelVKIndexError(f"{op}: index {int(first)} is out of bounds for an axis of size {n} "
                                   f"({int(bad.sum())} bad of {host.size}; accepted {accepted}; kernel {fam})")
        return
    ids = windowed(contiguous(host))
    if ids is None or n >= 2 ** 32:
        return _bounds(op, fam, host.numpy(), lo, n, accepted, ignore)
    ctx = runtime.get()
    check = _DeviceBoundsCheck(ctx.pool.alloc(_FOUND.nbytes, host=True),
                               (op, fam, n, host.size, accepted, ids.dtype != _dt.int32))
    info = np.iinfo(ids.dtype.name)
    has_ignore = ignore is not None and info.min <= ignore <= info.max   # else no index can equal it
    words = int(ignore) & 0xFFFFFFFFFFFFFFFF if has_ignore else 0
    ctx.launch(kernel("index_bounds", "check"), ctx.groups(-(-ids.size // (BOUNDS_WG * BOUNDS_PER))), found=check.slot,
               ids=ids, count=ids.size, off_idx=ids.offset, n=n, negative_ok=int(lo < 0), has_ignore=int(has_ignore),
               ignore=[words & 0xFFFFFFFF, words >> 32], IDX=INDEX_KINDS[ids.dtype.name])
    ctx.stream.defer_check(check)


class _DeviceBoundsCheck:
    """The deferred verdict of one index_bounds launch over its host-visible slot (reset here, before the
    launch is submitted: host-coherent memory). rebind(slot): the same check over another slot (torch
    launch plans replay it); equal when they check the same thing."""
    __slots__ = ("slot", "what")

    def __init__(self, slot, what):
        from ..runtime.vk import ffi
        self.slot, self.what = slot, what   # what: (op, fam, n, count, accepted, saturating dtype)
        ffi.buffer(slot.mapped, _FOUND.nbytes)[:] = _FOUND.tobytes()

    def rebind(self, slot):
        return _DeviceBoundsCheck(slot, self.what)

    def __eq__(self, other):
        return isinstance(other, _DeviceBoundsCheck) and other.what == self.what

    def __hash__(self):
        return hash(self.what)

    def __call__(self):
        from ..runtime.vk import ffi
        op, fam, n, count, accepted, wide = self.what
        found = np.frombuffer(ffi.buffer(self.slot.mapped, _FOUND.nbytes)[:], _FOUND.dtype)   # synchronized
        nbad, lowest, highest = int(found[0]) & 0xFFFFFFFF, int(found[1]), int(found[2])   # the count is a u32
        if nbad:
            low = lowest != _FOUND[1]
            worst, which = (lowest, "smallest") if low else (highest, "largest")
            if wide and worst in (_I32.min, _I32.max):   # saturated: the value is at least this far out
                worst = f"{'<=' if low else '>='} {worst}"
            raise FuelVKIndexError(f"{op}: index {worst} (the {which} of {nbad} bad of {count} device indices) is "
                                   f"out of bounds for an axis of size {n} (accepted {accepted}; kernel {fam}; "
                                   "found by the device-side check at this synchronize)")


def checked_indices(op, indices, n, ignore=None):
    """(index Array, IDX kind) for indices checked against [0, n) as torch checks class targets (entries
    equal to `ignore` pass: nll_loss's ignore_index; device indices on the device, see _bounds), for
    callers that then launch gather_along / scatter_along with them: one check for several launches.
    Those kernels clamp (gather) or skip / wrap (scatter) an ignored entry: the caller masks its rows."""
    return _indices(op, op, indices, n, False, ignore)


def _tag_bytes(op, fam, dt):
    if dt not in _dt.ALL:
        raise DTypeError(f"{op}: unsupported dtype {dt} (kernel {fam})")
    return dt.itemsize


def take(x, indices, axis=None):
    """numpy.take(x, indices, axis) (index_select / embedding lookup); axis=None takes from x.ravel()."""
    return _take(x, indices, axis, True)


def index_select(x, indices, axis):
    """take along axis with torch's index_select contract: indices in [0, n), a negative one is a
    FuelVKIndexError (numpy's take wraps it; torch's index_select and embedding raise)."""
    return _take(x, indices, axis, False)


def _take(x, indices, axis, negative_ok):
    (x,), numpy_out = device_args("take", x)
    numpy_out = numpy_out and not isinstance(indices, Array)
    if axis is None:
        x = contiguous(x).reshape(-1)
        ax = 0
    else:
        ax = layout.normalize_axis("take", axis, x.ndim)
        if x.ndim == 0:
            raise ShapeError("take: axis given for a 0-d array; use axis=None")
    if x.dtype == _dt.complex128:    # no 16-byte kernel width: each float64 part is taken on its own
        parts = [_take(complex_part(x, part), indices, ax, negative_ok) for part in (0, 1)]
        out = new_like(parts[0].shape, x.dtype)
        for part, values in enumerate(parts):
            complex_part(out, part)[...] = values
        return result(out, numpy_out)
    tag = _SEL_TAGS[_tag_bytes("take", "index_select", x.dtype)]
    n = x.shape[ax]
    idx_shape = np.shape(indices) if not isinstance(indices, Array) else indices.shape
    ids, kind = _indices("take", f"index_select.{tag}", indices, n, negative_ok)
    ids = contiguous(ids)
    out_shape = x.shape[:ax] + tuple(idx_shape) + x.shape[ax + 1:]
    if _take_as_gather(x, ax, out_shape):
        # rows that are not whole texels, where texel loads are faster: gather's texel reads and word
        # stores (the indices broadcast along every other dim), not index_select's per-element path
        shape = [1] * x.ndim
        shape[ax] = ids.size
        out = gather_along(x, ids.reshape(-1).reshape(tuple(shape)), kind, ax, f"b{x.dtype.itemsize}")
        return result(out.reshape(out_shape), numpy_out)
    out = new_like(out_shape, x.dtype)
    if out.size and not fits(x, ids, out):
        h = ids.numpy().astype(np.int64).reshape(-1)
        _take_blocks(contiguous(x), np.where(h < 0, h + n, h), ax, out)
    elif out.size:
        x = contiguous(x)
        inner = math.prod(x.shape[ax + 1:])
        n_idx = ids.size
        ctx = runtime.get()
        per = _texels_per_row(ctx, x, inner, out)
        if per:        # whole-texel rows, read through x's texel view: one invocation per texel
            nt = out.size // per
            (mr, sr), (ma, sa) = divider(inner // per, nt), divider(n_idx, nt // (inner // per))
            ctx.launch(kernel("index_select", tag), ctx.groups(-(-nt // _WG)), out=out, x=x, ids=ids,
                       x_t=x, n=nt, inner=inner // per, n_idx=n_idx, axis_in=n, off_out=0,
                       off_in=x.offset // per, off_idx=ids.offset, pad=0, IDX=kind, TEX=1,
                       magic_r=mr, shift_r=sr, magic_a=ma, shift_a=sa)
        else:
            ctx.launch(kernel("index_select_ssbo", tag), ctx.groups(-(-out.size // _WG)), out=out, x=x, ids=ids,
                       n=out.size, inner=inner, n_idx=n_idx, axis_in=n, off_out=0, off_in=x.offset,
                       off_idx=ids.offset, pad=0, IDX=kind, magic_r=0, shift_r=0, magic_a=0, shift_a=0)
    return result(out, numpy_out)


def _take_as_gather(x, ax, out_shape):
    """Whether take runs as gather_along: the device reads texels faster (loadpath, or FUELVK_TEXEL_LOADS),
    the result is at least loadpath.TEXEL_MIN_BYTES (unless forced), and x's rows after the axis are not
    whole texels (index_select's texel-row path takes those). Operands over one binding stay on
    index_select, which splits the source along the taken axis (gather_along cannot)."""
    size = math.prod(out_shape)
    if not size or not loadpath.texel_paths(runtime.get())[0]:
        return False
    if not fits(x) or size * x.dtype.itemsize > binding_limit():
        return False
    if not loadpath.forced() and size * x.dtype.itemsize < loadpath.TEXEL_MIN_BYTES:
        return False
    per = TEXEL_BYTES // x.dtype.itemsize
    return math.prod(x.shape[ax + 1:]) % per != 0 or (x.is_contiguous and x.offset % per != 0)


def _texels_per_row(ctx, x, inner, out):
    """Elements per 16-byte texel when take may read x's rows through its texel view: the device reads
    texels faster (loadpath, or FUELVK_TEXEL_LOADS), rows and x's offset are whole texels, the view
    holds x's slot (maxTexelBufferElements) and the result is not below loadpath.TEXEL_MIN_BYTES
    (unless forced); else 0 (the element path of the view-less twin)."""
    per = TEXEL_BYTES // x.dtype.itemsize
    if inner % per or x.offset % per or out.size // per > 2 ** 31 or not loadpath.texel_paths(ctx)[0]:
        return 0        # (the kernel's dividers are exact below 2^31 texels)
    if x.buffer.size // TEXEL_BYTES > ctx.device.limits.maxTexelBufferElements:
        return 0
    if not loadpath.forced() and out.size * x.dtype.itemsize < loadpath.TEXEL_MIN_BYTES:
        return 0
    return per


def _take_blocks(x, ih, ax, out):
    """take over an x (contiguous) or a result larger than one binding (an embedding table of 1 GiB...),
    with host indices ih (flat, in [0, n)). As [L, n, R] (L, R: the dims around the axis): blocks of L,
    then chunks of index positions whose result fits one binding; per chunk the indices are sorted, each
    span of x along the axis (a window) gathers its own indices into a sorted staging array, and one
    last gather puts them back in the caller's order."""
    write = kernel("write_slice", _dt.width_tag(x.dtype))
    n = x.shape[ax]
    L_, R = math.prod(x.shape[:ax]), math.prod(x.shape[ax + 1:])
    x3, o3 = x.reshape(L_, n, R), out.reshape(L_, ih.size, R)
    fit = lambda v: windowed(v) is not None   # noqa: E731

    def gather(xs, ids):
        if fit(xs):
            return take(windowed(xs), ids.astype(np.uint32), axis=1)
        order = np.argsort(ids, kind="stable")
        srt = ids[order]
        tmp = new_like((xs.shape[0], ids.size, R), x.dtype)
        for s0, s1 in spans("take", f"slice of x along axis {ax}", n, lambda a, b: fit(xs[:, a:b])):
            a, b = np.searchsorted(srt, [s0, s1])
            if a < b:
                r = take(windowed(xs[:, s0:s1]), (srt[a:b] - s0).astype(np.uint32), axis=1)
                launch_write(write, tmp[:, a:b], r)
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        return take(tmp, inv.astype(np.uint32), axis=1)

    for l0, l1 in spans("take", f"slice of x along axis {ax}", L_,
                        lambda a, b: fit(x3[a:b, 0:1]) and fit(o3[a:b, 0:1])):
        xs, os_ = x3[l0:l1], o3[l0:l1]
        for c0, c1 in spans("take", "index's slice of the result", ih.size, lambda a, b: fit(os_[:, a:b])):
            launch_write(write, windowed(os_[:, c0:c1]), gather(xs, ih[c0:c1]))


def _collapse_around(ax, shape, *stride_sets):
    """Merge the dims before and after `ax` (never ax itself); returns (shape, strides_list, new_ax)."""
    bs, bst = layout.collapse(shape[:ax], *[s[:ax] for s in stride_sets])
    as_, ast = layout.collapse(shape[ax + 1:], *[s[ax + 1:] for s in stride_sets])
    new_shape = tuple(bs) + (shape[ax],) + tuple(as_)
    strides = [tuple(b) + (s[ax],) + tuple(a) for b, s, a in zip(bst, stride_sets, ast)]
    return new_shape, strides, len(bs)


def take_along_axis(x, indices, axis):
    """numpy.take_along_axis: out[..., j, ...] = x[..., indices[..., j, ...], ...] (broadcasting)."""
    (x,), numpy_out = device_args("take_along_axis", x)
    numpy_out = numpy_out and not isinstance(indices, Array)
    tag = f"b{_tag_bytes('take_along_axis', 'gather', x.dtype)}"
    fam = f"gather.{tag}"
    if axis is None:
        x = contiguous(x).reshape(-1)
        ax = 0
    else:
        ax = layout.normalize_axis("take_along_axis", axis, x.ndim)
    idx_shape = tuple(np.shape(indices)) if not isinstance(indices, Array) else indices.shape
    if len(idx_shape) != x.ndim:
        raise ShapeError(f"take_along_axis: indices have rank {len(idx_shape)} but x has rank {x.ndim} "
                         f"(shapes {idx_shape} and {x.shape}); kernel {fam} needs equal ranks")
    n = x.shape[ax]
    ids, kind = _indices("take_along_axis", fam, indices, n, True)
    return result(gather_along(x, ids, kind, ax, tag), numpy_out)


def gather_along(x, ids, kind, ax, tag):
    """take_along_axis's launch for device indices already known to be in range (argsort's)."""
    fam = f"gather.{tag}"
    n = x.shape[ax]
    other = [d for d in range(x.ndim) if d != ax]
    b = layout.broadcast_shapes("take_along_axis", tuple(x.shape[d] for d in other), tuple(ids.shape[d] for d in other))
    out_shape = list(b)
    out_shape.insert(ax, ids.shape[ax])
    out_shape = tuple(out_shape)
    out = new_like(out_shape, x.dtype)
    if out.size and n and not fits(x, ids, out):
        # larger than one binding: blocks of the dims before the axis (the axis and those after stay whole)
        xshape = out_shape[:ax] + (n,) + out_shape[ax + 1:]
        blockwise("take_along_axis", lambda xb, ib: take_along_axis(xb, ib, xb.ndim - len(out_shape) + ax),
                  [x.broadcast_to(xshape), ids.broadcast_to(out_shape)], out, axes=ax)
        return out
    if out.size:
        if n == 0:
            raise FuelVKIndexError(f"take_along_axis: cannot take from an empty axis (x shape {x.shape}; {fam})")
        xs = list(layout.broadcast_strides(tuple(s if d != ax else 1 for d, s in enumerate(x.shape)),
                                      tuple(st if d != ax else 0 for d, st in enumerate(x.strides)), out_shape))
        xs[ax] = x.strides[ax]
        si = layout.broadcast_strides(ids.shape, ids.strides, out_shape)
        shape, (sx, si), new_ax = _collapse_around(ax, out_shape, tuple(xs), si)
        if len(shape) > MAX_RANK:
            raise ShapeError(f"take_along_axis: rank {len(shape)} after merging dims exceeds {MAX_RANK} "
                             f"(kernel {fam}); shapes {x.shape} and {ids.shape}")
        ctx = runtime.get()
        v = kernel("gather", tag)
        limit = ctx.device.limits.maxTexelBufferElements
        texel = loadpath.texel_paths(ctx)[0] and x.buffer.size // x.dtype.itemsize <= limit and ids.buffer.size // 4 <= limit
        views = {"x_t": x, "ids_t": ids} if texel else {}
        if not texel:
            v = storage_twin(v)
        per_group = GATHER_WG * GATHER_WORDS * (TEXEL_BYTES // x.dtype.itemsize)
        ctx.launch(v, ctx.groups(-(-out.size // per_group)), out=out, out_words=out, x=x, ids=ids, **views, n=out.size,
                   rank=len(shape), axis=new_ax, axis_len=n, off_x=x.offset, off_idx=ids.offset,
                   shape=list(shape), sx=list(sx), si=list(si), IDX=kind)
    return out


def _atomic_tag(op, fam, tag):
    ctx = runtime.get()
    have = NATIVE_FEATURE[tag] in ctx.device.features
    mode = ATOMICS
    if mode == "native" and not have:
        raise UnsupportedError(f"{op}: ATOMICS='native' but {ctx.device.name} lacks {NATIVE_FEATURE[tag]} "
                               f"(kernel {fam}_{tag}_native)")
    if mode == "native" or (mode is None and have):
        return f"{tag}_native"
    return tag


# The element-wise passes of the half-type scatter (init, finish) walk no index: these Params are unused.
_NO_WALK = {"rank": 0, "axis": 0, "dst_axis_len": 0, "off_idx": 0, "off_acc": 0, "shape": [], "s_src": [], "s_idx": [],
            "s_dst": []}


def _accumulate(op, fam, base, src, ids, kind, axis, iter_shape, s_src, s_idx, numpy_out):
    """out = copy of base, then out[dst(c)] += src[c] over iter_shape (atomic)."""
    tag = _dt.float_tag(op, base.dtype)
    vtag = _atomic_tag(op, fam, tag)
    v = kernel(fam, vtag)
    plain = storage_twin(v)       # the element-wise init / finish passes read no texels
    ctx = runtime.get()
    half = tag in ("f16", "bf16")
    n_base = base.size
    if half:
        base_c = contiguous(base)
        out = new_like(base.shape, base.dtype)
        acc = empty((max(n_base, 1),), _dt.float32)
        if n_base:
            ctx.launch(plain, ctx.groups(-(-n_base // SCATTER_WG)), out=out, src=base_c, ids=ids, acc=acc, **_NO_WALK,
                       n=n_base, off_src=base_c.offset, IDX=kind, MODE=SCATTER_MODES["init"])
    else:
        out = copy(base)
        acc = out
    n = math.prod(iter_shape)
    if n:
        s_dst = layout.contiguous_strides(base.shape)
        shape, (ss, si, sd), new_ax = _collapse_around(axis, tuple(iter_shape), tuple(s_src), tuple(s_idx),
                                                       tuple(s_dst))
        if len(shape) > MAX_RANK:
            raise ShapeError(f"{op}: rank {len(shape)} after merging dims exceeds {MAX_RANK} (kernel {fam}.{vtag})")
        limit = ctx.device.limits.maxTexelBufferElements
        texel = loadpath.texel_paths(ctx)[0] and src.buffer.size // src.dtype.itemsize <= limit \
            and ids.buffer.size // 4 <= limit
        groups = -(-(n // shape[-1]) * -(-shape[-1] // SCATTER_RUN) // SCATTER_WG)
        ctx.launch(v if texel else plain, ctx.groups(groups), out=out, src=src, ids=ids, acc=acc,
                   **({"src_t": src, "ids_t": ids} if texel else {}), n=n, rank=len(shape),
                   axis=new_ax, dst_axis_len=base.shape[axis], off_src=src.offset, off_idx=ids.offset, off_acc=0,
                   shape=list(shape), s_src=list(ss), s_idx=list(si), s_dst=list(sd), IDX=kind,
                   MODE=SCATTER_MODES["accumulate"])
    if half and n_base:
        ctx.launch(plain, ctx.groups(-(-n_base // SCATTER_WG)), out=out, src=src, ids=ids, acc=acc, **_NO_WALK, n=n_base,
                   off_src=0, IDX=kind, MODE=SCATTER_MODES["finish"])
    return result(out, numpy_out)


def _accumulate_blocks(op, base, src, ids, ax, along):
    """scatter_add / index_add where base, src or the indices are larger than one binding: out = a copy of
    base; for each span of out along the axis (a window) and each chunk of src along it, the chunk's
    indices that land in the span (host-side, made relative; the others out of range, which the kernel
    skips) are accumulated into the span. along: index_add's 1-D index (else scatter_add's, src-shaped).
    f16/bf16 round once per chunk (once when src fits one binding)."""
    out = copy(base)
    h = ids.numpy().astype(np.int64)
    src = contiguous(src)
    pre = (slice(None),) * ax
    n, k = base.shape[ax], (h.shape[0] if along else h.shape[ax])
    fit = lambda v: windowed(v) is not None   # noqa: E731
    write = kernel("write_slice", _dt.width_tag(out.dtype))
    for s0, s1 in spans(op, f"slice of base along axis {ax}", n, lambda a, b: fit(out[pre + (slice(a, b),)])):
        ow = windowed(out[pre + (slice(s0, s1),)])
        for c0, c1 in spans(op, f"slice of src along axis {ax}", k, lambda a, b: fit(src[pre + (slice(a, b),)])):
            hh = h[c0:c1] if along else h[pre + (slice(c0, c1),)]
            inside = (hh >= s0) & (hh < s1)
            if not inside.any():
                continue
            loc = asarray(np.where(inside, hh - s0, 0xFFFFFFFF).astype(np.uint32))
            sw = windowed(src[pre + (slice(c0, c1),)])
            if along:
                s_idx = [0] * base.ndim
                s_idx[ax] = 1
                it = sw.shape
            else:
                s_idx, it = loc.strides, loc.shape
            r = _accumulate(op, op, ow, sw, loc, INDEX_KINDS["uint32"], ax, it, sw.strides, s_idx, False)
            launch_write(write, ow, r)
    return out


def _common(op, fam, base, axis, index, src):
    (base, src), numpy_out = device_args(op, base, src)
    numpy_out = numpy_out and not isinstance(index, Array)
    tag = _dt.float_tag(op, base.dtype)
    if src.dtype != base.dtype:
        raise DTypeError(f"{op}: src has dtype {src.dtype} but base has {base.dtype}; kernel {fam}_{tag} "
                         "needs equal dtypes")
    if base.ndim == 0:
        raise ShapeError(f"{op}: base must have at least one dim (kernel {fam}_{tag})")
    ax = layout.normalize_axis(op, axis, base.ndim)
    return base, src, ax, tag, numpy_out


def scatter_add(base, axis, index, src):
    """torch.Tensor.scatter_add (out of place): out[..., index[c], ...] += src[c] for c over index.shape."""
    base, src, ax, tag, numpy_out = _common("scatter_add", "scatter_add", base, axis, index, src)
    idx_shape = tuple(np.shape(index)) if not isinstance(index, Array) else index.shape
    fam = f"scatter_add_{tag}"
    if not (len(idx_shape) == src.ndim == base.ndim):
        raise ShapeError(f"scatter_add: index {idx_shape}, src {src.shape} and base {base.shape} must have the "
                         f"same rank (kernel {fam})")
    for d in range(base.ndim):
        if idx_shape[d] > src.shape[d] or (d != ax and idx_shape[d] > base.shape[d]):
            raise ShapeError(f"scatter_add: index shape {idx_shape} must be <= src shape {src.shape} in every "
                             f"dim and <= base shape {base.shape} except along axis {ax} (kernel {fam})")
    ids, kind = _indices("scatter_add", fam, index, base.shape[ax], False)
    if not fits(base, src, ids):
        return result(_accumulate_blocks("scatter_add", base, src, ids, ax, False), numpy_out)
    return _accumulate("scatter_add", "scatter_add", base, src, ids, kind, ax, idx_shape, src.strides,
                       ids.strides, numpy_out)


def index_add(base, axis, index, src):
    """torch.Tensor.index_add (out of place): out[..., index[k], ...] += src[..., k, ...]."""
    base, src, ax, tag, numpy_out = _common("index_add", "index_add", base, axis, index, src)
    idx_shape = tuple(np.shape(index)) if not isinstance(index, Array) else index.shape
    fam = f"index_add_{tag}"
    if len(idx_shape) != 1:
        raise ShapeError(f"index_add: index must be 1-D, got shape {idx_shape} (kernel {fam})")
    want = base.shape[:ax] + (idx_shape[0],) + base.shape[ax + 1:]
    if src.shape != want:
        raise ShapeError(f"index_add: src has shape {src.shape}; with base {base.shape}, axis {ax} and "
                         f"{idx_shape[0]} indices it must be {want} (kernel {fam})")
    ids, kind = _indices("index_add", fam, index, base.shape[ax], False)
    if not fits(base, src, ids):
        return result(_accumulate_blocks("index_add", base, src, ids, ax, True), numpy_out)
    s_idx = [0] * base.ndim
    s_idx[ax] = ids.strides[0]
    return _accumulate("index_add", "index_add", base, src, ids, kind, ax, src.shape, src.strides, s_idx,
                       numpy_out)


def scatter_along(base, src, ids, kind, axis):
    """scatter_add's launch for indices already checked (checked_indices): base, src and ids Arrays of
    one rank, ids no larger than src; an entry outside [-n, n) adds nothing, a negative one counts from
    the end."""
    if not fits(base, src, ids):
        return _accumulate_blocks("scatter_add", base, src, ids, axis, False)
    return _accumulate("scatter_add", "scatter_add", base, src, ids, kind, axis, ids.shape, src.strides, ids.strides,
                       False)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, broadcast as _broadcast, declare, same


def _take_rule(x, indices, axis=None):
    if axis is None:
        return Meta(tuple(indices.shape), np.dtype(x.dtype))
    ax = axis % x.ndim
    return Meta(tuple(x.shape[:ax]) + tuple(indices.shape) + tuple(x.shape[ax + 1:]), np.dtype(x.dtype))


def _take_along_rule(x, indices, axis):
    shape = list(x.shape)
    shape[axis % x.ndim] = indices.shape[axis % x.ndim]
    return Meta(_broadcast(shape, indices.shape), np.dtype(x.dtype))


# FlashInfer-Bench's random ints span [-1024, 1024) and would index out of range.
_INDEX = {"skip": "integer index input: FlashInfer-Bench's random ints span [-1024, 1024) and would index out of range"}
_SCATTER = "(Tensor base, int dim, Tensor index, Tensor src) -> Tensor"   # torch adds the in-place <name>_
declare(
    OpDef("take", take, _take_rule, grad="take", schema="(Tensor x, Tensor indices, int? axis=None) -> Tensor",
          export=_INDEX),
    OpDef("take_along_axis", take_along_axis, _take_along_rule, grad="take_along_axis",
          schema="(Tensor x, Tensor indices, int axis) -> Tensor", export=_INDEX),
    OpDef("scatter_add", scatter_add, same, grad="scatter_add", schema=_SCATTER, export=_INDEX),
    OpDef("index_add", index_add, same, grad="index_add", schema=_SCATTER, export=_INDEX),
)
