"""Statistical functions of the array API beyond the single-kernel reductions (fuelvk.ops.reduction:
sum, prod, max, min, mean, argmax, argmin, cumsum): var, std, cumulative_sum / cumulative_prod, and
prod of integers.

Integer prod / cumulative_prod are exact (wrapping as numpy's) through the integer multiply kernel:
prod halves the reduced axis per launch (a tree of products, log2(n) launches), cumulative_prod is a
Hillis-Steele scan (y[i] *= y[i - 2^k], log2(n) launches). Float products through float64 would
round once a product passes 2^53.

var is the two-pass form numpy uses, on the device: mean (compensated sum), the deviations
x - mean, then the compensated sum of their squares divided once by max(N - correction, 0)
(numpy's rule: 0 / 0 is NaN, s / 0 is inf). No cancellation of E[x^2] - E[x]^2.
"""
import builtins as _b
import math

from .. import dtypes as _dt
from .. import layout
from ..array import Array, empty
from ..errors import DTypeError, ShapeError
from ..ops.elementwise import divide, int_binary, multiply, sqrt, subtract
from ..ops.comparison import equal
from ..ops.movement import concatenate, where
from ..ops import complex as _cx
from ..ops.reduction import cumsum, cumulative_prod_along, normalize_axes
from ..ops.reduction import argmax as _argmax
from ..ops.reduction import argmin as _argmin
from ..ops.reduction import mean as _mean
from ..ops.reduction import max as _max
from ..ops.reduction import min as _min
from ..ops.reduction import prod as _float_prod
from ..ops.reduction import sum as _sum
from ..array import zeros
from .creation import arange, ones

__all__ = ["var", "std", "cumulative_sum", "cumulative_prod", "prod", "sum", "max", "min", "mean", "argmax", "argmin"]


def _arr(op, x):
    if isinstance(x, Array):
        return x
    raise DTypeError(f"{op}: expected a fuelvk.Array, got {type(x).__name__}")


