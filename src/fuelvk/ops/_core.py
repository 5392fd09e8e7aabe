"""What every public op shares: argument normalization, output wrapping and the strided launch.

Convention (CuPy's): numpy (or scalar) inputs give numpy outputs; any Array input gives Array outputs.
"""
import math
import numbers
import operator
import struct

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import Array, asarray
from ..errors import FuelVKError, FuelVKMemoryError, LaunchError
from ..runtime import loadpath
from ..runtime.loadpath import TEXEL_BYTES
from ..kernels.elementwise import BCAST, EPT, FLAGS, LINEAR, MAX_RANK, MID, STRIDED, TEX, TEXEL_BINDINGS, TEXW, WG
from ..kernels.movement_core import copy_variant
from ..kernels.registry import storage_twin

ZERO2 = (0, 0)
_LIMITS = "device limits"   # the key of Context.plans' entry naming the limits its plans were made for
# Small launches (unless FUELVK_TEXEL_LOADS forces a path, as tests do): no texel views below
# loadpath.TEXEL_MIN_BYTES per operand, and the indexed path below LINEAR_MIN elements, which lavapipe
# executes faster there (a 16-element f32 add: ~17 us of CPU against ~28 us for LINEAR; equal at 256
# elements, LINEAR far ahead from 1024; benches/bench_dispatch.py). Either path reads the same few
# elements on any device.
LINEAR_MIN = 256
SMALL = {"min_bytes": loadpath.TEXEL_MIN_BYTES, "linear_min": LINEAR_MIN}


def device_args(op, *xs):
    """(Arrays, numpy_out): uploads numpy inputs; numpy_out is True when no input was an Array."""
    out = []
    numpy_out = True
    for x in xs:
        if type(x) is Array or isinstance(x, Array):
            pool = x.buffer.pool
            if pool is None or pool.closed:
                runtime.check_alive(x.buffer)   # raises the typed error
            out.append(x)
            numpy_out = False
        else:
            try:
                out.append(asarray(x))
            except FuelVKError as e:   # name the op that asked (an upload can run out of memory too)
                oom = isinstance(e, FuelVKMemoryError)
                where = f"uploading input {len(out)} (shape {np.shape(x)}): " if oom else ""
                raise type(e)(f"{op}: {where}{e}") from e
    return out, numpy_out


def result(out, numpy_out):
    if numpy_out:
        return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()
    return out


def is_scalar(x):
    return isinstance(x, numbers.Number) and not isinstance(x, complex) or (
        isinstance(x, np.generic) and x.dtype.kind in "biuf")


def scalar_words(op, value, dt):
    """A Python scalar rounded to dt (numpy's weak-scalar rule), as the kernels' two u32 words.

    Float kernels compute in f32 (f64 for float64): a half-type scalar is rounded to dt, then
    widened."""
    v = _dt.scalar_as(op, value, dt)
    if dt == _dt.float64:
        return struct.unpack("<2I", v.tobytes())
    return (struct.unpack("<I", struct.pack("<f", float(v)))[0], 0)


def element_words(op, value, dt):
    """The bit pattern of scalar `value` stored as a dt element (fill values, compare operands),
    zero-extended to the kernels' two u32 words."""
    return struct.unpack("<2I", _dt.scalar_as(op, value, dt).tobytes().ljust(8, b"\0"))


def promote(op, arrays, target=None):
    """Bring Arrays to their numpy result dtype, or to target (casting the others with astype)."""
    dts = {a.dtype for a in arrays}
    if target is None and len(dts) == 1 or dts == {target}:
        return arrays
    target = np.result_type(*dts) if target is None else target
    return [a if a.dtype == target else a.astype(target) for a in arrays]


def contiguous(x):
    """x itself when it is contiguous (any offset), else a contiguous copy."""
    if x.is_contiguous:
        return x
    return x.copy()


def _chunks(shape, strides, offsets):
    """Split leading dims until rank <= MAX_RANK; yields (shape, strides, offsets, out_offset)."""
    if len(shape) <= MAX_RANK:
        yield shape, strides, offsets, 0
        return
    inner = math.prod(shape[1:])
    for i in range(shape[0]):
        for sub, st, offs, o in _chunks(shape[1:], [s[1:] for s in strides], [
                off + i * s[0] for off, s in zip(offsets, strides)]):
            yield sub, st, offs, o + i * inner


