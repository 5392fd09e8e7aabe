"""matmul with numpy semantics, and the route picker behind it.

numpy rules: 1-D operands get a dim prepended (a) / appended (b) that is removed from the result,
batch dims broadcast; `n_rep` adds GQA broadcasting (a's head dim -3 is n_rep times b's: head h
uses b's head h // n_rep, as repeat_interleave would give). Operands are read through their
strides and offsets (transposed, sliced, broadcast views are never copied).

dtypes (A x B -> C, accumulation always f32): f32 x f32 -> f32, f32 x bf16 -> f32 (bf16 weights),
f16 x f16 -> f16 | f32, bf16 x bf16 -> bf16 | f32 (out_dtype; default: the input dtype).

Routes (kernels/matmul.py ROUTES): M == 1 -> matvec (also N == 1 with equal dtypes, as the
transposed problem); cooperative matrix where the device has it and M, N, K are multiples of
its tile; on such devices the small scalar kernel for half types the coop tiles cannot take;
else on GPUs 1 < M < 32 -> register-tiled, M >= 32 -> shared-memory tiled, and on CPU devices
(lavapipe) register-tiled for every M > 1: there shared memory is plain memory reached through the
same per-lane load loops as buffers, and barriers are coroutine switches (docs/MEASUREMENTS.md:
the shared-memory kernel measured several times slower there at every M). A route whose pipeline exceeds the device
limits (FUELVK_LIMITS=small included: the tiled kernel's 16,640 B of shared memory, coop's 24 KiB)
is skipped (the register tile instead); available_routes() lists what remains. `route=` or
FUELVK_MATMUL_ROUTE forces one; a route the device, its limits or the shape cannot take raises a
typed error. matmul_route() runs the same picker.

The register tile's shape (rows, columns per lane, lane groups along N) comes from a cost model of
the shape and the device's parallel workgroups (_reg_tile). A launch with fewer workgroups than the
device runs at once and a long K (a small layer's weight gradient) sums K spans side by side in the
same launch, as an extra batch dim, into float32 partials added in a fixed order (_k_splits).

Load paths chosen per launch (specialization constants, same kernel): matvec and the register tile
read A along K (the register tile also along M: a transposed A, as in a weight gradient dY.T @ X) and
B along N (its rows) or along K (x @ W.T) as 16-byte texels of a storage texel
buffer view of the same buffer (4 f32 / 8 f16 or bf16 elements) when the unit stride, offset and
other strides keep every run whole texels; scalar loads through the strides otherwise. Both store C a
4-column quad (one 16- / 8-byte word) at a time when N % 4 == 0 (CV4), element by element otherwise.
"""
import math
import operator
import weakref
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import Array, zeros
from ..errors import DTypeError, FuelVKMemoryError, ShapeError, UnsupportedError
from ..kernels import VARIANTS, kernel
from ..runtime.pipelines import best_device_ms, cached_probe
from ..kernels import matmul as matmul_kernels
from ._core import binding_limit, blockwise, contiguous, spans, device_args, fits, k_per_launch, new_like, result, split_k
from ._core import windowed
from .casts import astype
from .movement import launch_write
from ._routes import forced_route

__all__ = ["matmul", "matmul_route"]

ENV = "FUELVK_MATMUL_ROUTE"
_TAG = {_dt.float32: "f32", _dt.float16: "f16", _dt.bfloat16: "bf16"}
ACCEPTED = "f32 x f32 -> f32, f32 x bf16 -> f32, f16 x f16 -> f16|f32, bf16 x bf16 -> bf16|f32"

Operand = namedtuple("Operand", "shape strides offset dtype")
Plan = namedtuple("Plan", "route combo out_shape out_dtype M N K batch_shape a b transposed")


def _operand(x):
    """Shape/strides/offset/dtype of an Array or of what asarray(x) would upload (no upload)."""
    if isinstance(x, Array):
        return Operand(x.shape, x.strides, x.offset, x.dtype)
    arr = np.asarray(x)
    try:
        dt = _dt.dtype(arr.dtype)
    except DTypeError as e:
        raise DTypeError(f"matmul: {e}") from None
    return Operand(arr.shape, layout.contiguous_strides(arr.shape), 0, dt)


