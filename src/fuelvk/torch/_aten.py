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
device run draws exactly the CPU run's numbers); dropout's masks are drawn on the device, keyed from
torch's CPU generator (_aten_nn.native_dropout); arange is computed on the host and uploaded.
"""

import math

import numpy as np
import torch

import fuelvk as fv
from .. import dtypes as _dt
from ..array import Array
from ..errors import DeviceError, DTypeError, FuelVKError, UnsupportedError
from ..ops import elementwise as fv_elementwise
from . import _layout, _plans, device as fuelvk_device
from ._bridge import TO_TORCH, numpy_dtype
from ._fallback import FallbackError, Unhandled, run_on_cpu

KERNELS = {}   # aten overload name ("add.Tensor") -> python kernel
COMPOSITES = {}   # aten overload name -> a composition of aten ops replacing torch's own (see composite())
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


class Refused(FuelVKError, RuntimeError):
    """What torch CPU refuses with a RuntimeError, refused the same way (not run on the CPU): a result dtype
    an in-place / out= tensor cannot hold, integer division by zero, a write overlapping its input."""


def kernel(*names):
    def deco(fn):
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco


def composite(*names):
    """A device-specific decomposition of a CompositeImplicitAutograd op (one that torch decomposes itself):
    registered for AutogradPrivateUse1 (and PrivateUse1, for inference mode), so it runs in place of torch's
    decomposition and autograd differentiates the aten ops it calls, as for torch's own."""
    def deco(fn):
        for n in names:
            COMPOSITES[n] = fn
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


# Functional kernels whose CPU result torch's TensorIterator lays out (dense in the memory order of the
# operands at these positional indices, in its operand order; _layout.follows_inputs), and those laid out
# as empty_like's preserve_format (_PRESERVES). The other kernels' results are contiguous, as torch's.
_TWO = ("add", "sub", "mul", "div", "rsub", "remainder", "floor_divide", "maximum", "minimum", "pow", "eq", "ne",
        "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
        "bitwise_xor", "lerp", "sigmoid_backward", "tanh_backward", "silu_backward", "gelu_backward",
        "native_dropout_backward")
LAYOUT_OPERANDS = {**{n: (0, 1) for n in _TWO}, "where": (0, 1, 2), "addcmul": (0, 1, 2), "addcdiv": (0, 1, 2),
                   "threshold_backward": (1, 0), "pow.Tensor_Scalar": (0,),
                   "clamp_min.Tensor": (0, 1), "clamp_max.Tensor": (0, 1), "pow.Scalar": None}


_PRESERVES = {"clone": None, "sort": (1, "dim"), "sort.stable": (None, "dim"), "flip": (1, "dims")}   # dim argument


def _layout_rule(name, fn):
    """fn with torch CPU's result layout (see LAYOUT_OPERANDS); unary kernels: over their one operand."""
    if name in _PRESERVES:
        return _layout.preserves_layout(fn, _PRESERVES[name])
    base = name.partition(".")[0]
    if base.endswith("_") or "out" in name.partition(".")[2]:
        return fn
    positions = LAYOUT_OPERANDS.get(name, LAYOUT_OPERANDS.get(base))
    if positions is None and base in _UNARY_LAYOUT:
        positions = (0,)
    return fn if positions is None else _layout.follows_inputs(fn, positions)


_NO_OVERLAP_CHECK = {"fill_", "zero_", "resize_", "set_", "uniform_", "normal_", "bernoulli_", "random_",
                     "exponential_"}   # no tensor inputs (or torch does not check them)


def _checks_overlap(fn, op):
    """fn (an in-place or out= kernel) refusing, as torch does, an input that partially overlaps a tensor
    it writes (same memory, other elements: the result would depend on the order of the writes)."""
    args = op._schema.arguments
    written = [(i, a.name) for i, a in enumerate(args) if a.alias_info is not None and a.alias_info.is_write]
    if not written:
        return fn

    def k(*a, **kw):
        for i, n in written:
            w = a[i] if i < len(a) else kw.get(n)
            if not (isinstance(w, torch.Tensor) and fuelvk_device.is_fuelvk(w)):
                continue
            for x in (*a, *kw.values()):
                if x is not w and isinstance(x, torch.Tensor) and _layout.partial_overlap(w, x):
                    raise Refused("unsupported operation: some elements of the input tensor and the written-to "
                                  f"tensor refer to a single memory location ({op.name()}: an input of shape "
                                  f"{tuple(x.shape)} strides {x.stride()} overlaps the written tensor of shape "
                                  f"{tuple(w.shape)} strides {w.stride()}). Please clone() the tensor before "
                                  "performing the operation.")
        return fn(*a, **kw)
    k.__name__ = getattr(fn, "__name__", op.name())
    return k


def register(lib):
    for name, fn in {**KERNELS, **_out_variants()}.items():
        if name in KERNELS:
            fn = _layout_rule(name, fn)
        if name in KERNELS and _plans.plannable(name):
            fn = _plans.planned(fn, name)
        elif name.partition(".")[0] not in _NO_OVERLAP_CHECK:
            fn = _checks_overlap(fn, _overload(name))
        lib.impl(name, _guarded(fn, _overload(name)), "PrivateUse1")
    for name, fn in COMPOSITES.items():
        for key in ("AutogradPrivateUse1", "PrivateUse1"):
            lib.impl(name, fn, key)


