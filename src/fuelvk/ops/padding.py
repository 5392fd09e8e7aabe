"""numpy.pad (modes constant / reflect / edge) and its gradient, pad_backward.

The forward kernels (pad_const / pad_reflect / pad_replicate, any dtype by width) read any input
view directly. pad_backward of "constant" slices the gradient (pad_backward_const); of "reflect" and
"edge" sums, for every input element, all padded positions that copied it (pad_backward_reflect /
_replicate, float dtypes) -- a gather, so nothing is lost under contention and the sum is
deterministic. Deliberate differences from numpy: "reflect" needs every pad < its dimension, as
torch's reflect pad does (numpy would reflect repeatedly), and constant_values must be one scalar.
"""
import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array
from ..errors import DTypeError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.movement import WG
from ..kernels.padding import BACKWARD_RUN
from ._core import blocks, device_args, divider, element_words, fits, new_like, result
from .movement import _check_scalar, _remap_texels, _width_tag, launch_remap
from ..kernels.registry import storage_twin
from .casts import astype

__all__ = ["pad", "pad_backward"]

_MODES = {"constant": "const", "reflect": "reflect", "edge": "replicate", "replicate": "replicate"}


def _pad_width(op, pad_width, ndim):
    """numpy's normalization: int, (before, after) or ((b0, a0), ...) broadcast to (ndim, 2)."""
    try:
        pw = np.asarray(pad_width)
    except (TypeError, ValueError):
        pw = None
    if pw is None or pw.dtype.kind not in "iu":
        raise DTypeError(f"{op}: pad_width must be integers, got {pad_width!r}")
    try:
        pw = np.broadcast_to(pw, (ndim, 2))
    except ValueError:
        raise ShapeError(f"{op}: pad_width {pad_width!r} does not fit an array of rank {ndim}; accepted: an int, "
                         f"(before, after), or {ndim} (before, after) pairs") from None
    if (pw < 0).any():
        raise ShapeError(f"{op}: pad widths must be >= 0, got {pad_width!r}")
    return [(int(b), int(a)) for b, a in pw]


def _mode(op, mode):
    m = _MODES.get(mode) if isinstance(mode, str) else None
    if m is None:
        raise ShapeError(f"{op}: mode {mode!r} is not supported; accepted: 'constant', 'reflect', 'edge' "
                         "('replicate')")
    return m


def _check_pads(op, m, in_shape, pads):
    for d, (n, (b, a)) in enumerate(zip(in_shape, pads)):
        if m == "reflect" and (b >= n or a >= n) and (b or a):
            raise ShapeError(f"{op}: reflect padding needs pads < the dimension (as torch); axis {d} has size {n} "
                             f"and pads ({b}, {a})")
        if m == "replicate" and n == 0 and (b or a):
            raise ShapeError(f"{op}: edge padding of the empty axis {d} is undefined (pads ({b}, {a}))")


def pad(x, pad_width, mode="constant", constant_values=0):
    """numpy.pad with mode "constant" (scalar constant_values), "reflect" or "edge"; any dtype."""
    (xa,), numpy_out = device_args("pad", x)
    m = _mode("pad", mode)
    pads = _pad_width("pad", pad_width, xa.ndim)
    _check_pads("pad", m, xa.shape, pads)
    tag = _width_tag("pad", xa.dtype)
    fill = (0, 0)
    if m == "const":
        fill = element_words("pad", _check_scalar("pad", constant_values), xa.dtype)
    elif constant_values != 0:
        raise ShapeError(f"pad: constant_values applies to mode 'constant' only, got mode {mode!r}")
    out_shape = tuple(n + b + a for n, (b, a) in zip(xa.shape, pads))
    out = new_like(out_shape, xa.dtype)
    if out.size:
        src = xa
        if xa.size == 0:   # all fill: pad_const reads its source's first element wherever it fills (a
            src = Array(new_like((1,), xa.dtype).buffer, xa.shape, (0,) * xa.ndim, 0, xa.dtype)   # select)
        launch_remap("pad", kernel(f"pad_{m}", tag), out, src, src.strides, [b for b, _ in pads], list(xa.shape),
                     fill=fill, mode=f"pad_{m}")
    return result(out, numpy_out)


