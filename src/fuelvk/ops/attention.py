"""Scaled-dot-product attention (torch SDPA layout), forward with two routes and the backward.

Layout: torch SDPA's, q [..., Hq, Sq, D], k / v [..., Hkv, Sk, D] of any rank >= 3 (3-d [B, S, D] is
one head per batch entry); leading dims broadcast as torch's matmul does and flatten into one batch
dim B (views where the strides allow); Hq a multiple of Hkv (GQA: query head h reads kv head
h // (Hq // Hkv)). D <= 256, v has the head dim of k. The backward takes equal leading dims.

Semantics (flash-attn's, so models ported from it keep their numbers):
  s = scale * q.k (scale defaults to 1/sqrt(D); any finite scale, 0 and negative included, as torch's);
  softcap c > 0: s = c * tanh(s / c);
  ALiBi slopes [Hq] or [B, Hq]: s -= slope * |j - i - (Sk - Sq)|;
  window (left, right): query i sees key j iff -left <= j - i - (Sk - Sq) <= right (-1 = unbounded);
  is_causal: query i sees key j <= i, aligned top-left as torch's (causal_alignment="top_left", the
  default), or j <= i + Sk - Sq, aligned bottom-right as flash-attn's and FlashInfer's
  (causal_alignment="bottom_right": the last query row sees every key); identical when Sq == Sk.
  attn_mask (torch's): bool (True = attend) or an additive float mask, broadcastable to
  [..., Hq, Sq, Sk]. A row that sees no key gives zeros and lse = -inf (torch's math SDPA gives
  zeros for such rows too). lse is the natural-log log-sum-exp of the visible logits (mask added),
  float32 [..., Hq, Sq].

Routes: "single" (flash_attn_*: one workgroup per query row, the score row in shared memory,
Sk <= 4096), "tiled" (flash_attention*: FlashAttention-2, no Sk limit) and "decode" (flash_decode_*:
flash-decoding, row blocks of up to 16 of the G * Sq query rows of a kv head (4 on a CPU device); the
keys split over more workgroups, decode_splits, each writing partial (max, sum, acc) that
flash_decode_combine merges exactly with a log-sum-exp; K / V read in 16-byte chunks, through texel
views where the device's load-path probe picks them; see _decode); "math" (composed of device
ops: f32 scores [B, Hq, Sq, Sk], mask, softmax, @ v) takes what the fused kernels cannot express: an
attn_mask, or a top-left causal mask with Sq < Sk (Sq > Sk is the kernels' band with right = Sq - Sk);
it is chosen, never forced, and takes no window / ALiBi / softcap. The picker takes decode when
each kv head has at most 16 query rows (lavapipe, q 1x32x1x128, k 1x8x512x128 f32, CPU time per call:
tiled 24.8 ms, decode 2.5-2.9 ms; q 1x8x1x128, k 1x8x4096x128: single 95 ms, decode 11.7 ms) and for
any row count on a CPU device (prefill 4-7x faster than tiled there: kernels/attention.py,
CPU_DECODE_ROWS), else the tiled kernel (the single pass where only it fits); FUELVK_ATTENTION_ROUTE or route= forces one
(auto/single/tiled/decode);
attention_route() says which a call takes. On lavapipe, whose loops silently stop after ~65535
iterations per invocation (Device.loop_budget), long key ranges (tiled forward, dQ) and long
query ranges (dK, dV) are split over several launches that carry or accumulate their state.
"""
import math

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray, zeros
from ..errors import DTypeError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.attention import (
    D_MAX,
    DECODE_CHUNKS,
    DECODE_TEXELS,
    FLAGS,
    SINGLE_SK_MAX,
    SKMAX_BUCKETS,
    TILED_BR_MAX,
    bwd_span_per_launch,
    decode_config,
    decode_shared_bytes,
    decode_splits,
    decode_target,
    single_shared_bytes,
    tiled_config,
    tiled_keys_per_launch,
    tiled_shared_bytes,
)
from ._core import contiguous, device_args, fits, new_like, result, spans, windowed
from ._routes import forced_route
from .movement import launch_write
from .reduction import texel_views

__all__ = ["attention_route", "scaled_dot_product_attention", "scaled_dot_product_attention_backward"]

ROUTES = ("single", "tiled", "decode")
ALIGNMENTS = ("top_left", "bottom_right")
ENV = "FUELVK_ATTENTION_ROUTE"
FWD_DTYPES = (_dt.float32, _dt.float16, _dt.bfloat16)
FAMILY = {"single": "flash_attn", "tiled": "flash_attention", "decode": "flash_decode"}
# Without the decode route (a forced route, or shared memory too small for it): the single pass is only
# competitive while each kv head has one query row (G * Sq = 1), where the tiled kernel's rows cannot
# share a K/V read; from two rows on the tiled kernel wins (docs/MEASUREMENTS.md).
SINGLE_MAX_ROWS = 1
# flash_decode's TEX_P scratch (a score-tile slice per workgroup) is bounded: a long prefill on the decode
# route (a CPU device's) has many row blocks; past this size the score tile stays in shared memory.
DECODE_SCRATCH_BYTES = 16 << 20


def _shape_of(x):
    return tuple(x) if isinstance(x, (tuple, list)) else tuple(np.shape(x)) if not isinstance(x, Array) else x.shape