def var_mean(x, axis=None, correction=0.0, keepdims=False):
    """(variance, mean) over axis (None: all), two passes: sum((x - mean)^2) / (N - correction); N <=
    correction gives inf (nan where the sum is 0), as numpy and torch. The mean keeps the reduced axes
    only with keepdims. Shared by var/std and the torch device's var/std(_mean)."""
    x = _arr("var", x)
    axes = normalize_axes("var", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    m = _mean(x, axis=axes, keepdims=True)
    d = subtract(x, m)
    s = _sum(multiply(d, d), axis=axes, keepdims=keepdims)
    return divide(s, _b.max(n - correction, 0)), (m if keepdims else m.reshape(s.shape))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over axis (None: all), dividing by N - correction (numpy's ddof)."""
    return var_mean(x, axis, correction, keepdims)[0]


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation: sqrt(var) (one more elementwise pass)."""
    return sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def _scan_axis(op, x, axis):
    """The axis of a cumulative op: required for rank > 1, and the array must have one."""
    if x.ndim == 0:
        raise ShapeError(f"{op}: needs an array of rank >= 1")
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{op}: axis is required for an array of rank {x.ndim}")
        axis = 0
    return layout.normalize_axis(op, axis, x.ndim)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along axis (required for ndim > 1); include_initial prepends the 0."""
    x = _arr("cumulative_sum", x)
    ax = _scan_axis("cumulative_sum", x, axis)
    cdt = _complex_dtype("cumulative_sum", x, dtype)
    if cdt is not None or x.dtype.kind in "biu" and (dtype is None or _dt.dtype(dtype).kind in "iu"):
        # Integers (default int64 / uint64, wrapping as numpy's) and complex: a Hillis-Steele scan of
        # integer / complex adds, exact for integers.
        out_dt = cdt or (_dt.dtype(dtype) if dtype is not None else
                         (_dt.uint64 if x.dtype.kind == "u" else _dt.int64))
        x = _cx.to_complex("cumulative_sum", x, out_dt) if cdt else x.astype(out_dt) if x.dtype != out_dt else x
        out = _scan(x, ax, "add")
    else:
        if dtype is not None and dtype != x.dtype:
            x = x.astype(dtype)
        out = cumsum(x, axis=ax)
    if include_initial:
        out = concatenate([zeros(x.shape[:ax] + (1,) + x.shape[ax + 1:], out.dtype), out], axis=ax)
    return out


def _scan(x, ax, op):
    """Inclusive scan of x along ax with the pairwise kernel op: y[i] = y[i] op y[i - 2^k], k = 0, 1, ...
    (log2(n) launches; exact for integers)."""
    out, n, s = x.copy(), x.shape[ax], 1
    pre = (slice(None),) * ax
    while s < n:
        shifted = _pairwise(op, out[pre + (slice(s, None),)], out[pre + (slice(0, n - s),)])
        out = concatenate([out[pre + (slice(0, s),)], shifted], axis=ax)
        s *= 2
    return out


def _pairwise(op, a, b):
    return _cx.binary(op, a, b) if a.dtype.kind == "c" else int_binary(op, a, b)


def _complex_dtype(op, x, dtype):
    """The complex dtype a reduction of x is taken in (x complex), or None."""
    if not isinstance(x, Array) or x.dtype.kind != "c":
        return None
    dt = x.dtype if dtype is None else _dt.dtype(dtype)
    if dt.kind != "c":
        raise DTypeError(f"{op}: dtype={dt} for a complex array; complex results need a complex dtype")
    return dt


def _by_parts(reduce, x, dt, *args):
    """A linear reduction of complex x as the same reduction of its real and imaginary views."""
    x = _cx.to_complex("reduce", x, dt)
    re, im = (reduce(_cx.component(x, p), *args) for p in (0, 1))
    out = empty(re.shape, dt)
    _cx.component(out, 0)[...] = re
    _cx.component(out, 1)[...] = im
    return out


def _int_product_dtype(op, x, dtype):
    """The dtype an integer / bool product is taken in: dtype=, else the default integer of x's
    signedness (int64 / uint64, the standard's rule), or None when the product is a float one."""
    if dtype is not None:
        dt = _dt.dtype(dtype)
        return dt if dt.kind in "iu" else None
    if x.dtype.kind not in "biu":
        return None
    return _dt.uint64 if x.dtype.kind == "u" else _dt.int64


def _int_tree(op, kernel_op, x, axis, keepdims, dt):
    """Reduce x over axis with the pairwise kernel `kernel_op` (integer kernels, exact; complex
    multiply for complex x), halving the reduced length per launch; an empty reduction gives ones
    (prod) or zeros (sum)."""
    axes = normalize_axes(op, axis, x.ndim)
    keep = [a for a in range(x.ndim) if a not in axes]
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape) if keepdims or a not in axes)
    rows, n = math.prod(x.shape[a] for a in keep), math.prod(x.shape[a] for a in axes)
    y = x.astype(dt) if x.dtype != dt else x
    y = y.transpose(keep + list(axes)).reshape((rows, n))
    if n == 0 or rows == 0:
        if n == 0 and rows and kernel_op in ("maximum", "minimum"):
            raise ShapeError(f"{op}: an empty reduction has no identity (shape {x.shape}, axis {axis})")
        from .creation import full
        return full(out_shape, 1 if kernel_op == "multiply" else 0, dtype=dt)
    while n > 1:
        h = n // 2
        z = _pairwise(kernel_op, y[:, :h], y[:, h:2 * h])
        y = concatenate([z, y[:, 2 * h:]], axis=1) if n % 2 else z
        n -= h
    return y.reshape(out_shape) if y.shape != out_shape else y.copy()


def prod(x, axis=None, keepdims=False, *, dtype=None):   # fuelvk.ops.reduction.prod's signature
    """Product over axis (None: all). Integers (and bool) exactly in the integer dtype (default int64 /
    uint64, wrapping as numpy's), by a tree of integer multiplies; floats by the reduce kernel."""
    dt = _complex_dtype("prod", x, dtype) or (_int_product_dtype("prod", x, dtype) if isinstance(x, Array) else None)
    if dt is not None and dt.kind == "c":
        return _int_tree("prod", "multiply", _cx.to_complex("prod", x, dt), axis, keepdims, dt)
    if dt is None:
        return _float_prod(x, axis, keepdims, dtype=dtype)
    return _int_tree("prod", "multiply", x, axis, keepdims, dt)


def _wide(x):
    """64-bit integers: the reduce kernels take integers up to 32 bits."""
    return isinstance(x, Array) and x.dtype.kind in "iu" and x.dtype.itemsize == 8


