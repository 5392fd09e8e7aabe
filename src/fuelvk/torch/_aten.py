"""aten ops of the fuelvk device, on fuelvk kernels (fuelvk.ops composed; no host compute unless said).

This module: the registry and helpers, factories and copies, views, elementwise math, comparisons,
matmul, reductions, indexing; _aten_nn.py: activations' backwards, softmax, losses, norms, dropout,
convolution.

Each kernel is declared once with @kernel("aten overload", ...) and registered for PrivateUse1 by
register(); torch's autograd (AutogradPrivateUse1) differentiates them with aten's own formulas,
whose backward ops (silu_backward, native_layer_norm_backward, ...) are kernels here too. A kernel
that meets a case fuelvk does not cover (an integer dtype, gelu without the tanh approximation, ...)
raises Unhandled, or fuelvk raises DTypeError / UnsupportedError, and the op runs on the CPU through
the fallback (_fallback.py), counted and warned about like any op without a kernel.
Host work, said plainly: random factories draw on torch's CPU generator and upload (so a seeded
device run draws exactly the CPU run's numbers); arange is computed on the host and uploaded.
"""

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
    """(var, mean) with torch's correction (default 1): fuelvk.api's two-pass var_mean."""
    _float(self)
    from ..api.statistical import var_mean
    return var_mean(A(self), _axes(dim, self.dim()), 1 if correction is None else correction, keepdim)


KERNELS["var.correction"] = lambda self, dim=None, correction=None, keepdim=False: W(
    _var_mean(self, dim, correction, keepdim)[0])
KERNELS["std.correction"] = lambda self, dim=None, correction=None, keepdim=False: W(
    fv.sqrt(_var_mean(self, dim, correction, keepdim)[0]))
KERNELS["var_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: tuple(
    map(W, _var_mean(self, dim, correction, keepdim)))
KERNELS["std_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: (lambda vm: (
    W(fv.sqrt(vm[0])), W(vm[1])))(_var_mean(self, dim, correction, keepdim))


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


from . import _aten_nn  # noqa: E402,F401  (its kernels join KERNELS)