def _check_shapes(op, qs, ks, vs=None):
    if len(qs) != 4 or len(ks) != 4 or (vs is not None and len(vs) != 4):
        raise ShapeError(f"{op}: q, k, v must be 4-d [B, H, S, D]; got q{qs}, k{ks}" + (f", v{vs}" if vs else ""))
    if vs is not None and tuple(vs) != tuple(ks):
        raise ShapeError(f"{op}: k and v must have the same shape [B, Hkv, Sk, D]; got k{ks}, v{vs}")
    B, Hq, Sq, D = qs
    if ks[0] != B or ks[3] != D:
        raise ShapeError(f"{op}: q{qs} and k{ks} must share batch and head dim (q [B, Hq, Sq, D], k [B, Hkv, Sk, D])")
    Hkv = ks[1]
    if (Hkv == 0) != (Hq == 0) or (Hkv and Hq % Hkv):
        raise ShapeError(f"{op}: query heads Hq={Hq} must be a multiple of kv heads Hkv={Hkv} (GQA); "
                         f"q{qs}, k{ks}")
    if not 1 <= D <= D_MAX:
        raise ShapeError(f"{op}: head dim D={D} is not supported; accepted: 1 <= D <= {D_MAX} (q{qs})")
    return B, Hq, Hkv, Sq, ks[2], D


def _alignment(op, causal_alignment):
    if causal_alignment not in ALIGNMENTS:
        raise UnsupportedError(f"{op}: causal_alignment must be one of {', '.join(ALIGNMENTS)}; "
                               f"got {causal_alignment!r}")
    return causal_alignment


def _causal_right(align, Sq, Sk):
    """The kernels' right window bound of a causal mask (key j <= i + right + Sk - Sq): 0 bottom-right,
    Sq - Sk top-left; None where the kernels cannot express it (top-left with Sq < Sk: a negative
    bound reads as unbounded)."""
    if align == "bottom_right" or Sq == 0:
        return 0
    return Sq - Sk if Sq >= Sk else None


class _Layout:
    """How a call's q, k[, v] of torch's layout map onto the kernels' [B, H, S, D]: each operand is
    padded with leading 1s to rank R = max(4, rank), its leading dims (before [H, S, D]) broadcast as
    torch's matmul does and flattened into B; one query head broadcasts over the kv heads.
    Fields: shapes4 ([B, H, S, D] per operand), targets (each operand's broadcast R-d shape), padded
    (each operand's R-d shape before broadcasting), lead (the broadcast leading dims), batch (the
    caller's batch dims of the output, before [Sq, D]: lead + (Hq,) less the padding)."""

    def __init__(self, op, shapes):
        shapes = [tuple(s) for s in shapes]
        names = ", ".join(f"{n}{s}" for n, s in zip("qkv", shapes))
        if min(len(s) for s in shapes) < 3:
            raise ShapeError(f"{op}: q, k, v must be [..., H, S, D] or 3-d [B, S, D]; got {names}")
        nd = max(len(s) for s in shapes)
        R = max(4, nd)
        self.padded = [(1,) * (R - len(s)) + s for s in shapes]
        try:
            self.lead = tuple(np.broadcast_shapes(*(p[:-3] for p in self.padded)))
        except ValueError:
            raise ShapeError(f"{op}: the leading (batch) dims of q, k, v must broadcast (torch's rule); "
                             f"got {names}") from None
        hq, hk = self.padded[0][-3], self.padded[1][-3]
        hq = hk if hq == 1 else hq                  # one query head broadcasts over the kv heads
        heads = [hq] + [p[-3] for p in self.padded[1:]]
        self.targets = [self.lead + (h,) + p[-2:] for h, p in zip(heads, self.padded)]
        self.shapes4 = [(math.prod(self.lead),) + t[-3:] for t in self.targets]
        self.batch = (self.lead + (hq,))[R - nd:]

    def views(self, xs):
        """The device arrays xs as [B, H, S, D] (views where the strides allow, numpy's reshape rule)."""
        out = []
        for x, p, t, s4 in zip(xs, self.padded, self.targets, self.shapes4):
            x = x if x.shape == p else x.reshape(p)
            x = x if x.shape == t else x.broadcast_to(t)
            out.append(_as4(x, s4))
        return out


def _as4(x, shape4):
    """x as its [B, H, S, D] form (a view where the strides allow, numpy's reshape rule)."""
    return x if x.shape == tuple(shape4) else x.reshape(shape4)


def _options(op, D, is_causal, scale, window, softcap, causal_right=0):
    """(scale, cap, wl, wr) as the kernels take them, after validating the user's values."""
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    # torch's contract: any finite scale, zero (uniform weights) and negative included
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)) \
            or not math.isfinite(scale):
        raise ShapeError(f"{op}: scale must be a finite number (any sign, 0 included) or None (1/sqrt(D)), "
                         f"got {scale!r}")
    if window is None:
        window = (-1, -1)
    try:
        wl, wr = (int(w) for w in window)
        ok = all(int(w) == w for w in window) and wl >= -1 and wr >= -1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ShapeError(f"{op}: window must be (left, right) ints >= -1 (-1 = unbounded), got {window!r}")
    if is_causal:
        wr = causal_right if wr < 0 else min(wr, causal_right)
    cap = 0.0
    if softcap is not None and softcap != 0:
        if not isinstance(softcap, (int, float, np.floating, np.integer)) or not (math.isfinite(softcap) and softcap > 0):
            raise ShapeError(f"{op}: softcap must be a positive finite number or None, got {softcap!r}")
        cap = float(softcap)
    big = 2**31 - 1
    return float(scale), cap, min(wl, big), min(wr, big)