def sum(x, axis=None, keepdims=False, *, dtype=None):  # noqa: A001 - (ops.reduction.sum's signature)
    """Sum over axis (fuelvk.ops.reduction.sum); 64-bit integers, and integers with an integer dtype=,
    by a tree of integer adds (exact, wrapping in the dtype as numpy's)."""
    if _wide(x) and dtype is None:
        return _int_tree("sum", "add", x, axis, keepdims, x.dtype)
    if isinstance(x, Array) and x.dtype.kind in "biu" and dtype is not None and _dt.dtype(dtype).kind in "iu":
        return _int_tree("sum", "add", x, axis, keepdims, _dt.dtype(dtype))   # numpy: cast, then wrap in dtype
    cdt = _complex_dtype("sum", x, dtype)
    if cdt is not None:
        return _by_parts(_sum, x, cdt, axis, keepdims)
    return _sum(x, axis, keepdims, dtype=dtype)


def mean(x, axis=None, keepdims=False):
    """Mean over axis (fuelvk.ops.reduction.mean); complex: the mean of each component."""
    cdt = _complex_dtype("mean", x, None)
    if cdt is not None:
        return _by_parts(_mean, x, cdt, axis, keepdims)
    return _mean(x, axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over axis (fuelvk.ops.reduction.max); 64-bit integers by a tree of integer maxima."""
    return _int_tree("max", "maximum", x, axis, keepdims, x.dtype) if _wide(x) else _max(x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over axis (fuelvk.ops.reduction.min); 64-bit integers by a tree of integer minima."""
    return _int_tree("min", "minimum", x, axis, keepdims, x.dtype) if _wide(x) else _min(x, axis, keepdims)


def _wide_arg(op, x, axis, keepdims):
    """argmax / argmin of 64-bit integers (the reduce kernels take up to 32 bits): the extreme by the
    integer tree, then the lowest index where x equals it (a minimum over the indices, n elsewhere)."""
    v = x.reshape(-1) if axis is None or x.ndim == 0 else x
    ax = 0 if v is not x else layout.normalize_axis(op, axis, x.ndim)
    ext = _int_tree(op, "maximum" if op == "argmax" else "minimum", v, ax, True, v.dtype)
    n = v.shape[ax]
    idx = arange(n, dtype=_dt.int64).reshape((n,) + (1,) * (v.ndim - 1 - ax))
    first = _int_tree(op, "minimum", where(equal(v, ext), idx, n), ax, keepdims, _dt.int64)
    return first.reshape((1,) * x.ndim) if keepdims and v is not x else first


def argmax(x, axis=None, keepdims=False):
    """Index of the maximum (fuelvk.ops.reduction.argmax); 64-bit integers exactly, by integer kernels."""
    return _wide_arg("argmax", x, axis, keepdims) if _wide(x) else _argmax(x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """Index of the minimum (fuelvk.ops.reduction.argmin); 64-bit integers exactly, by integer kernels."""
    return _wide_arg("argmin", x, axis, keepdims) if _wide(x) else _argmin(x, axis, keepdims)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along axis (required for ndim > 1); include_initial prepends the 1. Floats
    use the cumsum kernel's product mode; integers a Hillis-Steele scan of integer multiplies (exact)."""
    x = _arr("cumulative_prod", x)
    ax = _scan_axis("cumulative_prod", x, axis)
    idt = _complex_dtype("cumulative_prod", x, dtype) or _int_product_dtype("cumulative_prod", x, dtype)
    if idt is not None:
        x = _cx.to_complex("cumulative_prod", x, idt) if idt.kind == "c" else x.astype(idt) if x.dtype != idt else x
        out = _scan(x, ax, "multiply")
    else:
        if dtype is not None and dtype != x.dtype:
            x = x.astype(dtype)
        out = cumulative_prod_along(x, ax)
    if include_initial:
        out = concatenate([ones(x.shape[:ax] + (1,) + x.shape[ax + 1:], dtype=out.dtype), out], axis=ax)
    return out


# The op each function extends (inspect.unwrap finds it: the op records and specs describe it).
prod.__wrapped__, sum.__wrapped__, mean.__wrapped__ = _float_prod, _sum, _mean
max.__wrapped__, min.__wrapped__, argmax.__wrapped__, argmin.__wrapped__ = _max, _min, _argmax, _argmin
