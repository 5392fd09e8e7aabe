"""Utility, linear-algebra and remaining elementwise functions of the array API, composed exactly
from device kernels:

- any / all: the bool array selects 1.0 / 0.0 (fuelvk.where), a float32 sum counts the true
  (false) elements, and one compare gives the bool answer. Counts below 2^24 are exact in the
  compensated f32 sum and any nonzero count is > 0, so the answer is exact at every size
  (empty: any False, all True, as the standard says).
- diff: subtraction of shifted views (prepend / append joined first).
- vecdot / tensordot: multiply + sum, and permute + reshape + matmul.
- isnan / isinf / isfinite: one compare each (x != x, |x| == inf, |x| < inf; exact); signbit is
  copysign(1, x) < 0 (exact, NaN signs included).
- real / imag / conj of complex arrays: the float components are strided views of the same buffer
  (interleaved pairs), copied; conj negates the imaginary view of a copy in place.
"""
import builtins
import math

from .. import dtypes as _dt
from .. import layout
from ..array import Array, complex_part, empty
from ..errors import DTypeError, ShapeError
from ..ops.comparison import equal, greater, less, not_equal
from ..ops.elementwise import abs as _abs
from ..ops.elementwise import api_binary, copysign, int_binary, multiply, negative, subtract
from ..ops import complex as _cx
from ..ops.matmul import matmul as _real_matmul
from ..ops.movement import concatenate, where
from ..ops.reduction import normalize_axes
from ..ops.reduction import sum as _sum
from ..array import zeros

__all__ = ["all", "any", "diff", "vecdot", "tensordot", "isnan", "isinf", "isfinite", "signbit", "positive", "pow",
           "real", "imag", "conj", "matmul", "floor_divide", "remainder", "bitwise_left_shift", "bitwise_right_shift"]


def _arr(op, x):
    if isinstance(x, Array):
        return x
    raise DTypeError(f"{op}: expected a fuelvk.Array, got {type(x).__name__}")


