"""Plain-PyTorch reference bodies, one per fuelvk op, for the exported Definitions' `reference`.

Each entry is the body of `run` (plus optional helper functions placed above it).  The exporter
(export.py) wraps it: module constants for the op's parameters (fixed by the Definition) and for
absent optional inputs (`None`), a prelude that upcasts floating inputs to float32, and a tail
that casts each output to its Definition dtype and returns them.  A body assigns one variable per
output, named as the spec names it.  These are the mathematical specification: explicit steps,
no torch.nn.functional, nothing from fuelvk.
"""

_UNARY = {
    "negative": "-x", "square": "x * x", "sqrt": "torch.sqrt(x)", "exp": "torch.exp(x)",
    "log": "torch.log(x)", "sin": "torch.sin(x)", "cos": "torch.cos(x)", "tanh": "torch.tanh(x)",
    "sigmoid": "1.0 / (1.0 + torch.exp(-x))", "silu": "x / (1.0 + torch.exp(-x))",
    # tanh approximation (fuelvk's gelu, as the inventory fixes it)
    "gelu": "0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))",
    "relu": "torch.maximum(x, torch.zeros_like(x))",
    "heaviside": "torch.where(x > 0, torch.ones_like(x), torch.where(x < 0, torch.zeros_like(x), "
                 "torch.full_like(x, h0)))",
    "abs": "torch.abs(x)", "sign": "torch.sign(x)", "reciprocal": "1.0 / x",
    "affine": "x * mul + add", "clip": "torch.minimum(torch.maximum(x, torch.tensor(lo)), torch.tensor(hi))",
    "power": "x ** n", "add": "a + b", "subtract": "a - b", "multiply": "a * b", "divide": "a / b",
    "maximum": "torch.maximum(a, b)", "minimum": "torch.minimum(a, b)",
    "equal": "a == b", "not_equal": "a != b", "less": "a < b", "less_equal": "a <= b", "greater": "a > b",
    "greater_equal": "a >= b",
    "add_assign_scaled": "dst + scale * src", "astype": "x", "ascontiguousarray": "x.clone()",
    "copy": "x.clone()", "triu": "torch.triu(x, k)", "tril": "torch.tril(x, k)",
    "masked_fill": "x.masked_fill(mask.to(torch.bool), value)",
    "cumsum": "x.reshape(-1).cumsum(0) if axis is None else x.cumsum(axis)",
    "argmax": "x.reshape(-1).argmax() if axis is None else x.argmax(axis)",  # first index on ties
    "argmin": "x.reshape(-1).argmin() if axis is None else x.argmin(axis)",
    "roll": "torch.roll(x, shift) if axis is None else torch.roll(x, shift, axis)",
    "flip": "torch.flip(x, tuple(range(x.dim())) if axis is None else "
            "((axis,) if isinstance(axis, int) else tuple(axis)))",
}

_DIMS = ("dims = tuple(range(x.dim())) if axis is None else "
         "((axis,) if isinstance(axis, int) else tuple(axis))")
_REDUCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin"}

