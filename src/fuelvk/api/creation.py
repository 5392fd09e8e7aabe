"""Creation functions of the array API: arange, linspace, full, ones, eye, the *_like family,
meshgrid, from_dlpack (asarray, empty, zeros, tril, triu live in fuelvk.array / fuelvk.ops).

full/ones/eye/*_like run on the device: one element is uploaded and broadcast by the strided-copy
kernel (a fill of any dtype, bit-exact), eye writes its diagonal through a strided view of zeros.
arange and linspace are a description (start, step, count) rather than data: they are generated on
the host with numpy's formulas and uploaded once, like asarray of a list (an iota kernel would save
that one transfer; numpy's exact rounding of start + i*step is what they reproduce).

Default dtypes (README "Array API"): float32 for real floating (fuelvk's zeros/empty default; the
GPU-native width, and float64 needs shaderFloat64), int64 for integers, as __array_namespace_info__
reports.
"""
import math
import numbers

import numpy as np

from .. import dtypes as _dt
from .. import layout
from ..array import Array, asarray, empty, zeros
from ..errors import DTypeError, ShapeError, ValueCastError
from .info import check_device

__all__ = ["arange", "linspace", "full", "ones", "full_like", "ones_like", "zeros_like", "empty_like", "eye",
           "meshgrid", "from_dlpack"]

DEFAULT_FLOAT = _dt.float32
DEFAULT_INT = _dt.int64


def _scalar_dtype(op, value):
    """The default dtype a Python scalar creates (bool, int64, float32)."""
    if isinstance(value, (bool, np.bool_)):
        return _dt.bool_
    if isinstance(value, (numbers.Integral, np.integer)):
        return DEFAULT_INT
    if isinstance(value, np.floating):
        return np.dtype(value.dtype)
    if isinstance(value, numbers.Real):
        return DEFAULT_FLOAT
    if isinstance(value, np.complexfloating):
        return np.dtype(value.dtype)
    if isinstance(value, complex):
        return _dt.complex64
    raise DTypeError(f"{op}: expected a real scalar (bool, int or float), got {type(value).__name__} {value!r}")


def _dtype(op, dtype, default):
    try:
        return default if dtype is None else _dt.dtype(dtype)
    except DTypeError as e:
        raise DTypeError(f"{op}: {e}") from None


def full(shape, fill_value, *, dtype=None, device=None):
    """A new array of `shape` filled with fill_value (cast as numpy's a[...] = value; on the device)."""
    check_device("full", device)
    shape = layout.as_shape("full", shape)
    if isinstance(fill_value, Array):
        if fill_value.ndim:
            raise ShapeError(f"full: fill_value must be a scalar, got an array of shape {fill_value.shape}")
        fill_value = fill_value.item()
    dt = _scalar_dtype("full", fill_value) if dtype is None else _dtype("full", dtype, None)
    if dt.kind == "c":
        if not isinstance(fill_value, (numbers.Number, np.generic)):
            raise DTypeError(f"full: expected a scalar fill_value, got {type(fill_value).__name__}")
        from ..ops.complex import component
        one = complex(np.asarray(fill_value, dt))
        out = empty(shape, dt, device=device)
        if out.size:       # each component view filled on the device (16-byte elements have no move kernel)
            component(out, 0)[...] = one.real
            component(out, 1)[...] = one.imag
        return out
    else:
        one = asarray(_dt.scalar_as("full", fill_value, dt), device=device)
    out = empty(shape, dt, device=device)
    if out.size:
        out[...] = one
    return out


def ones(shape, *, dtype=None, device=None):
    """An array of ones (float32 unless dtype is given)."""
    return full(shape, 1, dtype=_dtype("ones", dtype, DEFAULT_FLOAT), device=device)


def _like(op, x):
    if not isinstance(x, Array):
        x = asarray(x)
    return x


def full_like(x, fill_value, *, dtype=None, device=None):
    """An array of x's shape (and dtype unless given) filled with fill_value."""
    x = _like("full_like", x)
    return full(x.shape, fill_value, dtype=_dtype("full_like", dtype, x.dtype), device=device)


def ones_like(x, *, dtype=None, device=None):
    """An array of ones of x's shape (and dtype unless given)."""
    return full_like(x, 1, dtype=dtype, device=device)


def zeros_like(x, *, dtype=None, device=None):
    """An array of zeros of x's shape (and dtype unless given)."""
    x = _like("zeros_like", x)
    check_device("zeros_like", device)
    return zeros(x.shape, _dtype("zeros_like", dtype, x.dtype), device=device)