def pad_backward(grad, pad_width, mode="constant"):
    """Gradient of pad(x, pad_width, mode) w.r.t. x, given the gradient of its output (grad).

    constant: the interior slice (any dtype); reflect / edge: the sum over every padded copy of each
    element (float32/float64/float16/bfloat16, half types summed in f32).
    """
    (g,), numpy_out = device_args("pad_backward", grad)
    m = _mode("pad_backward", mode)
    pads = _pad_width("pad_backward", pad_width, g.ndim)
    in_shape = tuple(n - b - a for n, (b, a) in zip(g.shape, pads))
    if any(n < 0 for n in in_shape):
        raise ShapeError(f"pad_backward: pads {pads} are larger than the gradient's shape {g.shape}")
    _check_pads("pad_backward", m, in_shape, pads)
    out = new_like(in_shape, g.dtype)
    lo = [b for b, _ in pads]
    if m == "const":
        v = kernel("pad_backward_const", _width_tag("pad_backward", g.dtype))
        launch_remap("pad_backward", v, out, g, g.strides, [-b for b in lo], list(g.shape), mode="pad_const")
    else:
        _dt.float_tag("pad_backward", g.dtype)
        if out.size:
            out = _backward_sum(m, g, pads, out)
    return result(out, numpy_out)


# Work per invocation is bounded: an invocation sums each element's preimage, about rank + 2 loop
# steps per preimage element, and loop-capped devices (Device.loop_budget) stop it silently past
# their budget. Bigger fan-ins go one dim at a time.
_PREIMAGE_LIMIT = 8192


