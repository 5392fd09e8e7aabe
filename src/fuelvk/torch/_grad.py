"""Gradient formulas of the torch.ops.fuelvk ops, written with torch.ops.fuelvk ops only.

No numpy and no raw kernel here: a backward is a graph of registered ops (fuelvk's dedicated
backward ops where it has them: softmax / rms_norm / layer_norm / pad / attention), so
torch.compile traces it like any other graph. Torch appears only for views (reshape, expand,
slicing) and zero tensors.
"""
import math

import torch

from ..errors import UnsupportedError

fv_ops = torch.ops.fuelvk   # the registered ops (a backward is a graph of them)
GELU_K = math.sqrt(2.0 / math.pi)
GELU_C = 0.044715


def uses_output(formula):
    """Mark a formula that reads the op's outputs (the others' outputs are not kept for backward)."""
    formula.uses_output = True
    return formula


def setup(formula):
    """The setup_context of formula's op: its own (formula.setup) if it has one, else tensor inputs always,
    outputs only when the formula reads them."""
    if hasattr(formula, "setup"):
        return formula.setup
    keep = getattr(formula, "uses_output", False)
    return lambda ctx, inputs, output: save(ctx, inputs, output if keep else ())


def save(ctx, inputs, output):
    """Keep the tensor inputs and the given outputs; lists of tensors keep only their shapes."""
    outs = output if isinstance(output, tuple) else (output,)
    slots, tensors = [], []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            slots.append((True, len(tensors)))
            tensors.append(x)
        elif isinstance(x, (list, tuple)) and x and isinstance(x[0], torch.Tensor):
            slots.append((False, [t.shape for t in x]))
        else:
            slots.append((False, x))
    ctx.slots, ctx.n_in = slots, len(tensors)
    ctx.save_for_backward(*tensors, *outs)


def save_attention(ctx, inputs, output):
    """o and lse are the backward's inputs; lse is an auxiliary output, not differentiable."""
    ctx.mark_non_differentiable(output[1])
    save(ctx, inputs, output)


def backward(formula):
    """An autograd backward from formula(inputs, outputs, *grads) -> grads of the leading inputs."""
    def bw(ctx, *grads):
        saved = ctx.saved_tensors
        ins = [saved[v] if is_t else v for is_t, v in ctx.slots]
        got = tuple(formula(ins, saved[ctx.n_in:], *grads))
        return got + (None,) * (len(ins) - len(got))
    return bw


def sum_to(g, shape):
    """g summed over the dims that broadcasting added or expanded, down to shape."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1]
    return fv_ops.sum(g, axes, True).reshape(shape)


def _one_minus(t):
    return fv_ops.affine(t, -1.0, 1.0)


def _gelu(x, g):
    """d/dx of the tanh-approximated gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)."""
    x2 = fv_ops.square(x)
    t = fv_ops.tanh(fv_ops.multiply(x, fv_ops.affine(x2, GELU_K * GELU_C, GELU_K)))
    inner = fv_ops.multiply(fv_ops.multiply(fv_ops.affine(x, 0.5, 0.0), _one_minus(fv_ops.square(t))),
                       fv_ops.affine(x2, 3.0 * GELU_K * GELU_C, GELU_K))
    return fv_ops.multiply(g, fv_ops.add(fv_ops.affine(t, 0.5, 0.5), inner))


def _silu(x, g):
    s = fv_ops.sigmoid(x)   # d/dx x s(x) = s (1 + x (1 - s))
    return fv_ops.multiply(g, fv_ops.multiply(s, fv_ops.affine(fv_ops.multiply(x, _one_minus(s)), 1.0, 1.0)))


def zero_grad(ins, outs, g):
    return (torch.zeros_like(ins[0]),)


def _u(f):
    """A unary formula f(x, g) -> dx."""
    return lambda ins, outs, g: (f(ins[0], g),)


def _uy(f):
    """A unary formula f(y, g) -> dx from the op's output y."""
    return uses_output(lambda ins, outs, g: (f(outs[0], g),))


