"""aten ops of the fuelvk device for neural-network layers: activation backwards, softmax and
log_softmax (+ the safe softmax of torch's math attention), mse / nll losses, layer and batch norm,
dropout, convolution. Registered through _aten's KERNELS (see _aten.py for the rules)."""
import math
import weakref

import numpy as np
import torch

import fuelvk as fv
from .. import runtime as fv_runtime
from ..errors import FuelVKError
from ..kernels.attention import CPU_DECODE_ROWS
from ..ops import elementwise as fv_elementwise, indexing as fv_indexing, rng as fv_rng
from .. import dtypes as _dt
from . import device as fuelvk_device
from ._aten import _float, array_of, composite, kernel, operand, tensor_of
from ._bridge import numpy_dtype
from ._fallback import Unhandled, run_on_cpu


# -- dropout ---------------------------------------------------------------------------------------
@kernel("native_dropout")
def native_dropout(input, p, train):
    """Dropout with the mask drawn on the device (fuelvk.ops.rng.keep_mask, Philox4x32-10): each call keys
    its draw with 63 bits from torch's CPU generator, so torch.manual_seed reproduces the masks (they
    are not the CPU kernel's masks: that one draws bernoulli_ on the CPU stream). The output is
    input * mask * (1 / (1 - p)) in the CPU kernel's order; the mask (bool) is kept for the backward."""
    _float(input)
    if train is False:
        keep = fuelvk_device.upload(torch.ones(tuple(input.shape), dtype=torch.bool))
        return tensor_of(fv.copy(array_of(input))), keep
    keep = 1.0 - p
    key = int(torch.empty((), dtype=torch.int64).random_())   # advances torch's default CPU generator
    mask = fv_rng.keep_mask(tuple(input.shape), keep, key)
    out = fv.multiply(fv.multiply(array_of(input), mask), 0.0 if keep == 0 else 1.0 / keep)
    return tensor_of(out), tensor_of(mask)