def _combo(a_dt, b_dt, out_dtype):
    ta, tb = _TAG.get(a_dt), _TAG.get(b_dt)
    out = a_dt if out_dtype is None else _dt.dtype(out_dtype)
    if ta == tb == "f32" or (ta, tb) == ("f32", "bf16"):
        ok = out == _dt.float32
    else:
        ok = ta == tb and ta is not None and out in (a_dt, _dt.float32)
    if not ok:
        raise DTypeError(f"matmul: dtypes {a_dt} x {b_dt} -> {out} are not supported; accepted: {ACCEPTED}")
    return f"{ta}_{tb}_{_TAG[out]}", out


def _shapes(a, b, n_rep):
    """Per-operand (batch shape, batch strides, M/K or K/N strides) after numpy's 1-D and batch rules."""
    if not a.shape or not b.shape:
        raise ShapeError(f"matmul: operands must have at least 1 dim, got shapes {a.shape} and {b.shape}")
    a_shape, a_str = (a.shape, a.strides) if len(a.shape) > 1 else ((1,) + a.shape, (0,) + a.strides)
    b_shape, b_str = (b.shape, b.strides) if len(b.shape) > 1 else (b.shape + (1,), b.strides + (0,))
    M, Ka = a_shape[-2:]
    Kb, N = b_shape[-2:]
    if Ka != Kb:
        raise ShapeError(f"matmul: contracted dims differ: a {a.shape} has K={Ka}, b {b.shape} has K={Kb}")
    abat, abs_ = list(a_shape[:-2]), list(a_str[:-2])
    bbat, bbs = list(b_shape[:-2]), list(b_str[:-2])
    n_rep = operator.index(n_rep)
    if n_rep < 1:
        raise ShapeError(f"matmul: n_rep must be >= 1, got {n_rep}")
    if n_rep > 1:
        if not abat or not bbat or abat[-1] != n_rep * bbat[-1]:
            raise ShapeError(f"matmul: n_rep={n_rep} needs a.shape[-3] == n_rep * b.shape[-3], got shapes "
                             f"{a.shape} and {b.shape}")
        # a's head dim H = Hkv * n_rep splits into (Hkv, n_rep); b gets a broadcast n_rep dim.
        abat[-1:], abs_[-1:] = [bbat[-1], n_rep], [abs_[-1] * n_rep, abs_[-1]]
        bbat.append(1)
        bbs.append(0)
    batch = layout.broadcast_shapes("matmul", tuple(abat), tuple(bbat))
    sa_b = layout.broadcast_strides(tuple(abat), tuple(abs_), batch)
    sb_b = layout.broadcast_strides(tuple(bbat), tuple(bbs), batch)
    out_batch = batch
    if n_rep > 1:
        out_batch = batch[:-2] + (batch[-2] * n_rep,)
    out_shape = out_batch + ((M,) if len(a.shape) > 1 else ()) + ((N,) if len(b.shape) > 1 else ())
    return out_shape, M, N, Ka, batch, sa_b, sb_b, (a_str[-2], a_str[-1]), (b_str[-2], b_str[-1])


def _device():
    return runtime.get().device


def _over_limits(route, combo=None):
    """What the route's pipeline would exceed of the device limits (PipelineCache.over_limits);
    empty when it fits. Shared memory and workgroup size do not depend on the dtypes or the
    load-path constants, so one variant of the family answers for all."""
    fam = matmul_kernels.ROUTES[route]
    tag = combo if f"{fam}.{combo}" in VARIANTS else matmul_kernels.route_variant_tag(route)
    return runtime.get().pipelines.over_limits(kernel(fam, tag))


def available_routes():
    """Matmul routes this device runs: those its features allow and whose pipelines fit its limits
    (FUELVK_LIMITS included)."""
    return matmul_kernels.available_routes(_device().features, fits=lambda r: not _over_limits(r))