def launch_strided(variant, out, inputs, spec=None, s0=ZERO2, s1=ZERO2, flags_extra=0):
    """Launch a kernel of the EW Params layout (elementwise.comp and its kin): out (contiguous) from up
    to two strided/broadcast inputs, bound in the kernel's binding order (its first binding is out,
    the next ones the inputs, which the Params' a / b fields describe). spec: specialization constants
    by name ({"OP": UNARY["exp"]}); s0 / s1: the scalar words; flags_extra: FLAGS bits to set.

    Dims are collapsed wherever every input allows, so most views run at rank 1-3; contiguous and
    constant (all-stride-0) inputs get the kernel's linear fast paths. When every input is
    contiguous or constant with 4-aligned offsets, the LINEAR specialization (4 elements per access,
    through 64-bit words in the *_w64 variants where the device has shaderInt64; no
    index arithmetic) runs, in the kernels whose SPIR-V declares it. A launch that reads and writes
    nothing through texel views runs the variant's storage-only twin (registry.texel_twins), which
    binds no views. The launch plan (pipelines, grids, packed Params, which buffers bind where)
    depends only on the geometry and the buffers' sizes, so it is cached per context: a repeated
    call costs building its key, one dict lookup and the dispatches. Returns the plan it ran (None
    when the launch was split into blocks larger than one binding: launch_new caches no such plan).
    """
    ctx = runtime.get()
    plans, limits = ctx.plans, ctx.device.limits
    if plans.get(_LIMITS) is not limits:    # plans depend on the limits (tests swap in overrides)
        plans.clear()
        plans[_LIMITS] = limits
    loads, stores = loadpath.texel_paths(ctx)
    ob = out.buffer
    key = (variant._id, tuple(spec.items()) if spec else (), s0, s1, flags_extra, out.shape, out.offset, ob.size,
           loads, stores)
    for x in inputs:
        key += (x.shape, x.strides, x.offset, x.buffer.size)
    plan = plans.get(key)
    if plan is None:
        lim = limits.maxStorageBufferRange
        if ob.size > lim or any(x.buffer.size > lim for x in inputs):   # buffer sizes are in the key
            shape = out.shape
            views = [out] + [x if x.shape == shape else x.broadcast_to(shape) for x in inputs]
            for w in blocks(views, lim):
                launch_strided(variant, w[0], w[1:], spec, s0, s1, flags_extra)
            return None
        texels = (loads or stores) and (loads, stores) + tuple(x.buffer.size // TEXEL_BYTES
                                                              for x in (out,) + tuple(inputs))
        pipes, writes, views = _plan(ctx, variant, out, inputs, spec or {}, s0, s1, flags_extra, texels,
                                     **({} if loadpath.forced() else SMALL))
        stub = loadpath.stub(ctx.pool) if views and None in views else None
        # which buffer each binding takes: out, the inputs, then per texel view its source or the stub
        order = tuple(range(1 + len(inputs))) + tuple(len(inputs) + 1 if k is None else k for k in views or ())
        plan = (tuple(pipes), writes, operator.itemgetter(*order) if len(order) > 1 else lambda t: t[:1], stub)
        _remember(plans, limits, key, plan)
    for x in inputs:
        if x.buffer is ob and _overlap(out, x):
            raise LaunchError(f"kernel {variant.id}: the output overlaps an input in the same buffer (an "
                              "invocation may reread an element another one already wrote, and the LINEAR "
                              "path recomputes its last unit); compute into a fresh array, then copy")
    _run(ctx, plan, ob, inputs)
    return plan


def _span(a):
    """The byte range [lo, hi) that view a can touch in its buffer."""
    lo = hi = a.offset
    for d, s in zip(a.shape, a.strides):
        if d == 0:
            return 0, 0
        lo, hi = lo + min(0, s) * (d - 1), hi + max(0, s) * (d - 1)
    size = a.dtype.itemsize
    return lo * size, (hi + 1) * size


def _overlap(a, b):
    """Whether views a and b (of one buffer) can touch a common byte."""
    (alo, ahi), (blo, bhi) = _span(a), _span(b)
    return alo < bhi and blo < ahi and alo < ahi and blo < bhi


