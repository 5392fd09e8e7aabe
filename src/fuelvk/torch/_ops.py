"""torch.ops.fuelvk.*: fuelvk's public ops as torch.library custom ops (CPU tensors in and out).

Each op is declared once: schema, implementation (upload, run the fuelvk op, download), fake kernel
(contiguous outputs, as the real kernels return) and, for the differentiable ones, a gradient
formula written with torch.ops.fuelvk ops only (see _grad.py). Ops sharing a shape (unary math,
binary arithmetic, reductions, ...) come from tables.
"""
import functools

import torch

import fuelvk as fv
from fuelvk import quant as fq
from fuelvk.kernels.elementwise import COMPARE_OPS
from fuelvk.kernels.quant import BLOCK

from . import _grad as G
from ._bridge import is_device_tensor, numpy_dtype, results_on_device, to_array, to_tensor

NS = "fuelvk"
OPS = {}   # name -> CustomOpDef


def A(t, op, fresh=False):
    return to_array(t, op, fresh)


def T(out):
    return tuple(to_tensor(o) for o in out) if isinstance(out, tuple) else to_tensor(out)


def _device_aware(fn):
    """fn with results (and fake results) on the fuelvk device when any tensor argument is there."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        on = any(is_device_tensor(x) for x in torch.utils._pytree.tree_leaves((args, kwargs)))
        if not on:
            return fn(*args, **kwargs)
        with results_on_device():
            return fn(*args, **kwargs)
    return run


def define(name, schema, impl, fake, grad=None, mutates=(), setup=None):
    """Register fuelvk::name; grad(inputs, outputs, *grads) -> input grads (see _grad.backward).

    CPU tensors in, CPU tensors out; fuelvk-device tensors in, device tensors out, with no copy."""
    op = torch.library.custom_op(f"{NS}::{name}", _device_aware(impl), mutates_args=mutates, schema=schema)
    op.register_fake(_device_aware(fake))
    if grad is not None:
        op.register_autograd(G.backward(grad), setup_context=setup or G.setup(grad))
    OPS[name] = op
    return op


# -- fake kernels ---------------------------------------------------------------------------------
def like(x, *rest, **kw):
    return torch.empty(x.shape, dtype=x.dtype)


def new(shape, dtype):
    return torch.empty(tuple(shape), dtype=dtype)


def _axes(axis, ndim):
    if axis is None:
        return list(range(ndim))
    return sorted({a % ndim if ndim else 0 for a in axis})


def reduced_shape(x, axis, keepdims):
    ax = _axes(axis, x.dim())
    if keepdims:
        return [1 if i in ax else n for i, n in enumerate(x.shape)]
    return [n for i, n in enumerate(x.shape) if i not in ax]


# -- elementwise ----------------------------------------------------------------------------------
def family(names, schema, call, fake, grads=None):
    """One op per fuelvk function name, sharing a schema: call(fuelvk_fn, name, *args) runs one."""
    for name in names:
        define(name, schema, functools.partial(call, getattr(fv, name), name), fake, (grads or {}).get(name))


family(G.UNARY, "(Tensor x) -> Tensor", lambda f, n, x: T(f(A(x, n))), like, G.UNARY)

define("heaviside", "(Tensor x, float h0=0.0) -> Tensor", lambda x, h0=0.0: T(fv.heaviside(A(x, "heaviside"), h0)),
       like, G.zero_grad)
define("affine", "(Tensor x, float mul, float add) -> Tensor",
       lambda x, mul, add: T(fv.affine(A(x, "affine"), mul, add)), like, G.affine)
define("clip", "(Tensor x, float lo, float hi) -> Tensor", lambda x, lo, hi: T(fv.clip(A(x, "clip"), lo, hi)),
       like, G.clip)
define("power", "(Tensor x, int n) -> Tensor", lambda x, n: T(fv.power(A(x, "power"), n)), like, G.power)


def _fake_binary(a, b):
    return new(torch.broadcast_shapes(a.shape, b.shape), torch.promote_types(a.dtype, b.dtype))


family(G.BINARY, "(Tensor a, Tensor b) -> Tensor", lambda f, n, a, b: T(f(A(a, n), A(b, n))), _fake_binary,
       G.BINARY)


def _fake_compare(a, b):
    return new(torch.broadcast_shapes(a.shape, b.shape), torch.bool)


family(COMPARE_OPS, "(Tensor a, Tensor b) -> Tensor", lambda f, n, a, b: T(f(A(a, n), A(b, n))), _fake_compare)

define("astype", "(Tensor x, ScalarType dtype) -> Tensor",
       lambda x, dtype: T(fv.astype(A(x, "astype"), numpy_dtype("astype", dtype))),
       lambda x, dtype: new(x.shape, dtype), G.astype)


# -- movement -------------------------------------------------------------------------------------
def _tuple(v):
    return None if v is None else tuple(v)


def _fake_tri(x, k=0):
    return new((x.shape[0], x.shape[0]) if x.dim() == 1 else x.shape, x.dtype)


define("copy", "(Tensor x) -> Tensor", lambda x: T(fv.copy(A(x, "copy"))), like, G.identity)
define("flip", "(Tensor x, int[]? axis=None) -> Tensor",
       lambda x, axis=None: T(fv.flip(A(x, "flip"), _tuple(axis))), like, G.flip)
define("roll", "(Tensor x, int[] shift, int[]? axis=None) -> Tensor",
       lambda x, shift, axis=None: T(fv.roll(A(x, "roll"), tuple(shift), _tuple(axis))), like, G.roll)
family(("triu", "tril"), "(Tensor x, int k=0) -> Tensor", lambda f, n, x, k=0: T(f(A(x, n), k)), _fake_tri, G.TRI)


def _fake_cat(arrays, axis=0):
    ax = axis % arrays[0].dim()
    shape = list(arrays[0].shape)
    shape[ax] = sum(a.shape[ax] for a in arrays)
    return new(shape, arrays[0].dtype)


define("concatenate", "(Tensor[] arrays, int axis=0) -> Tensor",
       lambda arrays, axis=0: T(fv.concatenate([A(a, "concatenate") for a in arrays], axis)), _fake_cat,
       G.concatenate)
define("masked_fill", "(Tensor x, Tensor mask, float value) -> Tensor",
       lambda x, mask, value: T(fv.masked_fill(A(x, "masked_fill"), A(mask, "masked_fill"), value)), like,
       G.masked_fill)


def _pairs(pad_width):
    """[b0, a0, b1, a1, ...] (numpy's order: first dim first) -> ((b0, a0), (b1, a1), ...)."""
    return tuple(zip(pad_width[0::2], pad_width[1::2]))


define("pad", "(Tensor x, int[] pad_width, str mode='constant', float value=0.0) -> Tensor",
       lambda x, pad_width, mode="constant", value=0.0: T(fv.pad(A(x, "pad"), _pairs(pad_width), mode, value)),
       lambda x, pad_width, mode="constant", value=0.0: new(
           [n + b + a for n, (b, a) in zip(x.shape, _pairs(pad_width))], x.dtype), G.pad)
define("pad_backward", "(Tensor grad, int[] pad_width, str mode='constant') -> Tensor",
       lambda grad, pad_width, mode="constant": T(fv.pad_backward(A(grad, "pad_backward"), _pairs(pad_width), mode)),
       lambda grad, pad_width, mode="constant": new(
           [n - b - a for n, (b, a) in zip(grad.shape, _pairs(pad_width))], grad.dtype), G.pad_backward)


# -- in-place writes and their functional twins -----------------------------------------------------
def _add_assign_scaled(dst, src, scale):
    d = A(dst, "add_assign_scaled", fresh=True)
    fv.add_assign_scaled(d, A(src, "add_assign_scaled"), scale)
    dst.copy_(to_tensor(d))


def _add_scaled(dst, src, scale):
    d = A(dst, "add_scaled", fresh=True)
    fv.add_assign_scaled(d, A(src, "add_scaled"), scale)
    return to_tensor(d)


define("add_assign_scaled", "(Tensor(a!) dst, Tensor src, float scale) -> ()", _add_assign_scaled,
       lambda dst, src, scale: None, mutates=("dst",))
define("add_scaled", "(Tensor dst, Tensor src, float scale) -> Tensor", _add_scaled, like, G.add_scaled)


def slice_key(ndim, dim, start, end, step):
    return (slice(None),) * (dim % ndim) + (slice(start, end, step),)


def _slice_write_(dst, value, dim, start, end, step=1):
    d = A(dst, "slice_write_", fresh=True)
    key = slice_key(dst.dim(), dim, start, end, step)
    fv.setitem(d, key, A(value, "slice_write_"))
    dst[key].copy_(to_tensor(d[key]))


def _slice_write(dst, value, dim, start, end, step=1):
    d = A(dst, "slice_write", fresh=True)
    fv.setitem(d, slice_key(dst.dim(), dim, start, end, step), A(value, "slice_write"))
    return to_tensor(d)


define("slice_write_", "(Tensor(a!) dst, Tensor value, int dim, int start, int end, int step=1) -> ()",
       _slice_write_, lambda *a: None, mutates=("dst",))
define("slice_write", "(Tensor dst, Tensor value, int dim, int start, int end, int step=1) -> Tensor",
       _slice_write, like, G.slice_write)


def _scatter_like(name, fn):
    def functional(base, dim, index, src):
        return T(fn(A(base, name), dim, to_numpy_index(index), A(src, name)))

    def inplace(base, dim, index, src):
        base.copy_(T(fn(A(base, name + "_"), dim, to_numpy_index(index), A(src, name + "_"))))

    schema = "(Tensor{} base, int dim, Tensor index, Tensor src) -> {}"
    define(name, schema.format("", "Tensor"), functional, lambda base, *a: like(base), G.SCATTER[name])
    define(name + "_", schema.format("(a!)", "()"), inplace, lambda *a: None, mutates=("base",))


def to_numpy_index(index):
    """Indices go to fuelvk as host arrays: it validates them (negative wrap, bounds) before upload.
    Device indices stay on the device (fuelvk validates them there)."""
    return to_array(index, "index") if is_device_tensor(index) else index.detach().numpy()


_scatter_like("scatter_add", fv.scatter_add)
_scatter_like("index_add", fv.index_add)


def _fake_take(x, indices, axis=None):
    if axis is None:
        return new(indices.shape, x.dtype)
    ax = axis % x.dim()
    return new(list(x.shape[:ax]) + list(indices.shape) + list(x.shape[ax + 1:]), x.dtype)


define("take", "(Tensor x, Tensor indices, int? axis=None) -> Tensor",
       lambda x, indices, axis=None: T(fv.take(A(x, "take"), to_numpy_index(indices), axis)),
       _fake_take, G.take)


def _fake_take_along(x, indices, axis):
    shape = list(x.shape)
    shape[axis % x.dim()] = indices.shape[axis % x.dim()]
    return new(torch.broadcast_shapes(shape, indices.shape), x.dtype)


define("take_along_axis", "(Tensor x, Tensor indices, int axis) -> Tensor",
       lambda x, indices, axis: T(fv.take_along_axis(A(x, "take_along_axis"), to_numpy_index(indices), axis)),
       _fake_take_along, G.take_along_axis)


# -- reductions, softmax, norms, cumsum ---------------------------------------------------------------
family(("sum", "mean", "max", "min"), "(Tensor x, int[]? axis=None, bool keepdims=False) -> Tensor",
       lambda f, n, x, axis=None, keepdims=False: T(f(A(x, n), _tuple(axis), keepdims)),
       lambda x, axis=None, keepdims=False: new(reduced_shape(x, axis, keepdims), x.dtype), G.REDUCE)
family(("argmax", "argmin"), "(Tensor x, int? axis=None) -> Tensor", lambda f, n, x, axis=None: T(f(A(x, n), axis)),
       lambda x, axis=None: new(reduced_shape(x, None if axis is None else [axis], False), torch.int64))
define("cumsum", "(Tensor x, int? axis=None) -> Tensor", lambda x, axis=None: T(fv.cumsum(A(x, "cumsum"), axis)),
       lambda x, axis=None: new((x.numel(),) if axis is None else x.shape, x.dtype), G.cumsum)

define("softmax", "(Tensor x, int axis=-1) -> Tensor", lambda x, axis=-1: T(fv.softmax(A(x, "softmax"), axis)),
       like, G.softmax)
define("softmax_backward", "(Tensor y, Tensor grad, int axis=-1) -> Tensor",
       lambda y, grad, axis=-1: T(fv.softmax_backward(A(y, "softmax_backward"), A(grad, "softmax_backward"), axis)),
       like)
define("rms_norm", "(Tensor x, float eps=1e-06, Tensor? weight=None) -> Tensor",
       lambda x, eps=1e-6, weight=None: T(fv.rms_norm(A(x, "rms_norm"), eps, A(weight, "rms_norm"))),
       like, G.rms_norm)
define("layer_norm", "(Tensor x, float eps=1e-05, Tensor? weight=None, Tensor? bias=None) -> Tensor",
       lambda x, eps=1e-5, weight=None, bias=None: T(fv.layer_norm(
           A(x, "layer_norm"), eps, A(weight, "layer_norm"), A(bias, "layer_norm"))),
       like, G.layer_norm)


def _rms_norm_backward(x, grad, eps=1e-6, weight=None):
    out = fv.rms_norm_backward(A(x, "rms_norm_backward"), A(grad, "rms_norm_backward"), eps,
                               A(weight, "rms_norm_backward"))
    dx, dw = out if weight is not None else (out, None)
    return to_tensor(dx), _or_empty(to_tensor(dw), x)


def _layer_norm_backward(x, grad, eps=1e-5, weight=None, bias=None):
    out = fv.layer_norm_backward(A(x, "layer_norm_backward"), A(grad, "layer_norm_backward"), eps,
                                 A(weight, "layer_norm_backward"), A(bias, "layer_norm_backward"))
    dx, dw, db = out if (weight is not None or bias is not None) else (out, None, None)
    return to_tensor(dx), _or_empty(to_tensor(dw), x), _or_empty(to_tensor(db), x)


def _or_empty(t, x):
    """A gradient that does not exist (no weight / no bias) is returned as an empty tensor."""
    return torch.empty(0, dtype=x.dtype) if t is None else t


def _fake_norm_backward(x, grad, eps, *params):
    return (like(x),) + tuple(new((x.shape[-1],) if p is not None else (0,), x.dtype) for p in params)


def _fused_add_rmsnorm(x, residual, weight, eps=1e-6):
    r = A(residual, "fused_add_rmsnorm", fresh=True)
    out = fv.fused_add_rmsnorm(A(x, "fused_add_rmsnorm"), r, A(weight, "fused_add_rmsnorm"), eps)
    residual.copy_(to_tensor(r))
    return to_tensor(out)


define("fused_add_rmsnorm", "(Tensor x, Tensor(a!) residual, Tensor weight, float eps=1e-06) -> Tensor",
       _fused_add_rmsnorm, like, mutates=("residual",))


def _sampler(name, rows):
    """torch op of fuelvk.<name>(probs, *rows, seed): torch passes every argument positionally."""
    def impl(probs, *args):
        seed = args[len(rows)] if len(args) > len(rows) else None
        return T(getattr(fv, name)(A(probs, name), *(A(r, name) for r in args[:len(rows)]), seed=seed))
    define(name, f"(Tensor probs, {', '.join('Tensor ' + r for r in rows)}, int? seed=None) -> Tensor", impl,
           lambda probs, *args: new((probs.shape[0],), torch.int64))


_sampler("top_k_sampling_from_probs", ("top_k",))
_sampler("top_p_sampling_from_probs", ("top_p",))
_sampler("top_k_top_p_sampling_from_probs", ("top_k", "top_p"))


def _paged_attention(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len=None, qo_indptr=None,
                     causal=True, scale=None):
    n = "paged_attention"
    return T(fv.paged_attention(A(q, n), A(k_cache, n), A(v_cache, n), A(kv_indptr, n), A(kv_indices, n),
                                A(kv_last_page_len, n), A(qo_indptr, n), causal=causal, scale=scale,
                                return_lse=True))


define("paged_attention", "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor kv_indptr, Tensor kv_indices, "
       "Tensor? kv_last_page_len=None, Tensor? qo_indptr=None, bool causal=True, float? scale=None) -> (Tensor, Tensor)",
       _paged_attention, lambda q, *a, **k: (like(q), new(q.shape[:2], torch.float32)))


define("rms_norm_backward", "(Tensor x, Tensor grad, float eps=1e-06, Tensor? weight=None) -> (Tensor, Tensor)",
       _rms_norm_backward, lambda x, grad, eps=1e-6, weight=None: _fake_norm_backward(x, grad, eps, weight))
define("layer_norm_backward",
       "(Tensor x, Tensor grad, float eps=1e-05, Tensor? weight=None, Tensor? bias=None) -> (Tensor, Tensor, Tensor)",
       _layer_norm_backward,
       lambda x, grad, eps=1e-5, weight=None, bias=None: _fake_norm_backward(x, grad, eps, weight, bias))


# -- matmul family, conv, rope, attention --------------------------------------------------------------
def _fake_matmul(a, b):
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    shape = list(torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])) + [a2.shape[-2], b2.shape[-1]]
    if a.dim() == 1:
        shape.pop(-2)
    if b.dim() == 1:
        shape.pop(-1)
    return new(shape, torch.float32 if a.dtype != b.dtype else a.dtype)