def _coop_ok(combo, M, N, K):
    t = matmul_kernels.COOP_TILE
    return combo in matmul_kernels.COOP_COMBOS and M % t == 0 and N % t == 0 and K % t == 0 and M >= t and N >= t


def _plan(a, b, out_dtype, n_rep, route):
    a, b = _operand(a), _operand(b)
    combo, out_dt = _combo(a.dtype, b.dtype, out_dtype)
    out_shape, M, N, K, batch, sa_b, sb_b, (sa_m, sa_k), (sb_k, sb_n) = _shapes(a, b, n_rep)
    dev = _device()
    same = combo.split("_")[0] == combo.split("_")[1]
    transposed = M != 1 and N == 1 and same
    forced = forced_route("matmul", route, ENV, tuple(matmul_kernels.ROUTES))
    if forced is None:
        has_coop = "coop" in matmul_kernels.available_routes(dev.features)
        half = combo.split("_")[0] in ("f16", "bf16")

        def fits(r):
            return not _over_limits(r, combo)
        if M == 1 or transposed:
            name = "matvec"
        elif has_coop and _coop_ok(combo, M, N, K) and fits("coop"):
            name = "coop"
        elif has_coop and half and fits("small"):
            name = "small"
        else:
            # CPU devices (lavapipe): shared memory is ordinary memory there, so staging slabs only adds
            # loads and stores; the register-tiled kernel stays faster for every M (measured). Devices
            # whose shared memory cannot hold the tiled kernel's slabs take the register tile too.
            big = M >= 32 and dev.device_type != "cpu" and fits("tiled")
            name = "tiled" if big else "register_tiled"
        transposed = transposed and name == "matvec"
    else:
        name = forced
        missing = [f for f in matmul_kernels.ROUTE_FEATURES.get(name, ()) if f not in dev.features]
        if missing:
            raise UnsupportedError(f"matmul: route {name!r} needs device features {missing}, which {dev.name} "
                                   f"lacks; routes here: {', '.join(matmul_kernels.available_routes(dev.features))}")
        over = _over_limits(name, combo)
        if over:
            raise UnsupportedError(f"matmul: route {name!r} does not fit {dev.name}'s limits: " + "; ".join(
                f"its {q} {v} exceed {lim_name} = {lim}" for q, v, lim_name, lim in over)
                + f"; routes here: {', '.join(available_routes())}")
        if name == "matvec" and M != 1 and not transposed:
            raise ShapeError(f"matmul: route 'matvec' needs M == 1 (or N == 1 with equal dtypes), got M={M} "
                             f"N={N} for shapes {a.shape} x {b.shape}")
        if name == "coop" and combo not in matmul_kernels.COOP_COMBOS:
            raise DTypeError(f"matmul: route 'coop' has no {combo} kernel; it takes {', '.join(matmul_kernels.COOP_COMBOS)}")
        if name == "coop" and not _coop_ok(combo, M, N, K):
            raise ShapeError(f"matmul: route 'coop' needs M, N, K multiples of {matmul_kernels.COOP_TILE} (M, N >= "
                             f"{matmul_kernels.COOP_TILE}), got M={M} N={N} K={K}")
        transposed = transposed and name == "matvec"
    ops = (tuple(batch), tuple(sa_b), tuple(sb_b), sa_m, sa_k, sb_k, sb_n)
    return Plan(name, combo, out_shape, out_dt, M, N, K, batch, (a, ops), b, transposed)


def matmul_route(a, b, out_dtype=None, *, n_rep=1, route=None):
    """The route matmul(a, b, ...) takes on this device ("matvec", "register_tiled", "tiled", "small",
    "coop"), with the same validation; nothing is uploaded or launched."""
    return _plan(a, b, out_dtype, n_rep, route).route