def _signature(schema):
    """((name, type) of the non-out arguments, names of the out arguments) of an aten schema."""
    outs = [a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    return [(a.name, str(a.type)) for a in schema.arguments if a.name not in outs], outs


def _out_variants():
    """The out= overloads (maximum.out, topk.values, scatter.src_out, ...) of every functional kernel that
    has no kernel of its own: the functional kernel, its results written into the out tensors (resized
    as torch does). Matched by schema: the same arguments plus keyword-only written outputs."""
    found = {}
    for name, fn in KERNELS.items():
        functional = _overload(name)
        args, outs = _signature(functional._schema)
        if outs:
            continue
        packet = getattr(torch.ops.aten, name.partition(".")[0])
        for ov in packet.overloads():
            full = f"{packet._qualified_op_name.split('::')[1]}.{ov}"
            if full in KERNELS or full in found:
                continue
            oargs, oouts = _signature(getattr(packet, ov)._schema)
            if oouts and oargs == args:
                found[full] = _writes_outs(fn, oouts, any(n == "dtype" for n, _ in args))
    return found


def _writes_outs(fn, out_names, takes_dtype=False):
    """takes_dtype (a reduction's dtype argument): an out tensor's dtype is the dtype asked for, as torch's."""
    def k(*args, **kwargs):
        outs = [kwargs.pop(n) for n in out_names]
        if takes_dtype and len(outs) == 1 and kwargs.get("dtype") is None:
            kwargs["dtype"] = outs[0].dtype
        results = fn(*args, **kwargs)
        results = results if isinstance(results, tuple) else (results,)
        for dst, src in zip(outs, results):
            _castable(array_of(src), dst)
            if tuple(dst.shape) != tuple(src.shape):
                fuelvk_device.resize_(dst, tuple(src.shape))
            fuelvk_device.assign(dst, array_of(src))
        return outs[0] if len(outs) == 1 else tuple(outs)
    return k


# -- helpers ---------------------------------------------------------------------------------------
array_of = fuelvk_device.array   # the fuelvk Array view of a fuelvk tensor (no copy)
tensor_of = fuelvk_device.wrap   # a fuelvk tensor on a fresh Array (no copy)


def _float(*xs):
    """torch's result dtype of the operands, which must be a float dtype fuelvk computes in."""
    dt = torch.result_type(*xs) if len(xs) == 2 else xs[0].dtype
    if dt not in FLOATS:
        raise Unhandled(f"dtype {dt}: fuelvk computes this op in {', '.join(map(str, FLOATS))}")
    return dt


def _numeric(*xs):
    """torch's result dtype of the operands: a float, or an integer / bool dtype (ops exact in both)."""
    dt = torch.result_type(*xs) if len(xs) == 2 else xs[0].dtype
    if dt not in FLOATS and dt not in INTS:
        raise Unhandled(f"dtype {dt}: fuelvk computes this op in {', '.join(map(str, FLOATS + INTS))}")
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
        if fuelvk_device.is_fuelvk(x):
            a = array_of(x)
            return a if npdt is None or a.dtype == npdt else a.astype(npdt)
        if x.dim() == 0:
            return _scalar(x.item())
        raise fuelvk_device.not_here(x)
    return _scalar(x)


def _axes(dim, ndim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(sorted({d % ndim if ndim else 0 for d in dims}))


def _castable(arr, dst):
    """Refuse writing a result of arr's dtype into dst (in place, out=) where torch's can_cast refuses."""
    src = TO_TORCH.get(arr.dtype) if isinstance(arr, Array) else None
    if src is not None and src != dst.dtype and not torch.can_cast(src, dst.dtype):
        raise Refused(f"result type {src} can't be cast to the desired output type {dst.dtype} (torch casts a "
                      "result into an in-place or out= tensor only within its kind: no float into integer, "
                      "nothing but bool into bool)")


def _into(self, arr):
    """In-place result: write arr into self (see device.assign), return self."""
    _castable(arr, self)
    return fuelvk_device.assign(self, arr)


# -- factories, copies, scalars ---------------------------------------------------------------------
def _one_device(device):
    """Refuse "fuelvk:N" for N > 0 (every new tensor is made through these factories, .to() included):
    torch's Python device API makes each PrivateUse1 tensor on index 0, so a tensor cannot say it lives
    on another fuelvk device (see device.py)."""
    if device is not None and device.index not in (None, 0):
        raise DeviceError(f"{fuelvk_device.NAME}:{device.index}: the torch device has one index, "
                          f"{fuelvk_device.NAME}:0 (fuelvk's default device, of {len(fv.devices())} fuelvk "
                          "sees): torch's Python backend API (torch._C._acc.create_empty_tensor) makes every "
                          "tensor on index 0; use fuelvk Arrays (fuelvk.Device(i)) for the other devices")


@kernel("empty.memory_format")
def empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _one_device(device)
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        raise Unhandled(f"memory_format {memory_format}")
    return fuelvk_device.empty(size, dtype or torch.get_default_dtype())


@kernel("empty_strided")
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    _one_device(device)
    return fuelvk_device.empty(size, dtype or torch.get_default_dtype(), list(stride))


@kernel("_copy_from")
def _copy_from(self, dst, non_blocking=False):
    return fuelvk_device.copy_from(self, dst, non_blocking)


@kernel("_copy_from_and_resize")
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        resize = fuelvk_device.resize_ if fuelvk_device.is_fuelvk(dst) else torch.Tensor.resize_
        resize(dst, tuple(self.shape))
    return fuelvk_device.copy_from(self, dst)


@kernel("resize_")
def resize_(self, size, memory_format=None):
    return fuelvk_device.resize_(self, size, memory_format)


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
    pattern = _pattern(value, array_of(self).dtype) if fuelvk_device.covers_storage(self) else None
    if pattern is None:
        array_of(self)[...] = value
    else:
        nbytes = (self.numel() * self.element_size() + 3) & ~3
        fv.runtime.get().stream.fill(fuelvk_device.buffer_of(self), nbytes, pattern)
    return self


@kernel("zero_")
def zero_(self):
    return fill_(self, 0)


@kernel("_local_scalar_dense")
def _local_scalar_dense(self):
    return array_of(self).item()


@kernel("clone")
def clone(self, memory_format=None):
    return tensor_of(fv.copy(array_of(self)))


def _host_random(draw):
    """An in-place random fill: torch's CPU generator draws into a CPU tensor of self's shape and dtype
    (the numbers a CPU run draws), which is uploaded into self."""
    def fill(self, *args, **kwargs):
        drawn = draw(torch.empty(tuple(self.shape), dtype=self.dtype), *args, **kwargs)
        return fuelvk_device.copy_from(drawn, self)
    return fill


KERNELS["uniform_"] = _host_random(torch.Tensor.uniform_)
KERNELS["normal_"] = _host_random(torch.Tensor.normal_)
KERNELS["bernoulli_.float"] = _host_random(torch.Tensor.bernoulli_)
KERNELS["random_.from"] = _host_random(lambda t, from_, to, generator=None: t.random_(from_, to, generator=generator))
KERNELS["random_.to"] = _host_random(torch.Tensor.random_)
KERNELS["random_"] = _host_random(torch.Tensor.random_)
KERNELS["exponential_"] = _host_random(torch.Tensor.exponential_)


@kernel("multinomial")
def multinomial(self, num_samples, replacement=False, *, generator=None):
    """torch's CPU algorithm for one sample or none replaced: argmax (topk) of p / q with q ~ Exp(1)
    drawn on the CPU generator, so a seeded run draws what the CPU run draws."""
    if replacement and num_samples > 1:
        raise Unhandled("several samples with replacement")
    _float(self)
    q = torch.empty(tuple(self.shape), dtype=self.dtype).exponential_(1, generator=generator)
    ratio = fv.divide(array_of(self), array_of(fuelvk_device.upload(q)))
    if num_samples == 1:
        return tensor_of(fv.argmax(ratio, axis=-1, keepdims=True).astype(np.int64))
    order = fv.argsort(ratio, axis=-1, descending=True, stable=True)
    return tensor_of(fv.copy(order[..., :num_samples]).astype(np.int64))


@kernel("arange.start_out")
def arange_out(start, end, step=1, out=None):
    host = torch.arange(start, end, step, dtype=out.dtype)
    if tuple(out.shape) != tuple(host.shape):
        fuelvk_device.resize_(out, tuple(host.shape))
    return fuelvk_device.copy_from(host, out)


# -- views: torch's Meta kernels compute the metadata; the storage (and so the buffer) is shared -----
def _meta_view(op):
    def view(*args, **kwargs):
        return op.redispatch(fuelvk_device.META, *args, **kwargs)
    return view


for _name in ("view", "_reshape_alias", "unfold", "set_.source_Storage_storage_offset", "set_.source_Storage"):
    KERNELS[_name] = _meta_view(_overload(_name))
# as_strided (t, transpose, ...: ~50 a Llama forward) costs 11 us redispatched, 8 through the method
KERNELS["as_strided"] = fuelvk_device.meta_method(torch.Tensor.as_strided)   # (view: no faster that way)


# -- elementwise -------------------------------------------------------------------------------------
# torch's arithmetic on bools: + and max are or, * and min are and
def _first_on_ties(f):
    """torch's maximum / minimum / clamp keep their first operand on ties (-0.0 against 0.0); fuelvk's keep
    the second ((isnan(x) || x > y) ? x : y): the operands swapped. NaN propagates either way."""
    def g(x, y):
        return f(y, x)
    g.__name__ = f.__name__
    return g


_maximum, _minimum = _first_on_ties(fv.maximum), _first_on_ties(fv.minimum)
_BOOL_OPS = {fv.add: fv.logical_or, _maximum: fv.logical_or, fv.multiply: fv.logical_and, _minimum: fv.logical_and}
def _wrapped(v, npdt):
    """Integer scalar v as integer dtype npdt holds it, wrapped: torch casts a Python scalar to the tensor's
    integer dtype (uint8 + 300 adds 44, uint8 == 256 compares with 0)."""
    if isinstance(v, Array) or not isinstance(v, int):
        return v
    info = np.iinfo(npdt)
    return (v - info.min) % (info.max - info.min + 1) + info.min


def _binary(f, a, b, alpha=1):
    """f(a, b * alpha) in torch's result dtype (true division of integers gives the default float)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype:
        dt = a.dtype   # what torch.result_type says for one dtype (the common case, without its cost)
        if dt not in FLOATS and dt not in INTS:
            raise Unhandled(f"dtype {dt}: fuelvk computes this op in {', '.join(map(str, FLOATS + INTS))}")
    else:
        dt = _numeric(a, b)
    if f is fv.divide and dt in INTS:
        dt = torch.get_default_dtype()
    if dt == torch.bool and f not in _BOOL_OPS:
        raise Unhandled(f"bool operands of {f.__name__}")
    npdt = numpy_dtype("aten", dt)
    x, y = operand(a, npdt), operand(b, npdt)
    if dt == torch.bool:
        return _BOOL_OPS[f](x, y)
    if alpha != 1:
        y = fv.multiply(y, alpha) if isinstance(y, Array) else y * alpha
    if dt in INTS:
        x, y = _wrapped(x, npdt), _wrapped(y, npdt)
    return f(x, y)


def _binaries(name, f, reverse=False):
    def out_of_place(self, other, alpha=1):
        return tensor_of(_binary(f, other, self, alpha) if reverse else _binary(f, self, other, alpha))

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
def _torch_rounding(name):
    """aten.<name>: floats by torch's CPU rounding (the binary kernel's torch_<name>: fmod's zero sign,
    NaN for an infinite dividend), integers by fv.<name> (floored, as torch)."""
    def f(x, y):
        arr = x if isinstance(x, Array) else y
        if np.issubdtype(arr.dtype, np.integer):
            if (fv.any(fv.equal(y, 0)).item() if isinstance(y, Array) else y == 0):   # (waits for the device)
                raise Refused(f"ZeroDivisionError: integer {name} by zero")
            return getattr(fv, name)(x, y)
        return fv_elementwise.api_binary(f"torch_{name}", x, y)
    f.__name__ = f.__qualname__ = name
    return f


for _name, _ovs in (("remainder", ("Tensor", "Scalar")), ("floor_divide", ("", "Scalar"))):
    _op, _iop = _binaries(_name, _torch_rounding(_name))
    for _ov in _ovs:
        KERNELS[f"{_name}.{_ov}" if _ov else _name] = _op
    for _ov in ("Tensor", "Scalar"):
        KERNELS[f"{_name}_.{_ov}"] = _iop
KERNELS["maximum"] = lambda self, other: tensor_of(_binary(_maximum, self, other))
KERNELS["minimum"] = lambda self, other: tensor_of(_binary(_minimum, self, other))


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
    KERNELS[f"{_name}{_ov}"] = (lambda f: lambda self, *a, **k: tensor_of(f(self, *a, **k)))(_f)
    KERNELS[f"{_name}_{_ov}"] = (lambda f: lambda self, *a, **k: _into(self, f(self, *a, **k)))(_f)


_rsqrt = fv_elementwise.rsqrt   # 1 / sqrt(x) in one launch, as torch CPU computes it


def _torch_sign(x):
    """torch's sign, (0 < x) - (x < 0): 0 for NaN (fuelvk's, the array API's, is NaN)."""
    s = fv.sign(x)
    return fv.masked_fill(s, fv.not_equal(x, x), 0) if np.issubdtype(x.dtype, np.inexact) or \
        x.dtype.name == "bfloat16" else s


_UNARY = {"neg": fv.negative, "exp": fv.exp, "log": fv.log, "sqrt": fv.sqrt, "rsqrt": _rsqrt, "tanh": fv.tanh,
          "sigmoid": fv.sigmoid, "silu": fv.silu, "relu": fv.relu, "abs": fv.abs, "sin": fv.sin, "cos": fv.cos,
          "reciprocal": fv.reciprocal, "sign": _torch_sign}


def _unaries(f):
    def out_of_place(self):
        _float(self)
        return tensor_of(f(array_of(self)))

    def in_place(self):
        _float(self)
        return _into(self, f(array_of(self)))
    return out_of_place, in_place


for _name, _f in _UNARY.items():
    KERNELS[_name], KERNELS[_name + "_"] = _unaries(_f)
_UNARY_LAYOUT = set(_UNARY) | {"erf", "gelu", "logical_not", "bitwise_not", "clamp", "clamp_min", "clamp_max"}


@kernel("pow.Tensor_Scalar")
def pow_scalar(self, exponent):
    _float(self)
    x, e = array_of(self), exponent
    if e == 2:
        return tensor_of(fv.square(x))
    if e == 1:
        return tensor_of(fv.copy(x))
    if e == 0.5:
        return tensor_of(fv.sqrt(x))
    if e == -0.5:
        return tensor_of(_rsqrt(x))
    if e == -1:
        return tensor_of(fv.reciprocal(x))
    if float(e).is_integer() and x.dtype == np.float32:
        return tensor_of(fv.power(x, int(e)))
    return tensor_of(fv.pow(x, float(e)))          # the array API's pow (IEEE special cases)


def _float_pow(x, y):
    """aten.pow of floats through fuelvk.pow (exp(y log x) with exact integer powers); integer operands
    stay with torch (its errors for negative integer exponents)."""
    arr = x if isinstance(x, Array) else y
    if not np.issubdtype(arr.dtype, np.floating) and arr.dtype.name != "bfloat16":
        raise Unhandled(f"pow of {arr.dtype}")
    return fv.pow(x, y)


_pow_op, _pow_iop = _binaries("pow", _float_pow)
KERNELS["pow.Tensor_Tensor"], KERNELS["pow_.Tensor"], KERNELS["pow_.Scalar"] = _pow_op, _pow_iop, _pow_iop
KERNELS["pow.Scalar"] = lambda self, exponent: tensor_of(_binary(_float_pow, self, exponent))


# -- comparisons, masks --------------------------------------------------------------------------------
def _compare(f):
    def cmp(self, other):
        if isinstance(other, torch.Tensor) and fuelvk_device.is_fuelvk(other) and other.dtype != self.dtype:
            npdt = numpy_dtype("aten", _numeric(self, other))
            return tensor_of(f(operand(self, npdt), operand(other, npdt)))
        y = operand(other)
        if self.dtype in INTS and self.dtype != torch.bool:
            y = _wrapped(y, array_of(self).dtype)
        return tensor_of(f(array_of(self), y))
    return cmp


for _name, _f in (("eq", fv.equal), ("ne", fv.not_equal), ("lt", fv.less), ("le", fv.less_equal),
                  ("gt", fv.greater), ("ge", fv.greater_equal)):
    KERNELS[f"{_name}.Tensor"] = KERNELS[f"{_name}.Scalar"] = _compare(_f)


def _truth(x):
    """A fuelvk tensor (or number) as bools: x != 0."""
    x = operand(x)
    if not isinstance(x, Array):
        return bool(x)
    return x if x.dtype == np.bool_ else fv.not_equal(x, 0)


def _logical(f):
    def op(self, other):
        return tensor_of(f(_truth(self), _truth(other)))
    return op


def _bitwise(f, logical):
    def op(self, other):
        dt = _numeric(self, other)
        if dt not in INTS:
            raise Unhandled(f"dtype {dt} (bitwise ops take integer and bool tensors)")
        npdt = numpy_dtype("aten", dt)
        x, y = operand(self, npdt), operand(other, npdt)
        if dt == torch.bool:   # fuelvk's bitwise ops take integers: bools go through the logical ones
            x, y = (v if isinstance(v, Array) else fv.full((), bool(v), dtype=np.bool_) for v in (x, y))
            return tensor_of(logical(x, y))
        return tensor_of(f(x, y))
    return op


@kernel("logical_not")
def logical_not(self):
    return tensor_of(fv.logical_not(_truth(self)))


@kernel("bitwise_not")
def bitwise_not(self):
    if self.dtype not in INTS:
        raise Unhandled(f"dtype {self.dtype} (bitwise ops take integer and bool tensors)")
    return tensor_of(fv.bitwise_invert(array_of(self)))


def _out(fn):
    """The out= overload of a functional kernel: compute, resize out if needed, write."""
    def k(*args, out, **kwargs):
        r = fn(*args, **kwargs)
        _castable(array_of(r), out)
        if tuple(out.shape) != tuple(r.shape):
            fuelvk_device.resize_(out, tuple(r.shape))
        return fuelvk_device.assign(out, array_of(r))
    return k


def _in_place(fn):
    def k(self, *args, **kwargs):
        return _into(self, array_of(fn(self, *args, **kwargs)))
    return k


KERNELS["logical_not.out"], KERNELS["bitwise_not.out"] = _out(logical_not), _out(bitwise_not)
KERNELS["logical_not_"], KERNELS["bitwise_not_"] = _in_place(logical_not), _in_place(bitwise_not)
for _name, _f in (("and", "and"), ("or", "or"), ("xor", "xor")):
    _lf = _logical(getattr(fv, f"logical_{_f}"))
    _bf = _bitwise(getattr(fv, f"bitwise_{_f}"), getattr(fv, f"logical_{_f}"))
    KERNELS[f"logical_{_name}"], KERNELS[f"logical_{_name}.out"] = _lf, _out(_lf)
    KERNELS[f"logical_{_name}_"] = _in_place(_lf)
    for _ov in ("Tensor", "Scalar"):
        KERNELS[f"bitwise_{_name}.{_ov}"], KERNELS[f"bitwise_{_name}.{_ov}_out"] = _bf, _out(_bf)
        KERNELS[f"bitwise_{_name}_.{_ov}"] = _in_place(_bf)


@kernel("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(self, mask, value):
    """Out of place, self is broadcast to the mask's shape too (torch expands both; in place, only the mask)."""
    x = array_of(self)
    if tuple(mask.shape) != tuple(self.shape):
        x = x.broadcast_to(tuple(torch.broadcast_shapes(self.shape, mask.shape)))
    return tensor_of(fv.masked_fill(x, array_of(mask), operand(value)))


@kernel("masked_fill_.Scalar", "masked_fill_.Tensor")
def masked_fill_(self, mask, value):
    return _into(self, fv.masked_fill(array_of(self), array_of(mask), operand(value)))


@kernel("where.self")
def where(condition, self, other):
    """Exact select from masked_fill: masked_fill(x, ~c, -0.0) + masked_fill(y, c, -0.0), since v + -0.0 == v
    for every float v (-0.0, inf and NaN included); a scalar side is one masked_fill. Floats only."""
    if not fuelvk_device.is_fuelvk(condition) or condition.dtype != torch.bool:
        raise Unhandled("a condition that is not a fuelvk bool tensor")
    npdt = numpy_dtype("where", _float(self, other))
    x, y = operand(self, npdt), operand(other, npdt)
    shape = tuple(torch.broadcast_shapes(condition.shape, *(t.shape for t in (self, other)
                                                             if isinstance(t, torch.Tensor))))
    c = array_of(condition).broadcast_to(shape)
    if isinstance(x, Array):
        x = fv.masked_fill(x.broadcast_to(shape), fv.equal(c, False), y if not isinstance(y, Array) else -0.0)
    if not isinstance(y, Array):
        return tensor_of(x)
    y = fv.masked_fill(y.broadcast_to(shape), c, x if not isinstance(x, Array) else -0.0)
    return tensor_of(y if not isinstance(x, Array) else fv.add(x, y))


# -- matmul ------------------------------------------------------------------------------------------
@kernel("mm", "bmm")
def mm(self, mat2):
    return tensor_of(fv.matmul(array_of(self), array_of(mat2)))


@kernel("addmm")
def addmm(self, mat1, mat2, beta=1, alpha=1):
    r = fv.matmul(array_of(mat1), array_of(mat2))
    if alpha != 1:
        r = fv.multiply(r, alpha)
    if beta == 0:
        return tensor_of(r)
    bias = array_of(self) if beta == 1 else fv.multiply(array_of(self), beta)
    return tensor_of(fv.add(r, bias))


# -- reductions ------------------------------------------------------------------------------------
# Integers are reduced exactly through float64: inputs up to 32 bits directly, int64 in two 32-bit halves
# (x == hi * 2^32 + lo), each half's sums exact while fewer than 2^21 elements are summed.
MAX_EXACT_INT_SUM = 1 << 21


def _halves(x):
    """int64 x as float64 (hi, lo): hi = x >> 32 in int32's range, lo = x & 0xFFFFFFFF in [0, 2^32)."""
    return (fv.bitwise_right_shift(x, 32).astype(np.float64),
            fv.bitwise_and(x, 0xFFFFFFFF).astype(np.float64))


def _join(hi, lo):
    """hi * 2^32 + lo as int64 (wrapping as torch's int64 arithmetic does) from integer-valued float64s."""
    return fv.add(fv.bitwise_left_shift(hi.astype(np.int64), 32), lo.astype(np.int64))


def _int_linear(f, x, count):
    """f (a sum or running sum, linear in x) of integer array x, exact; count: elements one output sums."""
    if count >= MAX_EXACT_INT_SUM:
        raise Unhandled(f"an integer sum over {count} elements (fuelvk sums integers exactly up to "
                        f"{MAX_EXACT_INT_SUM - 1})")
    if x.dtype.itemsize < 8:
        return f(x.astype(np.float64)).astype(np.int64)
    hi, lo = _halves(x)
    return _join(f(hi), f(lo))


def _int_extreme(f, x, axes):
    """max / min (f) of integer array x over axes, exact, keeping the reduced dims (size 1)."""
    if x.dtype.itemsize < 8:
        return f(x.astype(np.float64), axis=axes, keepdims=True).astype(x.dtype)
    hi, lo = _halves(x)
    top = f(hi, axis=axes, keepdims=True)
    other = -1.0 if f is fv.max else 2.0 ** 33   # loses against every lo of the winning hi
    lo = fv.masked_fill(lo, fv.not_equal(hi, top), other)
    return _join(top, f(lo, axis=axes, keepdims=True))


def _reduce(f, self, dim, keepdim, dtype):
    axes = _axes(dim, self.dim())
    if self.dtype in INTS and f in (fv.sum, fv.max, fv.min):
        x = array_of(self)
        if f is fv.sum:
            count = math.prod(self.shape[i] for i in (axes if axes is not None else range(self.dim())))
            out = _int_linear(lambda v: fv.sum(v, axis=axes, keepdims=True), x, count)
        else:
            out = _int_extreme(f, x, axes)
        shape = tuple(1 if keepdim else None if axes is None or i in axes else n for i, n in enumerate(self.shape))
        out = out.reshape(tuple(n for n in shape if n is not None))
        want = numpy_dtype("aten", dtype or (torch.int64 if f is fv.sum else self.dtype))
        return tensor_of(out if out.dtype == want else out.astype(want))
    _float(self)
    out = f(array_of(self), axis=axes, keepdims=keepdim)
    want = numpy_dtype("aten", dtype or self.dtype)
    if not isinstance(out, Array):
        out = fv.asarray(out)
    return tensor_of(out if out.dtype == want else out.astype(want))


def _any_all(f):
    def k(self, dim=None, keepdim=False):
        if self.dtype == torch.uint8:
            raise Unhandled("a uint8 tensor (torch's any/all return uint8 for it)")
        return tensor_of(f(_truth(self), axis=_axes(dim, self.dim()), keepdims=keepdim))
    return k


for _name in ("any", "all"):
    _k = _any_all(getattr(fv, _name))
    for _ov in ("", ".dim", ".dims"):
        KERNELS[_name + _ov] = _k
    for _ov in (".all_out", ".out", ".dims_out"):
        KERNELS[_name + _ov] = _out(_k)


@kernel("isin.Tensor_Tensor")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element equals any test element: one equal over [elements, tests], any over the tests."""
    if elements.numel() * test_elements.numel() > 1 << 26:
        raise Unhandled("more than 2^26 element x test pairs")
    npdt = numpy_dtype("isin", _numeric(elements, test_elements))
    e, t = operand(elements, npdt), operand(test_elements, npdt)
    if not isinstance(e, Array) or not isinstance(t, Array):
        raise Unhandled("a CPU tensor operand")
    hit = fv.any(fv.equal(e.reshape(e.shape + (1,)), t.reshape(-1)), axis=-1)
    return tensor_of(fv.logical_not(hit) if invert else hit)


KERNELS["isin.Tensor_Tensor_out"] = _out(isin)


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
            out = f(array_of(self))
            return tensor_of(out.reshape((1,) * self.dim()) if keepdim else out)
        d = dim % max(self.dim(), 1)
        out = f(array_of(self), d) if self.dim() else f(array_of(self))
        return tensor_of(out.reshape(tuple(1 if i == d else n for i, n in enumerate(self.shape))) if keepdim else out)
    return arg


KERNELS["argmax"], KERNELS["argmin"] = _arg(fv.argmax), _arg(fv.argmin)


def _value_index(f):
    def vi(self, dim, keepdim=False):
        """(values, indices): torch's first index on ties; values gathered at it."""
        idx = _arg(f)(self, dim, True)
        vals = fv.take_along_axis(array_of(self), array_of(idx), axis=dim % max(self.dim(), 1)) if self.dim() else array_of(self)
        if not keepdim and self.dim():
            return tensor_of(vals.squeeze(dim % self.dim())), idx.squeeze(dim)
        return tensor_of(vals), idx
    return vi


KERNELS["max.dim"], KERNELS["min.dim"] = _value_index(fv.argmax), _value_index(fv.argmin)


def _index_arrays(self, indices):
    """torch's advanced-index list as (dims, index Arrays): bool masks become their nonzero coordinates
    (a data-dependent size, so this waits for the device), integer indices are broadcast together."""
    dims, idx, d = [], [], 0
    for i in indices:
        if i is None:
            d += 1
            continue
        if not fuelvk_device.is_fuelvk(i):
            i = fuelvk_device.upload(i)
        if i.dtype in (torch.bool, torch.uint8):
            coords = fv.nonzero(array_of(i).astype(np.bool_) if i.dtype == torch.uint8 else array_of(i))
            dims += range(d, d + i.dim())
            idx += coords
            d += i.dim()
        elif i.dtype in (torch.int64, torch.int32):
            dims.append(d)
            idx.append(array_of(i))
            d += 1
        else:
            raise Unhandled(f"an index of dtype {i.dtype}")
    shape = tuple(torch.broadcast_shapes(*(tuple(a.shape) for a in idx)))
    return dims, [a.broadcast_to(shape) for a in idx], shape


def _linear_index(self, dims, idx):
    """One flat index into the indexed dims (moved to the front, in order): each index checked against
    its dim's size and wrapped when negative by a take from arange(size), then combined row-major."""
    lin = None
    for d, i in zip(dims, idx):
        n = self.shape[d]
        i = fv.take(fv.arange(n, dtype=np.int64), i.reshape(-1).astype(np.int64), axis=0)
        lin = i if lin is None else fv.add(fv.multiply(lin, n), i)
    return lin


def _index_layout(self, dims):
    """(permutation putting the indexed dims first, whether torch keeps the result dims in place)."""
    rest = [d for d in range(self.dim()) if d not in dims]
    adjacent = list(dims) == list(range(dims[0], dims[0] + len(dims)))
    return list(dims) + rest, adjacent


@kernel("index.Tensor")
def index(self, indices):
    """x[idx...] (torch's advanced indexing): one take along the indexed dims flattened together. With
    adjacent indexed dims the result dims replace them in place; otherwise they come first (as torch)."""
    dims, idx, shape = _index_arrays(self, indices)
    if not dims:
        return tensor_of(fv.copy(array_of(self)))
    return _layout.restride(tensor_of(_indexed(self, dims, idx, shape)), _index_strides(self, dims, idx, shape))


def _index_strides(self, dims, idx, shape):
    """The strides torch gives x[idx...]: TensorIterator's over self restrided to the result (the indexed
    dims stride 0) and the index tensors (strides in the result's index dims)."""
    perm, adjacent = _index_layout(self, dims)
    k, at = len(shape), (dims[0] if adjacent else 0)
    rest = [d for d in range(self.dim()) if d not in dims]
    before, after = (rest[:at], rest[at:])
    src = [self.stride()[d] for d in before] + [0] * k + [self.stride()[d] for d in after]
    result = tuple(self.shape[d] for d in before) + shape + tuple(self.shape[d] for d in after)
    ops = [(result, src)] + [(result, [0] * len(before) + list(i.strides) + [0] * len(after)) for i in idx]
    return _layout.iterator_strides(result, ops)


def _indexed(self, dims, idx, shape):
    """x[idx...] as a C-contiguous Array."""
    x = array_of(self)
    if len(dims) == 1:
        out = fv.take(x, idx[0].reshape(-1), axis=dims[0])
        return out.reshape(tuple(self.shape[:dims[0]]) + shape + tuple(self.shape[dims[0] + 1:]))
    perm, adjacent = _index_layout(self, dims)
    rest = tuple(self.shape[d] for d in perm[len(dims):])
    flat = fv.permute_dims(x, tuple(perm)).reshape((-1,) + rest)
    out = fv.take(flat, _linear_index(self, dims, idx), axis=0).reshape(shape + rest)
    if adjacent and dims[0] > 0:   # the leading non-indexed dims go back in front of the result dims
        k, lead = len(shape), dims[0]
        out = fv.permute_dims(out, tuple(range(k, k + lead)) + tuple(range(k)) + tuple(range(k + lead, out.ndim)))
    return fv.copy(out) if not out.is_contiguous else out


def _once_each(counts):
    """Raise Unhandled when some position is written twice (counts > 1): torch leaves which write wins
    unspecified, and fuelvk composes the write from sums, which would add them. Waits for the device."""
    if fv.any(fv.greater(counts, 1)).item():
        raise Unhandled("duplicate indices in a non-accumulating write")


def _put_rows(flat, lin, vals, accumulate):
    """flat[lin[k]] = vals[k] (or += with accumulate): index_add for the sum, a select for the write."""
    if accumulate:
        return fv.index_add(flat, 0, lin, vals.astype(flat.dtype))
    ones = fv.ones((lin.shape[0],) + (1,) * (flat.ndim - 1), dtype=np.float32).broadcast_to((lin.shape[0],) + flat.shape[1:])
    counts = fv.index_add(fv.zeros(flat.shape, dtype=np.float32), 0, lin, fv.copy(ones))
    _once_each(counts)
    written = fv.index_add(fv.zeros(flat.shape, flat.dtype), 0, lin, vals.astype(flat.dtype))
    return fv.where(fv.greater(counts, 0), written, flat)


@kernel("_index_put_impl_")
def _index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    """self[indices] = values (+= with accumulate), torch's advanced-index assignment: the indexed dims
    flattened to one (as in index), rows written by _put_rows, the result written back into self."""
    given = [i for i in indices if i is not None]
    if (len(given) == 1 and given[0].dtype == torch.bool and indices[0] is not None and not accumulate
            and values.numel() == 1 and fuelvk_device.is_fuelvk(given[0])):   # x[mask] = scalar: masked_fill
        mask = array_of(given[0]).reshape(tuple(given[0].shape) + (1,) * (self.dim() - given[0].dim()))
        value = operand(values.reshape(()), array_of(self).dtype)
        return _into(self, fv.masked_fill(array_of(self), mask.broadcast_to(tuple(self.shape)), value))
    dims, idx, shape = _index_arrays(self, indices)
    if not dims:
        raise Unhandled("an index_put_ without index tensors")
    perm, adjacent = _index_layout(self, dims)
    rest = tuple(self.shape[d] for d in perm[len(dims):])
    npdt = array_of(self).dtype
    vals = operand(values, npdt)
    if not isinstance(vals, Array):
        vals = fv.full((), vals, dtype=npdt)
    k = len(shape)
    # values as torch's index result lays them out, then in (index dims, rest) order
    if adjacent and dims[0] > 0:
        lead = dims[0]
        laid = tuple(self.shape[:lead]) + shape + tuple(self.shape[lead + len(dims):])
        vals = fv.permute_dims(vals.broadcast_to(laid), tuple(range(lead, lead + k)) + tuple(range(lead))
                               + tuple(range(lead + k, len(laid))))
    vals = fv.copy(vals.broadcast_to(shape + rest)).reshape((-1,) + rest)
    x = fv.permute_dims(array_of(self), tuple(perm))
    permuted = x.shape
    flat = _put_rows(fv.copy(x).reshape((-1,) + rest), _linear_index(self, dims, idx), vals, accumulate)
    inverse = tuple(perm.index(i) for i in range(self.dim()))
    return _into(self, fv.permute_dims(flat.reshape(permuted), inverse))


def _scatter(self, dim, index, src=None, value=None):
    """torch.scatter: positions index names along dim take src's (or value); the rest keep self's."""
    if not fuelvk_device.is_fuelvk(index):
        raise Unhandled("a CPU index")
    d = dim % max(self.dim(), 1)
    x = array_of(self)
    idx = _index(index)
    counts = fv.scatter_add(fv.zeros(x.shape, dtype=np.float32), d, idx, fv.ones(idx.shape, dtype=np.float32))
    if src is None:
        return fv.masked_fill(x, fv.greater(counts, 0), operand(value))
    if not fuelvk_device.is_fuelvk(src):
        raise Unhandled("a CPU src")
    _once_each(counts)
    cut = tuple(slice(0, n) for n in index.shape)
    values = array_of(src)[cut].astype(x.dtype)

    def place(v):   # each written position receives exactly one value: a sum of one is that value
        return fv.scatter_add(fv.zeros(x.shape, dtype=v.dtype), d, idx, v)
    if self.dtype in FLOATS:
        written = place(values)
    elif values.dtype.itemsize < 8:   # bool and integers up to 32 bits: exact through float64
        written = place(values.astype(np.float64)).astype(x.dtype)
    else:
        hi, lo = _halves(values)
        written = _join(place(hi), place(lo))
    return fv.where(fv.greater(counts, 0), written, x)


KERNELS["scatter.src"] = lambda self, dim, index, src: tensor_of(_scatter(self, dim, index, src=src))
KERNELS["scatter.value"] = lambda self, dim, index, value: tensor_of(_scatter(self, dim, index, value=value))
KERNELS["scatter_.src"] = lambda self, dim, index, src: _into(self, _scatter(self, dim, index, src=src))
KERNELS["scatter_.value"] = lambda self, dim, index, value: _into(self, _scatter(self, dim, index, value=value))


@kernel("sort.stable")
def sort_stable(self, *, stable=False, dim=-1, descending=False):
    """(values, indices) by fuelvk's stable argsort (torch allows any order of ties when not stable)."""
    if self.dim() == 0:
        return tensor_of(fv.copy(array_of(self))), tensor_of(fv.zeros((), np.int64))
    d = dim % self.dim()
    order = fv.argsort(array_of(self), axis=d, descending=descending, stable=True)
    return tensor_of(fv.take_along_axis(array_of(self), order, axis=d)), tensor_of(order.astype(np.int64))


@kernel("sort")
def sort(self, dim=-1, descending=False):
    return sort_stable(self, stable=False, dim=dim, descending=descending)


@kernel("topk")
def topk(self, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) along dim, in order: the first k of a stable argsort."""
    if self.dim() == 0:
        return sort(self)
    d = dim % self.dim()
    order = fv.argsort(array_of(self), axis=d, descending=largest, stable=True)
    order = fv.copy(order[(slice(None),) * d + (slice(0, k),)])
    return tensor_of(fv.take_along_axis(array_of(self), order, axis=d)), tensor_of(order.astype(np.int64))


def _var_mean(self, dim=None, correction=None, keepdim=False):
    """(var, mean) with torch's correction (default 1): fuelvk.api's two-pass var_mean."""
    _float(self)
    from ..api.statistical import var_mean
    return var_mean(array_of(self), _axes(dim, self.dim()), 1 if correction is None else correction, keepdim)


KERNELS["var.correction"] = lambda self, dim=None, correction=None, keepdim=False: tensor_of(
    _var_mean(self, dim, correction, keepdim)[0])
KERNELS["std.correction"] = lambda self, dim=None, correction=None, keepdim=False: tensor_of(
    fv.sqrt(_var_mean(self, dim, correction, keepdim)[0]))
KERNELS["var_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: tuple(
    map(tensor_of, _var_mean(self, dim, correction, keepdim)))
KERNELS["std_mean.correction"] = lambda self, dim=None, correction=None, keepdim=False: (lambda vm: (
    tensor_of(fv.sqrt(vm[0])), tensor_of(vm[1])))(_var_mean(self, dim, correction, keepdim))


# -- indexing, joining --------------------------------------------------------------------------------
def _index(t):
    if not fuelvk_device.is_fuelvk(t):
        return t.numpy()
    return array_of(t)


@kernel("index_select")
def index_select(self, dim, index):
    return tensor_of(fv.ops.indexing.index_select(array_of(self), _index(index.reshape(-1)), dim))


@kernel("slice_backward")
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    """The gradient of x[..., start:end, ...] (step 1): grad_output zero-padded to x's size along dim, one
    pad kernel (torch's decomposition is a zero fill, a slice and a copy). Other steps: Unhandled."""
    if step != 1 or grad_output.dim() == 0:
        raise Unhandled(f"slice_backward with step {step}")
    d = dim % grad_output.dim()
    n = int(input_sizes[d])
    lo = range(n)[slice(start, end)].start if n else 0
    before = min(lo, n)
    after = n - before - grad_output.shape[d]
    if after < 0 or list(input_sizes) != [n if i == d else m for i, m in enumerate(grad_output.shape)]:
        raise Unhandled("a slice_backward whose sizes do not match its slice")
    pads = [(0, 0)] * grad_output.dim()
    pads[d] = (before, after)
    return tensor_of(fv.pad(array_of(grad_output), pads))


@kernel("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise Unhandled("scale_grad_by_freq=True")
    dim = grad_output.shape[-1]
    base = fv.zeros((num_weights, dim), numpy_dtype("aten", grad_output.dtype))
    out = fv.index_add(base, 0, _index(indices.reshape(-1)), array_of(grad_output).reshape(-1, dim))
    if padding_idx is not None and 0 <= padding_idx < num_weights:
        out[padding_idx] = 0
    return tensor_of(out)


def _triangle(f):
    def tri(self, diagonal=0):
        if self.dim() < 2:
            raise Unhandled("a tensor of fewer than 2 dims (torch refuses it; numpy squares it)")
        return f(array_of(self), diagonal)
    return tri


for _name, _f in (("tril", _triangle(fv.tril)), ("triu", _triangle(fv.triu))):
    KERNELS[_name] = (lambda f: lambda self, diagonal=0: tensor_of(f(self, diagonal)))(_f)
    KERNELS[_name + "_"] = (lambda f: lambda self, diagonal=0: _into(self, f(self, diagonal)))(_f)


@kernel("gather")
def gather(self, dim, index, sparse_grad=False):
    """torch.gather: take_along_axis on the view of self cut to index's extent in the other dims."""
    d = dim % max(self.dim(), 1)
    key = tuple(slice(None) if i == d else slice(0, n) for i, n in enumerate(index.shape))
    return tensor_of(fv.take_along_axis(array_of(self)[key], _index(index), axis=d))


def _scatter_add(self, dim, index, src):
    if not fuelvk_device.is_fuelvk(src):
        raise Unhandled("a CPU src")
    return fv.scatter_add(array_of(self), dim % max(self.dim(), 1), _index(index), array_of(src))


KERNELS["scatter_add"] = lambda self, dim, index, src: tensor_of(_scatter_add(self, dim, index, src))
KERNELS["scatter_add_"] = lambda self, dim, index, src: _into(self, _scatter_add(self, dim, index, src))


@kernel("flip")
def flip(self, dims):
    return tensor_of(fv.flip(array_of(self), tuple(dims)))


@kernel("roll")
def roll(self, shifts, dims=()):
    if not dims:
        if len(shifts) != 1:
            raise Unhandled("several shifts without dims")
        return tensor_of(fv.roll(array_of(self), shifts[0]))
    return tensor_of(fv.roll(array_of(self), tuple(shifts), tuple(dims)))


def _clamp(self, min=None, max=None):
    _float(self)
    lo, hi = operand(min) if min is not None else None, operand(max) if max is not None else None
    if isinstance(lo, Array) or isinstance(hi, Array):
        raise Unhandled("tensor bounds")
    x = array_of(self)
    if lo is not None:
        x = _maximum(x, lo)
    if hi is not None:
        x = _minimum(x, hi)
    return x if x is not array_of(self) else fv.copy(x)


for _name, _f in (("clamp_min", _maximum), ("clamp_max", _minimum)):
    _k = (lambda f: lambda self, bound: tensor_of(_binary(f, self, bound)))(_f)
    KERNELS[_name] = KERNELS[_name + ".Tensor"] = _k
    KERNELS[_name + "_"] = KERNELS[_name + "_.Tensor"] = _in_place(_k)
KERNELS["clamp"] = lambda self, min=None, max=None: tensor_of(_clamp(self, min, max))
KERNELS["clamp_"] = lambda self, min=None, max=None: _into(self, _clamp(self, min, max))


@kernel("cumsum")
def cumsum(self, dim, dtype=None):
    d = dim % max(self.dim(), 1)
    if self.dtype in INTS:
        out = _int_linear(lambda v: fv.cumsum(v, d), array_of(self), self.shape[d] if self.dim() else 1)
        want = numpy_dtype("cumsum", dtype or torch.int64)
    else:
        _float(self)
        out = fv.cumsum(array_of(self), d)
        want = numpy_dtype("cumsum", dtype or self.dtype)
    out = out if out.dtype == want else out.astype(want)
    return tensor_of(out if self.dim() else out.reshape(()))


@kernel("cat")
def cat(tensors, dim=0):
    ts = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)] or list(tensors[:1])
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = torch.promote_types(dt, t.dtype)
    npdt = numpy_dtype("cat", dt)
    arrs = [operand(t, npdt) for t in ts]
    return tensor_of(fv.concatenate(arrs, axis=dim % ts[0].dim()))

