"""fuelvk.rope: rotary position embedding with precomputed cos/sin tables (one fused kernel).

Conventions (HF / vLLM / FlashInfer):
- NeoX (default): rotate_half pairs channel i with i + rot/2: out = x * cos + rotate_half(x) * sin.
- GPT-J (interleaved=True): pairs (2i, 2i+1).
- rotary_dim: only the first rotary_dim channels rotate; the rest are copied unchanged.
- Tables: cos/sin of shape [..., rot] (HF's full tables: cat(freqs, freqs) for NeoX,
  repeat_interleave(freqs, 2) for GPT-J) or, with rotary_dim=, half tables [..., rot/2] (vLLM's
  cos_sin_cache halves). They broadcast against x's leading dims ([seq, rot] or [b, 1, seq, rot]...).
x may be any view, e.g. q.permute(0, 2, 1, 3) of a [b, s, h, d] projection: no copy is made.
Math runs in float32 for f16/bf16 (float64 for f64), rounded once: for every dtype the result
is bit-identical to torch's formula evaluated in float32 (float64) and cast back.
"""
import math

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..errors import DTypeError, ShapeError
from ..kernels import kernel
from ..kernels.rope import FLAG_HALF_TABLE, FLAG_INTERLEAVED, ROPE_CPU_HEADS, ROPE_TEXELS, ROPE_WG
from ._core import blockwise, contiguous, device_args, fits, new_like, result
from ..runtime.loadpath import TEXEL_BYTES
from .reduction import texel_views

__all__ = ["rope"]


def _table_strides(op, name, t, lead_orig):
    """Strides of table t broadcast to the 4-d lead dims (o0, o1, seq) plus its last-dim stride."""
    try:
        st = layout.broadcast_strides(t.shape[:-1], t.strides[:-1], lead_orig)
    except ShapeError:
        raise ShapeError(f"{op}: {name} of shape {t.shape} does not broadcast against x's leading dims "
                         f"{lead_orig}") from None
    extra = len(lead_orig) - 3
    if extra > 0:
        if any(st[:extra + 1]):  # x's dims [:-3] collapse into one
            raise ShapeError(f"{op}: for x of rank {len(lead_orig) + 1}, {name} may vary only over x's last "
                             f"two leading dims (seq and the one before), got shape {t.shape}")
        st = st[extra:]
    st = (0,) * (3 - len(st)) + tuple(st)
    return list(st) + [t.strides[-1]]


def rope_heads(ctx, o1, shared):
    """Rows per invocation: ROPE_CPU_HEADS heads at one position where the tables do not vary over the
    heads (`shared`) on a CPU device, whose invocations read through the same caches as any load (a
    table entry read once serves the heads: lavapipe 1x32x128x128 f32, one thread, device ms: 1.14-1.30
    -> 0.89-1.06); 1 elsewhere (a GPU keeps one row per invocation: more of them, tables cached anyway)."""
    if not shared or o1 < 2 or ctx.device.device_type != "cpu":
        return 1
    return min(ROPE_CPU_HEADS, o1)


