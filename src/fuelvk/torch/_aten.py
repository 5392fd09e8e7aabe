"""aten ops of the fuelvk device, on fuelvk kernels (fuelvk.ops composed; no host compute unless said).

Each kernel is declared once with @kernel("aten overload", ...) and registered for PrivateUse1 by
register(); torch's autograd (AutogradPrivateUse1) differentiates them with aten's own formulas,
whose backward ops (silu_backward, native_layer_norm_backward, ...) are kernels here too. A kernel
that meets a case fuelvk does not cover (an integer dtype, gelu without the tanh approximation, ...)
raises Unhandled, or fuelvk raises DTypeError / UnsupportedError, and the op runs on the CPU through
the fallback (_fallback.py), counted and warned about like any op without a kernel.
Host work, said plainly: random factories draw on torch's CPU generator and upload (so a seeded
device run draws exactly the CPU run's numbers); arange is computed on the host and uploaded.
"""
import math

import numpy as np
import torch

import fuelvk as fv
from .. import dtypes as _dt
from ..array import Array
from ..errors import DeviceError, DTypeError, UnsupportedError
from . import device as D
from ._bridge import numpy_dtype
from ._fallback import FallbackError, Unhandled, run_on_cpu

KERNELS = {}   # aten overload name ("add.Tensor") -> python kernel
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def kernel(*names):
    def deco(fn):
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco


