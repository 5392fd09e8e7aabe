"""fuelvk.conv2d: NCHW 2-D convolution (torch.nn.functional.conv2d semantics) = im2col + matmul.

im2col writes patches [batch, groups, cin/groups * kh * kw, h_out * w_out]; the weights viewed as
[groups, cout/groups, cin/groups * kh * kw] multiply them with the matmul family's routes (batched
numpy broadcasting), giving [batch, groups, cout/groups, h_out * w_out] = NCHW output, no transpose.
A 1x1 / stride 1 / no padding convolution skips im2col (the input already is the patch matrix).
Beyond torch: padding may be (top, bottom, left, right), as the inventory's asymmetric padding.
"""
import operator

from .. import dtypes as _dt
from .. import runtime
from ..array import zeros
from ..errors import DTypeError, ShapeError
from ..kernels import kernel
from ..kernels.conv import IM2COL_WG, IM2COL_WORDS
from ..kernels.registry import storage_twin
from ..runtime import loadpath
from ..runtime.loadpath import TEXEL_BYTES
from ._core import binding_limit, contiguous, device_args, fits, new_like, result, spans, windowed
from .casts import astype
from .matmul import matmul
from .movement import launch_write

__all__ = ["conv2d"]

CONV_DTYPES = (_dt.float32, _dt.bfloat16, _dt.float16)  # the matmul family's dtypes (no f64 GEMM)


def _pair(op, name, v):
    try:
        if isinstance(v, (tuple, list)):
            if len(v) != 2:
                raise ShapeError(f"{op}: {name} must be an int or a pair, got {v!r}")
            return tuple(operator.index(a) for a in v)
        v = operator.index(v)
        return (v, v)
    except TypeError:
        raise ShapeError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None