UNARY = {
    "negative": _u(lambda x, g: fv_ops.negative(g)),
    "square": _u(lambda x, g: fv_ops.multiply(g, fv_ops.affine(x, 2.0, 0.0))),
    "sqrt": _uy(lambda y, g: fv_ops.divide(g, fv_ops.affine(y, 2.0, 0.0))),
    "exp": _uy(lambda y, g: fv_ops.multiply(g, y)),
    "log": _u(lambda x, g: fv_ops.divide(g, x)),
    "sin": _u(lambda x, g: fv_ops.multiply(g, fv_ops.cos(x))),
    "cos": _u(lambda x, g: fv_ops.multiply(g, fv_ops.negative(fv_ops.sin(x)))),
    "tanh": _uy(lambda y, g: fv_ops.multiply(g, _one_minus(fv_ops.square(y)))),
    "sigmoid": _uy(lambda y, g: fv_ops.multiply(g, fv_ops.multiply(y, _one_minus(y)))),
    "silu": _u(_silu),
    "gelu": _u(_gelu),
    "relu": _u(lambda x, g: fv_ops.multiply(g, fv_ops.heaviside(x, 0.0))),
    "abs": _u(lambda x, g: fv_ops.multiply(g, fv_ops.sign(x))),
    "reciprocal": _uy(lambda y, g: fv_ops.multiply(g, fv_ops.negative(fv_ops.square(y)))),
}


def affine(ins, outs, g):
    return (fv_ops.affine(g, ins[1], 0.0),)


def clip(ins, outs, g):
    x, lo, hi = ins   # torch.clamp's rule: the gradient passes where lo <= x <= hi
    inside = fv_ops.multiply(fv_ops.heaviside(fv_ops.affine(x, 1.0, -lo), 1.0),
                             fv_ops.heaviside(fv_ops.affine(x, -1.0, hi), 1.0))
    return (fv_ops.multiply(g, inside),)


def power(ins, outs, g):
    x, n = ins
    if n == 0:
        return (torch.zeros_like(x),)
    return (fv_ops.multiply(g, fv_ops.affine(fv_ops.power(x, n - 1), float(n), 0.0)),)


def _binary_formula(f):
    """A binary formula f(a, b, g) -> (da, db) before un-broadcasting."""
    def formula(ins, outs, g):
        a, b = ins
        da, db = f(a, b, g)
        return sum_to(da, a.shape), sum_to(db, b.shape)
    return formula


def _max_mask(a, b):
    """1 where a wins, 1/2 on ties (torch splits a tie's gradient evenly), 0 where b wins."""
    return fv_ops.heaviside(fv_ops.subtract(a, b), 0.5)


BINARY = {
    "add": _binary_formula(lambda a, b, g: (g, g)),
    "subtract": _binary_formula(lambda a, b, g: (g, fv_ops.negative(g))),
    "multiply": _binary_formula(lambda a, b, g: (fv_ops.multiply(g, b), fv_ops.multiply(g, a))),
    "divide": _binary_formula(lambda a, b, g: (
        fv_ops.divide(g, b), fv_ops.negative(fv_ops.divide(fv_ops.multiply(g, fv_ops.divide(a, b)), b)))),
    "maximum": _binary_formula(lambda a, b, g: (
        fv_ops.multiply(g, _max_mask(a, b)), fv_ops.multiply(g, _max_mask(b, a)))),
    "minimum": _binary_formula(lambda a, b, g: (
        fv_ops.multiply(g, _max_mask(b, a)), fv_ops.multiply(g, _max_mask(a, b)))),
}


def astype(ins, outs, g):
    x = ins[0]
    if not (x.dtype.is_floating_point and g.dtype.is_floating_point):
        return (None,)
    return (fv_ops.astype(g, x.dtype),)


def identity(ins, outs, g):
    return (g,)


def flip(ins, outs, g):
    return (fv_ops.flip(g, ins[1]),)


def roll(ins, outs, g):
    return (fv_ops.roll(g, [-s for s in ins[1]], ins[2]),)


def _tri(name):
    def formula(ins, outs, g):
        x, k = ins
        gt = getattr(fv_ops, name)(g, k)
        return (fv_ops.sum(gt, [0], False) if x.dim() == 1 else gt,)   # 1-d x was broadcast over rows
    return formula


TRI = {"triu": _tri("triu"), "tril": _tri("tril")}


def concatenate(ins, outs, g):
    shapes, axis = ins
    ax = axis % len(shapes[0])
    parts, at = [], 0
    for s in shapes:
        parts.append(g.narrow(ax, at, s[ax]))
        at += s[ax]
    return (parts,)


def masked_fill(ins, outs, g):
    return (fv_ops.masked_fill(g, ins[1], 0.0),)


def pad(ins, outs, g):
    return (fv_ops.pad_backward(g, ins[1], ins[2]),)


def pad_backward(ins, outs, g):
    """pad_backward is the adjoint of pad (a linear map), so its adjoint is pad again."""
    return (fv_ops.pad(g, ins[1], ins[2], 0.0),)


def add_scaled(ins, outs, g):
    _, src, scale = ins
    return g, sum_to(fv_ops.affine(g, scale, 0.0), src.shape)