def rope(x, cos, sin, *, interleaved=False, rotary_dim=None):
    """Rotary embedding of x [..., seq, head_dim] (rank >= 2) with cos/sin tables; see the module doc."""
    op = "rope"
    (x, cos, sin), numpy_out = device_args(op, x, cos, sin)
    tag = _dt.float_tag(op, x.dtype)
    if cos.dtype != x.dtype or sin.dtype != x.dtype:
        raise DTypeError(f"{op}: kernel rope.{tag} needs cos/sin of x's dtype {x.dtype}, "
                         f"got cos {cos.dtype}, sin {sin.dtype}")
    if x.ndim < 2:
        raise ShapeError(f"{op}: x must be [..., seq, head_dim] (rank >= 2), got shape {x.shape}")
    if cos.shape != sin.shape or cos.ndim < 1:
        raise ShapeError(f"{op}: cos {cos.shape} and sin {sin.shape} must have the same shape [..., rot]")
    hd, table = x.shape[-1], cos.shape[-1]
    rot = table if rotary_dim is None else int(rotary_dim)
    if rot <= 0 or rot % 2 or rot > hd:
        raise ShapeError(f"{op}: rotary dim {rot} must be even and in (0, head_dim={hd}] (x {x.shape}, "
                         f"cos {cos.shape})")
    if table == rot:
        half = False
    elif 2 * table == rot:
        half = True
    else:
        raise ShapeError(f"{op}: cos/sin last dim {table} must be rotary_dim={rot} (full tables) or "
                         f"{rot // 2} (half tables)")
    out = new_like(x.shape, x.dtype)
    if out.size == 0:
        return result(out, numpy_out)
    if not fits(x, cos, sin):    # larger than one binding: blocks of x's leading dims (seq, head_dim whole)
        tabs = [t.broadcast_to(x.shape[:-1] + t.shape[-1:]) for t in (cos, sin)]
        blockwise(op, lambda xb, cb, sb: rope(xb, cb, sb, interleaved=interleaved, rotary_dim=rotary_dim),
                  [x] + tabs, out, axes=x.ndim - 2)
        return result(out, numpy_out)
    lead_orig = x.shape[:-1]
    # the kernel reads channels (x's and the tables' last dim) at unit stride, as 16-byte chunks
    x, cos, sin = (t if t.shape[-1] == 1 or t.strides[-1] == 1 else contiguous(t) for t in (x, cos, sin))
    cst = _table_strides(op, "cos", cos, lead_orig)[:3]
    sst = _table_strides(op, "sin", sin, lead_orig)[:3]
    if x.ndim > 4:
        shape4 = (math.prod(x.shape[:-3]),) + x.shape[-3:]
        st = layout.reshape_strides(x.shape, x.strides, shape4)
        if st is None:
            x = contiguous(x)
            st = layout.contiguous_strides(shape4)
        xv_shape, xs = shape4, list(st)
    else:
        pad = 4 - x.ndim
        xv_shape, xs = (1,) * pad + x.shape, [0] * pad + list(x.strides)
    o0, o1, seq, _ = xv_shape
    ctx = runtime.get()
    heads = rope_heads(ctx, o1, cst[1] == 0 and sst[1] == 0)
    total = o0 * -(-o1 // heads) * seq                          # invocations: `heads` rows each
    flags = (FLAG_INTERLEAVED if interleaved else 0) | (FLAG_HALF_TABLE if half else 0)
    views, tex = texel_views(ROPE_TEXELS, {"x": x, "c": cos, "s": sin}, {"o": out})
    # ALIGN (rowchunks.glsl): operands whose every chunk is a whole texel. The kernel reads x / the tables
    # in chunks from each row's start (+ rot/2 for NeoX's partner), writes rows of head_dim.
    per = TEXEL_BYTES // x.dtype.itemsize
    span = rot if interleaved else rot // 2                      # the chunked run from each row's start
    row_ok = span % per == 0 and hd % per == 0
    align = 0
    for key, a, strides in (("x", x, xs[:3]), ("c", cos, cst), ("s", sin, sst), ("o", out, [hd])):
        halves = key in "cs" and half and interleaved      # GPT-J's half tables: half chunks
        if row_ok and not halves and a.offset % per == 0 and all(t % per == 0 for t in strides):
            align |= ROPE_TEXELS[key]
    ctx.launch(kernel("rope", tag), ctx.groups(-(-total // ROPE_WG)), out=out, x=x, cos=cos, sin=sin, **views,
               o1=o1, seq=seq, head_dim=hd, rot=rot, flags=flags, total=total, off_x=x.offset, off_c=cos.offset,
               off_s=sin.offset, xs=xs[:3], cs=cst, ss=sst, TEX=tex, ALIGN=align, HEADS=heads)
    return result(out, numpy_out)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import OpDef, declare, same


def _rope_reference(cat, who):
    """NeoX full-rotary RoPE written with `cat` (np.concatenate / torch.cat): the baselines' one formula."""
    def run(x, cos, sin, interleaved=False, rotary_dim=None):
        if interleaved or rotary_dim is not None:
            raise NotImplementedError(f"{who} reference covers NeoX full-rotary RoPE only")
        h = x.shape[-1] // 2
        return x * cos + cat([-x[..., h:], x[..., :h]], -1) * sin
    return run


def _torch_rope(*args, **kwargs):
    import torch
    return _rope_reference(torch.cat, "torch")(*args, **kwargs)


def _numpy_rope(*args, **kwargs):
    import numpy as np
    return _rope_reference(np.concatenate, "numpy")(*args, **kwargs)


declare(OpDef("rope", rope, same, numpy=_numpy_rope, torch=_torch_rope, reference=("", '''\
R = x.shape[-1] if rotary_dim is None else rotary_dim
if cos.shape[-1] == R // 2 and R > 1:   # half tables: expand as the convention pairs channels
    cos, sin = ((c.repeat_interleave(2, -1) if interleaved else torch.cat([c, c], -1)) for c in (cos, sin))
xr = x[..., :R]
if interleaved:   # GPT-J: pairs (2i, 2i+1)
    rot = torch.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
else:             # NeoX: pairs (i, i + R/2)
    rot = torch.cat([-xr[..., R // 2:], xr[..., :R // 2]], -1)
output = torch.cat([xr * cos + rot * sin, x[..., R:]], -1)'''), grad="rope",
    schema="(Tensor x, Tensor cos, Tensor sin, bool interleaved=False, int? rotary_dim=None) -> Tensor",
    export={"var_dims": ("S",)}))
