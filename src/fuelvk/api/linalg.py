"""fuelvk.linalg: the array API's linalg extension, the part fuelvk implements on the device.

matmul, matrix_transpose, tensordot and vecdot are the top-level functions; vector_norm and
matrix_norm compose reductions (ord 2 / 'fro' as sqrt(sum(x*x)), 1 as sum(|x|), inf / -inf as
max / min of |x|). Decompositions and solvers (cholesky, det, eigh, inv, qr, solve, svd, ...) have
no kernels: they are absent, so hasattr() tells the truth.
"""
import math

from ..array import Array
from ..errors import DTypeError, UnsupportedError
from ..ops.elementwise import abs as _abs
from ..ops.elementwise import multiply, sqrt
from ..ops.reduction import max as _max
from ..ops.reduction import min as _min
from ..ops.reduction import normalize_axes
from ..ops.reduction import sum as _sum
from .manipulation import matrix_transpose
from .utility import matmul, tensordot, vecdot

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot", "vector_norm", "matrix_norm"]


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - the standard's name
    """The ord-norm of vectors along axis (None: all elements); ord 2, 1, inf, -inf."""
    if not isinstance(x, Array):
        raise DTypeError(f"vector_norm: expected a fuelvk.Array, got {type(x).__name__}")
    axes = normalize_axes("vector_norm", axis, x.ndim)
    a = _abs(x)
    if ord == 2:
        return sqrt(_sum(multiply(a, a), axis=axes, keepdims=keepdims))
    if ord == 1:
        return _sum(a, axis=axes, keepdims=keepdims)
    if ord == math.inf:
        return _max(a, axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return _min(a, axis=axes, keepdims=keepdims)
    raise UnsupportedError(f"vector_norm: ord={ord!r} is not implemented; accepted: 1, 2, inf, -inf")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """The Frobenius norm (ord 'fro') over the last two axes; 1 / inf norms: max column / row sums."""
    if not isinstance(x, Array) or x.ndim < 2:
        raise DTypeError("matrix_norm: expected a fuelvk.Array of rank >= 2")
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims, ord=2)
    if ord in (1, math.inf):
        s = _sum(_abs(x), axis=-2 if ord == 1 else -1, keepdims=True)
        r = _max(s, axis=-1 if ord == 1 else -2, keepdims=True)
        return r if keepdims else r.reshape(x.shape[:-2])
    raise UnsupportedError(f"matrix_norm: ord={ord!r} is not implemented (2 and 'nuc' need an SVD); accepted: "
                           "'fro', 1, inf")