def _count(op, x, axis, keepdims, value):
    """How many elements of x are `value` (True / False) along axis, as float32 (exact, see above)."""
    x = _arr(op, x)
    b = x if x.dtype == _dt.bool_ else not_equal(x, 0)
    ones = where(b, 1.0, 0.0) if value else where(b, 0.0, 1.0)
    return _sum(ones, axis=normalize_axes(op, axis, x.ndim), keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001 - the standard's name
    """Whether any element along axis is true (nonzero)."""
    return greater(_count("any", x, axis, keepdims, True), 0)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether every element along axis is true (nonzero)."""
    return equal(_count("all", x, axis, keepdims, False), 0)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """n-th forward difference along axis: x[1:] - x[:-1], n times (numpy.diff)."""
    x = _arr("diff", x)
    if x.ndim == 0:
        raise ShapeError("diff: needs an array of rank >= 1")
    ax = layout.normalize_axis("diff", axis, x.ndim)
    n = layout.as_int("diff", n, "n")
    if n < 0:
        raise ShapeError(f"diff: n must be >= 0, got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concatenate([_arr("diff", p) for p in parts], axis=ax)
    for _ in range(n):
        if x.shape[ax] == 0:
            break
        hi = (slice(None),) * ax + (slice(1, None),)
        lo = (slice(None),) * ax + (slice(None, -1),)
        x = subtract(x[hi], x[lo])
    return x


def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of vectors along axis (broadcast over the others): sum(x1 * x2, axis)."""
    x1, x2 = _arr("vecdot", x1), _arr("vecdot", x2)
    shape = layout.broadcast_shapes("vecdot", x1.shape, x2.shape)
    if not shape:
        raise ShapeError("vecdot: needs arrays of rank >= 1")
    ax = layout.normalize_axis("vecdot", axis, len(shape))
    if axis >= 0 and (axis >= x1.ndim or axis >= x2.ndim):
        raise ShapeError(f"vecdot: axis {axis} must index both inputs ({x1.shape}, {x2.shape})")
    return _sum(multiply(x1, x2), axis=ax)


def tensordot(x1, x2, /, *, axes=2):
    """Sum of products over the given axes: the contracted axes are moved together (views), the
    operands reshaped to matrices (a copy where the view is not contiguous) and multiplied."""
    x1, x2 = _arr("tensordot", x1), _arr("tensordot", x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ShapeError(f"tensordot: axes={axes} is out of range for ranks {x1.ndim} and {x2.ndim}")
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        if len(axes) != 2 or len(axes[0]) != len(axes[1]):
            raise ShapeError(f"tensordot: axes must be an int or two sequences of one length, got {axes!r}")
        a1 = [layout.normalize_axis("tensordot", a, x1.ndim) for a in axes[0]]
        a2 = [layout.normalize_axis("tensordot", a, x2.ndim) for a in axes[1]]
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ShapeError(f"tensordot: contracted axes differ in length ({x1.shape} axis {i}, {x2.shape} "
                             f"axis {j})")
    k1 = [a for a in range(x1.ndim) if a not in a1]
    k2 = [a for a in range(x2.ndim) if a not in a2]
    K = math.prod(x1.shape[a] for a in a1)
    m = x1.transpose(k1 + a1).reshape((math.prod(x1.shape[a] for a in k1), K))
    b = x2.transpose(a2 + k2).reshape((K, math.prod(x2.shape[a] for a in k2)))
    out_shape = tuple(x1.shape[a] for a in k1) + tuple(x2.shape[a] for a in k2)
    return matmul(m, b).reshape(out_shape)


def isnan(x, /):
    x = _arr("isnan", x)
    return not_equal(x, x)


def isinf(x, /):
    x = _arr("isinf", x)
    if x.dtype.kind in "biu":
        return not_equal(x, x)          # all False
    return equal(_abs(x), float("inf"))


def isfinite(x, /):
    x = _arr("isfinite", x)
    if x.dtype.kind in "biu":
        return equal(x, x)              # all True
    return less(_abs(x), float("inf"))


def signbit(x, /):
    x = _arr("signbit", x)
    if x.dtype.kind in "biu":
        return less(x, 0)
    return less(copysign(1.0, x), 0)


def pow(x1, x2, /):  # noqa: A001 - the standard's name
    """x1 ** x2 elementwise, broadcast: floats by the standard's special cases (a few ulp elsewhere),
    integers exact and wrapping (a negative integer exponent is a ValueCastError, numpy's rule)."""
    return api_binary("pow", x1, x2)


def matmul(a, b, out_dtype=None, *, n_rep=1, route=None):
    """Matrix product (fuelvk.ops.matmul, whose signature this keeps); complex operands: four real
    products of the component matrices, (A + iB)(C + iD) = (AC - BD) + i(AD + BC), written into the
    component views."""
    if not (isinstance(a, Array) and a.dtype.kind == "c" or isinstance(b, Array) and b.dtype.kind == "c"):
        return _real_matmul(a, b, out_dtype, n_rep=n_rep, route=route)
    if out_dtype is not None or n_rep != 1 or route is not None:
        raise DTypeError("matmul: out_dtype / n_rep / route are not supported for complex operands")
    x1, x2 = a, b
    dt = _cx._result_dtype("matmul", [x1, x2])
    a, b = _cx.to_complex("matmul", _arr("matmul", x1), dt), _cx.to_complex("matmul", _arr("matmul", x2), dt)
    ar, ai = (_cx.component(a, p).copy() for p in (0, 1))
    br, bi = (_cx.component(b, p).copy() for p in (0, 1))
    re = subtract(_real_matmul(ar, br), _real_matmul(ai, bi))
    im = _real_matmul(ar, bi) + _real_matmul(ai, br)
    out = empty(re.shape, dt)
    _cx.component(out, 0)[...] = re
    _cx.component(out, 1)[...] = im
    return out


matmul.__wrapped__ = _real_matmul     # the op it extends (inspect.unwrap: op records, specs)


def real(x, /):
    x = _arr("real", x)
    return complex_part(x, 0).copy() if x.dtype.kind == "c" else x.copy()


def imag(x, /):
    x = _arr("imag", x)
    if x.dtype.kind == "c":
        return complex_part(x, 1).copy()
    return zeros(x.shape, x.dtype)


def conj(x, /):
    x = _arr("conj", x)
    out = x.copy()
    if x.dtype.kind == "c":
        im = complex_part(out, 1)
        im[...] = negative(im)
    return out


def positive(x, /):
    """+x: a copy."""
    return _arr("positive", x).copy()


def _int_only(name):
    def f(x1, x2, /):
        if builtins.any(isinstance(v, Array) and v.dtype.kind == "f" or isinstance(v, float)
                        for v in (x1, x2)):
            raise DTypeError(f"{name} takes integer operands (the standard defines it for integer dtypes only)")
        return int_binary(name, x1, x2)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} of integer arrays (exact, numpy's semantics; shaders/intops.comp)."
    return f


def floor_divide(x1, x2, /):
    """x1 // x2 rounded toward -inf: integers exact (x // 0 == 0), floats numpy's bits (an exact fmod,
    then numpy's divmod), except the standard's infinite cases: inf // finite = +-inf, finite // inf = +-0."""
    return api_binary("floor_divide", x1, x2)


def remainder(x1, x2, /):
    """x1 % x2 with the divisor's sign (Python's / numpy's): integers exact, floats numpy's bits."""
    return api_binary("remainder", x1, x2)


bitwise_left_shift = _int_only("bitwise_left_shift")
bitwise_right_shift = _int_only("bitwise_right_shift")