def _overload(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _guarded(fn, op):
    def k(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Unhandled as e:
            return run_on_cpu(op, args, kwargs, str(e))
        except FallbackError:
            raise
        except (DTypeError, UnsupportedError) as e:   # a dtype / feature fuelvk has no kernel for
            return run_on_cpu(op, args, kwargs, f"fuelvk: {e}")
    k.__name__ = fn.__name__
    return k


def register(lib):
    for name, fn in KERNELS.items():
        lib.impl(name, _guarded(fn, _overload(name)), "PrivateUse1")


# -- helpers ---------------------------------------------------------------------------------------
A = D.array
W = D.wrap


def _float(*xs):
    """torch's result dtype of the operands, which must be a float dtype fuelvk computes in."""
    dt = torch.result_type(*xs) if len(xs) == 2 else xs[0].dtype
    if dt not in FLOATS:
        raise Unhandled(f"dtype {dt}: fuelvk computes this op in {', '.join(map(str, FLOATS))}")
    return dt


def _scalar(x):
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, complex):
        raise Unhandled("a complex scalar")
    return x


def operand(x, npdt=None):
    """A fuelvk tensor as an Array (cast to npdt), a CPU 0-d tensor or number as a Python scalar."""
    if isinstance(x, torch.Tensor):
        if D.is_fuelvk(x):
            a = A(x)
            return a if npdt is None or a.dtype == npdt else a.astype(npdt)
        if x.dim() == 0:
            return _scalar(x.item())
        raise DeviceError(f"Expected all tensors to be on the same device, but found at least two devices, "
                          f"{D.NAME}:0 and {x.device} (a {x.device} operand of shape {tuple(x.shape)}); move it "
                          f"with .to('{D.NAME}')")
    return _scalar(x)


def _axes(dim, ndim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(sorted({d % ndim if ndim else 0 for d in dims}))


def _into(self, arr):
    """In-place result: write arr into self (see device.assign), return self."""
    return D.assign(self, arr)


# -- factories, copies, scalars ---------------------------------------------------------------------
@kernel("empty.memory_format")
def empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        raise Unhandled(f"memory_format {memory_format}")
    return D.empty(size, dtype or torch.get_default_dtype())


@kernel("empty_strided")
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return D.empty(size, dtype or torch.get_default_dtype(), list(stride))


@kernel("_copy_from")
def _copy_from(self, dst, non_blocking=False):
    return D.copy_from(self, dst, non_blocking)


@kernel("_copy_from_and_resize")
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        (D.resize_ if D.is_fuelvk(dst) else torch.Tensor.resize_)(dst, tuple(self.shape))
    return D.copy_from(self, dst)


@kernel("resize_")
def resize_(self, size, memory_format=None):
    return D.resize_(self, size, memory_format)


def _pattern(value, npdt):
    """The 32-bit vkCmdFillBuffer pattern that repeats value's bits, or None (8-byte halves differ)."""
    raw = _dt.scalar_as("fill_", value, npdt).tobytes()
    if len(raw) == 8:
        if raw[:4] != raw[4:]:
            return None
        raw = raw[:4]
    return int.from_bytes(raw * (4 // len(raw)), "little")


@kernel("fill_.Scalar", "fill_.Tensor")
def fill_(self, value):
    """A tensor covering its storage is filled by the transfer unit (no upload); a view by a write."""
    value = operand(value)
    if not self.numel():
        return self
    pattern = _pattern(value, A(self).dtype) if D.covers_storage(self) else None
    if pattern is None:
        A(self)[...] = value
    else:
        fv.runtime.get().stream.fill(D.buffer_of(self), (self.numel() * self.element_size() + 3) & ~3, pattern)
    return self


@kernel("zero_")
def zero_(self):
    return fill_(self, 0)


@kernel("_local_scalar_dense")
def _local_scalar_dense(self):
    return A(self).item()


@kernel("clone")
def clone(self, memory_format=None):
    return W(fv.copy(A(self)))


def _host_random(draw):
    """An in-place random fill: torch's CPU generator draws into a CPU tensor of self's shape and dtype
    (the numbers a CPU run draws), which is uploaded into self."""
    def fill(self, *args, **kwargs):
        return D.copy_from(draw(torch.empty(tuple(self.shape), dtype=self.dtype), *args, **kwargs), self)
    return fill


KERNELS["uniform_"] = _host_random(torch.Tensor.uniform_)
KERNELS["normal_"] = _host_random(torch.Tensor.normal_)
KERNELS["bernoulli_.float"] = _host_random(torch.Tensor.bernoulli_)
KERNELS["random_.from"] = _host_random(lambda t, from_, to, generator=None: t.random_(from_, to, generator=generator))
KERNELS["random_.to"] = _host_random(torch.Tensor.random_)
KERNELS["random_"] = _host_random(torch.Tensor.random_)


@kernel("native_dropout")
def native_dropout(input, p, train):
    """Dropout's mask from torch's CPU generator (bernoulli_(1 - p), as the CPU kernel draws it), uploaded;
    the scaling runs on the device: input * mask * (1 / (1 - p)) in the CPU kernel's order."""
    _float(input)
    if train is False:
        return W(fv.copy(A(input))), D.upload(torch.ones(tuple(input.shape), dtype=torch.bool))
    keep = 1.0 - p
    mask = D.upload(torch.empty(tuple(input.shape), dtype=input.dtype).bernoulli_(keep))
    out = fv.multiply(fv.multiply(A(input), A(mask)), 0.0 if keep == 0 else 1.0 / keep)
    return W(out), W(fv.not_equal(A(mask), 0))


@kernel("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    _float(grad_output)
    g = A(grad_output)
    return W(fv.multiply(fv.masked_fill(g, fv.equal(A(mask), False), 0), scale))


@kernel("arange.start_out")
def arange_out(start, end, step=1, out=None):
    host = torch.arange(start, end, step, dtype=out.dtype)
    if tuple(out.shape) != tuple(host.shape):
        D.resize_(out, tuple(host.shape))
    return D.copy_from(host, out)


# -- views: torch's Meta kernels compute the metadata; the storage (and so the buffer) is shared -----
def _meta_view(op):
    def view(*args, **kwargs):
        return op.redispatch(D.META, *args, **kwargs)
    return view


for _name in ("view", "as_strided", "_reshape_alias", "unfold", "set_.source_Storage_storage_offset",
              "set_.source_Storage"):
    KERNELS[_name] = _meta_view(_overload(_name))


# -- elementwise -------------------------------------------------------------------------------------
def _binary(f, a, b, alpha=1):
    npdt = numpy_dtype("aten", _float(a, b))
    x, y = operand(a, npdt), operand(b, npdt)
    if alpha != 1:
        y = fv.multiply(y, alpha) if isinstance(y, Array) else y * alpha
    return f(x, y)


def _binaries(name, f, reverse=False):
    def out_of_place(self, other, alpha=1):
        return W(_binary(f, other, self, alpha) if reverse else _binary(f, self, other, alpha))

    def in_place(self, other, alpha=1):
        return _into(self, _binary(f, self, other, alpha))
    return out_of_place, in_place


for _name, _f in (("add", fv.add), ("sub", fv.subtract), ("mul", fv.multiply), ("div", fv.divide)):
    _op, _iop = _binaries(_name, _f)
    for _ov in ("Tensor", "Scalar"):
        KERNELS[f"{_name}.{_ov}"] = _op
        KERNELS[f"{_name}_.{_ov}"] = _iop
for _ov in ("Tensor", "Scalar"):
    KERNELS[f"rsub.{_ov}"] = _binaries("rsub", fv.subtract, reverse=True)[0]
KERNELS["maximum"] = lambda self, other: W(_binary(fv.maximum, self, other))
KERNELS["minimum"] = lambda self, other: W(_binary(fv.minimum, self, other))


def _lerp(self, end, weight):
    """torch's CPU formula (exact at both ends): |w| < 0.5 ? a + w (b - a) : b - (b - a) (1 - w)."""
    npdt = numpy_dtype("aten", _float(self, end))
    a, b = operand(self, npdt), operand(end, npdt)
    w = operand(weight)
    if isinstance(w, Array):
        raise Unhandled("a tensor weight")
    d = fv.subtract(b, a)
    return fv.add(a, fv.multiply(d, w)) if abs(w) < 0.5 else fv.subtract(b, fv.multiply(d, 1 - w))


def _addc(f):
    def addc(self, tensor1, tensor2, value=1):
        """self + value * t1 (*|/) t2, in torch's order of roundings."""
        npdt = numpy_dtype("aten", torch.promote_types(_float(self, tensor1), _float(self, tensor2)))
        t1, t2 = operand(tensor1, npdt), operand(tensor2, npdt)
        return fv.add(operand(self, npdt), f(fv.multiply(t1, value) if value != 1 else t1, t2))
    return addc


for _name, _f in (("lerp", _lerp), ("addcmul", _addc(fv.multiply)), ("addcdiv", _addc(fv.divide))):
    _ov = ".Scalar" if _name == "lerp" else ""
    KERNELS[f"{_name}{_ov}"] = (lambda f: lambda self, *a, **k: W(f(self, *a, **k)))(_f)
    KERNELS[f"{_name}_{_ov}"] = (lambda f: lambda self, *a, **k: _into(self, f(self, *a, **k)))(_f)


def _rsqrt(x):
    return fv.reciprocal(fv.sqrt(x))


_UNARY = {"neg": fv.negative, "exp": fv.exp, "log": fv.log, "sqrt": fv.sqrt, "rsqrt": _rsqrt, "tanh": fv.tanh,
          "sigmoid": fv.sigmoid, "silu": fv.silu, "relu": fv.relu, "abs": fv.abs, "sin": fv.sin, "cos": fv.cos,
          "reciprocal": fv.reciprocal, "sign": fv.sign}


def _unaries(f):
    def out_of_place(self):
        _float(self)
        return W(f(A(self)))

    def in_place(self):
        _float(self)
        return _into(self, f(A(self)))
    return out_of_place, in_place


for _name, _f in _UNARY.items():
    KERNELS[_name], KERNELS[_name + "_"] = _unaries(_f)


def _gelu_tanh(approximate):
    if approximate != "tanh":
        raise Unhandled(f"gelu(approximate={approximate!r}): fuelvk's gelu is the tanh approximation")


@kernel("gelu")
def gelu(self, approximate="none"):
    _gelu_tanh(approximate)
    _float(self)
    return W(fv.gelu(A(self)))


@kernel("pow.Tensor_Scalar")
def pow_scalar(self, exponent):
    _float(self)
    x, e = A(self), exponent
    if e == 2:
        return W(fv.square(x))
    if e == 1:
        return W(fv.copy(x))
    if e == 0.5:
        return W(fv.sqrt(x))
    if e == -0.5:
        return W(_rsqrt(x))
    if e == -1:
        return W(fv.reciprocal(x))
    if float(e).is_integer() and x.dtype == np.float32:
        return W(fv.power(x, int(e)))
    raise Unhandled(f"exponent {e!r} for {self.dtype}")


# -- activation backwards (aten's formulas call these) -----------------------------------------------
@kernel("sigmoid_backward")
def sigmoid_backward(grad_output, output):
    y = A(output)
    return W(fv.multiply(fv.multiply(A(grad_output), y), fv.subtract(1.0, y)))


@kernel("tanh_backward")
def tanh_backward(grad_output, output):
    return W(fv.multiply(A(grad_output), fv.subtract(1.0, fv.square(A(output)))))


@kernel("silu_backward")
def silu_backward(grad_output, self):
    x = A(self)
    s = fv.sigmoid(x)
    return W(fv.multiply(fv.multiply(A(grad_output), s), fv.add(fv.multiply(x, fv.subtract(1.0, s)), 1.0)))


@kernel("threshold_backward")
def threshold_backward(grad_output, self, threshold):
    return W(fv.masked_fill(A(grad_output), fv.less_equal(A(self), threshold), 0))


@kernel("gelu_backward")
def gelu_backward(grad_output, self, approximate="none"):
    """d/dx of 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi), c = 0.044715."""
    _gelu_tanh(approximate)
    x = A(self)
    k, c = math.sqrt(2 / math.pi), 0.044715
    x2 = fv.square(x)
    t = fv.tanh(fv.multiply(fv.multiply(x, fv.affine(x2, c, 1.0)), k))
    dt = fv.multiply(fv.subtract(1.0, fv.square(t)), fv.affine(x2, 3 * c * k, k))
    d = fv.affine(fv.add(t, fv.multiply(x, dt)), 0.5, 0.5)
    return W(fv.multiply(A(grad_output), d))


# -- comparisons, masks --------------------------------------------------------------------------------
def _compare(f):
    def cmp(self, other):
        if isinstance(other, torch.Tensor) and D.is_fuelvk(other) and other.dtype != self.dtype:
            npdt = numpy_dtype("aten", _float(self, other))
            return W(f(operand(self, npdt), operand(other, npdt)))
        return W(f(A(self), operand(other)))
    return cmp


for _name, _f in (("eq", fv.equal), ("ne", fv.not_equal), ("lt", fv.less), ("le", fv.less_equal),
                  ("gt", fv.greater), ("ge", fv.greater_equal)):
    KERNELS[f"{_name}.Tensor"] = KERNELS[f"{_name}.Scalar"] = _compare(_f)


@kernel("bitwise_not", "logical_not")
def logical_not(self):
    if self.dtype != torch.bool:
        raise Unhandled(f"dtype {self.dtype} (fuelvk negates bool tensors)")
    return W(fv.equal(A(self), False))


def _bool_pair(self, other):
    if self.dtype != torch.bool or not isinstance(other, torch.Tensor) or other.dtype != torch.bool \
            or not D.is_fuelvk(other):
        raise Unhandled("operands that are not two fuelvk bool tensors")
    shape = tuple(torch.broadcast_shapes(self.shape, other.shape))
    return A(self).broadcast_to(shape), A(other).broadcast_to(shape)


@kernel("logical_and", "bitwise_and.Tensor")
def logical_and(self, other):
    a, b = _bool_pair(self, other)
    return W(fv.masked_fill(a, fv.equal(b, False), False))


@kernel("logical_or", "bitwise_or.Tensor")
def logical_or(self, other):
    a, b = _bool_pair(self, other)
    return W(fv.masked_fill(a, b, True))


def _out(fn):
    """The out= overload of a functional kernel: compute, resize out if needed, write."""
    def k(*args, out, **kwargs):
        r = fn(*args, **kwargs)
        if tuple(out.shape) != tuple(r.shape):
            D.resize_(out, tuple(r.shape))
        return D.assign(out, A(r))
    return k


for _name, _f in (("logical_and", logical_and), ("logical_or", logical_or)):
    KERNELS[_name + ".out"] = _out(_f)
    KERNELS[_name + "_"] = (lambda f: lambda self, other: _into(self, A(f(self, other))))(_f)


@kernel("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(self, mask, value):
    return W(fv.masked_fill(A(self), A(mask), operand(value)))


@kernel("masked_fill_.Scalar", "masked_fill_.Tensor")
def masked_fill_(self, mask, value):
    return _into(self, fv.masked_fill(A(self), A(mask), operand(value)))


@kernel("where.self")
def where(condition, self, other):
    """Exact select from masked_fill: masked_fill(x, ~c, -0.0) + masked_fill(y, c, -0.0), since v + -0.0 == v
    for every float v (-0.0, inf and NaN included); a scalar side is one masked_fill. Floats only."""
    if not D.is_fuelvk(condition) or condition.dtype != torch.bool:
        raise Unhandled("a condition that is not a fuelvk bool tensor")
    npdt = numpy_dtype("where", _float(self, other))
    x, y = operand(self, npdt), operand(other, npdt)
    shape = tuple(torch.broadcast_shapes(condition.shape, *(t.shape for t in (self, other)
                                                             if isinstance(t, torch.Tensor))))
    c = A(condition).broadcast_to(shape)
    if isinstance(x, Array):
        x = fv.masked_fill(x.broadcast_to(shape), fv.equal(c, False), y if not isinstance(y, Array) else -0.0)
    if not isinstance(y, Array):
        return W(x)
    y = fv.masked_fill(y.broadcast_to(shape), c, x if not isinstance(x, Array) else -0.0)
    return W(y if not isinstance(x, Array) else fv.add(x, y))


# -- matmul ------------------------------------------------------------------------------------------
@kernel("mm", "bmm")
def mm(self, mat2):
    return W(fv.matmul(A(self), A(mat2)))


@kernel("addmm")
def addmm(self, mat1, mat2, beta=1, alpha=1):
    r = fv.matmul(A(mat1), A(mat2))
    if alpha != 1:
        r = fv.multiply(r, alpha)
    if beta == 0:
        return W(r)
    bias = A(self) if beta == 1 else fv.multiply(A(self), beta)
    return W(fv.add(r, bias))


@kernel("convolution_overrideable")
def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch sends a non-CPU/CUDA device's convolution here (its own kernel only raises): fuelvk.conv2d
    for a plain 2-D convolution, aten::convolution on the CPU for the rest (1-D/3-D, transposed)."""
    if not transposed and input.dim() == 4 and weight.dim() == 4 and D.is_fuelvk(weight):
        b = A(bias) if bias is not None else None
        return W(fv.conv2d(A(input), A(weight), b, tuple(stride), tuple(padding), tuple(dilation), groups))
    return run_on_cpu(torch.ops.aten.convolution.default, (input, weight, bias, stride, padding, dilation,
                                                          transposed, output_padding, groups), {},
                      "only plain 2-D convolutions run on fuelvk", "aten::convolution_overrideable")


@kernel("convolution_backward_overrideable")
def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
                                      output_padding, groups, output_mask):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return run_on_cpu(torch.ops.aten.convolution_backward.default,
                      (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                       output_padding, groups, output_mask), {},
                      "no fuelvk convolution backward yet", "aten::convolution_backward_overrideable")


# -- reductions ------------------------------------------------------------------------------------
def _reduce(f, self, dim, keepdim, dtype):
    _float(self)
    out = f(A(self), axis=_axes(dim, self.dim()), keepdims=keepdim)
    want = numpy_dtype("aten", dtype or self.dtype)
    if not isinstance(out, Array):
        out = fv.asarray(out)
    return W(out if out.dtype == want else out.astype(want))


@kernel("sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, dtype=None):
    return _reduce(fv.sum, self, dim, keepdim, dtype)


@kernel("sum")
def sum_all(self, dtype=None):
    return _reduce(fv.sum, self, None, False, dtype)


@kernel("mean.dim")
def mean_dim(self, dim, keepdim=False, dtype=None):
    return _reduce(fv.mean, self, dim, keepdim, dtype)


@kernel("mean")
def mean_all(self, dtype=None):
    return _reduce(fv.mean, self, None, False, dtype)


@kernel("amax")
def amax(self, dim=(), keepdim=False):
    return _reduce(fv.max, self, dim, keepdim, None)


@kernel("amin")
def amin(self, dim=(), keepdim=False):
    return _reduce(fv.min, self, dim, keepdim, None)


@kernel("max")
def max_all(self):
    return _reduce(fv.max, self, None, False, None)


@kernel("min")
def min_all(self):
    return _reduce(fv.min, self, None, False, None)


def _arg(f):
    def arg(self, dim=None, keepdim=False):
        _float(self)
        if dim is None:
            out = f(A(self))
            return W(out.reshape((1,) * self.dim()) if keepdim else out)
        d = dim % max(self.dim(), 1)
        out = f(A(self), d) if self.dim() else f(A(self))
        return W(out.reshape(tuple(1 if i == d else n for i, n in enumerate(self.shape))) if keepdim else out)
    return arg


KERNELS["argmax"], KERNELS["argmin"] = _arg(fv.argmax), _arg(fv.argmin)


def _value_index(f):
    def vi(self, dim, keepdim=False):
        """(values, indices): torch's first index on ties; values gathered at it."""
        idx = _arg(f)(self, dim, True)
        vals = fv.take_along_axis(A(self), A(idx), axis=dim % max(self.dim(), 1)) if self.dim() else A(self)
        if not keepdim and self.dim():
            return W(vals.squeeze(dim % self.dim())), idx.squeeze(dim)
        return W(vals), idx
    return vi


KERNELS["max.dim"], KERNELS["min.dim"] = _value_index(fv.argmax), _value_index(fv.argmin)


@kernel("index.Tensor")
def index(self, indices):
    """x[..., idx, ...] with one integer index tensor (the others None): a take along that dim."""
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(given) != 1 or given[0][1].dtype not in (torch.int64, torch.int32):
        raise Unhandled("several index tensors, or a bool mask (fuelvk takes one integer index tensor)")
    d, idx = given[0]
    out = fv.take(A(self), _index(idx.reshape(-1)), axis=d)
    return W(out.reshape(tuple(self.shape[:d]) + tuple(idx.shape) + tuple(self.shape[d + 1:])))


def _var_mean(self, dim=None, correction=None, keepdim=False):
    """(var, mean) with torch's correction (default 1): two passes, sum((x - mean)^2) / (n - correction)."""
    _float(self)
    x, axes = A(self), _axes(dim, self.dim())
    n = math.prod(self.shape[a] for a in axes) if axes is not None else self.numel()
    mean = fv.mean(x, axis=axes, keepdims=True)
    ss = fv.sum(fv.square(fv.subtract(x, mean)), axis=axes, keepdims=keepdim)
    c = 1 if correction is None else correction
    var = fv.divide(ss, max(n - c, 0)) if n - c > 0 else fv.multiply(ss, math.inf)
    return var, (mean if keepdim else mean.reshape(tuple(ss.shape)))


KERNELS["var.correction"] = lambda self, dim=None, correction=None, keepdim=False: W(
    _var_mean(self, dim, correction, keepdim)[0])
KERNELS["std.correction"] = lambda self, dim=None, correction=None, keepdim=False: W(
    fv.sqrt(_var_mean(self, dim, correction, keepdim)[0]))
KERNELS["var_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: tuple(
    map(W, _var_mean(self, dim, correction, keepdim)))
KERNELS["std_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: (lambda vm: (
    W(fv.sqrt(vm[0])), W(vm[1])))(_var_mean(self, dim, correction, keepdim))


# -- softmax, losses ---------------------------------------------------------------------------------
def _no_half_to_float(half_to_float):
    if half_to_float:
        raise Unhandled("half_to_float=True")


@kernel("_softmax")
def _softmax(self, dim, half_to_float):
    _no_half_to_float(half_to_float)
    _float(self)
    return W(fv.softmax(A(self), axis=dim))


@kernel("_safe_softmax")
def _safe_softmax(self, dim, dtype=None):
    """softmax, with 0 (not NaN) in rows that are all -inf (what attention's math path calls)."""
    if dtype is not None and dtype != self.dtype:
        raise Unhandled(f"dtype={dtype}")
    _float(self)
    x = A(self)
    empty_rows = fv.equal(fv.max(x, axis=dim, keepdims=True), -math.inf)
    return W(fv.masked_fill(fv.softmax(x, axis=dim), empty_rows.broadcast_to(x.shape), 0))


@kernel("_softmax_backward_data")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    return W(fv.softmax_backward(A(output), A(grad_output), axis=dim))


@kernel("_log_softmax")
def _log_softmax(self, dim, half_to_float):
    _no_half_to_float(half_to_float)
    _float(self)
    z = fv.subtract(A(self), fv.max(A(self), axis=dim, keepdims=True))
    return W(fv.subtract(z, fv.log(fv.sum(fv.exp(z), axis=dim, keepdims=True))))


@kernel("_log_softmax_backward_data")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    g = A(grad_output)
    return W(fv.subtract(g, fv.multiply(fv.exp(A(output)), fv.sum(g, axis=dim, keepdims=True))))


_REDUCTION = {0: None, 1: "mean", 2: "sum"}


@kernel("mse_loss")
def mse_loss(self, target, reduction=1):
    npdt = numpy_dtype("aten", _float(self, target))
    sq = fv.square(fv.subtract(operand(self, npdt), operand(target, npdt)))
    r = _REDUCTION[reduction]
    return W(sq if r is None else (fv.mean(sq) if r == "mean" else fv.sum(sq)))


@kernel("mse_loss_backward")
def mse_loss_backward(grad_output, self, target, reduction):
    npdt = numpy_dtype("aten", _float(self, target))
    scale = 2.0 / self.numel() if _REDUCTION[reduction] == "mean" else 2.0
    d = fv.subtract(operand(self, npdt), operand(target, npdt))
    return W(fv.multiply(fv.multiply(d, scale), operand(grad_output, npdt)))


def _nll_parts(self, target, weight, ignore_index):
    """(x [N, C], safe targets [N, 1], per-row weights [N]): ignored rows get weight 0 and target 0."""
    if self.dim() not in (1, 2) or not D.is_fuelvk(target):
        raise Unhandled("an input of more than 2 dims (nll_loss2d) or a CPU target")
    npdt = numpy_dtype("nll_loss", _float(self))
    x = A(self).reshape(1, -1) if self.dim() == 1 else A(self)
    t = A(target).reshape(-1)
    ignored = fv.equal(t, ignore_index)
    safe = fv.masked_fill(t, ignored, 0).reshape(-1, 1)
    if weight is None:
        w = fv.masked_fill(fv.zeros((t.shape[0],), npdt), fv.equal(ignored, False), 1.0)
    else:
        w = fv.masked_fill(fv.take(operand(weight, npdt), safe.reshape(-1), axis=0), ignored, 0)
    return x, safe, w


@kernel("nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    x, safe, w = _nll_parts(self, target, weight, ignore_index)
    losses = fv.negative(fv.multiply(fv.take_along_axis(x, safe, axis=1).reshape(-1), w))
    total = fv.sum(w)
    r = _REDUCTION[reduction]
    if r is None:
        out = losses if self.dim() == 2 else losses.reshape(())
        return W(out), W(fv.zeros((), x.dtype))
    out = fv.sum(losses)
    return W(fv.divide(out, total) if r == "mean" else out), W(total)


@kernel("nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    x, safe, w = _nll_parts(self, target, weight, ignore_index)
    g = A(grad_output).reshape(-1) if grad_output.dim() else A(grad_output)
    vals = fv.negative(fv.multiply(w, g))
    if _REDUCTION[reduction] == "mean":
        vals = fv.divide(vals, A(total_weight))
    grad = fv.scatter_add(fv.zeros(x.shape, x.dtype), 1, safe, vals.reshape(-1, 1))
    return W(grad.reshape(tuple(self.shape)))


# -- norms -----------------------------------------------------------------------------------------
def _rows(t, k):
    """t as (rows, cols) over its last k dims (a view when the layout allows)."""
    cols = math.prod(t.shape[t.dim() - k:]) if k else 1
    return A(t).reshape(-1, cols)


@kernel("native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    _float(input)
    k = len(normalized_shape)
    x = _rows(input, k)
    w = A(weight).reshape(-1) if weight is not None else None
    b = A(bias).reshape(-1) if bias is not None else None
    out = fv.layer_norm(x, eps, w, b).reshape(tuple(input.shape))
    mean = fv.mean(x, axis=-1, keepdims=True)
    var = fv.mean(fv.square(fv.subtract(x, mean)), axis=-1, keepdims=True)
    rstd = fv.reciprocal(fv.sqrt(fv.add(var, eps)))
    stat = tuple(input.shape[:input.dim() - k]) + (1,) * k
    return W(out), W(mean.reshape(stat)), W(rstd.reshape(stat))


@kernel("native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = len(normalized_shape)
    x, g = _rows(input, k), _rows(grad_out, k)
    m, r = A(mean).reshape(-1, 1), A(rstd).reshape(-1, 1)
    xhat = fv.multiply(fv.subtract(x, m), r)
    dx = dw = db = None
    if output_mask[0]:
        gw = fv.multiply(g, A(weight).reshape(-1)) if weight is not None else g
        inner = fv.subtract(fv.subtract(gw, fv.mean(gw, axis=-1, keepdims=True)),
                            fv.multiply(xhat, fv.mean(fv.multiply(gw, xhat), axis=-1, keepdims=True)))
        dx = W(fv.multiply(inner, r).reshape(tuple(input.shape)))
    if output_mask[1] and weight is not None:
        dw = W(fv.sum(fv.multiply(g, xhat), axis=0).reshape(tuple(weight.shape)))
    if output_mask[2] and bias is not None:
        db = W(fv.sum(g, axis=0).reshape(tuple(bias.shape)))
    return dx, dw, db


@kernel("native_batch_norm")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Inference batch norm (running statistics) over dim 1: (x - mean) * rsqrt(var + eps) * w + b."""
    if training or running_mean is None or running_var is None:
        raise Unhandled("training-mode batch norm (batch statistics, running-stat updates)")
    npdt = numpy_dtype("batch_norm", _float(input))
    shape = (1, -1) + (1,) * (input.dim() - 2)
    scale = fv.reciprocal(fv.sqrt(fv.add(operand(running_var, npdt), eps)))
    if weight is not None:
        scale = fv.multiply(scale, operand(weight, npdt))
    y = fv.multiply(fv.subtract(A(input), operand(running_mean, npdt).reshape(shape)), scale.reshape(shape))
    if bias is not None:
        y = fv.add(y, operand(bias, npdt).reshape(shape))
    return W(y), D.empty([0], input.dtype), D.empty([0], input.dtype)


# -- indexing, joining --------------------------------------------------------------------------------
def _index(t):
    if not D.is_fuelvk(t):
        return t.numpy()
    return A(t)


@kernel("index_select")
def index_select(self, dim, index):
    return W(fv.take(A(self), _index(index.reshape(-1)), axis=dim))


@kernel("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise Unhandled("scale_grad_by_freq=True")
    dim = grad_output.shape[-1]
    base = fv.zeros((num_weights, dim), numpy_dtype("aten", grad_output.dtype))
    out = fv.index_add(base, 0, _index(indices.reshape(-1)), A(grad_output).reshape(-1, dim))
    if padding_idx is not None and 0 <= padding_idx < num_weights:
        out[padding_idx] = 0
    return W(out)


def _triangle(f):
    def tri(self, diagonal=0):
        if self.dim() < 2:
            raise Unhandled("a tensor of fewer than 2 dims (torch refuses it; numpy squares it)")
        return f(A(self), diagonal)
    return tri


for _name, _f in (("tril", _triangle(fv.tril)), ("triu", _triangle(fv.triu))):
    KERNELS[_name] = (lambda f: lambda self, diagonal=0: W(f(self, diagonal)))(_f)
    KERNELS[_name + "_"] = (lambda f: lambda self, diagonal=0: _into(self, f(self, diagonal)))(_f)


@kernel("gather")
def gather(self, dim, index, sparse_grad=False):
    """torch.gather: take_along_axis on the view of self cut to index's extent in the other dims."""
    d = dim % max(self.dim(), 1)
    key = tuple(slice(None) if i == d else slice(0, n) for i, n in enumerate(index.shape))
    return W(fv.take_along_axis(A(self)[key], _index(index), axis=d))


def _scatter_add(self, dim, index, src):
    if not D.is_fuelvk(src):
        raise Unhandled("a CPU src")
    return fv.scatter_add(A(self), dim % max(self.dim(), 1), _index(index), A(src))


KERNELS["scatter_add"] = lambda self, dim, index, src: W(_scatter_add(self, dim, index, src))
KERNELS["scatter_add_"] = lambda self, dim, index, src: _into(self, _scatter_add(self, dim, index, src))


@kernel("flip")
def flip(self, dims):
    return W(fv.flip(A(self), tuple(dims)))


@kernel("roll")
def roll(self, shifts, dims=()):
    if not dims:
        if len(shifts) != 1:
            raise Unhandled("several shifts without dims")
        return W(fv.roll(A(self), shifts[0]))
    return W(fv.roll(A(self), tuple(shifts), tuple(dims)))


def _clamp(self, min=None, max=None):
    _float(self)
    lo, hi = operand(min) if min is not None else None, operand(max) if max is not None else None
    if isinstance(lo, Array) or isinstance(hi, Array):
        raise Unhandled("tensor bounds")
    x = A(self)
    if lo is not None:
        x = fv.maximum(x, lo)
    if hi is not None:
        x = fv.minimum(x, hi)
    return x if x is not A(self) else fv.copy(x)


KERNELS["clamp"] = lambda self, min=None, max=None: W(_clamp(self, min, max))
KERNELS["clamp_"] = lambda self, min=None, max=None: _into(self, _clamp(self, min, max))


@kernel("cumsum")
def cumsum(self, dim, dtype=None):
    _float(self)
    out = fv.cumsum(A(self), dim % max(self.dim(), 1))
    want = numpy_dtype("cumsum", dtype or self.dtype)
    return W(out if out.dtype == want else out.astype(want))


@kernel("cat")
def cat(tensors, dim=0):
    ts = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)] or list(tensors[:1])
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = torch.promote_types(dt, t.dtype)
    npdt = numpy_dtype("cat", dt)
    arrs = [operand(t, npdt) for t in ts]
    return W(fv.concatenate(arrs, axis=dim % ts[0].dim()))