def slice_write(ins, outs, g):
    dst, value, dim, start, end, step = ins
    key = (slice(None),) * (dim % dst.dim()) + (slice(start, end, step),)
    zero = torch.zeros((), dtype=g.dtype)
    return fv_ops.slice_write(g, zero, dim, start, end, step), sum_to(g[key], value.shape)


def _scatter_add(ins, outs, g):
    base, dim, index, src = ins
    ax = dim % base.dim()
    # the gradient of src[c] is g at base position index[c]: a gather over index's extent
    g_idx = g[tuple(slice(0, n) if i != ax else slice(None) for i, n in enumerate(index.shape))]
    d_src = fv_ops.take_along_axis(g_idx, index, ax)
    if tuple(d_src.shape) != tuple(src.shape):    # src entries beyond index's extent are not read
        pw = [v for n, m in zip(d_src.shape, src.shape) for v in (0, m - n)]
        d_src = fv_ops.pad(d_src, pw, "constant", 0.0)
    return g, None, None, d_src


def _index_add(ins, outs, g):
    _, dim, index, _ = ins
    return g, None, None, fv_ops.take(g, index, dim)


SCATTER = {"scatter_add": _scatter_add, "index_add": _index_add}


def take(ins, outs, g):
    x, indices, axis = ins
    if axis is None:
        flat = fv_ops.index_add(torch.zeros(x.numel(), dtype=g.dtype), 0, indices.reshape(-1), g.reshape(-1))
        return (flat.reshape(x.shape),)
    ax = axis % x.dim()
    g2 = g.reshape(tuple(x.shape[:ax]) + (indices.numel(),) + tuple(x.shape[ax + 1:]))
    return (fv_ops.index_add(torch.zeros_like(x), ax, indices.reshape(-1), g2),)


def take_along_axis(ins, outs, g):
    x, indices, axis = ins
    return (fv_ops.scatter_add(torch.zeros_like(x), axis, indices, g),)


def _expand_back(x, axis, keepdims, g):
    if axis is None:
        axis = list(range(x.dim()))
    ax = {a % x.dim() for a in axis} if x.dim() else set()
    kshape = [1 if i in ax else n for i, n in enumerate(x.shape)]
    return g.reshape(kshape).expand(x.shape), math.prod(x.shape[i] for i in ax)


def _sum(ins, outs, g):
    return (_expand_back(ins[0], ins[1], ins[2], g)[0],)


def _mean(ins, outs, g):
    ge, n = _expand_back(ins[0], ins[1], ins[2], g)
    return (fv_ops.affine(ge, 1.0 / n, 0.0),)


def _extremum(sign):
    @uses_output
    def formula(ins, outs, g):
        """torch.amax's rule: the gradient is shared evenly by the elements equal to the extremum."""
        x, axis, keepdims = ins
        y, _ = _expand_back(x, axis, keepdims, outs[0])
        ge, _ = _expand_back(x, axis, keepdims, g)
        hit = fv_ops.heaviside(fv_ops.subtract(x, y) if sign > 0 else fv_ops.subtract(y, x), 1.0)
        count = fv_ops.sum(hit, axis, True)
        return (fv_ops.divide(fv_ops.multiply(ge, hit), count),)
    return formula


REDUCE = {"sum": _sum, "mean": _mean, "max": _extremum(1), "min": _extremum(-1)}


def cumsum(ins, outs, g):
    x, axis = ins   # d/dx_i sum_{j >= i} g_j: a reversed cumulative sum
    if axis is None:
        return (fv_ops.flip(fv_ops.cumsum(fv_ops.flip(g, None), 0), None).reshape(x.shape),)
    return (fv_ops.flip(fv_ops.cumsum(fv_ops.flip(g, [axis]), axis), [axis]),)


@uses_output
def softmax(ins, outs, g):
    return (fv_ops.softmax_backward(outs[0], g, ins[1]),)


def rms_norm(ins, outs, g):
    x, eps, w = ins
    dx, dw = fv_ops.rms_norm_backward(x, g, eps, w)
    return dx, None, (dw if w is not None else None)


def layer_norm(ins, outs, g):
    x, eps, w, b = ins
    dx, dw, db = fv_ops.layer_norm_backward(x, g, eps, w, b)
    return dx, None, (dw if w is not None else None), (db if b is not None else None)


def matmul(ins, outs, g):
    a, b = ins
    if a.dim() < 2 or b.dim() < 2:
        a2 = a.unsqueeze(0) if a.dim() == 1 else a
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        g2 = g.unsqueeze(-2) if a.dim() == 1 else g
        g2 = g2.unsqueeze(-1) if b.dim() == 1 else g2
        da, db = matmul([a2, b2], outs, g2)
        return da.reshape(a.shape), db.reshape(b.shape)
    da = sum_to(fv_ops.matmul(g, b.mT), a.shape)
    db = sum_to(fv_ops.matmul(a.mT, g), b.shape)
    return ((da if da.dtype == a.dtype else fv_ops.astype(da, a.dtype)),
            (db if db.dtype == b.dtype else fv_ops.astype(db, b.dtype)))