def _slopes(op, alibi_slopes, B, Hq):
    """(Array of f32 slopes or None, batch stride): [Hq] or [B, Hq], any float dtype."""
    if alibi_slopes is None:
        return None, 0
    shp = alibi_slopes.shape if isinstance(alibi_slopes, Array) else np.shape(alibi_slopes)
    if shp not in ((Hq,), (B, Hq)):
        raise ShapeError(f"{op}: alibi_slopes must have shape [Hq]=({Hq},) or [B, Hq]=({B}, {Hq}); got {shp}")
    if isinstance(alibi_slopes, Array) and (alibi_slopes.dtype != _dt.float32 or not alibi_slopes.is_contiguous):
        alibi_slopes = alibi_slopes.numpy()
    if not isinstance(alibi_slopes, Array):
        host = np.asarray(alibi_slopes)
        if host.dtype.kind not in "fiu":
            raise DTypeError(f"{op}: alibi_slopes must be real numbers, got dtype {host.dtype}")
        alibi_slopes = asarray(np.ascontiguousarray(host, dtype=np.float32))
    return alibi_slopes, (Hq if len(shp) == 2 else 0)


def _view_strides(x):
    """(b, h, s) strides of a [B, H, S, D] view the forward kernels take as is, else None."""
    if x.size == 0:
        return (0, 0, 0)
    st = [0 if n == 1 else s for n, s in zip(x.shape, x.strides)]
    if (x.shape[3] != 1 and st[3] != 1) or any(s < 0 for s in st):
        return None
    return tuple(st[:3])


def _pick(op, Sq, Sk, D, G, route):
    """The forward route a call takes (see the module docstring)."""
    want = forced_route(op, route, ENV, ROUTES) or "auto"
    ctx = runtime.get()
    shared = ctx.device.limits.maxComputeSharedMemorySize
    tiled_ok = tiled_config(D, G * Sq, shared) is not None
    single_ok = Sk <= SINGLE_SK_MAX and single_shared_bytes(D, _skmax(Sk)) <= shared
    cpu = ctx.device.device_type == "cpu"
    cfg = decode_config(D, G * Sq, shared, ctx.device.device_type)
    # flash_decode takes any number of rows (row blocks of BR); auto picks it for at most TILED_BR_MAX rows
    # per kv head, and for every row count on a CPU device (CPU_DECODE_ROWS in kernels/attention.py)
    decode_ok = cfg is not None and decode_shared_bytes(D, *cfg) <= shared
    if want == "single" and Sk > SINGLE_SK_MAX:
        raise ShapeError(f"{op}: route 'single' (flash_attn_*) takes Sk <= {SINGLE_SK_MAX} keys; got Sk={Sk}, "
                         f"D={D}; use route='tiled'")
    if want == "single" and not single_ok:   # a device limit, not the shape: as the pipeline check says it
        raise UnsupportedError(f"{op}: route 'single' needs {single_shared_bytes(D, _skmax(Sk))} B of shared "
                               f"memory for Sk={Sk}, D={D}, more than maxComputeSharedMemorySize = {shared} on "
                               f"{ctx.device.name}; use route='tiled'")
    if want == "tiled" and not tiled_ok:
        raise UnsupportedError(f"{op}: route 'tiled' needs {tiled_shared_bytes(D, 1, 64)} B of shared memory for "
                               f"D={D}, more than maxComputeSharedMemorySize = {shared} on {ctx.device.name}")
    if want == "decode" and not decode_ok:
        raise UnsupportedError(f"{op}: route 'decode' needs {decode_shared_bytes(D, 1, 64)} B of shared memory "
                               f"for D={D}, more than maxComputeSharedMemorySize = {shared} on {ctx.device.name}; "
                               "use route='tiled'")
    if want != "auto":
        return want
    if decode_ok and (G * Sq <= TILED_BR_MAX or cpu):
        return "decode"
    if single_ok and (G * Sq <= SINGLE_MAX_ROWS or not tiled_ok):
        return "single"
    if tiled_ok:
        return "tiled"
    raise UnsupportedError(f"{op}: no attention route fits D={D}, Sk={Sk} in {shared} B of shared memory")


def _sg8(ctx):
    """SG8 of shaders/attention.comp (bcast8): 1 subgroups of 8, 2 a multiple of 8, 0 other."""
    sg = ctx.device.subgroup_size
    return 1 if sg == 8 else 2 if sg % 8 == 0 else 0


def _spans(n, per):
    """[jb, je) ranges of at most per items covering range(n) (one range when per is None)."""
    if per is None or n <= per:
        return [(0, n)]
    return [(b, min(b + per, n)) for b in range(0, n, per)]


def _strides(name, st):
    """The forward Params' (b, h, s) element strides of operand `name`: q_b, q_h, q_s for "q"."""
    return {f"{name}_b": st[0], f"{name}_h": st[1], f"{name}_s": st[2]}


def _skmax(Sk):
    return next((b for b in SKMAX_BUCKETS if Sk <= b), SINGLE_SK_MAX)


def _needs_math(attn_mask, is_causal, align, Sq, Sk):
    return attn_mask is not None or (is_causal and _causal_right(align, Sq, Sk) is None)