def _run(ctx, plan, ob, inputs):
    """Record a launch plan's dispatches with ob as the output buffer and inputs' buffers bound."""
    pipes, writes, bind, stub = plan
    if pipes:
        if len(inputs) == 2:
            bufs = bind((ob, inputs[0].buffer, inputs[1].buffer, stub))
        else:
            bufs = bind((ob,) + tuple(x.buffer for x in inputs) + (stub,))
        dispatch = ctx.stream.dispatch
        for pipe, groups, push in pipes:
            dispatch(pipe, groups, bufs, writes, push)


def _remember(plans, limits, key, plan):
    """plans[key] = plan, the cache emptied first past 4096 entries (geometries that never repeat)."""
    if len(plans) > 4096:
        plans.clear()
        plans[_LIMITS] = limits
    plans[key] = plan


# -- fresh outputs: the whole op's plan -------------------------------------------------------------
# An op whose output is a new contiguous array (every elementwise op, unary and binary, of one dtype)
# caches, next to launch_strided's plan, what its wrapper would work out again on every call: the
# output's shape, strides, dtype and slot size, and the launch plan itself, under the op's own key
# (its name and dtype: what picks the variant, spec and scalars on this context's device, whose
# features are fixed; tests that change them reset Context.plans) plus the inputs' geometry. A repeat
# call (the common case: the same op over arrays of the same layout) is one key, one dict lookup,
# one allocation and the dispatches. Plans live in Context.plans (cleared with launch_strided's).

def _fresh_key(ctx, op_key, inputs):
    """The Context.plans key of a fresh-output launch of op_key over inputs, or None when an input's
    device is closed (the op's general path raises the typed error)."""
    key = (op_key, loadpath.texel_paths(ctx))
    for x in inputs:
        buf = x.buffer
        pool = buf.pool
        if pool is None or pool.closed:
            return None
        key += (x.shape, x.strides, x.offset, buf.size)
    return key


def cached_new(op_key, inputs):
    """The output of the launch launch_new cached for op_key over inputs of this geometry, run again
    on these inputs into a fresh array; None when nothing is cached (then the op takes its general
    path, which ends in launch_new). op_key must determine everything but the inputs' geometry:
    variant, spec, scalars, flags, output dtype."""
    ctx = runtime.get()
    plans = ctx.plans
    if plans.get(_LIMITS) is not ctx.device.limits:
        return None
    hit = plans.get(_fresh_key(ctx, op_key, inputs))
    if hit is None:
        return None
    nbytes, shape, strides, dtype, plan = hit
    buf = ctx.pool.alloc(nbytes)
    out = Array(buf, shape, strides, 0, dtype)
    _run(ctx, plan, buf, inputs)
    return out


def launch_new(op_key, variant, inputs, shape, dtype, spec=None, s0=ZERO2, s1=ZERO2, flags_extra=0):
    """launch_strided(variant, out, inputs, spec, s0, s1, flags_extra) into a fresh contiguous out of
    shape / dtype, returned; its plan cached for cached_new under op_key (see there) when op_key is
    not None."""
    out = new_like(shape, dtype)
    plan = launch_strided(variant, out, inputs, spec, s0, s1, flags_extra)
    if plan is not None and op_key is not None:
        ctx = runtime.get()
        key = _fresh_key(ctx, op_key, inputs)
        if key is not None:
            _remember(ctx.plans, ctx.device.limits, key,
                      (max(math.prod(shape), 1) * dtype.itemsize, out.shape, out.strides, dtype, plan))
    return out