@kernel("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    _float(grad_output)
    g = array_of(grad_output)
    return tensor_of(fv.multiply(fv.masked_fill(g, fv.equal(array_of(mask), False), 0), scale))


# -- gelu, erf ------------------------------------------------------------------------------------------
# erf has no fuelvk kernel: Abramowitz & Stegun 7.1.26, |error| < 1.5e-7 (float32's resolution near 1),
# computed in float32 (half inputs are widened and the result rounded back); float64 is refused.
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def _widened(x):
    """(x in float32 if it is a half type, else x; x's dtype)."""
    return (x.astype(np.float32) if x.dtype in (_dt.float16, _dt.bfloat16) else x), x.dtype


def _narrowed(x, dt):
    return x if x.dtype == dt else x.astype(dt)


def _erf(x):
    """erf of a float32/f16/bf16 Array, in float32 then back to x's dtype."""
    if x.dtype == np.float64:
        raise Unhandled("erf in float64 (fuelvk's erf is accurate to float32)")
    dt, x = x.dtype, x.astype(np.float32) if x.dtype != np.float32 else x
    ax = fv.abs(x)
    t = fv.reciprocal(fv.affine(ax, _ERF_P, 1.0))
    poly = fv.multiply(t, _ERF_A[0])
    for c in _ERF_A[1:]:
        poly = fv.multiply(fv.add(poly, c), t)
    y = fv.subtract(1.0, fv.multiply(poly, fv.exp(fv.negative(fv.square(ax)))))
    y = fv.multiply(y, fv.sign(x))
    return y if dt == np.float32 else y.astype(dt)


@kernel("erf")
def erf(self):
    _float(self)
    return tensor_of(_erf(array_of(self)))


@kernel("gelu")
def gelu(self, approximate="none"):
    """tanh: fuelvk's gelu kernel; none (exact): 0.5 x (1 + erf(x / sqrt 2))."""
    _float(self)
    x = array_of(self)
    if approximate == "tanh":
        return tensor_of(fv.gelu(x))
    x, dt = _widened(x)   # half inputs: computed in float32 and rounded once, as torch's CPU kernel does
    return tensor_of(_narrowed(fv.multiply(fv.multiply(x, 0.5), fv.add(_erf(fv.multiply(x, math.sqrt(0.5))), 1.0)),
                               dt))


# -- activation backwards (aten's formulas call these) -----------------------------------------------
@kernel("sigmoid_backward")
def sigmoid_backward(grad_output, output):
    y = array_of(output)
    return tensor_of(fv.multiply(fv.multiply(array_of(grad_output), y), fv.subtract(1.0, y)))


@kernel("tanh_backward")
def tanh_backward(grad_output, output):
    return tensor_of(fv.multiply(array_of(grad_output), fv.subtract(1.0, fv.square(array_of(output)))))


@kernel("silu_backward")
def silu_backward(grad_output, self):
    x = array_of(self)
    s = fv.sigmoid(x)
    return tensor_of(fv.multiply(fv.multiply(array_of(grad_output), s), fv.add(fv.multiply(x, fv.subtract(1.0, s)), 1.0)))


@kernel("threshold_backward")
def threshold_backward(grad_output, self, threshold):
    return tensor_of(fv.masked_fill(array_of(grad_output), fv.less_equal(array_of(self), threshold), 0))


@kernel("gelu_backward")
def gelu_backward(grad_output, self, approximate="none"):
    """tanh: d/dx of 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi), c = 0.044715;
    none: 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)."""
    _float(self)
    x, dt = _widened(array_of(self))
    x2 = fv.square(x)
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = fv.tanh(fv.multiply(fv.multiply(x, fv.affine(x2, c, 1.0)), k))
        dt = fv.multiply(fv.subtract(1.0, fv.square(t)), fv.affine(x2, 3 * c * k, k))
        d = fv.affine(fv.add(t, fv.multiply(x, dt)), 0.5, 0.5)
    else:
        cdf = fv.affine(_erf(fv.multiply(x, math.sqrt(0.5))), 0.5, 0.5)
        d = fv.add(cdf, fv.multiply(x, fv.multiply(fv.exp(fv.multiply(x2, -0.5)), 1 / math.sqrt(2 * math.pi))))
    return tensor_of(_narrowed(fv.multiply(_widened(array_of(grad_output))[0], d), dt))


# -- convolution ------------------------------------------------------------------------------------
@kernel("convolution_overrideable")
def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch sends a non-CPU/CUDA device's convolution here (its own kernel only raises): fuelvk.conv2d
    for a plain 2-D convolution, aten::convolution on the CPU for the rest (1-D/3-D, transposed)."""
    if not transposed and input.dim() == 4 and weight.dim() == 4 and fuelvk_device.is_fuelvk(weight):
        b = array_of(bias) if bias is not None else None
        return tensor_of(fv.conv2d(array_of(input), array_of(weight), b, tuple(stride), tuple(padding), tuple(dilation), groups))
    return run_on_cpu(torch.ops.aten.convolution.default, (input, weight, bias, stride, padding, dilation,
                                                          transposed, output_padding, groups), {},
                      "only plain 2-D convolutions run on fuelvk", "aten::convolution_overrideable")


@kernel("convolution_backward_overrideable")
def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
                                      output_padding, groups, output_mask):
    """A plain 2-D convolution's gradients as fuelvk.conv2d calls (per group): the input's is the
    gradient spread onto a stride-dilated grid correlated with the flipped, channel-swapped weight;
    the weight's is the input correlated with the gradient (batch as channels, stride and dilation
    swapped); the bias's is a sum. Transposed and non-2-D convolutions run on the CPU."""
    if transposed or input.dim() != 4 or not fuelvk_device.is_fuelvk(weight):
        bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
        return run_on_cpu(torch.ops.aten.convolution_backward.default,
                          (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                           output_padding, groups, output_mask), {},
                          "only plain 2-D convolutions run on fuelvk", "aten::convolution_backward_overrideable")
    _float(input)
    g, x, w = array_of(grad_output), array_of(input), array_of(weight)
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    parts = [(g[:, k * cout:(k + 1) * cout], x[:, k * cin:(k + 1) * cin], w[k * cout:(k + 1) * cout])
             for k in range(groups)]
    gx = gw = gb = None
    if output_mask[0]:
        gx = tensor_of(_cat1([_conv_grad_input(gg, tuple(x.shape[2:]), ww, stride, padding, dilation)
                              for gg, _, ww in parts], 1))
    if output_mask[1]:
        gw = tensor_of(_cat1([_conv_grad_weight(gg, xx, tuple(w.shape[2:]), stride, padding, dilation)
                              for gg, xx, _ in parts], 0))
    if output_mask[2]:
        gb = tensor_of(fv.sum(g, axis=(0, 2, 3)))
    return gx, gw, gb


def _cat1(arrays, axis):
    return arrays[0] if len(arrays) == 1 else fv.concatenate(arrays, axis=axis)