def attention_route(q, k, *, attn_mask=None, is_causal=False, causal_alignment="top_left", route=None):
    """The forward route ("single", "tiled", "decode" or "math") scaled_dot_product_attention takes for these
    shapes (q, k: arrays or shape tuples) and options, honouring route= and FUELVK_ATTENTION_ROUTE."""
    op = "attention_route"
    qs, ks = _Layout(op, [_shape_of(q), _shape_of(k)]).shapes4
    _, Hq, Hkv, Sq, Sk, D = _check_shapes(op, qs, ks)
    if _needs_math(attn_mask, is_causal, _alignment(op, causal_alignment), Sq, Sk):
        return _math_route(op, route)
    return _pick(op, Sq, Sk, D, Hq // max(Hkv, 1), route)


def _math_route(op, route):
    """"math" unless a fused route is forced (it cannot express the mask: a typed error)."""
    want = forced_route(op, route, ENV, ROUTES)
    if want is not None:
        raise UnsupportedError(f"{op}: route {want!r} takes no attn_mask and no top-left causal mask with "
                               f"Sq < Sk; such calls take the math path (leave route= / {ENV} on auto)")
    return "math"


def _check_dtypes(op, names, arrays, accepted):
    dts = {a.dtype for a in arrays}
    given = ", ".join(f"{n}={a.dtype}" for n, a in zip(names, arrays))
    if len(dts) != 1:
        raise DTypeError(f"{op}: {', '.join(names)} must share one dtype; got {given}")
    dt = dts.pop()
    if dt not in accepted:
        raise DTypeError(f"{op}: dtype {dt} is not supported; accepted: {', '.join(str(a) for a in accepted)}")
    return dt


def scaled_dot_product_attention(q, k, v, *, attn_mask=None, is_causal=False, causal_alignment="top_left",
                                 scale=None, window=(-1, -1), alibi_slopes=None, softcap=None, return_lse=False,
                                 route=None):
    """softmax(mask(softcap(scale * q k^T) + alibi)) v, see the module docstring for every option.

    torch's contract: q [..., Hq, Sq, D] or [B, Sq, D]; attn_mask bool (True = attend) or additive,
    broadcastable to [..., Hq, Sq, Sk]; is_causal aligned top-left (causal_alignment="bottom_right":
    flash-attn's / FlashInfer's). Returns o [..., Hq, Sq, D] (dtype of q), and lse [..., Hq, Sq]
    float32 with return_lse=True. f32 / f16 / bf16, accumulation in f32. q, k, v may be any views
    with unit stride along D.
    """
    op = "scaled_dot_product_attention"
    align = _alignment(op, causal_alignment)
    lay = _Layout(op, [_shape_of(q), _shape_of(k), _shape_of(v)])
    B, Hq, Hkv, Sq, Sk, D = _check_shapes(op, *lay.shapes4)
    (q, k, v), numpy_out = device_args(op, q, k, v)
    q, k, v = lay.views((q, k, v))
    if _needs_math(attn_mask, is_causal, align, Sq, Sk):
        _math_route(op, route)
        _check_dtypes(op, ("q", "k", "v"), (q, k, v), FWD_DTYPES)
        if tuple(window if window is not None else (-1, -1)) != (-1, -1) or alibi_slopes is not None or softcap:
            raise UnsupportedError(f"{op}: window, alibi_slopes and softcap are fused-kernel options; they "
                                   "do not combine with attn_mask or a top-left causal mask with Sq < Sk")
        scale = _options(op, D, False, scale, window, softcap)[0]
        mask = None if attn_mask is None else _mask4(op, attn_mask, lay, B, Hq, Sq, Sk)
        o, lse = _math(op, q, k, v, mask, is_causal, scale)
    else:
        o, lse = _fused(op, q, k, v, is_causal, scale, window, alibi_slopes, softcap, route,
                        _causal_right(align, Sq, Sk))
    o = o.reshape(lay.batch + o.shape[2:])
    lse = lse.reshape(lay.batch + lse.shape[2:])
    return result((o, lse) if return_lse else o, numpy_out)


def _mask4(op, mask, lay, B, Hq, Sq, Sk):
    """attn_mask as a [B or 1, Hq or 1, Sq or 1, Sk or 1] device array broadcasting against the scores
    (a view unless the caller's leading dims broadcast partly)."""
    full = lay.batch + (Sq, Sk)
    if not isinstance(mask, Array):
        host = np.asarray(mask)
        if host.dtype == np.float64:
            host = host.astype(np.float32)
        mask = asarray(np.ascontiguousarray(host))
    if mask.dtype != _dt.bool_ and mask.dtype not in FWD_DTYPES:
        raise DTypeError(f"{op}: attn_mask must be bool (True = attend) or an additive float mask "
                         f"(float32 / float16 / bfloat16); got dtype {mask.dtype}")
    try:
        ok = mask.ndim <= len(full) and np.broadcast_shapes(mask.shape, full) == full
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"{op}: attn_mask{mask.shape} must broadcast to [..., Hq, Sq, Sk] = {full}")
    lead = lay.lead
    n = len(lead)
    m = mask.reshape((1,) * (n + 3 - mask.ndim) + mask.shape)
    if m.shape[:n] == (1,) * n:
        return m.reshape((1,) + m.shape[n:])
    return m.broadcast_to(lead + m.shape[n:]).reshape((B,) + m.shape[n:])