def _preimage_limit(rank):
    """The largest fan-in one pass may gather: _PREIMAGE_LIMIT, less where the loop budget is smaller."""
    budget = runtime.get().device.loop_budget
    return _PREIMAGE_LIMIT if budget is None else max(1, min(_PREIMAGE_LIMIT, budget // (rank + 2)))


def _backward_sum(m, g, pads, out):
    """Sum of every padded copy of each element: one pass when each element's preimage is small,
    else one pass per padded dim (the adjoint of a pad is the product of its per-dim adjoints)."""
    def fan_in(dims):
        k = 1
        for b, a in dims:
            k *= (max(b, a) + 1) if m == "replicate" else (3 if b or a else 1)
        return k

    limit = _preimage_limit(g.ndim)
    if fan_in(pads) <= limit:
        _launch_backward(kernel(f"pad_backward_{m}", _dt.float_tag("pad_backward", g.dtype)), out, g,
                         [b for b, _ in pads])
        return out
    big = [d for d, (b, a) in enumerate(pads) if fan_in([(b, a)]) > limit]
    if big:
        raise UnsupportedError(f"pad_backward: a pad of {pads[big[0]]} on axis {big[0]} gives one element a fan-in "
                               f"above {limit} (mode {m}); pads up to {limit - 1} per axis are "
                               "supported")
    cur = g if g.dtype in (_dt.float32, _dt.float64) else astype(g, _dt.float32)   # one rounding at the end
    v = kernel(f"pad_backward_{m}", _dt.float_tag("pad_backward", cur.dtype))
    for d, (b, a) in enumerate(pads):
        if not (b or a):
            continue
        shape = list(cur.shape)
        shape[d] -= b + a
        nxt = new_like(tuple(shape), cur.dtype)
        _launch_backward(v, nxt, cur, [b if i == d else 0 for i in range(cur.ndim)])
        cur = nxt
    return cur if cur.dtype == out.dtype else astype(cur, out.dtype)


def _launch_backward(v, out, g, lo):
    """pad_backward.comp: dims without padding are merged (strides permitting); rank <= 6 after that."""
    if not fits(out, g):   # larger than one binding: blocks of the leading unpadded dims, through windows
        cut = 0
        while cut < out.ndim and lo[cut] == 0 and out.shape[cut] == g.shape[cut]:
            cut += 1
        for ow, gw in blocks([out, g], axes=cut, op="pad_backward"):
            _launch_backward(v, ow, gw, lo[out.ndim - ow.ndim:])
        return
    dims = []   # [n_in, stride, lo, n_out]
    for n_in, s, b, n_out in zip(out.shape, g.strides, lo, g.shape):
        plain = n_in == n_out
        if plain and n_in == 1:
            continue
        if plain and dims and dims[-1][0] == dims[-1][3] and dims[-1][1] == s * n_in:
            dims[-1][0] *= n_in
            dims[-1][1] = s
            dims[-1][3] = dims[-1][0]
        else:
            dims.append([n_in, s, b, n_out])
    if len(dims) > 6:
        raise ShapeError(f"pad_backward: at most 6 padded (or non-mergeable) dims are supported, shape {g.shape} "
                         f"with pads on {len(dims)} of them")
    dims = dims or [[1, 1, 0, 1]]    # rank 0: one element
    ctx = runtime.get()
    texel = _remap_texels(g)         # grad_out through texels where faster, else the storage-only twin
    if not texel:
        v = storage_twin(v)
    n = out.size
    rows, last = n // dims[-1][0], dims[-1][0]
    runs = -(-last // BACKWARD_RUN[v.tag])          # invocations per row
    groups = -(-rows * runs // WG)
    magic, shift = divider(runs, groups * WG)       # exact for every invocation of the launch
    ctx.launch(v, ctx.groups(groups), out=out, a=g, **({"a_t": g} if texel else {}), n=n, rank=len(dims),
               off_o=out.offset, off_a=g.offset, runs_magic=magic, runs_shift=shift, shape=[d[0] for d in dims],
               sa=[d[1] for d in dims], lo=[d[2] for d in dims], dim=[d[3] for d in dims])


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import REF_GRADS, Meta, OpDef, declare

_REF_PAD = '''
def _pad(x):
    """numpy.pad(x, pad_width, mode): each axis gathers from clamped / mirrored source indices."""
    for ax, (lo, hi) in enumerate(pad_width):
        n = x.shape[ax]
        idx = torch.arange(-lo, n + hi)
        if mode == "reflect":
            period = max(2 * (n - 1), 1)
            src = idx % period
            src = torch.where(src >= n, period - src, src)
        else:
            src = idx.clamp(0, n - 1)
        y = x.index_select(ax, src)
        if mode == "constant":
            outside = ((idx < 0) | (idx >= n)).reshape([-1 if a == ax else 1 for a in range(x.dim())])
            y = y.masked_fill(outside, constant_values)
        x = y
    return x
'''


def _np_pad(x, pad_width, mode="constant", constant_values=0):
    return np.pad(x, pad_width, mode, **({"constant_values": constant_values} if mode == "constant" else {}))


# torch schemas take pad_width flat, numpy's order: [b0, a0, b1, a1, ...]
declare(
    OpDef("pad", pad, lambda x, pad_width, mode="constant", constant_values=0: Meta(
              tuple(n + b + a for n, (b, a) in zip(x.shape, pad_width)), np.dtype(x.dtype)),
          numpy=_np_pad, reference=(_REF_PAD, "output = _pad(x)"), grad="pad",
          schema="(Tensor x, int[] pad_width, str mode='constant', float value=0.0) -> Tensor"),
    OpDef("pad_backward", pad_backward, lambda grad, pad_width, mode="constant": Meta(
              tuple(n - b - a for n, (b, a) in zip(grad.shape, pad_width)), np.dtype(grad.dtype)),
          reference=("\nconstant_values = 0   # the fill value does not reach the gradient\n" + _REF_PAD + REF_GRADS,
                     """shape = [p - lo - hi for p, (lo, hi) in zip(grad.shape, pad_width)]
(grad_input,) = _grads(_pad, (torch.zeros(shape),), grad)"""), grad="pad_backward",
          schema="(Tensor grad, int[] pad_width, str mode='constant') -> Tensor",
          export={"small_floor": 16}),   # reflect needs pads < the unpadded size (numpy's, torch's rule)
)
