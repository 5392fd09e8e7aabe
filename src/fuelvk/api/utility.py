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
import sys

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


class _Namespace:
    """The fuelvk namespace (its complex-aware multiply / conj / sum, result_type, astype, zeros ...),
    looked up when called: fuelvk/__init__ imports this module before those names exist."""
    def __getattr__(self, name):
        return getattr(sys.modules["fuelvk"], name)


xp = _Namespace()

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
        x = xp.subtract(x[hi], x[lo])   # (complex-aware)
    return x


def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of vectors along axis (broadcast over the others): sum(conj(x1) * x2, axis), in
    the operands' promoted dtype. The vectors' lengths must match (a length 1 does not broadcast)."""
    x1, x2 = _arr("vecdot", x1), _arr("vecdot", x2)
    shape = layout.broadcast_shapes("vecdot", x1.shape, x2.shape)
    if not shape or not x1.ndim or not x2.ndim:
        raise ShapeError("vecdot: needs arrays of rank >= 1")
    ax = layout.normalize_axis("vecdot", axis, len(shape))
    if axis >= 0 and (axis >= x1.ndim or axis >= x2.ndim):
        raise ShapeError(f"vecdot: axis {axis} must index both inputs ({x1.shape}, {x2.shape})")
    n1 = x1.shape[ax - len(shape)] if ax - len(shape) >= -x1.ndim else 1
    n2 = x2.shape[ax - len(shape)] if ax - len(shape) >= -x2.ndim else 1
    if n1 != n2:
        raise ShapeError(f"vecdot: the vectors along axis {axis} differ in length ({x1.shape}, {x2.shape})")
    dt = xp.result_type(x1, x2)
    return xp.sum(xp.multiply(xp.conj(x1) if dt.kind == "c" else x1, x2), axis=ax, dtype=dt)


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
    """Elementwise: whether the sign bit is set (True for -0.0 and negative NaNs), as bool."""
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
    if _general(a, b, out_dtype, n_rep, route):
        return _general_matmul(a, b)
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


def _general(a, b, out_dtype, n_rep, route):
    """Whether a @ b is a product the matmul kernels have no tile for: two Arrays whose promoted dtype
    is float64, complex128 or an integer, or an empty operand (zeros of the result's shape); plain
    calls only (no out_dtype / n_rep / route)."""
    if not (isinstance(a, Array) and isinstance(b, Array)) or out_dtype is not None or n_rep != 1 or route is not None:
        return False
    dt = xp.result_type(a, b)
    return dt in (_dt.float64, _dt.complex128) or dt.kind in "iu" or a.size == 0 or b.size == 0


def _general_matmul(x1, x2):
    """The array API's matmul (1-D operands promoted and their axis dropped, stacks broadcast) for
    float64 / complex128 (the linalg kernel's product) and integers (a broadcast multiply and sum)."""
    from ..ops import linalg as _la
    dt = xp.result_type(x1, x2)
    x1, x2 = (x if x.dtype == dt else xp.astype(x, dt) for x in (x1, x2))
    if x1.ndim == 0 or x2.ndim == 0:
        raise ShapeError(f"matmul: operands must have rank >= 1, got shapes {x1.shape} and {x2.shape}")
    a = x1.reshape((1,) + x1.shape) if x1.ndim == 1 else x1
    b = x2.reshape(x2.shape + (1,)) if x2.ndim == 1 else x2
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {x1.shape} and {x2.shape} do not contract (last axis of x1 against "
                         "the second to last of x2)")
    lead = layout.broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if math.prod(lead) * m * n == 0 or k == 0:
        out = xp.zeros(lead + (m, n), dtype=dt)
    elif dt.kind in "fc":
        out = _la.product(xp.broadcast_to(a, lead + (m, k)).copy(), xp.broadcast_to(b, lead + (k, n)).copy())
    else:
        wide = _dt.uint64 if dt.kind == "u" else _dt.int64      # summed wide, then wrapped into dt (numpy's)
        out = xp.astype(xp.sum(xp.multiply(a[..., :, :, None], b[..., None, :, :]), axis=-2, dtype=wide), dt)
    if x1.ndim == 1:
        out = out[..., 0, :]
    if x2.ndim == 1:
        out = out[..., 0]
    return out


matmul.__wrapped__ = _real_matmul     # the op it extends (inspect.unwrap: op records, specs)


def real(x, /):
    """The real part of a complex array (a copy of x for real dtypes), as a new array."""
    x = _arr("real", x)
    return complex_part(x, 0).copy() if x.dtype.kind == "c" else x.copy()


def imag(x, /):
    """The imaginary part of a complex array (zeros for real dtypes), as a new array."""
    x = _arr("imag", x)
    if x.dtype.kind == "c":
        return complex_part(x, 1).copy()
    return zeros(x.shape, x.dtype)


def conj(x, /):
    """The complex conjugate (a copy of x for real dtypes)."""
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