def _math(op, q, k, v, mask, causal, scale):
    """(o, lse) of [B, H, S, D] q, k, v by device ops in float32: s = scale q k^T (GQA by grouping the
    query heads of each kv head), masked, softmax with fully masked rows giving zeros and lse = -inf."""
    from ..api.creation import arange, full
    from .casts import astype
    from .elementwise import exp, log
    from .matmul import matmul
    from .movement import where
    from .reduction import max as amax
    from .reduction import sum as asum
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    dt = q.dtype
    if B * Hq * Sq == 0 or Sk == 0:
        return zeros((B, Hq, Sq, D), dt), full((B, Hq, Sq), -np.inf, dtype=_dt.float32)
    f32 = [x if x.dtype == _dt.float32 else astype(x, _dt.float32) for x in (q, k, v)]
    qg = f32[0].reshape(B, Hkv, (Hq // Hkv) * Sq, D)          # query heads of kv head h, one after another
    s = matmul(qg, f32[1].mT).reshape(B, Hq, Sq, Sk) * scale
    neg = -np.inf
    if mask is not None:
        s = where(mask, s, neg) if mask.dtype == _dt.bool_ else s + astype(mask, _dt.float32)
    if causal:
        seen = arange(Sk, dtype=_dt.int32).reshape(1, Sk) <= arange(Sq, dtype=_dt.int32).reshape(Sq, 1)
        s = where(seen, s, neg)
    m = amax(s, axis=-1, keepdims=True)
    m = where(m == neg, 0.0, m)                                  # a row that sees no key: exp(-inf) = 0
    p = exp(s - m)
    l_ = asum(p, axis=-1, keepdims=True)
    p = p / where(l_ > 0, l_, 1.0)
    o = matmul(p.reshape(B, Hkv, (Hq // Hkv) * Sq, Sk), f32[2]).reshape(B, Hq, Sq, D)
    lse = (log(l_) + m).reshape(B, Hq, Sq)
    return (o if dt == _dt.float32 else astype(o, dt)), lse


def _fused(op, q, k, v, is_causal, scale, window, alibi_slopes, softcap, route, causal_right):
    """(o, lse) of [B, H, S, D] device arrays by the flash kernels (route "single" or "tiled")."""
    B, Hq, Hkv, Sq, Sk, D = _check_shapes(op, q.shape, k.shape, v.shape)
    scale, cap, wl, wr = _options(op, D, is_causal, scale, window, softcap, causal_right)
    dt = _check_dtypes(op, ("q", "k", "v"), (q, k, v), FWD_DTYPES)
    slopes, sa_b = _slopes(op, alibi_slopes, B, Hq)
    rt = _pick(op, Sq, Sk, D, Hq // max(Hkv, 1), route)
    o = new_like((B, Hq, Sq, D), dt)
    lse = new_like((B, Hq, Sq), _dt.float32)
    rows = B * Hq * Sq
    if rows and not fits(q, k, v, o, lse):
        _head_blocks(op, [q], [k, v], [o, lse], [], slopes, lambda qb, kb, sb: (_fused(
            op, qb[0], kb[0], kb[1], is_causal, scale, window, sb, softcap, route, causal_right), ()))
        return o, lse
    if rows:
        views = []
        for x in (q, k, v):
            st = _view_strides(x)
            if st is None:
                x = contiguous(x)
                st = _view_strides(x)
            views.append((x, st))
        (q, qs), (k, ks), (v, vs) = views
        ctx = runtime.get()
        var = kernel(FAMILY[rt], _dt.FLOAT_TAGS[dt])
        sg8 = _sg8(ctx)
        if rt == "decode":
            _decode(ctx, dt, q, qs, k, ks, v, vs, o, lse, slopes, sa_b, B, Hq, Hkv, Sq, Sk, D, wl, wr, scale, cap)
            return o, lse
        if rt == "single":
            spec = {"D": D, "SKMAX": _skmax(Sk), "SG8": sg8}
            groups = rows
        else:
            br, bc = tiled_config(D, (Hq // Hkv) * Sq, ctx.device.limits.maxComputeSharedMemorySize)
            spec = {"D": D, "BR": br, "BC": bc, "SG8": sg8}
            groups = B * Hkv * -(-(Hq // Hkv) * Sq // br)
        flags = FLAGS["alibi"] if slopes is not None else 0
        alibi = slopes if slopes is not None else lse    # bound but not read without FLAG_ALIBI
        args = dict(out_o=o, out_lse=lse, in_q=q, in_k=k, in_v=v, in_alibi=alibi,
                    B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Sk=Sk, wl=wl, wr=wr, scale=scale, cap=cap, off_q=q.offset,
                    off_k=k.offset, off_v=v.offset, off_o=o.offset,
                    off_a=slopes.offset if slopes is not None else 0, sa_b=sa_b, **_strides("q", qs),
                    **_strides("k", ks), **_strides("v", vs), nsplit=1, split_keys=Sk, **spec)
        if rt == "single":
            ctx.launch(var, ctx.groups(groups), flags=flags, jb=0, je=Sk, **args)
        else:
            spans = _spans(Sk, tiled_keys_per_launch(D, br, bc, ctx.device.loop_budget))
            state = new_like((rows, D + 2), _dt.float32) if len(spans) > 1 else lse
            for n, (jb, je) in enumerate(spans):
                f = flags | (FLAGS["resume"] if n else 0) | (FLAGS["partial"] if n < len(spans) - 1 else 0)
                ctx.launch(var, ctx.groups(groups), state=state, flags=f, jb=jb, je=je, **args)
    return o, lse


def _decode(ctx, dt, q, qs, k, ks, v, vs, o, lse, slopes, sa_b, B, Hq, Hkv, Sq, Sk, D, wl, wr, scale, cap):
    """o, lse by flash_decode: each row block's keys split over nsplit workgroups (decode_splits), K and V
    read through their texel views where the device's load path takes them; with nsplit > 1 the
    splits' (m, l, acc) go to a state buffer that flash_decode_combine merges into o and lse."""
    rows, G = B * Hq * Sq, Hq // Hkv
    br, bc = decode_config(D, G * Sq, ctx.device.limits.maxComputeSharedMemorySize, ctx.device.device_type)
    blocks = B * Hkv * -(-G * Sq // br)
    nsplit, split_keys = decode_splits(Sk, blocks, bc, tiled_keys_per_launch(D, br, bc, ctx.device.loop_budget),
                                       decode_target(ctx.device))
    slices = blocks * nsplit * -(-br // 4) * (bc + D) * 4          # TEX_P's slices, one per workgroup
    scratch = new_like((slices,), _dt.float32) if slices * 4 <= DECODE_SCRATCH_BYTES else None
    views, tex = texel_views(DECODE_TEXELS, {"k": k, "v": v, "p": scratch})
    per = 16 // k.dtype.itemsize                 # elements of a 16-byte chunk
    if all(x % per == 0 for x in (k.offset,) + ks):
        tex |= DECODE_CHUNKS["kc"]
    if D % per == 0 and all(x % per == 0 for x in (v.offset,) + vs):
        tex |= DECODE_CHUNKS["vc"]
    state = new_like((nsplit * rows, D + 2), _dt.float32) if nsplit > 1 else lse   # bound, unused at 1
    common = dict(B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Sk=Sk, wl=wl, wr=wr, scale=scale, cap=cap, off_q=q.offset,
                  off_k=k.offset, off_v=v.offset, off_o=o.offset, off_a=slopes.offset if slopes is not None else 0,
                  sa_b=sa_b, **_strides("q", qs), **_strides("k", ks), **_strides("v", vs), jb=0, je=Sk,
                  nsplit=nsplit, split_keys=split_keys, flags=FLAGS["alibi"] if slopes is not None else 0, D=D)
    tag = _dt.FLOAT_TAGS[dt]
    ctx.launch(kernel("flash_decode", tag), ctx.groups(blocks * nsplit), out_o=o, out_lse=lse, in_q=q, in_k=k,
               in_v=v, in_alibi=slopes if slopes is not None else lse, state=state, **views, TEX=tex, BR=br, BC=bc,
               SG8=_sg8(ctx), **common)
    if nsplit > 1:
        ctx.launch(kernel("flash_decode_combine", tag), ctx.groups(rows), out_o=o, out_lse=lse, state=state, **common)


def _head_blocks(op, q_in, kv_in, q_out, kv_out, slopes, run):
    """An attention call over operands larger than one binding: per batch entry, spans of kv heads (with
    their G query heads) whose blocks of every operand fit one binding. q_in / kv_in / q_out / kv_out:
    the [B, H, ...] inputs and (fresh) outputs indexed by query / kv heads; run(q_in blocks, kv_in
    blocks, slopes block) returns the blocks' (q_out results, kv_out results), written into the outputs'
    blocks. Keys of one head beyond one binding are a typed error (that would need an lse merge)."""
    B, Hq = q_in[0].shape[:2]
    G = Hq // kv_in[0].shape[1]
    fit = lambda x: windowed(x) is not None
    sl = None if slopes is None else (slopes if slopes.ndim == 2 else slopes.broadcast_to((B, Hq)))
    for b in range(B):
        def cut(xs, h0, h1, g):
            return [x[b:b + 1, h0 * g:h1 * g] for x in xs]

        def ok(h0, h1):
            return all(fit(x) for x in cut(q_in + q_out, h0, h1, G) + cut(kv_in + kv_out, h0, h1, 1))
        for h0, h1 in spans(op, "kv head (with its query heads)", kv_in[0].shape[1], ok):
            rq, rk = run([windowed(x) for x in cut(q_in, h0, h1, G)], [windowed(x) for x in cut(kv_in, h0, h1, 1)],
                         None if sl is None else contiguous(sl[b:b + 1, h0 * G:h1 * G]))
            for dst, r in zip(cut(q_out, h0, h1, G) + cut(kv_out, h0, h1, 1), list(rq) + list(rk)):
                launch_write(kernel("write_slice", _dt.width_tag(dst.dtype)), windowed(dst), r)


def scaled_dot_product_attention_backward(do, q, k, v, o, lse, *, attn_mask=None, is_causal=False,
                                          causal_alignment="top_left", scale=None, window=(-1, -1),
                                          alibi_slopes=None, softcap=None):
    """(dq, dk, dv) of scaled_dot_product_attention, from its output o and lse (return_lse=True).

    float32 only; the options must be those of the forward. The fused kernels' options (no attn_mask,
    no top-left causal mask with Sq < Sk) run flash_attn_backward_{q,k,v}_f32, recomputing P from lse
    (no [Sq, Sk] matrix stored); an attn_mask or a top-left causal mask with Sq < Sk take the math
    route's backward (device ops over f32 [B, Hq, Sq, Sk] scores, as its forward). Leading dims as the
    forward's; dK/dV sum over the GQA group. Rows that see no key (lse = -inf) get zero gradients.
    """
    op = "scaled_dot_product_attention_backward"
    align = _alignment(op, causal_alignment)
    qs, ks, vs = _shape_of(q), _shape_of(k), _shape_of(v)
    lay = _Layout(op, [qs, ks, vs])
    if lay.targets != lay.padded:
        raise ShapeError(f"{op}: q{qs}, k{ks}, v{vs} broadcast in their leading dims; the backward takes "
                         "q, k, v of equal leading dims (broadcast them first)")
    q4, k4, v4 = lay.shapes4
    B, Hq, Hkv, Sq, Sk, D = _check_shapes(op, q4, k4, v4)
    for name, x, want in (("do", do, qs), ("o", o, qs), ("lse", lse, qs[:-1])):
        if _shape_of(x) != tuple(want):
            raise ShapeError(f"{op}: {name} must have shape {tuple(want)} for q{qs}; got {_shape_of(x)}")
    math = _needs_math(attn_mask, is_causal, align, Sq, Sk)
    if math and (tuple(window if window is not None else (-1, -1)) != (-1, -1) or alibi_slopes is not None
                 or softcap):
        raise UnsupportedError(f"{op}: window, alibi_slopes and softcap are fused-kernel options; they do not "
                               "combine with attn_mask or a top-left causal mask with Sq < Sk")
    right = None if math else _causal_right(align, Sq, Sk)
    scale, cap, wl, wr = _options(op, D, is_causal and not math, scale, window, softcap, right or 0)
    (do, q, k, v, o, lse), numpy_out = device_args(op, do, q, k, v, o, lse)
    do, q, o, k, v, lse = (_as4(x, s4) for x, s4 in ((do, q4), (q, q4), (o, q4), (k, k4), (v, v4), (lse, q4[:3])))
    _check_dtypes(op, ("do", "q", "k", "v", "o", "lse"), (do, q, k, v, o, lse), (_dt.float32,))
    if math:
        mask = None if attn_mask is None else _mask4(op, attn_mask, lay, B, Hq, Sq, Sk)
        dq, dk, dv = _math_backward(do, q, k, v, o, lse, mask, is_causal, scale)
    else:
        dq, dk, dv = _backward4(op, do, q, k, v, o, lse, is_causal, scale, window, alibi_slopes, softcap, align,
                                wl, wr, cap)
    return result((dq.reshape(qs), dk.reshape(ks), dv.reshape(vs)), numpy_out)


def _math_backward(do, q, k, v, o, lse, mask, causal, scale):
    """(dq, dk, dv) of _math's attention by device ops in float32: P = exp(s - lse) recomputed from the
    masked scores (0 in rows that see no key), dV = P^T dO, dS = P (dO V^T - rowsum(dO o)) scale,
    dQ = dS K, dK = dS^T Q; the query heads of a kv head stacked as rows, so dK / dV sum over the group."""
    from ..api.creation import arange
    from .elementwise import exp
    from .matmul import matmul
    from .movement import where
    from .reduction import sum as asum
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    rows = (Hq // Hkv) * Sq
    if B * Hq * Sq == 0 or Sk == 0:
        return zeros(q.shape, _dt.float32), zeros(k.shape, _dt.float32), zeros(v.shape, _dt.float32)
    do, q, k, v, o = (contiguous(x) for x in (do, q, k, v, o))
    qg, dog = q.reshape(B, Hkv, rows, D), do.reshape(B, Hkv, rows, D)
    s = matmul(qg, k.mT).reshape(B, Hq, Sq, Sk) * scale
    if mask is not None:
        s = where(mask, s, -np.inf) if mask.dtype == _dt.bool_ else s + mask.astype(_dt.float32)
    if causal:
        seen = arange(Sk, dtype=_dt.int32).reshape(1, Sk) <= arange(Sq, dtype=_dt.int32).reshape(Sq, 1)
        s = where(seen, s, -np.inf)
    lse4 = lse.reshape(B, Hq, Sq, 1)
    p = exp(s - where(lse4 == -np.inf, np.inf, lse4)).reshape(B, Hkv, rows, Sk)   # exp(-inf - inf) = 0
    dv = matmul(p.mT, dog)
    delta = asum(do * o, axis=-1, keepdims=True).reshape(B, Hkv, rows, 1)
    ds = p * (matmul(dog, v.mT) - delta) * scale
    return matmul(ds, k).reshape(B, Hq, Sq, D), matmul(ds.mT, qg), dv


def _backward4(op, do, q, k, v, o, lse, is_causal, scale, window, alibi_slopes, softcap, align, wl, wr, cap):
    """(dq, dk, dv) of [B, H, S, D] float32 device arrays by the flash backward kernels."""
    B, Hq, Hkv, Sq, Sk, D = _check_shapes(op, q.shape, k.shape, v.shape)
    slopes, sa_b = _slopes(op, alibi_slopes, B, Hq)
    do, q, k, v, o, lse = (contiguous(x) for x in (do, q, k, v, o, lse))
    dq = new_like(q.shape, _dt.float32)
    dk = new_like(k.shape, _dt.float32)
    dv = new_like(k.shape, _dt.float32)
    if dq.size and not fits(do, q, k, v, o, lse, dq, dk, dv):
        def run(qb, kb, sb):
            dqb, dkb, dvb = scaled_dot_product_attention_backward(
                qb[0], qb[1], kb[0], kb[1], qb[2], qb[3], is_causal=is_causal, scale=scale, window=window,
                alibi_slopes=sb, softcap=softcap, causal_alignment=align)
            return (dqb,), (dkb, dvb)
        _head_blocks(op, [do, q, o, lse], [k, v], [dq], [dk, dv], slopes, run)
        return dq, dk, dv
    ctx = runtime.get()
    flags = FLAGS["alibi"] if slopes is not None else 0
    common = dict(in_q=q, in_k=k, in_do=do, in_lse=lse, in_alibi=slopes if slopes is not None else lse,
                  B=B, Hq=Hq, Hkv=Hkv, Sq=Sq, Sk=Sk, wl=wl, wr=wr, scale=scale, cap=cap, off_q=q.offset,
                  off_k=k.offset, off_v=v.offset, off_o=o.offset, off_do=do.offset, off_lse=lse.offset,
                  off_a=slopes.offset if slopes is not None else 0, sa_b=sa_b, D=D, SG8=_sg8(ctx))
    per = bwd_span_per_launch(D, ctx.device.loop_budget)

    def launches(fam, n_groups, span, n, **bindings):
        for m, (jb, je) in enumerate(_spans(n, span)):
            ctx.launch(kernel(fam, "f32"), ctx.groups(n_groups), flags=flags | (FLAGS["accum"] if m else 0),
                       jb=jb, je=je, **common, **bindings)

    rows_per = None if per is None else max(1, per // max(Hq // max(Hkv, 1), 1))
    if dq.size:  # dQ over key ranges; dK / dV over query-row ranges (rows_per rows of each GQA group)
        delta = new_like((B, Hq, Sq), _dt.float32)
        launches("flash_attn_backward_q", B * Hq * Sq, per, Sk, out_grad=dq, in_v=v, out_delta=delta, in_o=o)
        if dk.size:
            launches("flash_attn_backward_k", B * Hkv * Sk, rows_per, Sq, out_grad=dk, in_v=v, in_delta=delta)
    elif dk.size:  # no query rows: dK = 0 (the dV kernel below writes zeros the same way)
        ctx.stream.fill(dk.buffer, dk.nbytes)
    if dv.size:
        launches("flash_attn_backward_v", B * Hkv * Sk, rows_per, Sq, out_grad=dv)
    return dq, dk, dv


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare, same


def _attention_rule(q, k, v, *, attn_mask=None, is_causal=False, causal_alignment="top_left", scale=None,
                    window=(-1, -1), alibi_slopes=None, softcap=None, return_lse=False, route=None):
    out = Meta(tuple(q.shape[:-1]) + tuple(v.shape[-1:]), np.dtype(q.dtype))
    return (out, Meta(tuple(q.shape[:-1]), np.dtype(np.float32))) if return_lse else out


def _torch_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, window=(-1, -1), softcap=None,
                return_lse=False, causal_alignment="top_left"):
    import torch
    if tuple(window) != (-1, -1) or softcap is not None or return_lse:
        raise NotImplementedError("torch reference covers plain (causal / masked) attention only")
    sq, sk = q.shape[-2], k.shape[-2]
    if is_causal and causal_alignment == "bottom_right" and sq != sk:   # torch's is_causal is top-left
        attn_mask, is_causal = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq), False
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                                            scale=scale, enable_gqa=q.shape[-3] != k.shape[-3])


_ATTN_OPTS = ("bool is_causal=False, float? scale=None, int[] window=[-1, -1], Tensor? alibi_slopes=None, "
              "float? softcap=None")
declare(
    # torch: returns (output, lse) always (lse is what the backward reads)
    OpDef("scaled_dot_product_attention", scaled_dot_product_attention, _attention_rule, torch=_torch_sdpa,
          reference=("", '''b_, hq, sq, d_ = q.shape
hkv, sk = k.shape[1], k.shape[2]
kk = k.repeat_interleave(hq // hkv, dim=1)     # GQA: query head h reads kv head h // (hq / hkv)
vv = v.repeat_interleave(hq // hkv, dim=1)
s = (q @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(d_) if scale is None else scale)   # [b, h, sq, sk]
if softcap is not None:
    s = softcap * torch.tanh(s / softcap)
rel = torch.arange(sk)[None, :] - torch.arange(sq)[:, None] - (sk - sq)   # windows align bottom-right
if alibi_slopes is not None:
    s = s - alibi_slopes[None, :, None, None] * rel.abs()
left, right = window
visible = torch.ones(sq, sk, dtype=torch.bool)
if is_causal:        # torch's top-left causal mask: key j <= query i; flash-attn's bottom-right: rel <= 0
    visible &= (rel <= 0) if causal_alignment == "bottom_right" else \
        torch.arange(sk)[None, :] <= torch.arange(sq)[:, None]
if left >= 0:
    visible &= rel >= -left
if right >= 0:
    visible &= rel <= right
s = s.masked_fill(~visible, float("-inf"))
if attn_mask is not None:                      # torch's: bool (True = attend) or additive
    s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.float()
m = s.amax(-1, keepdim=True)
m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
p = torch.exp(s - m)
l = p.sum(-1, keepdim=True)
output = (p / torch.where(l > 0, l, torch.ones_like(l))) @ vv
lse = (torch.log(l) + m).squeeze(-1)           # natural log; -inf for a row that sees no key'''),
          grad="attention", route="attention_route",
          schema=f"(Tensor q, Tensor k, Tensor v, {_ATTN_OPTS}) -> (Tensor, Tensor)",
          export={"var_dims": ("B", "S_q", "S_kv"), "small_keep": ("H_q", "H_kv")}),
    OpDef("scaled_dot_product_attention_backward", scaled_dot_product_attention_backward,
          lambda do, q, k, v, o, lse, **kw: (same(q), same(k), same(v)),
          schema=f"(Tensor do, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, {_ATTN_OPTS}) "
                 "-> (Tensor, Tensor, Tensor)",
          export={"skip": "inputs o and lse must be the forward's outputs for q, k, v; independent random inputs "
                          "make the gradient ill-defined"}),
)