def _conv_grad_input(g, size, w, stride, padding, dilation):
    n, o, oh, ow = g.shape
    k = w.shape[2:]
    spread = [size[i] + (k[i] - 1) * dilation[i] for i in range(2)]   # the grid the full correlation reads
    lead = [(k[i] - 1) * dilation[i] - padding[i] for i in range(2)]  # where gradient row 0 lands on it
    keys, first = [], []
    for i, m in enumerate((oh, ow)):   # gradient rows landing outside the grid only touch padding: dropped
        y0 = max(0, -(lead[i] // stride[i])) if lead[i] < 0 else 0
        y1 = min(m - 1, (spread[i] - 1 - lead[i]) // stride[i])
        first.append(lead[i] + y0 * stride[i])
        keys.append((slice(y0, y1 + 1), slice(first[i], first[i] + (y1 - y0) * stride[i] + 1, stride[i])))
    grid = fv.zeros((n, o, spread[0], spread[1]), dtype=g.dtype)
    grid[:, :, keys[0][1], keys[1][1]] = g[:, :, keys[0][0], keys[1][0]]
    flipped = fv.copy(fv.permute_dims(fv.flip(w, (2, 3)), (1, 0, 2, 3)))
    return fv.conv2d(grid, flipped, None, (1, 1), (0, 0), tuple(dilation), 1)


def _conv_grad_weight(g, x, k, stride, padding, dilation):
    xt = fv.copy(fv.permute_dims(x, (1, 0, 2, 3)))
    gt = fv.copy(fv.permute_dims(g, (1, 0, 2, 3)))
    out = fv.conv2d(xt, gt, None, tuple(dilation), tuple(padding), tuple(stride), 1)   # [C, O, >=kh, >=kw]
    return fv.copy(fv.permute_dims(out[:, :, :k[0], :k[1]], (1, 0, 2, 3)))


# -- softmax, losses ---------------------------------------------------------------------------------
def _widen_if(x, half_to_float):
    """softmax's half_to_float: a half input computed and returned in float32."""
    return x.astype(np.float32) if half_to_float and x.dtype in (_dt.float16, _dt.bfloat16) else x


@kernel("_softmax")
def _softmax(self, dim, half_to_float):
    _float(self)
    return tensor_of(fv.softmax(_widen_if(array_of(self), half_to_float), axis=dim))


@kernel("_safe_softmax")
def _safe_softmax(self, dim, dtype=None):
    """softmax, with 0 (not NaN) in rows that are all -inf (what attention's math path calls)."""
    if dtype is not None and dtype != self.dtype:
        raise Unhandled(f"dtype={dtype}")
    _float(self)
    x = array_of(self)
    empty_rows = fv.equal(fv.max(x, axis=dim, keepdims=True), -math.inf)
    return tensor_of(fv.masked_fill(fv.softmax(x, axis=dim), empty_rows.broadcast_to(x.shape), 0))


@kernel("_softmax_backward_data")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    return tensor_of(fv.softmax_backward(array_of(output), array_of(grad_output), axis=dim))


@kernel("_log_softmax")
def _log_softmax(self, dim, half_to_float):
    _float(self)
    x = _widen_if(array_of(self), half_to_float)
    z = fv.subtract(x, fv.max(x, axis=dim, keepdims=True))
    return tensor_of(fv.subtract(z, fv.log(fv.sum(fv.exp(z), axis=dim, keepdims=True))))


@kernel("_log_softmax_backward_data")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    g = array_of(grad_output)
    return tensor_of(fv.subtract(g, fv.multiply(fv.exp(array_of(output)), fv.sum(g, axis=dim, keepdims=True))))


_REDUCTION = {0: None, 1: "mean", 2: "sum"}


@kernel("mse_loss")
def mse_loss(self, target, reduction=1):
    npdt = numpy_dtype("aten", _float(self, target))
    sq = fv.square(fv.subtract(operand(self, npdt), operand(target, npdt)))
    r = _REDUCTION[reduction]
    return tensor_of(sq if r is None else (fv.mean(sq) if r == "mean" else fv.sum(sq)))


@kernel("mse_loss_backward")
def mse_loss_backward(grad_output, self, target, reduction):
    npdt = numpy_dtype("aten", _float(self, target))
    scale = 2.0 / self.numel() if _REDUCTION[reduction] == "mean" else 2.0
    d = fv.subtract(operand(self, npdt), operand(target, npdt))
    return tensor_of(fv.multiply(fv.multiply(d, scale), operand(grad_output, npdt)))


def _nll_parts(self, target, weight, ignore_index):
    """(x [N, C], targets [N, 1] checked against [0, C) or ignore_index (one device launch, deferred
    verdict), their IDX kind, ignored [N] bool, the targets' class weights [N] or None). Ignored rows'
    targets stay as they are: the unchecked gather clamps them, their rows are masked to 0 after it
    (masked, not multiplied by a 0 weight: an ignored row's log-prob may be -inf or NaN)."""
    if self.dim() not in (1, 2) or not fuelvk_device.is_fuelvk(target):
        raise Unhandled("an input of more than 2 dims (nll_loss2d) or a CPU target")
    npdt = numpy_dtype("nll_loss", _float(self))
    x = array_of(self).reshape(1, -1) if self.dim() == 1 else array_of(self)
    t = array_of(target).reshape(-1)
    t, kind = fv_indexing.checked_indices("nll_loss", t, x.shape[1], ignore=ignore_index)
    ignored = fv.equal(t, ignore_index)
    wt = None if weight is None else fv_indexing.gather_along(operand(weight, npdt), t, kind, 0, f"b{x.dtype.itemsize}")
    return x, t.reshape(-1, 1), kind, ignored, wt


@kernel("nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    """-x[i, t_i] * w[t_i] over rows whose target is not ignore_index: one check, one gather, masks and
    sums (8 launches unweighted, mean)."""
    x, t, kind, ignored, wt = _nll_parts(self, target, weight, ignore_index)
    picked = fv.masked_fill(fv_indexing.gather_along(x, t, kind, 1, f"b{x.dtype.itemsize}").reshape(-1), ignored, 0)
    r = _REDUCTION[reduction]
    if wt is not None:
        picked = fv.multiply(picked, wt)
    if r is None:
        out = fv.negative(picked)
        return tensor_of(out if self.dim() == 2 else out.reshape(())), tensor_of(fv.zeros((), x.dtype))
    if wt is None:   # (ones: a fill and a mask, no upload, so that launch plans replay the call)
        w = fv.masked_fill(fv.zeros(ignored.shape, x.dtype), fv.equal(ignored, False), 1.0)
    else:
        w = fv.masked_fill(wt, ignored, 0)
    total = fv.sum(w)
    if r == "mean":
        return tensor_of(fv_elementwise.fused("nll_loss", fv.sum(picked), total, "divide", post="negative")), \
            tensor_of(total)
    return tensor_of(fv.negative(fv.sum(picked))), tensor_of(total)


@kernel("nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """grad[i, t_i] = -w[t_i] * g (/ total_weight for mean), 0 on ignored rows: one check, the row values,
    one scatter into zeros."""
    x, t, kind, ignored, wt = _nll_parts(self, target, weight, ignore_index)
    g = array_of(grad_output).reshape(-1) if grad_output.dim() else array_of(grad_output)
    if _REDUCTION[reduction] == "mean":
        coef = fv_elementwise.fused("nll_loss_backward", g, array_of(total_weight), "divide", post="negative")
    else:
        coef = fv.negative(g)
    vals = coef.broadcast_to(ignored.shape) if wt is None else fv.multiply(wt, coef)
    vals = fv.masked_fill(vals, ignored, 0).reshape(-1, 1)
    grad = fv_indexing.scatter_along(fv.zeros(x.shape, x.dtype), vals, t, kind, 1)
    return tensor_of(grad.reshape(tuple(self.shape)))


# -- norms -----------------------------------------------------------------------------------------
def _rows(t, k):
    """t as (rows, cols) over its last k dims (a view when the layout allows)."""
    cols = math.prod(t.shape[t.dim() - k:]) if k else 1
    return array_of(t).reshape(-1, cols)


@kernel("native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    _float(input)
    k = len(normalized_shape)
    x = _rows(input, k)
    w = array_of(weight).reshape(-1) if weight is not None else None
    b = array_of(bias).reshape(-1) if bias is not None else None
    out = fv.layer_norm(x, eps, w, b).reshape(tuple(input.shape))
    mean = fv.mean(x, axis=-1, keepdims=True)
    var = fv.mean(fv.square(fv.subtract(x, mean)), axis=-1, keepdims=True)
    rstd = fv.reciprocal(fv.sqrt(fv.add(var, eps)))
    stat = tuple(input.shape[:input.dim() - k]) + (1,) * k
    return tensor_of(out), tensor_of(mean.reshape(stat)), tensor_of(rstd.reshape(stat))


@kernel("native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = len(normalized_shape)
    x, g = _rows(input, k), _rows(grad_out, k)
    m, r = array_of(mean).reshape(-1, 1), array_of(rstd).reshape(-1, 1)
    xhat = fv.multiply(fv.subtract(x, m), r)
    dx = dw = db = None
    if output_mask[0]:
        gw = fv.multiply(g, array_of(weight).reshape(-1)) if weight is not None else g
        inner = fv.subtract(fv.subtract(gw, fv.mean(gw, axis=-1, keepdims=True)),
                            fv.multiply(xhat, fv.mean(fv.multiply(gw, xhat), axis=-1, keepdims=True)))
        dx = tensor_of(fv.multiply(inner, r).reshape(tuple(input.shape)))
    if output_mask[1] and weight is not None:
        dw = tensor_of(fv.sum(fv.multiply(g, xhat), axis=0).reshape(tuple(weight.shape)))
    if output_mask[2] and bias is not None:
        db = tensor_of(fv.sum(g, axis=0).reshape(tuple(bias.shape)))
    return dx, dw, db


def _channel_shape(input):
    return (1, -1) + (1,) * (input.dim() - 2)


@kernel("native_batch_norm")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm over dim 1. Training: batch statistics (biased variance normalizes, the unbiased one
    updates running_var), running statistics updated in place; eval: the running statistics."""
    npdt = numpy_dtype("batch_norm", _float(input))
    shape = _channel_shape(input)
    x = array_of(input)
    axes = (0,) + tuple(range(2, input.dim()))
    if training:
        count = input.numel() // input.shape[1]
        mean = fv.mean(x, axis=axes)
        var = fv.mean(fv.square(fv.subtract(x, mean.reshape(shape))), axis=axes)
        if running_mean is not None:
            fuelvk_device.assign(running_mean, fv.add(fv.multiply(array_of(running_mean), 1 - momentum),
                                          fv.multiply(mean, momentum)))
        if running_var is not None:
            unbiased = fv.multiply(var, count / max(count - 1, 1))
            fuelvk_device.assign(running_var, fv.add(fv.multiply(array_of(running_var), 1 - momentum),
                                         fv.multiply(unbiased, momentum)))
    elif running_mean is None or running_var is None:
        raise Unhandled("eval-mode batch norm without running statistics")
    else:
        mean, var = operand(running_mean, npdt), operand(running_var, npdt)
    invstd = fv.reciprocal(fv.sqrt(fv.add(var, eps)))
    scale = fv.multiply(invstd, operand(weight, npdt)) if weight is not None else invstd
    y = fv.multiply(fv.subtract(x, mean.reshape(shape)), scale.reshape(shape))
    if bias is not None:
        y = fv.add(y, operand(bias, npdt).reshape(shape))
    if training:
        return tensor_of(y), tensor_of(mean), tensor_of(invstd)
    return tensor_of(y), fuelvk_device.empty([0], input.dtype), fuelvk_device.empty([0], input.dtype)


@kernel("native_batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                               eps, output_mask):
    """dx = w invstd (g - mean(g) - xhat mean(g xhat)) in training (g w invstd in eval), dw = sum(g xhat),
    db = sum(g), over every dim but 1."""
    npdt = numpy_dtype("batch_norm", _float(input))
    shape = _channel_shape(input)
    axes = (0,) + tuple(range(2, input.dim()))
    g, x = array_of(grad_out), array_of(input)
    if train:
        mean, invstd = array_of(save_mean), array_of(save_invstd)
    else:
        mean = operand(running_mean, npdt)
        invstd = fv.reciprocal(fv.sqrt(fv.add(operand(running_var, npdt), eps)))
    xhat = fv.multiply(fv.subtract(x, mean.reshape(shape)), invstd.reshape(shape))
    scale = fv.multiply(invstd, operand(weight, npdt)) if weight is not None else invstd
    dx = dw = db = None
    if output_mask[0]:
        if train:
            inner = fv.subtract(fv.subtract(g, fv.mean(g, axis=axes, keepdims=True)),
                                fv.multiply(xhat, fv.mean(fv.multiply(g, xhat), axis=axes, keepdims=True)))
        else:
            inner = g
        dx = tensor_of(fv.multiply(inner, scale.reshape(shape)))
    if output_mask[1] and weight is not None:
        dw = tensor_of(fv.sum(fv.multiply(g, xhat), axis=axes))
    if output_mask[2] and weight is not None:
        db = tensor_of(fv.sum(g, axis=axes))
    return dx, dw, db


# -- pooling ---------------------------------------------------------------------------------------
def _pool_size(n, k, s, p, d, ceil_mode):
    """torch's pooling output size along one dim."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:   # the last window must start inside the input or left pad
        out -= 1
    return out


def _pair(v, default=None):
    v = list(v) if v else list(default)
    return v * 2 if len(v) == 1 else v


def _first_inside(start, dilation):
    """The first window cell at or after start that is inside the input (torch: while < 0 += dilation)."""
    while start < 0:
        start += dilation
    return start


@kernel("max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The maximum over each window as one fuelvk.maximum per window offset, on strided views of the
    input padded with -inf; indices (flat h * W + w into the unpadded plane, torch's first on ties) kept
    alongside by a select where an offset is strictly greater."""
    _float(self)
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(stride, kernel_size)
    (ph, pw), (dh, dw) = _pair(padding if isinstance(padding, (list, tuple)) else [padding]), \
        _pair(dilation if isinstance(dilation, (list, tuple)) else [dilation])
    x = array_of(self)
    h, w = self.shape[-2:]
    oh, ow = _pool_size(h, kh, sh, ph, dh, ceil_mode), _pool_size(w, kw, sw, pw, dw, ceil_mode)
    right_h, right_w = (oh - 1) * sh + dh * (kh - 1) + 1 - h - ph, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pw
    lead = [(0, 0)] * (self.dim() - 2)
    xp = fv.pad(x, lead + [(ph, max(right_h, 0)), (pw, max(right_w, 0))], constant_values=-math.inf)
    # flat input position of every padded cell (-1 in the padding)
    pos = fv.arange(h * w, dtype=np.int64).reshape(h, w)
    posp = fv.pad(pos, [(ph, max(right_h, 0)), (pw, max(right_w, 0))], constant_values=-1)
    batch = tuple(self.shape[:-2]) + (oh, ow)
    # torch's start: maximum -inf at each window's first cell inside the input (so an all -inf window
    # points there, never into the padding); a later cell wins only when strictly greater
    first = np.add.outer(np.array([_first_inside(y * sh - ph, dh) for y in range(oh)]) * w,
                         np.array([_first_inside(x * sw - pw, dw) for x in range(ow)]))
    best = fv.full(batch, -math.inf, dtype=x.dtype)
    idx = fv.asarray(first.astype(np.int64)).broadcast_to(batch)
    for i in range(kh):
        for j in range(kw):
            key = (Ellipsis, slice(i * dh, i * dh + (oh - 1) * sh + 1, sh), slice(j * dw, j * dw + (ow - 1) * sw + 1, sw))
            v, p = xp[key], posp[key].broadcast_to(batch)
            more = fv.greater(v, best)
            best = fv.maximum(best, v)
            idx = fv.where(more, p, idx)
    return tensor_of(best), tensor_of(idx)


@kernel("max_pool2d_with_indices.out")
def max_pool2d_with_indices_out(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *,
                                out, indices):
    v, i = max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    for dst, src in ((out, v), (indices, i)):
        if tuple(dst.shape) != tuple(src.shape):
            fuelvk_device.resize_(dst, tuple(src.shape))
        fuelvk_device.assign(dst, array_of(src))
    return out, indices


@kernel("_adaptive_avg_pool2d")
def _adaptive_avg_pool2d(self, output_size):
    """Adaptive average pooling when the output size divides the input (equal windows): a mean over a
    reshape; uneven windows are not covered."""
    _float(self)
    h, w = self.shape[-2:]
    oh, ow = output_size
    if oh == 0 or ow == 0 or h % oh or w % ow:
        raise Unhandled(f"adaptive pooling {h}x{w} -> {oh}x{ow} with uneven windows")
    lead = tuple(self.shape[:-2])
    x = array_of(self).reshape(lead + (oh, h // oh, ow, w // ow))
    return tensor_of(fv.mean(x, axis=(-3, -1)))


@kernel("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added at its argmax (indices: flat positions in the input plane)."""
    _float(self)
    lead, plane = tuple(self.shape[:-2]), self.shape[-2] * self.shape[-1]
    g = fv.copy(array_of(grad_output)).reshape(lead + (-1,))
    idx = fv.copy(array_of(indices)).reshape(lead + (-1,))
    out = fv.scatter_add(fv.zeros(lead + (plane,), dtype=g.dtype), len(lead), idx, g)
    return tensor_of(out.reshape(tuple(self.shape)))


@kernel("_adaptive_avg_pool2d_backward")
def _adaptive_avg_pool2d_backward(grad_output, self):
    """Each window's gradient spread evenly over it (the even windows _adaptive_avg_pool2d covers)."""
    _float(self)
    h, w = self.shape[-2:]
    oh, ow = grad_output.shape[-2:]
    if h % oh or w % ow:
        raise Unhandled(f"adaptive pooling {h}x{w} -> {oh}x{ow} with uneven windows")
    lead = tuple(self.shape[:-2])
    g = fv.multiply(array_of(grad_output), 1.0 / ((h // oh) * (w // ow))).reshape(lead + (oh, 1, ow, 1))
    return tensor_of(fv.copy(g.broadcast_to(lead + (oh, h // oh, ow, w // ow))).reshape(tuple(self.shape)))


# -- attention: fuelvk's fused kernel where it matches torch's contract, torch's math path elsewhere ----
_ATTN_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _composed_attention_ok(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    """The float32 calls _sdpa_composed takes (the rest take torch's math path, which also raises
    torch's errors for bad calls): 4-D, one batch size, heads equal or grouped under enable_gqa, no
    dropout, not both a mask and is_causal."""
    if not (query.dim() == key.dim() == value.dim() == 4 and dropout_p == 0.0
            and query.dtype == key.dtype == value.dtype == torch.float32
            and (attn_mask is None or not is_causal)):
        return False
    (b, hq, sq, d), (bk, hk, sk, dk), (bv, hv, sv, _) = query.shape, key.shape, value.shape
    return (b == bk == bv and hk == hv and sk == sv and d == dk and hk > 0 and hq % hk == 0
            and (hq == hk or enable_gqa) and sq > 0 and sk > 0
            and (attn_mask is None or attn_mask.dtype in (torch.bool, torch.float32)))


_CAUSAL_BIASES = 16          # cached per device: a generate() loop's growing key lengths start over past it
_CAUSAL_BIAS_MAX = 1 << 18   # elements of a cached bias (1 MiB in float32; the cache holds <= 16 MiB); larger
                             # masks are built per call (ones + triu + masked_fill)
_causal_biases = weakref.WeakKeyDictionary()   # fuelvk Context -> {(sq, sk, dtype): bias tensor}


def _causal_bias(sq, sk, dtype, device):
    """The top-left causal mask as an additive [sq, sk] bias (0 on and below the diagonal, -inf above), as
    torch's math attention adds it; made once per shape (a CPU build and one upload) and cached: the
    per-call ones + triu + masked_fill took 3 launches, the bias takes one add (the masked_fill kernel
    alone cost ~4 adds of device time on lavapipe)."""
    table = _causal_biases.setdefault(fv_runtime.get(), {})
    key = (sq, sk, dtype)
    bias = table.get(key)
    if bias is None:
        if len(table) >= _CAUSAL_BIASES:
            table.clear()
        bias = table[key] = torch.full((sq, sk), -math.inf, dtype=dtype).triu(1).to(device)
    return bias


def _fused_expresses(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    """Whether fuelvk's fused attention kernel expresses the call: no mask or dropout, 4-D inputs of one
    float dtype, k and v of one shape, heads equal or grouped under enable_gqa, causal only where the
    top-left mask is a band (Sq >= Sk), a head dim the kernel takes (attention_route says "math" else)."""
    if attn_mask is not None or dropout_p != 0.0:
        return False
    if not (query.dim() == key.dim() == value.dim() == 4 and query.dtype in _ATTN_DTYPES
            and query.dtype == key.dtype == value.dtype and key.shape == value.shape):
        return False
    (b, hq, sq, d), (bk, hk, sk, dk) = query.shape, key.shape
    if not (b == bk and b > 0 and d == dk and hk > 0 and hq % hk == 0 and (hq == hk or enable_gqa)
            and sq > 0 and sk > 0):
        return False
    try:   # shapes the kernel refuses (head dim > 256, ...) and top-left causal with Sq < Sk: "math"
        return fv.attention_route(tuple(query.shape), tuple(key.shape), is_causal=is_causal) != "math"
    except FuelVKError:
        return False


def _fused_attention_wins(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    """Whether _sdpa_composed hands the call to fuelvk's fused kernel (one launch): a call that builds no
    autograd graph (the kernel's output has none) and is not traced, that the kernel expresses
    (_fused_expresses), where it is the cheaper route. On a CPU device (lavapipe) that is at most one
    flash_decode row block per kv head, G * Sq <= CPU_DECODE_ROWS: the decode steps of generate(). Device
    ms, B 2 Hq 4 Hk 2 D 64 f32, fused / composed: Sq 1 Sk 64 0.23 / 0.41, Sq 2 0.34 / 0.40, Sq 4 0.61 /
    0.48, Sq = Sk = 32 causal 4.4 / 0.45; bf16 Sq 1 Sk 512 (Hq 32 Hk 8 D 128) 2.4 / 201 (half types'
    composed path is torch's math path). Other devices take it wherever the kernel expresses the call,
    as _fused_sdp_choice answers (not measured here)."""
    if not all(type(t) is torch.Tensor for t in (query, key, value)):
        return False
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return False
    if not _fused_expresses(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        return False
    return (fv_runtime.get().device.device_type != "cpu"
            or (query.shape[1] // key.shape[1]) * query.shape[2] <= CPU_DECODE_ROWS)


@composite("scaled_dot_product_attention")
def _sdpa_composed(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
    """torch's math attention in fewer kernels: torch's own decomposition (what a PrivateUse1 device gets,
    its fused-choice hook being C++ only) runs ~16 kernels per call: q and k each scaled, GQA heads
    copied out by expand + clone, a causal mask built by tril + where, a max pass for the safe softmax.
    Here: the scale on q, one batched matmul per kv head group (query heads of a kv head stacked as rows:
    no copy of k or v), a masked_fill of the causal triangle (every top-left causal row sees key 0, so a
    plain softmax), or the mask applied and the safe softmax (fully masked rows give 0), and p @ v.
    Other calls (dropout, half types, 3-D inputs) take torch's math path unchanged; calls with no graph to
    build where the fused kernel is cheaper (decode steps: _fused_attention_wins) take that kernel."""
    if _fused_attention_wins(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        return tensor_of(fv.scaled_dot_product_attention(array_of(query), array_of(key), array_of(value),
                                                         is_causal=is_causal, scale=scale))
    if not _composed_attention_ok(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        if attn_mask is not None and attn_mask.dtype == torch.bool:   # as torch's decomposition converts it
            attn_mask = torch.where(attn_mask.logical_not(), -math.inf,
                                    torch.zeros((), dtype=query.dtype, device=attn_mask.device))
        return torch.ops.aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]
    b, hq, sq, d = query.shape
    hk, sk = key.shape[1], key.shape[2]
    g = hq // hk
    q = (query * (1.0 / math.sqrt(d) if scale is None else scale)).reshape(b, hk, g * sq, d)
    s = torch.matmul(q, key.transpose(-2, -1)).view(b, hq, sq, sk)
    if is_causal and (type(s) is not torch.Tensor or sq * sk > _CAUSAL_BIAS_MAX):   # traced, or too big to keep
        above = torch.ones(sq, sk, dtype=torch.bool, device=query.device).triu(1)
        p = torch.softmax(s.masked_fill(above, -math.inf), dim=-1)
    elif is_causal:
        p = torch.softmax(s + _causal_bias(sq, sk, s.dtype, s.device), dim=-1)
    else:
        if attn_mask is not None:
            s = s.masked_fill(attn_mask.logical_not(), -math.inf) if attn_mask.dtype == torch.bool else s + attn_mask
        p = torch.ops.aten._safe_softmax(s, -1)
    return torch.matmul(p.view(b, hk, g * sq, sk), value).view(b, hq, sq, value.shape[-1])


@kernel("_fused_sdp_choice")
def _fused_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                      enable_gqa=False):
    """Which SDPA backend a call would take (torch.nn.functional.scaled_dot_product_attention does not ask:
    for PrivateUse1 its choice is a C++ DispatchStub, and fuelvk's calls run _sdpa_composed; this answers
    direct callers of the op): fuelvk's fused kernel (the "overrideable" backend) for 4-D inputs of one
    float dtype without a mask or dropout, causal (top-left, as torch's) where the fused kernels express it
    (Sq >= Sk; attention_route says "math" otherwise), heads equal or grouped under enable_gqa; torch's
    math path (matmul + softmax on fuelvk kernels) otherwise."""
    from torch.nn.attention import SDPBackend
    fused = _fused_expresses(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    return int(SDPBackend.OVERRIDEABLE if fused else SDPBackend.MATH)


@kernel("_scaled_dot_product_fused_attention_overrideable")
def _sdpa_fused(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                scale=None):
    if attn_bias is not None or dropout_p:
        raise Unhandled("a mask or dropout in fuelvk's fused attention (the math path takes them)")
    o, lse = fv.scaled_dot_product_attention(array_of(query), array_of(key), array_of(value), is_causal=is_causal,
                                             scale=scale, return_lse=True)
    none = fuelvk_device.empty([0], torch.int64)
    return (tensor_of(o), tensor_of(lse), none, none, query.shape[2], key.shape[2], none, none,
            fuelvk_device.empty([0], query.dtype))


@kernel("_scaled_dot_product_fused_attention_overrideable_backward")
def _sdpa_fused_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                         cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    """fuelvk's attention backward, in float32 for half inputs (widened and the gradients rounded back)."""
    dt = array_of(query).dtype
    wide = [_widened(array_of(t))[0] for t in (grad_out, query, key, value, out)]
    dq, dk, dv = fv.scaled_dot_product_attention_backward(*wide, array_of(logsumexp), is_causal=is_causal,
                                                         scale=scale)
    return tensor_of(_narrowed(dq, dt)), tensor_of(_narrowed(dk, dt)), tensor_of(_narrowed(dv, dt)), None