_PAD = '''
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

_RMS = '''
def _rms_norm(x, weight):
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight
'''

_LAYER = '''
def _layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(-1, keepdim=True)   # biased, as torch
    y = (x - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
'''

_GRAD = '''
def _grads(f, args, grad):
    """Gradients of f(*args) against `grad` for the arguments that are not None (autograd)."""
    with torch.enable_grad():
        leaves = [a.detach().requires_grad_(True) if a is not None else None for a in args]
        out = f(*leaves)
        wanted = [a for a in leaves if a is not None]
        got = torch.autograd.grad(out, wanted, grad)
    it = iter(got)
    return [next(it) if a is not None else None for a in leaves]
'''

# The array API's elementwise functions: torch's own, which follow numpy (round: half to even).
_UNARY.update({op: f"torch.{op}(x)" for op in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cosh", "expm1", "floor", "log10", "log1p",
    "log2", "round", "sinh", "tan", "trunc")})
_UNARY.update({op: f"torch.{op}(a, b)" for op in ("copysign", "hypot", "logaddexp", "atan2", "nextafter")})
_UNARY.update({
    "where": "torch.where(condition.to(torch.bool), x1, x2)",
    "sort": "torch.sort(x, dim=axis, descending=descending, stable=True).values",
    "argsort": "torch.sort(x, dim=axis, descending=descending, stable=True).indices",  # ties: first index
})

REFERENCES = {op: ("", f"output = {expr}") for op, expr in _UNARY.items()}
REFERENCES.update({op: ("", f"{_DIMS}\noutput = {fn}(x, dim=dims, keepdim=keepdims)")
                   for op, fn in _REDUCE.items()})
REFERENCES["prod"] = ("", f"""{_DIMS}
output = x
for d in sorted((d % max(x.dim(), 1) for d in dims), reverse=True):   # torch.prod takes one dim
    output = torch.prod(output, d, keepdim=keepdims)""")
REFERENCES.update({
    "matmul": ("", """if n_rep > 1:   # GQA broadcast: b's last batch axis (heads) repeats n_rep times
    b = b.repeat_interleave(n_rep, dim=-3)
output = torch.matmul(a, b)"""),
    "softmax": ("", """e = torch.exp(x - x.amax(axis, keepdim=True))
output = e / e.sum(axis, keepdim=True)"""),
    "softmax_backward": ("", "grad_input = y * (grad - (grad * y).sum(axis, keepdim=True))"),
    "rms_norm": (_RMS, "output = _rms_norm(x, weight)"),
    "fused_add_rmsnorm": (_RMS, "output = _rms_norm(x + residual, weight)"),   # residual += x: not an output
    "rms_norm_backward": (_RMS + _GRAD, """grad_input, _, grad_weight = _grads(
    lambda x_, g_, w_: _rms_norm(x_, w_), (x, None, weight), grad)"""),
    "layer_norm": (_LAYER, "output = _layer_norm(x, weight, bias)"),
    "layer_norm_backward": (_LAYER + _GRAD, """grad_input, grad_weight, grad_bias = _grads(
    _layer_norm, (x, weight, bias), grad)"""),
    "pad": (_PAD, "output = _pad(x)"),
    "pad_backward": ("\nconstant_values = 0   # the fill value does not reach the gradient\n" + _PAD + _GRAD,
                     """shape = [p - lo - hi for p, (lo, hi) in zip(grad.shape, pad_width)]
(grad_input,) = _grads(_pad, (torch.zeros(shape),), grad)"""),
    "rope": ("", '''R = x.shape[-1] if rotary_dim is None else rotary_dim
if cos.shape[-1] == R // 2 and R > 1:   # half tables: expand as the convention pairs channels
    cos, sin = ((c.repeat_interleave(2, -1) if interleaved else torch.cat([c, c], -1)) for c in (cos, sin))
xr = x[..., :R]
if interleaved:   # GPT-J: pairs (2i, 2i+1)
    rot = torch.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
else:             # NeoX: pairs (i, i + R/2)
    rot = torch.cat([-xr[..., R // 2:], xr[..., :R // 2]], -1)
output = torch.cat([xr * cos + rot * sin, x[..., R:]], -1)'''),
    "conv2d": ("", '''sh, sw = (stride, stride) if isinstance(stride, int) else stride
dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
pt, pb, pl, pr = pads                      # (top, bottom, left, right), resolved from `padding`
n_, c_, h_, w_ = x.shape
o_, cg, kh, kw = w.shape
xp = torch.zeros(n_, c_, h_ + pt + pb, w_ + pl + pr)
xp[:, :, pt:pt + h_, pl:pl + w_] = x
ho = (h_ + pt + pb - dh * (kh - 1) - 1) // sh + 1
wo = (w_ + pl + pr - dw * (kw - 1) - 1) // sw + 1
xg = xp.reshape(n_, groups, c_ // groups, xp.shape[2], xp.shape[3])
wg = w.reshape(groups, o_ // groups, cg, kh, kw)
output = torch.zeros(n_, groups, o_ // groups, ho, wo)
for i in range(kh):
    for j in range(kw):
        patch = xg[..., i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
        # sum over the group's input channels c: [n, g, 1, c, h, w] * [1, g, o, c, 1, 1]
        output += (patch[:, :, None] * wg[None, :, :, :, i, j, None, None]).sum(3)
output = output.reshape(n_, o_, ho, wo)
if bias is not None:
    output = output + bias[None, :, None, None]'''),
    "scaled_dot_product_attention": ("", '''b_, hq, sq, d_ = q.shape
hkv, sk = k.shape[1], k.shape[2]
kk = k.repeat_interleave(hq // hkv, dim=1)     # GQA: query head h reads kv head h // (hq / hkv)
vv = v.repeat_interleave(hq // hkv, dim=1)
s = (q @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(d_) if scale is None else scale)   # [b, h, sq, sk]
if softcap is not None:
    s = softcap * torch.tanh(s / softcap)
rel = torch.arange(sk)[None, :] - torch.arange(sq)[:, None] - (sk - sq)   # masks align bottom-right
if alibi_slopes is not None:
    s = s - alibi_slopes[None, :, None, None] * rel.abs()
left, right = window[0], (0 if is_causal else window[1])
visible = torch.ones(sq, sk, dtype=torch.bool)
if left >= 0:
    visible &= rel >= -left
if right >= 0:
    visible &= rel <= right
s = s.masked_fill(~visible, float("-inf"))
m = s.amax(-1, keepdim=True)
m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
p = torch.exp(s - m)
l = p.sum(-1, keepdim=True)
output = (p / torch.where(l > 0, l, torch.ones_like(l))) @ vv
lse = (torch.log(l) + m).squeeze(-1)           # natural log; -inf for a row that sees no key'''),
})

# Ops whose Definition cannot be stated sensibly, with the reason `export` prints.
_UINT8 = "GGUF blocks are uint8 byte streams: no FlashInfer-Bench dtype (uint8) describes them"
_INDEX = "integer index input: FlashInfer-Bench's random ints span [-1024, 1024) and would index out of range"
SKIP = {
    "quant.quantize": _UINT8,
    "quant.dequantize": _UINT8,
    "quant.qmatmul": _UINT8,
    "concatenate": "takes a Python list of a variable number of tensors; Definition inputs are fixed, named",
    "setitem": "an in-place write through a view with no output tensor; a Definition needs outputs",
    "take": _INDEX,
    "take_along_axis": _INDEX,
    "scatter_add": _INDEX,
    "index_add": _INDEX,
    "paged_attention": _INDEX + " (page tables); the dataset's gqa_paged Definitions are served (run.py SOLUTIONS)",
    "scaled_dot_product_attention_backward": "inputs o and lse must be the forward's outputs for q, k, v; "
                                             "independent random inputs make the gradient ill-defined",
    **dict.fromkeys(("top_k_sampling_from_probs", "top_p_sampling_from_probs", "top_k_top_p_sampling_from_probs"),
                    "random top_p rows are half <= 0 (greedy), which FlashInfer-Bench's frequency check rejects "
                    "even for the reference; the dataset's sampling Definitions are served (run.py SOLUTIONS)"),
}

# Parameters that are not literal values in the reference but spec lets (resolved at export).
LETS = {"conv2d": ("pads",)}