def _batch_chunks(batch, sa, sb, so):
    """Collapse batch dims (<= MAX_BATCH_DIMS per launch; more are looped over on the host)."""
    shape, (sa, sb, so) = layout.collapse(batch, sa, sb, so)
    nd = matmul_kernels.MAX_BATCH_DIMS
    if len(shape) <= nd:
        yield shape, sa, sb, 0, 0, 0
        return
    lead = shape[:-nd]
    for idx in np.ndindex(*lead):
        yield (shape[-nd:], sa[-nd:], sb[-nd:], sum(i * s for i, s in zip(idx, sa)),
               sum(i * s for i, s in zip(idx, sb)), sum(i * s for i, s in zip(idx, so)))


def _sg8(dev):
    s = dev.subgroup_size
    return 1 if s == 8 else (2 if s % 8 == 0 else 0)


def _reg_tile(M, N, lc, matvec=False, min_rows=1, batch=1, groups=1):
    """(rows TM, column groups TNV, 8-lane groups along N GN) per invocation / workgroup of the register
    tile, whose lanes own `lc` columns (one texel of B) per column group.

    matvec (one row, B [K, N]): 1 row, two column groups once N fills a workgroup (docs/MEASUREMENTS.md).
    Otherwise the candidate with the least modelled time: the launch's `batch` x tiles run in waves of
    `groups` workgroups at once (the device's parallel_groups), each wave as long as one tile's padded
    rows x columns times (1 + load cost per FMA): an A texel feeds 4 k x columns-per-lane FMAs and a B
    texel 4 k x TM, at REG_LOAD_COST FMAs a load. So small M x N take smaller tiles (more workgroups
    than cores: the Llama's 64-row products) and N that is no multiple of a wide tile (640) a narrower
    one instead of padded columns; large products keep the 32 x 8 tile (8 columns per lane at most,
    the register budget measured best). Ties: fewer workgroups. At least min_rows rows (a transposed
    A reads whole texels of rows)."""
    if matvec:
        return 1, 1 if N <= 64 * lc else matmul_kernels.REG_MATVEC_GROUPS, 8
    load = matmul_kernels.REG_LOAD_COST
    best = None
    for gn in matmul_kernels.REG_GN:
        for tnv in matmul_kernels.REG_TNV:
            c = lc * tnv
            if c > matmul_kernels.REG_LANE_TARGET and tnv > 1:
                continue
            cols = gn * 8 * c
            for tm in matmul_kernels.REG_TM[1:]:
                if tm < min_rows or tm * c > matmul_kernels.REG_MAX_ACC:
                    continue
                rows = (8 // gn) * tm
                tiles = -(-M // rows) * -(-N // cols) * batch
                cost = -(-tiles // groups) * rows * cols * (1 + load / (4 * c) + load / (4 * tm))
                if best is None or (cost, tiles) < best[0]:
                    best = (cost, tiles), (tm, tnv, gn)
    return best[1]


def _texel_ok(itemsize, offset, unit, *dims):
    """True when runs along the unit-stride dim can be read as whole 16-byte texels: unit stride, and
    every run start a multiple of the elements per texel: the offset and the stride of every other
    dim (extent, stride) that has more than one index."""
    per = matmul_kernels.TEXEL_BYTES // itemsize
    return unit == 1 and offset % per == 0 and all(s % per == 0 for n, s in dims if n > 1)


_stubs = weakref.WeakKeyDictionary()


def _texel_binding(pool, arr):
    """(buffer for a texel-view binding, whether the kernel may read it): the array's own slot, or a
    16-byte stub when the slot is over maxTexelBufferElements (the kernel then takes scalar loads)."""
    if arr.buffer.size // matmul_kernels.TEXEL_BYTES <= pool.device.limits.maxTexelBufferElements:
        return arr.buffer, True
    if pool not in _stubs:
        _stubs[pool] = pool.alloc(matmul_kernels.TEXEL_BYTES)
    return _stubs[pool], False


# Shared A loads (TEXA 3): whether the register tile's 8 lanes split each K step's A texels between them
# and hand the values out (share8) instead of every lane loading them all; a property of the device,
# measured once per A element width on one product (cached on disk like the load-path probe).
SHARE_PROBE_SHAPE = (128, 256, 512)   # M, N, K: a few workgroups of the 32-row tile, ~1 ms on lavapipe
SHARE_WINS = 0.9                      # shared chosen where it took <= 90% of the direct loads' time
SHARE_PROBE_VERSION = 1
_share = weakref.WeakKeyDictionary()


def _probe_share(ctx):
    """{"<width>_direct_ms", "<width>_shared_ms"}: best device ms of the probe product with A texels
    loaded by every lane and shared, for an f32 and a 16-bit (bf16) A."""
    M, N, K = SHARE_PROBE_SHAPE
    runs = {}
    for width, dt in (("f32", _dt.float32), ("half", _dt.bfloat16)):
        a, b = zeros((M, K), dt), zeros((K, N), dt)
        plan = _plan(a, b, None, 1, "register_tiled")
        out = new_like(plan.out_shape, plan.out_dtype)
        for name, share in (("direct", False), ("shared", True)):
            runs[f"{width}_{name}_ms"] = lambda plan=plan, a=a, b=b, out=out, share=share: _launch(plan, a, b, out, share)
    return best_device_ms(ctx, runs, 3)


def share_a(ctx, dtype):
    """Whether the register tile shares A's texels among its lanes for an A of this dtype on ctx's
    device: the probe's (_probe_share) choice, made once per device."""
    dev = ctx.device
    choice = _share.get(dev)
    if choice is None:
        with dev.lock:      # one probe per device, also when threads start their first matmuls together
            choice = _share.get(dev)
            if choice is None:
                rec = cached_probe(dev, "matmul_share_a", SHARE_PROBE_VERSION, lambda: _probe_share(ctx))
                choice = _share[dev] = {w: rec[f"{w}_shared_ms"] <= SHARE_WINS * rec[f"{w}_direct_ms"]
                                        for w in ("f32", "half")}
    return choice["f32" if dtype.itemsize == 4 else "half"]


def _launch(plan, a, b, out, share=None):
    """Record the launches of C = A @ B into `out`; returns the result Array (out, or the sum of K-span
    partials where K is longer than one launch may loop on this device: ops/_core.split_k). share:
    whether the register tile may share A's texels (TEXA 3); None: the device's measured choice."""
    ctx = runtime.get()
    dev = ctx.device
    batch, sa_b, sb_b, sa_m, sa_k, sb_k, sb_n = plan.a[1]
    M, N, K = plan.M, plan.N, plan.K
    if plan.transposed:  # C[m, 0] = sum_k B[k, 0] A[m, k]: matvec with x = B^T, matrix = A^T
        a, b = b, a
        sa_b, sb_b = sb_b, sa_b
        sa_m, sa_k, sb_k, sb_n = sb_n, sb_k, sa_k, sa_m
        M, N = 1, M
    so = layout.contiguous_strides(tuple(batch) + (M * N,))[:-1] if batch else ()
    route = plan.route
    sg8 = _sg8(dev)
    tm = tnv = ksplit = 0
    texels = {}
    if route in ("matvec", "register_tiled"):
        # matvec with B contiguous along K (x @ W.T): lanes split K; otherwise the register tile, 1 row.
        ksplit = int(route == "matvec" and sg8 != 0 and abs(sb_k) == 1 and abs(sb_n) != 1)
        lc = matmul_kernels.REG_LANE_COLS[plan.combo.split("_")[1]]
        per_a = matmul_kernels.TEXEL_BYTES // a.dtype.itemsize
        along_m = route == "register_tiled" and sa_m == 1 and sa_k != 1 and M % per_a == 0   # TEXA 2 candidate
        tm, tnv, gn = _reg_tile(1 if route == "matvec" else M, N, lc, matvec=route == "matvec",
                                min_rows=per_a if along_m else 1, batch=math.prod(batch),
                                groups=matmul_kernels.parallel_groups(dev))
        tiles = -(-N // matmul_kernels.MATVEC_KSPLIT_COLS) if ksplit else \
            -(-N // (gn * 8 * lc * tnv)) * -(-M // (tm * (8 // gn)))
        area = gn * 8 * lc * tnv * tm * (8 // gn)   # one workgroup's rows x columns
        (ta_buf, ta_ok), (tb_buf, tb_ok) = (_texel_binding(ctx.pool, x) for x in (a, b))
        texels = {"a_t": ta_buf, "b_t": tb_buf}
    else:
        bm, bn = {"tiled": matmul_kernels.TILED_BLOCK, "small": matmul_kernels.SMALL_BLOCK, "coop": matmul_kernels.COOP_BLOCK}[route]
        tiles = -(-N // bn) * -(-M // bm)
        area = bm * bn
    nd = matmul_kernels.MAX_BATCH_DIMS
    a_dt, b_dt, _ = plan.combo.split("_")

    def run(k0, k1, dst, splits=1):
        """Launch C[k0:k1 span] into dst; splits > 1: that many consecutive spans of k1 - k0 at once,
        as an outermost batch dim whose partials land in dst[0 .. splits - 1]."""
        nonlocal share
        variant = kernel(matmul_kernels.ROUTES[route], f"{a_dt}_{b_dt}_{_TAG[dst.dtype]}")
        bat, sab, sbb, sob = tuple(batch), tuple(sa_b), tuple(sb_b), tuple(so)
        if splits > 1:
            bat, sab, sbb = (splits,) + bat, ((k1 - k0) * sa_k,) + sab, ((k1 - k0) * sb_k,) + sbb
            sob = (math.prod(batch) * M * N,) + sob
        for shape, sa, sb, oa, ob, oc in _batch_chunks(bat, sab, sbb, sob):
            nb = math.prod(shape)
            pad = nd - len(shape)
            offa, offb = a.offset + oa + k0 * sa_k, b.offset + ob + k0 * sb_k
            if route == "coop":
                spec = {}
            elif tm:
                texa = int(ta_ok and _texel_ok(a.dtype.itemsize, offa, sa_k, (M, sa_m), *zip(shape, sa)))
                if not texa and ta_ok and along_m and tm % per_a == 0 and \
                        _texel_ok(a.dtype.itemsize, offa, sa_m, (k1 - k0, sa_k), *zip(shape, sa)):
                    texa = 2   # A transposed (a weight gradient's dY.T): texels along M
                along_k = tb_ok and _texel_ok(b.dtype.itemsize, offb, sb_k, (N, sb_n), *zip(shape, sb))
                along_n = tb_ok and not ksplit and N % lc == 0 and \
                    _texel_ok(b.dtype.itemsize, offb, sb_n, (k1 - k0, sb_k), *zip(shape, sb))
                texb = 1 if along_n else (2 if along_k else 0)
                if texa == 1 and route == "register_tiled" and sg8 and tm % per_a == 0:
                    if share is None:
                        share = share_a(ctx, a.dtype)
                    texa = 3 if share else 1
                cv4 = int(not ksplit and N % 4 == 0 and (dst.offset + oc) % 4 == 0)
                spec = {"SG8": sg8, "TM": tm, "KSPLIT": ksplit, "TNV": tnv, "TEXA": texa, "TEXB": texb, "GN": gn,
                        "CV4": cv4}
            else:
                spec = {"SG8": sg8}
            ctx.launch(variant, ctx.groups(tiles * nb), c=dst, a=a, b=b, **texels, M=M, N=N, K=k1 - k0, batch=nb,
                       off_a=offa, off_b=offb, off_c=dst.offset + oc, sa_m=sa_m, sa_k=sa_k, sb_k=sb_k, sb_n=sb_n,
                       bshape=[1] * pad + list(shape), sa_batch=[0] * pad + list(sa),
                       sb_batch=[0] * pad + list(sb), **spec)

    k_loop = matmul_kernels.K_LOOP["matvec_ksplit" if ksplit else route]
    align = matmul_kernels.K_SPAN_ALIGN
    if route == "coop":
        align = math.lcm(align, matmul_kernels.COOP_TILE)
    budget = k_per_launch(k_loop, dev.loop_budget, align)
    # (no split past the kernel's batch dims: the host would loop over the spans one launch each)
    splits = 1
    if route != "matvec" and len(batch) < matmul_kernels.MAX_BATCH_DIMS:
        splits = _k_splits(tiles * math.prod(batch), min(area, M * N) * K, K, matmul_kernels.parallel_groups(dev))
    if splits == 1:
        return split_k("matmul", out, K, budget, run)
    span = -(-K // splits)
    span = -(-span // align) * align
    if budget is not None:
        span = min(span, budget)
    full, rem = divmod(K, span)
    part = new_like((full + (rem > 0),) + out.shape, _dt.float32)
    run(0, span, part, splits=full)
    if rem:
        run(full * span, K, part[full])
    total = part.sum(axis=0)
    return total if out.dtype == _dt.float32 else total.astype(out.dtype)


def _k_splits(workgroups, work, K, groups):
    """K spans to run side by side (1: none): enough to give the device's `groups` parallel workgroups
    work when the launch has fewer and each has `work` >= KSPLIT_MIN_WORK multiply-adds over the
    product's own (not padded) rows x columns (small M x N, long K: a weight gradient over many
    tokens), each span at least KSPLIT_MIN_K deep."""
    if workgroups >= groups or work < matmul_kernels.KSPLIT_MIN_WORK:
        return 1
    n = min(-(-groups // workgroups), K // matmul_kernels.KSPLIT_MIN_K)
    return n if n >= 2 else 1


def matmul(a, b, out_dtype=None, *, n_rep=1, route=None):
    """numpy.matmul(a, b) on the device (see the module docstring for dtypes, n_rep and routes)."""
    plan = _plan(a, b, out_dtype, n_rep, route)
    try:
        (a_arr, b_arr), numpy_out = device_args("matmul", a, b)
    except FuelVKMemoryError as e:
        raise FuelVKMemoryError(f"matmul: an operand does not fit one binding: {e}") from None
    if math.prod(plan.out_shape) == 0 or plan.K == 0:
        out = zeros(plan.out_shape, plan.out_dtype)   # empty, or K == 0: a sum of nothing
        return result(out, numpy_out)
    out = new_like(plan.out_shape, plan.out_dtype)
    if not fits(a_arr, b_arr, out):
        _matmul_blocks(a_arr, b_arr, out, plan, n_rep, route)
        return result(out, numpy_out)
    out = _launch(plan, a_arr, b_arr, out)
    return result(out, numpy_out)


def _matmul_blocks(a, b, out, plan, n_rep, route):
    """out = a @ b for operands or a result larger than one binding (e.g. x @ W.T with W [28672, 4096]
    f32, 448 MiB): cut A and the result by rows (M), B and the result by columns (N), and K into
    spans when one row of A or column of B is itself larger than a binding (float32 partials, summed,
    rounded once). Each block is an ordinary matmul on windows; its result is written into out's block.
    Batch dims are folded into M when A's leading dims reshape without a copy and B is one matrix."""
    out_dtype = plan.out_dtype
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    if n_rep != 1:
        raise FuelVKMemoryError(f"matmul: GQA (n_rep={n_rep}) operands larger than one binding (a {a.shape}, "
                                f"b {b.shape}) are not split (maxStorageBufferRange = {binding_limit()} bytes); "
                                "loop over the kv heads")
    if b2.ndim != 2:   # B batched: blocks of batch entries, or one entry at a time (split by M / N / K)
        batch = plan.out_shape[:len(plan.out_shape) - (a.ndim > 1) - 1]
        a3 = a2.broadcast_to(batch + a2.shape[-2:])
        b3 = b2.broadcast_to(batch + b2.shape[-2:])
        o3 = out.reshape(batch + (a3.shape[-2], b3.shape[-1]))
        first = (0,) * len(batch)
        if all(windowed(x[first]) is not None for x in (a3, b3, o3)):
            blockwise("matmul", lambda x, y: matmul(x, y, out_dtype, route=route), [a3, b3], o3, axes=len(batch))
        else:
            for idx in np.ndindex(*batch):
                launch_write(kernel("write_slice", _dt.width_tag(out_dtype)), o3[idx],
                             matmul(a3[idx], b3[idx], out_dtype, route=route))
        return
    K = a2.shape[-1]
    lead = a2.shape[:-1]
    st = layout.reshape_strides(a2.shape, a2.strides, (math.prod(lead), K))
    if st is None:
        a2 = contiguous(a2)
        st = layout.contiguous_strides((math.prod(lead), K))
    a2 = Array(a2.buffer, (math.prod(lead), K), tuple(st), a2.offset, a2.dtype)
    M, N = a2.shape[0], b2.shape[1]
    o2 = Array(out.buffer, (M, N), (N, 1), out.offset, out.dtype)
    fit = lambda v: windowed(v) is not None   # noqa: E731
    k_spans = spans("matmul", "K span", K, lambda k0, k1: fit(a2[0:1, k0:k1]) and fit(b2[k0:k1, 0:1]))
    if len(k_spans) > 1:
        total = None
        for k0, k1 in k_spans:
            part = new_like((M, N), _dt.float32)
            _matmul_blocks(a2[:, k0:k1], b2[k0:k1], part, plan._replace(out_dtype=_dt.float32), 1, route)
            total = part if total is None else total + part
        r = total if out_dtype == _dt.float32 else astype(total, out_dtype)
        blockwise("matmul", lambda x: x, [r], o2, axes=2)
        return
    n_spans = spans("matmul", "column of B", N, lambda n0, n1: fit(b2[:, n0:n1]) and fit(o2[0:1, n0:n1]))
    m_spans = spans("matmul", "row of A", M, lambda m0, m1: fit(a2[m0:m1])
                      and all(fit(o2[m0:m1, n0:n1]) for n0, n1 in n_spans))
    for m0, m1 in m_spans:
        aw = windowed(a2[m0:m1])
        for n0, n1 in n_spans:
            r = matmul(aw, windowed(b2[:, n0:n1]), out_dtype, route=route)
            ow = windowed(o2[m0:m1, n0:n1])
            launch_write(kernel("write_slice", _dt.width_tag(out_dtype)), ow, r)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, broadcast as _broadcast, declare


def _matmul_rule(a, b, out_dtype=None, *, n_rep=1, route=None):
    """numpy's matmul shape (1-d operands promoted, then their dim dropped; batch dims broadcast; n_rep
    repeats b's head dim, the third from last); dtype: out_dtype, else a's where a and b agree, else float32."""
    a2 = tuple(a.shape) if a.ndim > 1 else (1,) + tuple(a.shape)
    b2 = tuple(b.shape) if b.ndim > 1 else tuple(b.shape) + (1,)
    bb = list(b2[:-2])
    if n_rep > 1:
        bb[-1] *= n_rep
    shape = list(_broadcast(a2[:-2], bb)) + ([a2[-2]] if a.ndim > 1 else []) + ([b2[-1]] if b.ndim > 1 else [])
    dt = _dt.dtype(out_dtype) if out_dtype is not None else (
        np.dtype(a.dtype) if np.dtype(a.dtype) == np.dtype(b.dtype) else _dt.float32)
    return Meta(tuple(shape), dt)


def _np_matmul(a, b, out_dtype=None, n_rep=1):
    if n_rep != 1:
        raise NotImplementedError("numpy reference has no n_rep (GQA broadcast)")
    return np.matmul(a, b)


def _torch_matmul(a, b, out_dtype=None, n_rep=1):
    import torch
    if n_rep != 1:
        raise NotImplementedError("torch reference has no n_rep (GQA broadcast)")
    if a.dtype != b.dtype:                # torch needs one dtype; promote like fuelvk's result
        a, b = a.float(), b.float()
    return torch.matmul(a, b)


declare(OpDef("matmul", matmul, _matmul_rule, numpy=_np_matmul, torch=_torch_matmul, reference=("", """\
if n_rep > 1:   # GQA broadcast: b's last batch axis (heads) repeats n_rep times
    b = b.repeat_interleave(n_rep, dim=-3)
output = torch.matmul(a, b)"""), grad="matmul", route="matmul_route", schema="(Tensor a, Tensor b) -> Tensor",
    export={"var_dims": ("M",)}))