def empty_like(x, *, dtype=None, device=None):
    """An uninitialized array of x's shape (and dtype, device unless given)."""
    x = _like("empty_like", x)
    check_device("empty_like", device)
    return empty(x.shape, _dtype("empty_like", dtype, x.dtype), device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """Ones on the k-th diagonal: zeros, then a write of 1 through the diagonal's strided view."""
    check_device("eye", device)
    n = layout.as_int("eye", n_rows, "n_rows")
    m = n if n_cols is None else layout.as_int("eye", n_cols, "n_cols")
    k = layout.as_int("eye", k, "k")
    if n < 0 or m < 0:
        raise ShapeError(f"eye: negative dimensions are not allowed, got ({n}, {m})")
    out = zeros((n, m), _dtype("eye", dtype, DEFAULT_FLOAT), device=device)
    count = max(0, min(n, m - k) if k >= 0 else min(n + k, m))
    if count:
        start = k if k >= 0 else -k * m
        diag = out._view((count,), (m + 1,), start)
        if diag.dtype.kind == "c":   # through the real component view (16-byte elements have no move kernel)
            from ..ops.complex import component
            diag = component(diag, 0)
        diag[...] = 1
    return out


def _real(op, name, v):
    if isinstance(v, (complex, np.complexfloating)) or not isinstance(v, (numbers.Real, np.generic)):
        raise DTypeError(f"{op}: {name} must be a real scalar, got {type(v).__name__} {v!r}")
    return v


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """numpy.arange (generated on the host from start/step and uploaded; see the module docstring)."""
    check_device("arange", device)
    if stop is None:
        start, stop = 0, start
    vals = [_real("arange", n, v) for n, v in (("start", start), ("stop", stop), ("step", step))]
    if step == 0:
        raise ShapeError("arange: step must not be 0")
    if dtype is None:
        dtype = DEFAULT_FLOAT if any(_scalar_dtype("arange", v).kind == "f" for v in vals) else DEFAULT_INT
    dt = _dtype("arange", dtype, None)
    n = max(0, math.ceil((stop - start) / step))
    host = (start + np.arange(n, dtype=np.float64 if dt.kind == "f" else np.int64) * step)
    if dt.kind in "iu" and n and not (np.iinfo(dt).min <= host.min() and host.max() <= np.iinfo(dt).max):
        raise DTypeError(f"arange: values [{host.min()}, {host.max()}] do not fit in {dt}")
    return asarray(host.astype(dt), device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """numpy.linspace (generated on the host from its formula and uploaded, as arange)."""
    check_device("linspace", device)
    _real("linspace", "start", start), _real("linspace", "stop", stop)
    num = layout.as_int("linspace", num, "num")
    if num < 0:
        raise ShapeError(f"linspace: num must be >= 0, got {num}")
    dt = _dtype("linspace", dtype, DEFAULT_FLOAT)
    if dt.kind != "f" and dt not in (_dt.bfloat16, _dt.float8_e4m3fn):
        raise DTypeError(f"linspace: dtype must be a floating dtype, got {dt}")
    return asarray(np.linspace(start, stop, num, endpoint=endpoint).astype(dt), device=device)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate matrices from 1-d arrays (broadcast views, copied contiguous as the standard's
    results are independent arrays)."""
    if indexing not in ("xy", "ij"):
        raise ShapeError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [_like("meshgrid", a) for a in arrays]
    if any(x.ndim != 1 for x in xs):
        raise ShapeError(f"meshgrid: inputs must be 1-d, got shapes {[x.shape for x in xs]}")
    if len({x.dtype for x in xs}) > 1:
        raise DTypeError(f"meshgrid: inputs must share one dtype, got {[str(x.dtype) for x in xs]}")
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and len(xs) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        ax = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and len(xs) >= 2 else i
        view = x.reshape([-1 if d == ax else 1 for d in range(len(xs))]).broadcast_to(tuple(shape))
        out.append(view.copy())
    return out


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from any DLPack-exporting object: its data is read through numpy (host memory) and
    uploaded; fuelvk's device memory is not shared zero-copy (copy=False is refused)."""
    check_device("from_dlpack", device)
    if isinstance(x, Array):
        return asarray(x, device=device, copy=copy)
    if copy is False:
        raise ValueCastError("from_dlpack: copy=False, but importing foreign memory into fuelvk uploads a "
                             "copy (device buffers are not imported zero-copy)")
    return asarray(np.from_dlpack(x), device=device)