define("matmul", "(Tensor a, Tensor b) -> Tensor",
       lambda a, b: T(fv.matmul(A(a, "matmul"), A(b, "matmul"))), _fake_matmul, G.matmul)
define("qmatmul", "(Tensor x, Tensor w_blocks, str kind) -> Tensor",
       lambda x, w_blocks, kind: T(fv.qmatmul(A(x, "qmatmul"), A(w_blocks, "qmatmul"), kind)),
       lambda x, w_blocks, kind: new(list(x.shape[:-1]) + [w_blocks.shape[0]], torch.float32), G.qmatmul)
# GGML blocks travel as uint8 [rows, bytes per row] (gguf's layout): the logical last dim is
# bytes / block bytes * block values (fuelvk.quant's rule).
define("quantize", "(Tensor x, str kind='q8_0') -> Tensor",
       lambda x, kind="q8_0": T(fq.quantize(A(x, "quantize"), kind)),
       lambda x, kind="q8_0": new(list(x.shape[:-1]) + [x.shape[-1] // BLOCK[kind][0] * BLOCK[kind][1]],
                                  torch.uint8))
define("dequantize", "(Tensor blocks, str kind) -> Tensor",
       lambda blocks, kind: T(fq.dequantize(A(blocks, "dequantize"), kind)),
       lambda blocks, kind: new(list(blocks.shape[:-1]) + [blocks.shape[-1] // BLOCK[kind][1] * BLOCK[kind][0]],
                                torch.float32))


def _conv_out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _fake_conv2d(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    hw = [_conv_out(x.shape[-2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in range(2)]
    return new(list(x.shape[:-3]) + [w.shape[0]] + hw, x.dtype)


define("conv2d", "(Tensor x, Tensor w, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
       "int groups=1) -> Tensor",
       lambda x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1: T(fv.conv2d(
           A(x, "conv2d"), A(w, "conv2d"), A(bias, "conv2d"), tuple(stride), tuple(padding),
           tuple(dilation), groups)), _fake_conv2d, G.conv2d)
define("rope", "(Tensor x, Tensor cos, Tensor sin, bool interleaved=False, int? rotary_dim=None) -> Tensor",
       lambda x, cos, sin, interleaved=False, rotary_dim=None: T(fv.rope(
           A(x, "rope"), A(cos, "rope"), A(sin, "rope"), interleaved=interleaved,
           rotary_dim=rotary_dim)), like, G.rope)

_ATTN_OPTS = "bool is_causal=False, float? scale=None, int[] window=[-1, -1], Tensor? alibi_slopes=None, " \
             "float? softcap=None"


def _attn_kw(is_causal, scale, window, alibi_slopes, softcap, op):
    return {"is_causal": is_causal, "scale": scale, "window": tuple(window), "alibi_slopes": A(alibi_slopes, op),
            "softcap": softcap}


def _attention(q, k, v, is_causal=False, scale=None, window=(-1, -1), alibi_slopes=None, softcap=None):
    op = "scaled_dot_product_attention"
    return T(fv.scaled_dot_product_attention(A(q, op), A(k, op), A(v, op), return_lse=True,
                                             **_attn_kw(is_causal, scale, window, alibi_slopes, softcap, op)))


def _attention_backward(do, q, k, v, o, lse, is_causal=False, scale=None, window=(-1, -1), alibi_slopes=None,
                        softcap=None):
    op = "scaled_dot_product_attention_backward"
    return T(fv.scaled_dot_product_attention_backward(
        *(A(t, op) for t in (do, q, k, v, o, lse)), **_attn_kw(is_causal, scale, window, alibi_slopes, softcap, op)))


define("scaled_dot_product_attention", f"(Tensor q, Tensor k, Tensor v, {_ATTN_OPTS}) -> (Tensor, Tensor)",
       _attention, lambda q, k, v, *a, **kw: (new(q.shape[:3] + v.shape[3:], q.dtype), new(q.shape[:3], torch.float32)),
       G.attention, setup=G.save_attention)
define("scaled_dot_product_attention_backward",
       f"(Tensor do, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, {_ATTN_OPTS}) -> (Tensor, Tensor, Tensor)",
       _attention_backward, lambda do, q, k, v, *a, **kw: (like(q), new(k.shape, torch.float32),
                                                             new(k.shape, torch.float32)))