def _dilate(g, s, dims):
    """Zeros between g's elements along dims (a stride-s conv's output grid on its input grid)."""
    for dim, st in zip(dims, s):
        if st == 1:
            continue
        shape = list(g.shape)
        shape[dim] = (shape[dim] - 1) * st + 1
        g = fv_ops.slice_write(torch.zeros(shape, dtype=g.dtype), g, dim, 0, shape[dim], st)
    return g


def _pad_or_crop(g, lo_hi):
    """Spatial (lo, hi) pads of g's last two dims; negative amounts crop."""
    key = tuple(slice(max(-lo, 0), g.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(lo_hi))
    g = g[(slice(None), slice(None)) + key]
    pw = [0, 0, 0, 0] + [max(v, 0) for lo, hi in lo_hi for v in (lo, hi)]
    return fv_ops.pad(g, pw, "constant", 0.0) if any(pw) else g


def conv2d(ins, outs, g):
    """Input and weight gradients as two more conv2d calls (groups == 1).

    dx: the output grad dilated by the stride, padded to the full correlation, convolved with the
    flipped weight (in/out channels swapped). dw: x (batch as channels) convolved with the output
    grad as the kernel, the forward's stride and dilation trading places.
    """
    x, w, bias, stride, padding, dilation, groups = ins
    if groups != 1:
        raise UnsupportedError(f"torch.ops.fuelvk.conv2d backward: groups={groups} is not supported; accepted: 1")
    unbatched = x.dim() == 3
    if unbatched:
        x, g = x.unsqueeze(0), g.unsqueeze(0)
    k = w.shape[2:]
    gd = _dilate(g, stride, (2, 3))
    lo_hi = []
    for i in range(2):
        q = dilation[i] * (k[i] - 1) - padding[i]
        extra = x.shape[2 + i] - (gd.shape[2 + i] + 2 * q - dilation[i] * (k[i] - 1))
        lo_hi.append((q, q + extra))
    dx = fv_ops.conv2d(_pad_or_crop(gd, lo_hi), fv_ops.flip(w, [2, 3]).transpose(0, 1), None, [1, 1], [0, 0],
                       dilation, 1)
    dw = fv_ops.conv2d(x.transpose(0, 1), g.transpose(0, 1), None, dilation, padding, stride, 1)
    dw = dw[:, :, :k[0], :k[1]].transpose(0, 1)
    db = fv_ops.sum(g, [0, 2, 3], False) if bias is not None else None
    return (dx.squeeze(0) if unbatched else dx), dw, db


def qmatmul(ins, outs, g):
    """x @ W.T with W fixed (quantized weights are not trained): dx = g @ dequantize(W)."""
    _, w_blocks, kind = ins
    return (fv_ops.matmul(g, fv_ops.dequantize(w_blocks, kind)),)


def rope(ins, outs, g):
    """A rotation's adjoint is the rotation by the opposite angle: cos kept, sin negated.

    Exact for HF/vLLM tables (each pair's two channels share an angle); cos/sin are constants.
    """
    _, cos, sin, interleaved, rotary_dim = ins
    return (fv_ops.rope(g, cos, fv_ops.negative(sin), interleaved, rotary_dim),)


def attention(ins, outs, g_o, g_lse):
    """setup: save_attention (lse is an auxiliary output)."""
    q, k, v, is_causal, scale, window, alibi_slopes, softcap = ins
    o, lse = outs
    dq, dk, dv = fv_ops.scaled_dot_product_attention_backward(g_o, q, k, v, o, lse, is_causal, scale, window,
                                                         alibi_slopes, softcap)
    return dq, dk, dv


attention.setup = save_attention

# The formulas by the key an op record names (OpDef.grad in fuelvk/ops/<family>.py).
FORMULAS = {
    **UNARY, **BINARY, **TRI, **SCATTER, **REDUCE, "zero": zero_grad, "identity": identity, "affine": affine,
    "clip": clip, "power": power, "astype": astype, "flip": flip, "roll": roll, "concatenate": concatenate,
    "masked_fill": masked_fill, "pad": pad, "pad_backward": pad_backward, "add_scaled": add_scaled,
    "slice_write": slice_write, "take": take, "take_along_axis": take_along_axis, "cumsum": cumsum,
    "softmax": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm, "matmul": matmul, "conv2d": conv2d,
    "qmatmul": qmatmul, "rope": rope, "attention": attention,
}
