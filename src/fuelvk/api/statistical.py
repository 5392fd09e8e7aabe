"""Statistical functions of the array API beyond the single-kernel reductions (fuelvk.ops.reduction:
sum, prod, max, min, mean, argmax, argmin, cumsum): var, std and cumulative_sum.

var is the two-pass form numpy uses, on the device: mean (compensated sum), the deviations
x - mean, then the compensated sum of their squares divided once by max(N - correction, 0)
(numpy's rule: 0 / 0 is NaN, s / 0 is inf). No cancellation of E[x^2] - E[x]^2.
"""
import math

from .. import dtypes as _dt
from .. import layout
from ..array import Array
from ..errors import DTypeError, ShapeError
from ..ops.elementwise import divide, multiply, sqrt, subtract
from ..ops.movement import concatenate
from ..ops.reduction import cumsum, cumulative_prod_along, mean, normalize_axes
from ..ops.reduction import sum as _sum
from ..array import zeros
from .creation import ones

__all__ = ["var", "std", "cumulative_sum", "cumulative_prod"]


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
    m = mean(x, axis=axes, keepdims=True)
    d = subtract(x, m)
    s = _sum(multiply(d, d), axis=axes, keepdims=keepdims)
    return divide(s, max(n - correction, 0)), (m if keepdims else m.reshape(s.shape))


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
    if x.dtype.kind in "biu":
        # Integers: numpy's default-int result, summed exactly through float64 while every running
        # sum stays below 2^53 (guaranteed by the length for <= 32-bit inputs).
        out_dt = _dt.dtype(dtype) if dtype is not None else (_dt.uint64 if x.dtype.kind == "u" else _dt.int64)
        bits = 1 if x.dtype == _dt.bool_ else x.dtype.itemsize * 8
        if out_dt.kind not in "iu" or bits > 32 or x.shape[ax] * 2.0 ** bits >= 2.0 ** 53:
            raise DTypeError(f"cumulative_sum: {x.dtype} -> {out_dt} is not supported (integers up to 32 bits, "
                             "summed exactly through float64, into an integer dtype)")
        out = cumsum(x.astype(_dt.float64), axis=ax).astype(out_dt)
        x = x.astype(out_dt) if include_initial else x
    else:
        if dtype is not None and dtype != x.dtype:
            x = x.astype(dtype)
        out = cumsum(x, axis=ax)
    if include_initial:
        out = concatenate([zeros(x.shape[:ax] + (1,) + x.shape[ax + 1:], out.dtype), out], axis=ax)
    return out


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along axis (required for ndim > 1); include_initial prepends the 1. Float
    dtypes (the cumsum kernel's product mode); integer products are not exact through floats."""
    x = _arr("cumulative_prod", x)
    ax = _scan_axis("cumulative_prod", x, axis)
    if dtype is not None and dtype != x.dtype:
        x = x.astype(dtype)
    out = cumulative_prod_along(x, ax)
    if include_initial:
        out = concatenate([ones(x.shape[:ax] + (1,) + x.shape[ax + 1:], dtype=out.dtype), out], axis=ax)
    return out