def _padding(op, padding, k, dil, stride):
    """(top, bottom, left, right) from torch's int / pair / 'valid' / 'same', or a 4-tuple."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ShapeError(f"{op}: padding='same' needs stride 1 (as torch), got stride {stride}")
            th, tw = dil[0] * (k[0] - 1), dil[1] * (k[1] - 1)
            return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
        raise ShapeError(f"{op}: padding must be 'valid', 'same', an int, a pair or a 4-tuple, got {padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        try:
            pads = tuple(operator.index(a) for a in padding)
        except TypeError:
            raise ShapeError(f"{op}: padding must hold ints, got {padding!r}") from None
    else:
        ph, pw = _pair(op, "padding", padding)
        pads = (ph, ph, pw, pw)
    if any(a < 0 for a in pads):
        raise ShapeError(f"{op}: padding must be non-negative, got {padding!r}")
    return pads


def _im2col(x, kh, kw, stride, pads, dil, groups, h_out, w_out):
    """patches [B * groups, cin_g * kh * kw, h_out * w_out] (contiguous) of x [B, C, H, W] (any view)."""
    b, c, h, w = x.shape
    cin_g = c // groups
    shape = (b * groups, cin_g * kh * kw, h_out * w_out)
    if x.size == 0:                  # all padding (h or w is 0): the kernel's loads need an element
        return zeros(shape, x.dtype)
    out = new_like(shape, x.dtype)
    total = out.size
    if total and not fits(x, out):   # larger than one binding: blocks of images
        g = groups
        for b0, b1 in spans("im2col", "image (its input or patches)", b,
                            lambda b0, b1: windowed(x[b0:b1]) is not None and windowed(out[b0 * g:b1 * g]) is not None):
            r = _im2col(windowed(x[b0:b1]), kh, kw, stride, pads, dil, groups, h_out, w_out)
            launch_write(kernel("write_slice", _dt.width_tag(x.dtype)), windowed(out[b0 * g:b1 * g]), r)
        return out
    ctx = runtime.get()
    v = kernel("im2col", _dt.width_tag(x.dtype))
    texel = loadpath.texel_paths(ctx)[0] and x.buffer.size // x.dtype.itemsize <= ctx.device.limits.maxTexelBufferElements
    if not texel:
        v = storage_twin(v)
    span = IM2COL_WORDS * (TEXEL_BYTES // x.dtype.itemsize)     # output elements per invocation
    ctx.launch(v, ctx.groups(-(-total // (IM2COL_WG * span))), out=out, out_words=out, x=x, **({"x_t": x} if texel else {}),
               TWO_ROWS=int(h_out * w_out % span != 0),     # spans cross patch rows (out starts at a word)
               batch=b, c_in=c, h=h, w=w, h_out=h_out, w_out=w_out, k_h=kh, k_w=kw, stride_h=stride[0],
               stride_w=stride[1], pad_t=pads[0], pad_l=pads[2], dil_h=dil[0], dil_w=dil[1], n_groups=groups,
               cin_per_g=cin_g, total=total, off_x=x.offset, xs=x.strides)
    return out


def im2col(x, kernel_size, stride=1, padding=0, dilation=1, groups=1):
    """The conv2d patch matrix [B * groups, C / groups * kh * kw, h_out * w_out] of x [B, C, H, W]."""
    op = "im2col"
    (xa,), numpy_out = device_args(op, x)
    k = _pair(op, "kernel_size", kernel_size)
    geo = _geometry(op, xa.shape, k, stride, padding, dilation, groups)
    return result(_im2col(xa, k[0], k[1], *geo), numpy_out)


def _geometry(op, xshape, k, stride, padding, dilation, groups):
    stride, dil = _pair(op, "stride", stride), _pair(op, "dilation", dilation)
    if min(stride) < 1 or min(dil) < 1 or min(k) < 1:
        raise ShapeError(f"{op}: stride {stride}, dilation {dil} and kernel size {k} must be >= 1")
    try:
        groups = operator.index(groups)
    except TypeError:
        raise ShapeError(f"{op}: groups must be an int, got {groups!r}") from None
    if groups < 1 or xshape[1] % groups:
        raise ShapeError(f"{op}: groups={groups!r} must be a positive int dividing the {xshape[1]} input channels")
    pads = _padding(op, padding, k, dil, stride)
    h_out = (xshape[2] + pads[0] + pads[1] - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
    w_out = (xshape[3] + pads[2] + pads[3] - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
    if h_out < 1 or w_out < 1:
        raise ShapeError(f"{op}: input {tuple(xshape)} padded by {pads} is smaller than the dilated kernel "
                         f"{k} (dilation {dil})")
    return stride, pads, dil, groups, h_out, w_out


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d: x [B, C, H, W] (or [C, H, W]), w [Cout, C / groups, kh, kw]."""
    op = "conv2d"
    args = (x, w) if bias is None else (x, w, bias)
    arrays, numpy_out = device_args(op, *args)
    xa, wa = arrays[0], arrays[1]
    ba = arrays[2] if bias is not None else None
    unbatched = xa.ndim == 3
    if unbatched:
        xa = xa.reshape((1,) + xa.shape)
    if xa.ndim != 4 or wa.ndim != 4:
        raise ShapeError(f"{op}: expected x [B, C, H, W] or [C, H, W] and w [Cout, C/groups, kh, kw], got x "
                         f"{arrays[0].shape}, w {wa.shape}")
    dts = {xa.dtype, wa.dtype} | ({ba.dtype} if ba is not None else set())
    if len(dts) != 1:
        raise DTypeError(f"{op}: x, w and bias must share a dtype, got {sorted(map(str, dts))}")
    _dt.float_tag(op, xa.dtype, CONV_DTYPES)
    b, c, h, wd = xa.shape
    cout, cin_g, kh, kw = wa.shape
    stride, pads, dil, groups, h_out, w_out = _geometry(op, xa.shape, (kh, kw), stride, padding, dilation, groups)
    if cin_g * groups != c or cout % groups:
        raise ShapeError(f"{op}: w {wa.shape} with groups={groups} expects {cin_g * groups} input channels and "
                         f"Cout divisible by groups; x has {c} channels ({xa.shape})")
    if ba is not None and ba.shape != (cout,):
        raise ShapeError(f"{op}: bias must have shape ({cout},), got {ba.shape}")
    out_shape = (b, cout, h_out, w_out)
    kd, hw, isz = cin_g * kh * kw, h_out * w_out, xa.itemsize
    lim = binding_limit()
    if b and cout and c and not (fits(xa, wa) and b * groups * kd * hw * isz <= lim and b * cout * hw * 4 <= lim):
        # larger than one binding (input, patches or result): blocks of images, each an ordinary conv2d
        out = new_like(out_shape, xa.dtype)
        ok = lambda b0, b1: (windowed(xa[b0:b1]) is not None and windowed(out[b0:b1]) is not None   # noqa: E731
                             and (b1 - b0) * max(groups * kd * isz, cout * 4) * hw + 512 <= lim)
        for b0, b1 in spans(op, "image (its input, patches or output)", b, ok):
            r = conv2d(windowed(xa[b0:b1]), wa, ba, stride, padding, dilation, groups)
            launch_write(kernel("write_slice", _dt.width_tag(out.dtype)), windowed(out[b0:b1]), r)
        return result(out.reshape(out_shape[1:]) if unbatched else out, numpy_out)
    if b == 0 or cout == 0 or c == 0:
        out = zeros(out_shape, xa.dtype)
        if c == 0 and ba is not None and b and cout:
            out = out + ba.reshape(1, cout, 1, 1)
    else:
        kd = cin_g * kh * kw
        if (kh, kw) == (1, 1) and stride == (1, 1) and pads == (0, 0, 0, 0):
            patches = contiguous(xa).reshape(b, groups, kd, h * wd)
        else:
            patches = _im2col(xa, kh, kw, stride, pads, dil, groups, h_out, w_out).reshape(b, groups, kd, h_out * w_out)
        wg = contiguous(wa).reshape(groups, cout // groups, kd)
        # half types: f32 GEMM output, bias added in f32, one rounding (as torch's CPU kernels)
        half = xa.dtype in (_dt.bfloat16, _dt.float16)
        y = matmul(wg, patches, out_dtype=_dt.float32 if half else xa.dtype)
        out = y.reshape(out_shape)
        if ba is not None:
            out = out + (astype(ba, _dt.float32) if half else ba).reshape(1, cout, 1, 1)
        if half:
            out = astype(out, xa.dtype)
    if unbatched:
        out = out.reshape(out_shape[1:])
    return result(out, numpy_out)



# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
import numpy as _np

from ._opdef import Meta, OpDef, declare


def _conv2d_rule(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    k = tuple(w.shape[2:])
    st, dil = _pair("conv2d", "stride", stride), _pair("conv2d", "dilation", dilation)
    pt, pb, pl, pr = _padding("conv2d", padding, k, dil, st)
    hw = [(x.shape[-2 + i] + lo + hi - dil[i] * (k[i] - 1) - 1) // st[i] + 1
          for i, (lo, hi) in enumerate(((pt, pb), (pl, pr)))]
    return Meta(tuple(x.shape[:-3]) + (w.shape[0],) + tuple(hw), _np.dtype(x.dtype))


declare(OpDef("conv2d", conv2d, _conv2d_rule, reference=("", '''sh, sw = (stride, stride) if isinstance(stride, int) else stride
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
    output = output + bias[None, :, None, None]'''), grad="conv2d",
    schema="(Tensor x, Tensor w, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
           "int groups=1) -> Tensor",
    export={"var_dims": ("N",), "lets": ("pads",)}))   # pads: a spec let, resolved at export