def _texel_ok(offset, itemsize, n, texels):
    """Whether the LINEAR path may read n elements from `offset` (a multiple of 4) of a buffer of
    `texels` whole texels through its rgba32ui view: the view is within maxTexelBufferElements and
    holds every texel read (half types read 4 elements from a texel's half: the whole texel must lie
    in the view, which ends at the buffer's last whole texel)."""
    end = -(-(offset + n // 4 * 4) * itemsize // TEXEL_BYTES)
    return 0 < texels <= runtime.get().device.limits.maxTexelBufferElements and end <= texels


def _plan(ctx, variant, out, inputs, spec, s0, s1, flags_extra, texels=False, min_bytes=0, linear_min=0):
    """([(pipeline, grid, Params bytes)] one per rank<=6 chunk, the write set, the texel views'
    sources: per texel binding (a_t, b_t) the input it views or None for the stub) for
    launch_strided. The Params, bindings and spec constants go through the kernel's Signature by
    name, once per plan. texels: False (storage buffers) or (texel loads, texel stores, then out's
    and each input's buffer size in texels); min_bytes: chunks moving fewer bytes per operand stay
    on storage buffers; linear_min: chunks of fewer elements take the indexed path, not LINEAR. A plan that binds no texel view runs the storage-only twin, if the variant
    has one (no views: view sources ())."""
    sig = ctx.pipelines.signature(variant)
    views = tuple(b for b in sig.bindings if b in TEXEL_BINDINGS)
    out_view = "o_t" in views
    if len(sig.bindings) != 1 + len(inputs) + len(views) or views and len(views) != len(inputs) + out_view:
        raise LaunchError(f"kernel {variant.id}: launch_strided got {len(inputs)} inputs for bindings "
                          f"{list(sig.bindings)} (out first, texel views {list(TEXEL_BINDINGS)} last)")
    named = dict(zip(sig.bindings, (out,) + tuple(inputs) + tuple(inputs[:len(views)]) + (out,)))
    shape = out.shape
    n = math.prod(shape)
    if n == 0:
        return [], sig.writes, ()
    if all(x.shape == shape and layout.is_contiguous(shape, x.strides) for x in inputs):
        chunks = [((n,), [(1,)] * len(inputs), [x.offset for x in inputs], 0)]   # the common case
    else:
        cshape, cstrides = layout.collapse(shape, *[layout.broadcast_strides(x.shape, x.strides, shape) for x in inputs])
        chunks = _chunks(cshape, cstrides, [x.offset for x in inputs])
    linear_ok = LINEAR is not None and LINEAR in sig.spec_ids
    bcast_ok = any(f[0] == "inner" for f in sig.fields)    # the kernel reads ROW / COL inputs
    strided_ok = STRIDED in sig.spec_ids
    mid_ok = MID in sig.spec_ids
    plan, view_src = [], None
    for sub, st, offs, o in chunks:
        m = math.prod(sub)
        contig = layout.contiguous_strides(sub)
        flags = flags_extra
        linear = linear_ok and m >= linear_min
        inner = 0                       # the ROW / COL inputs' run length (one per chunk)
        strided = False                 # some input takes the general strided index
        mid = 0                         # some input is a MID broadcast (its stride words replaced): 1, a two-level one: 2
        st = list(st)
        reads = [m] * len(st)           # per input: the elements past its offset it reads (texel views)
        units = []                      # strided inputs read as 4-element units
        for k, s in enumerate(st):
            if tuple(s) == contig:
                flags |= _CONTIGUOUS[k]
                linear = linear and offs[k] % 4 == 0
            elif not any(s):
                flags |= _CONSTANT[k]
            else:
                kind, run = _broadcast_kind(sub, s) if bcast_ok and m <= _DIV_MAX else (None, 0)
                if kind is None or inner not in (0, run):
                    runs = _mid_kind(sub, s) if mid_ok and m <= _DIV_MAX else None
                    pre, span = None, m         # a two-level MID's ROW / COL step, and the index range it gives
                    if runs is None and mid_ok and m <= _DIV_MAX:
                        two = _mid2_kind(sub, s)
                        if two is not None and inner in (0, two[1]):
                            pre, inner, runs = two
                            flags |= _ROW[k] if pre == "row" else _COL[k]
                            span = inner if pre == "row" else m // inner
                    if runs is not None:
                        mid = max(mid, 2 if pre else 1)
                        flags |= _MID[k]
                        st[k] = _mid_words(*runs, m)
                        reads[k] = span // runs[1] * runs[0]
                        # LINEAR: a unit of 4 elements reads one aligned unit (ROW + MID), one element (COL + MID)
                        linear = linear and (inner % 4 == 0 if pre else True) and (
                            pre == "col" or runs[0] % 4 == 0 and offs[k] % 4 == 0)
                        continue
                    strided = True     # LINEAR still, where it reads as 4-element units
                    unit = bcast_ok and strided_ok and _strided_unit(sub, s, offs[k])
                    linear = linear and unit
                    if unit:           # its texel view covers up to its highest element
                        units.append(k)
                        reads[k] = 1 + sum((e - 1) * t for e, t in zip(sub, s) if t > 0)
                    continue
                inner = run
                flags |= _ROW[k] if kind == "row" else _COL[k]
                linear = linear and run % 4 == 0 and (kind == "col" or offs[k] % 4 == 0)
        off_o = out.offset + o
        linear = linear and off_o % 4 == 0
        bcast_linear = linear and bool(inner or strided or mid)   # BCAST: ROW / COL / MID / strided unit inputs
        # Texel loads: LINEAR chunks whose contiguous (and ROW, MID, strided unit) inputs all have views
        # covering what they read.
        contig_in = [k for k in range(len(inputs))
                     if flags & (_CONTIGUOUS[k] | _ROW[k] | _MID[k]) and not flags & _COL[k] or k in units]
        big = m * out.dtype.itemsize >= min_bytes
        tex = bool(views) and linear and big and texels and texels[0] and bool(contig_in) and all(
            _texel_ok(offs[k], inputs[k].dtype.itemsize, inner if flags & _ROW[k] and not flags & _MID[k] else reads[k],
                      texels[3 + k])
            for k in contig_in)
        # Texel stores: the same, for an output whose 4-element units are whole texels (f32, f64).
        texw = bool(views) and linear and big and texels and texels[1] and TEXW in sig.spec_ids and out.dtype.itemsize in (4, 8) \
            and _texel_ok(off_o, out.dtype.itemsize, m, texels[2])
        if tex or texw:
            view_src = tuple(1 + k if tex and k in contig_in else None for k in range(len(inputs))) \
                + (((0 if texw else None),) if out_view else ())
        bcast = dict(zip(("inner", "magic", "shift"), (inner,) + divider(inner, m))) if bcast_ok else {}
        index = {STRIDED: _strided_mode(strided, m)} if strided_ok and (bcast_linear or not linear) else {}
        _, _, push, spec_ids = sig.bind(dict(
            named, **spec, **bcast, **index, **({MID: mid} if mid else {}), **({LINEAR: 1} if linear else {}), **({BCAST: 1} if bcast_linear else {}), **({TEX: 1} if tex else {}), **({TEXW: 1} if texw else {}), n=m, rank=len(sub), flags=flags, off_o=off_o,
            off_a=offs[0] if offs else 0, off_b=offs[1] if len(offs) > 1 else 0, s0=s0, s1=s1, shape=sub,
            sa=st[0] if st else (), sb=st[1] if len(st) > 1 else ()))
        per_group = WG * EPT * (4 if linear else 1)
        plan.append((spec_ids, ctx.groups(-(-m // per_group)), push))
    writes = sig.writes
    if views and view_src is None:
        twin = storage_twin(variant)
        if twin is not None:
            return _plan(ctx, twin, out, inputs, spec, s0, s1, flags_extra, linear_min=linear_min)
    plan = [(ctx.pipelines.get(variant, spec_ids), groups, push) for spec_ids, groups, push in plan]
    if views:
        view_src = view_src or (None,) * len(views)
        # the stub is never written: a writeonly view bound to it must not order later dispatches
        nb = len(writes) - len(views)
        writes = writes[:nb] + tuple(w and k is not None for w, k in zip(writes[nb:], view_src))
    return plan, writes, view_src or ()


# The FLAGS bits of input k (a, b) being contiguous / constant / a ROW / COL broadcast.
_CONTIGUOUS = (FLAGS["a_contiguous"], FLAGS["b_contiguous"])
_CONSTANT = (FLAGS["a_constant"], FLAGS["b_constant"])
_ROW = (FLAGS["a_row"], FLAGS["b_row"])
_COL = (FLAGS["a_col"], FLAGS["b_col"])
_MID = (FLAGS["a_mid"], FLAGS["b_mid"])
_DIV_MAX = 1 << 31      # divider is exact for indices below 2**31 (larger chunks: the general index)


def _strided_unit(shape, strides, offset):
    """Whether a strided input can be read on the LINEAR path as 4-element units (elementwise.comp's
    unit_index): unit innermost stride, that dim's extent, the offset and the other strides multiples
    of 4 (a transposed or head-sliced view of a contiguous array: the rotary q)."""
    return strides[-1] == 1 and shape[-1] % 4 == 0 and offset % 4 == 0 and all(s % 4 == 0 for s in strides[:-1])


def _strided_mode(strided, n):
    """The STRIDED specialization of an indexed launch of n elements (elementwise.comp): 0 when no
    input is strided, 2 (float-estimate division, exact below _FAST_DIV_MAX) or 1 (integer division)."""
    return 0 if not strided else (2 if n <= _FAST_DIV_MAX else 1)


_FAST_DIV_MAX = 1 << 20


def _broadcast_kind(shape, strides):
    """("row", run) when an input of these (collapsed) strides repeats one contiguous run of the
    trailing dims (stride 0 before them: index i % run), ("col", run) when it is contiguous over the
    leading dims and constant over the trailing ones (index i // run), else (None, 0)."""
    for j in range(1, len(shape)):
        head, tail = strides[:j], strides[j:]
        if not any(head) and tuple(tail) == layout.contiguous_strides(shape[j:]):
            return "row", math.prod(shape[j:])
        if not any(tail) and tuple(head) == layout.contiguous_strides(shape[:j]):
            return "col", math.prod(shape[j:])
    return None, 0


def _mid_kind(shape, strides):
    """(R, H * R) when an input of these strides is a MID broadcast: contiguous runs of R elements (the
    trailing dims), each repeated over H elements' worth of stride-0 middle dims, the runs one after
    another over the leading dims (cos [B, 1, S, D] against q [B, H, S, D]: R = S * D, H R = H * S * D;
    index (i // (H R)) * R + i % R); else None."""
    nd = len(shape)
    for k in range(nd - 1, 0, -1):
        if tuple(strides[k:]) != layout.contiguous_strides(shape[k:]):
            break
        run = math.prod(shape[k:])
        for j in range(k - 1, 0, -1):
            if strides[j] != 0:
                break
            if tuple(strides[:j]) == tuple(run * c for c in layout.contiguous_strides(shape[:j])):
                return run, math.prod(shape[j:])
    return None


def _mid2_kind(shape, strides):
    """("row", P, (R, H R)) when an input of these strides is constant over the leading dims and a MID
    broadcast over the trailing ones, of P elements (x [1, H, 1, D] against [B, H, S, D]: P = H S D, R = D,
    H R = S D; index mid(i % P)); ("col", C, (R, H R)) when constant over the trailing dims, of C elements,
    and a MID broadcast over the leading ones ([B, 1, S, 1]: C = D, R = S, H R = H S; index mid(i // C));
    else None. elementwise.comp's mid_pre: a ROW or COL step before the MID index, no general strided one."""
    nd = len(shape)
    for j in range(1, nd - 2):
        if not any(strides[:j]):
            runs = _mid_kind(shape[j:], strides[j:])
            if runs is not None:
                return "row", math.prod(shape[j:]), runs
    for j in range(nd - 1, 2, -1):
        if not any(strides[j:]):
            runs = _mid_kind(shape[:j], strides[:j])
            if runs is not None:
                return "col", math.prod(shape[j:]), runs
    return None


def _mid_words(run, period, n):
    """A MID input's stride words (elementwise.comp's mid_index): its run R, H R and their dividers for
    indices below n, as the signed ints the Params' int arrays hold."""
    words = (run, *divider(run, n), period, *divider(period, n))
    return tuple(w - (1 << 32) if w >= 1 << 31 else w for w in words)


def divider(d, n):
    """(magic, shift) with (i * magic) >> shift == i // d for every 0 <= i < n <= 2**31 (Granlund and
    Montgomery's round-up method; elementwise.comp's div_inner, copy_texels.comp's run_index): m = ceil(2**s / d),
    s = k + ceil(log2 d), k the bits of n - 1. (0, 1) for d = 0 (no ROW / COL input)."""
    if d == 0:
        return 0, 1
    s = max((n - 1).bit_length(), 1) + (d - 1).bit_length()
    return -(-(1 << s) // d), s


# -- arrays larger than one binding -----------------------------------------------------------------
# A launch binds each operand's whole slot, and one binding holds at most maxStorageBufferRange bytes.
# Bigger arrays (up to maxBufferSize) are reached through windows: `windowed(x)` is the same view
# rebased onto a Window of its buffer (runtime/memory.py) that covers just its byte span, with the
# element offset made relative to the window; `blocks` cuts the common index space of a launch's
# operands along leading axes until every operand's view fits a window; `spans` cuts one dimension for
# ops that cut several operands differently (matmul's M / N / K, take's indices). Ops then run their
# ordinary launch per block (elementwise, casts and copies in launch_strided, moves in launch_write /
# launch_remap) or call themselves per block and copy the block's result into place (`blockwise`,
# `rowwise` for row ops). The runtime refuses any other over-sized binding with a typed error
# (Context.launch).

def binding_limit():
    return runtime.get().device.limits.maxStorageBufferRange


def fits(*xs):
    """True when every array's buffer fits one binding (the common case: no windows needed)."""
    lim = binding_limit()
    return all(x.buffer.size <= lim for x in xs)


def windowed(x, lim=None):
    """x when its buffer fits one binding; else x rebased onto a Window over its byte span; None when
    even that span is larger than one binding."""
    lim = binding_limit() if lim is None else lim
    buf = x.buffer
    if buf.size <= lim:
        return x
    isz = x.dtype.itemsize
    lo = hi = x.offset
    for n, s in zip(x.shape, x.strides):
        if n == 0:
            lo = hi = x.offset
            break
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    w = buf.window(lo * isz, (hi + 1) * isz)
    if w.size > lim:
        return None
    shift = w.start - getattr(buf, "start", 0)
    return Array(w, x.shape, x.strides, x.offset - shift // isz, x.dtype)


def _sub(x, a, b):
    return Array(x.buffer, (b - a,) + x.shape[1:], x.strides, x.offset + a * x.strides[0], x.dtype)


def _at(x, i):
    return Array(x.buffer, x.shape[1:], x.strides[1:], x.offset + i * x.strides[0], x.dtype)


def blocks(views, lim=None, axes=None, op=None):
    """Windowed views of blocks of `views` (arrays whose first `axes` dims agree), cut along those
    leading axes so each fits one binding: yields lists of views, in order (an axis cut down to one
    index is dropped). axes (default all): how many leading axes may be cut (a row op keeps its last
    axis whole); a block that still does not fit is a typed error naming op and the limit."""
    lim = binding_limit() if lim is None else lim
    axes = len(views[0].shape) if axes is None else axes
    ws = [windowed(v, lim) for v in views]
    if all(w is not None for w in ws):
        yield ws
        return
    if axes <= 0 or not views[0].shape:
        big = max(views, key=lambda v: v.buffer.size)
        raise FuelVKMemoryError(
            f"{op or 'split'}: a block of shape {views[0].shape} ({big.dtype}, strides {big.strides}) spans "
            f"more bytes than one binding holds (maxStorageBufferRange = {lim} bytes) and cannot be split further")
    n = views[0].shape[0]
    if n == 1:
        yield from blocks([_at(v, 0) for v in views], lim, axes - 1, op)
        return
    per = max(abs(v.strides[0]) * v.dtype.itemsize for v in views)
    b = max(1, min((n + 1) // 2, (lim - 512) // per if per else n))
    for a in range(0, n, b):
        yield from blocks([_sub(v, a, min(a + b, n)) for v in views], lim, axes, op)


def tiles(views, lim=None, op=None, turns=0):
    """Like `blocks`, for launchers that take any view on every side (launch_write): when cutting the
    leading axis does not make every view fit (a transposed operand), the views' axes are rotated (the
    same for all: elements still correspond) and the next axis is cut too, so a transpose moves in a
    few 2-D tiles instead of one block per row."""
    lim = binding_limit() if lim is None else lim
    ws = [windowed(v, lim) for v in views]
    if all(w is not None for w in ws):
        yield ws
        return
    nd = len(views[0].shape)
    if turns >= nd:
        yield from blocks(views, lim, op=op)
        return
    n = views[0].shape[0]
    per = max(abs(v.strides[0]) * v.dtype.itemsize for v in views)
    b = min(n, max(1, (lim - 512) // per)) if per else n
    if b >= n:       # cutting this axis alone does not help: cut the next one
        rot = list(range(1, nd)) + [0]
        yield from tiles([v.transpose(rot) for v in views], lim, op, turns + 1)
        return
    for a in range(0, n, b):
        yield from tiles([_sub(v, a, min(a + b, n)) for v in views], lim, op, 0)


def spans(op, what, n, ok):
    """[(i0, i1)] covering range(n) in order, each with ok(i0, i1) (an operand block fits one binding):
    the widest power-of-two fraction of n that fits; blocks that do not (window alignment) are cut again."""
    size = n
    while size > 1 and not ok(0, size):
        size = -(-size // 2)
    if not ok(0, size):
        raise FuelVKMemoryError(f"{op}: one {what} is larger than one binding "
                                f"(maxStorageBufferRange = {binding_limit()} bytes)")
    out = []
    for i0 in range(0, n, size):
        i1 = min(i0 + size, n)
        if ok(i0, i1):
            out.append((i0, i1))
        else:
            out += [(i0 + j0, i0 + j1) for j0, j1 in spans(op, what, i1 - i0, lambda j0, j1: ok(i0 + j0, i0 + j1))]
    return out


def rowwise(op, fn, xs, tail=None, dtype=None):
    """A row op over arrays larger than one binding: fn(*blocks) on blocks of whole rows (the last axis)
    of xs (Arrays of one shape), each block's result (shape block rows + tail; tail defaults to the row,
    () for a per-row scalar) copied into one output of xs[0].shape[:-1] + tail. A single row larger
    than one binding is a typed error naming op."""
    shape = xs[0].shape
    cols = shape[-1]
    rows = math.prod(shape[:-1])
    tail = (cols,) if tail is None else tuple(tail)
    flat = [contiguous(x).reshape(rows, cols) for x in xs]
    out = new_like(shape[:-1] + tail, dtype or xs[0].dtype)
    o2 = Array(out.buffer, (rows,) + tail, layout.contiguous_strides((rows,) + tail), out.offset, out.dtype)
    blockwise(op, fn, flat, o2, axes=1)
    return out


def blockwise(op, fn, xs, out, axes):
    """out <- fn(*xs) computed per block: xs and the contiguous out are cut along their first `axes`
    axes (which they share) into blocks that fit one binding; fn(*blocks) returns the block's result,
    which is copied into out's block."""
    if out.size == 0:
        return
    copy = copy_variant(_dt.width_tag(out.dtype), runtime.get().device.features)
    for bw in blocks(list(xs) + [out], axes=axes, op=op):
        r = fn(*bw[:-1])
        launch_strided(copy, bw[-1], [r.reshape(bw[-1].shape)])


def new_like(shape, dtype):
    """A contiguous output (shape a tuple of ints, dtype a supported numpy dtype: no re-validation)."""
    buf = runtime.get().pool.alloc(max(math.prod(shape), 1) * dtype.itemsize)
    return Array(buf, shape, (1,) if len(shape) == 1 else layout.contiguous_strides(shape), 0, dtype)


def k_per_launch(k_loop, budget, align=1):
    """The longest K span one launch may sum within the device's loop budget, for a kernel whose
    K loop is k_loop = (K elements per step, loop iterations per step, iterations outside it);
    a multiple of `align` (and of the step), at least one step. None: no budget, no limit."""
    if budget is None:
        return None
    step, per_step, fixed = k_loop
    unit = step * align // math.gcd(step, align)
    return max(1, (budget - fixed) // per_step * step // unit) * unit


def split_k(op, out, K, per_launch, launch):
    """out = the sum over K of a contraction, run as launch(k0, k1, dst) per K span (dst: an Array the
    span's result is written to). One span (no budget, or K within it) writes `out` directly, with no
    extra dispatch. Longer K (a loop-capped device, Device.loop_budget): each span writes its own
    float32 partial, the partials are summed once and cast once to out's dtype, so f16 / bf16
    results round once, as an unsplit launch would. Returns the result Array (out, or the sum)."""
    if per_launch is None or K <= per_launch:
        launch(0, K, out)
        return out
    spans = [(k0, min(k0 + per_launch, K)) for k0 in range(0, K, per_launch)]
    nbytes = len(spans) * out.size * 4
    limit = runtime.get().device.limits.maxStorageBufferRange
    if nbytes > limit:
        raise FuelVKMemoryError(f"{op}: K={K} is summed in {len(spans)} spans of {per_launch} (the device's "
                                f"loop budget); their float32 partials of {out.shape} need {nbytes} bytes, "
                                f"more than one binding holds ({limit}); split the output")
    part = new_like((len(spans),) + out.shape, _dt.float32)
    for i, (k0, k1) in enumerate(spans):
        launch(k0, k1, part[i])
    total = part.sum(axis=0)
    return total if out.dtype == _dt.float32 else total.astype(out.dtype)
