"""fuelvk.linalg: the array API's linalg extension (2024.12), every function, on the device.

Factorizations run in one kernel family (ops/linalg.py, shaders/linalg.comp; one workgroup per
matrix): cholesky; LU with partial pivoting -> det, slogdet, solve, inv; Householder QR (R's diagonal
real and >= 0); cyclic Jacobi -> eigh, eigvalsh (eigenvalues ascending); one-sided Jacobi plus QR ->
svd, svdvals (descending), matrix_rank, pinv. cross, diagonal, trace, outer, matrix_power (repeated
squaring), vector_norm and matrix_norm compose elementwise / reduction / matmul ops.

Dtypes: float32, float64, complex64 and complex128 (computed in float32 / float64 as the input;
eigh takes Hermitian matrices, eigenvalues and singular values are real); other dtypes raise
DTypeError.
Singular input: det is 0 and slogdet (0, -inf); solve, inv and matrix_power(x, n < 0) raise
LinAlgError (as numpy); cholesky of a matrix that is not positive definite raises LinAlgError.
Those three checks download one flag per matrix (a synchronization).
"""
import importlib
import math
from collections import namedtuple

import numpy as np

from .. import layout
from ..array import Array, asarray
from ..errors import DTypeError, ShapeError, UnsupportedError
from ..ops import linalg as _k
from ..ops._core import contiguous
from ..ops.elementwise import multiply, sqrt
from ..ops.reduction import max as _max
from ..ops.reduction import min as _min
from ..ops.reduction import normalize_axes
from ..ops.reduction import sum as _sum
from .manipulation import matrix_transpose
from .utility import matmul, tensordot, vecdot

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def _xp():
    """The fuelvk namespace (its functions are bound after this module is imported)."""
    return importlib.import_module("fuelvk")


def _arr(op, x):
    if isinstance(x, Array):
        return x
    try:
        return asarray(x)
    except Exception as e:
        raise DTypeError(f"linalg.{op}: expected an array, got {type(x).__name__}") from e


def _float(op, x):
    """x as an Array of a floating dtype the kernels take (integer / bool: DTypeError, as the
    standard asks for floating-point input)."""
    x = _arr(op, x)
    if x.dtype.kind not in "fc":
        raise DTypeError(f"linalg.{op}: expected a floating-point array, got {x.dtype}")
    _k.tag_of(op, x)
    return x


def _eye_like(lead, rows, cols, dtype):
    """A contiguous stack of identity matrices [*lead, rows, cols]."""
    xp = _xp()
    eye = xp.eye(rows, cols, dtype=_k.REAL[dtype])     # (eye cannot write 16-byte complex128 ones)
    if dtype.kind == "c":
        eye = xp.astype(eye, dtype)
    return contiguous(xp.broadcast_to(eye, tuple(lead) + (rows, cols)).copy())


def cholesky(x, /, *, upper=False):
    """L with x = L L^H (lower), or U = L^H with x = U^H U (upper=True)."""
    L = _k.cholesky(_float("cholesky", x))
    if not upper:
        return L
    U = matrix_transpose(L)
    return _xp().conj(U) if U.dtype.kind == "c" else contiguous(U)


def det(x, /):
    """The determinant of each square matrix: sign * prod(|U_ii|) of its LU factorization."""
    x = _float("det", x)
    sign, absd = _k.lu_det(x)
    return _xp().multiply(sign, _xp().prod(absd, axis=-1)) if absd.shape[-1] else _xp().ones_like(sign)


def slogdet(x, /):
    """(sign, log|det|) of each square matrix; a singular one gives (0, -inf)."""
    x = _float("slogdet", x)
    sign, absd = _k.lu_det(x)
    if absd.shape[-1] == 0:
        return SlogdetResult(_xp().ones_like(sign), _xp().zeros(sign.shape, dtype=absd.dtype))
    return SlogdetResult(sign, _sum(_xp().log(absd), axis=-1))


def _promoted(op, *xs):
    xs = [_float(op, x) for x in xs]
    dt = _xp().result_type(*xs)
    return [x if x.dtype == dt else _xp().astype(x, dt) for x in xs]


def solve(x1, x2, /):
    """X with x1 X = x2: x2 of shape (M,) is one vector per x1 matrix, otherwise a stack of M x K
    matrices broadcast against x1's stack."""
    a, b = _promoted("solve", x1, x2)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"linalg.solve: x1 must be a stack of square matrices, got shape {a.shape}")
    n = a.shape[-1]
    vector = b.ndim == 1
    if vector:
        b = b.reshape((n, 1))
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(f"linalg.solve: x2 {b.shape} does not match x1 {a.shape} (x2 must be (M,) or (..., M, K))")
    lead = layout.broadcast_shapes("linalg.solve", a.shape[:-2], b.shape[:-2])
    xp = _xp()
    a = contiguous(xp.broadcast_to(a, lead + (n, n)))
    b = xp.broadcast_to(b, lead + b.shape[-2:]).copy()     # overwritten with the solution
    out = _k.solve(a, b)
    return out.reshape(lead + (n,)) if vector else out


def inv(x, /):
    """The inverse of each square matrix (LU, then the solve of A X = I)."""
    x = _float("inv", x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.inv: expected a stack of square matrices, got shape {x.shape}")
    return _k.solve(contiguous(x), None, inverse=True)


def qr(x, /, *, mode="reduced"):
    """(Q, R) with x = Q R: mode 'reduced' (Q m x k, R k x n, k = min(m, n)) or 'complete'
    (Q m x m, R m x n). R's diagonal is real and >= 0."""
    if mode not in ("reduced", "complete"):
        raise ShapeError(f"linalg.qr: mode={mode!r} is not supported; accepted: 'reduced', 'complete'")
    x = _float("qr", x)
    got = _k.qr(x, mode == "complete")
    if got is None:                                   # an empty stack or a 0-sized matrix
        m, n = x.shape[-2:]
        rows = m if mode == "complete" else min(m, n)
        return QRResult(_eye_like(x.shape[:-2], m, rows, x.dtype), _xp().zeros(x.shape[:-2] + (rows, n), dtype=x.dtype))
    return QRResult(*got)


def eigh(x, /):
    """(eigenvalues ascending (real), eigenvectors as columns) of each symmetric / Hermitian matrix
    (its lower triangle), by cyclic Jacobi."""
    w, v = _k.eigh(_float("eigh", x))
    return EighResult(w, v)


def eigvalsh(x, /):
    """The eigenvalues of each symmetric / Hermitian matrix, ascending."""
    return eigh(x).eigenvalues


def _H(x):
    """The conjugate transpose of each matrix (a view for real x)."""
    t = matrix_transpose(x)
    return _xp().conj(t) if t.dtype.kind == "c" else t


def _svd(op, x, vectors, full_matrices=True):
    x = _float(op, x)
    if x.ndim < 2:
        raise ShapeError(f"linalg.{op}: expected a stack of matrices (rank >= 2), got shape {x.shape}")
    lead, (m, n) = x.shape[:-2], x.shape[-2:]
    kk = min(m, n)
    xp = _xp()
    if math.prod(lead) == 0 or kk == 0:
        S = xp.zeros(lead + (kk,), dtype=_k.REAL[x.dtype])
        if not vectors:
            return S
        return SVDResult(_eye_like(lead, m, m if full_matrices else kk, x.dtype), S,
                         _eye_like(lead, n if full_matrices else kk, n, x.dtype))
    flip = m < n                                      # factor x^H (m >= n for one-sided Jacobi)
    a = contiguous(_H(x) if flip else x)
    S, B, Vh = _k.svd_parts(a)
    if not vectors:
        return S
    U = _k.qr(B, full_matrices)[0]                    # B = A V = U diag(S), columns in S's order
    if flip:
        U, Vh = contiguous(_H(Vh)), contiguous(_H(U))
    return SVDResult(U, S, Vh)


def svd(x, /, *, full_matrices=True):
    """(U, S, Vh) with x = U diag(S) Vh, S descending and real."""
    return _svd("svd", x, True, full_matrices)


def svdvals(x, /):
    """The singular values of each matrix, descending (real)."""
    return _svd("svdvals", x, False)


def _cutoff(op, x, S, rtol):
    """rtol * max(S) per matrix, shaped [..., 1] (rtol None: max(M, N) * eps of x's dtype)."""
    xp = _xp()
    if rtol is None:
        rtol = max(x.shape[-2:]) * float(np.finfo(S.dtype).eps)
    if isinstance(rtol, Array):
        rtol = xp.astype(rtol, S.dtype)[..., None]
    return multiply(_max(S, axis=-1, keepdims=True), rtol)


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above rtol * the largest (int64), per matrix."""
    x = _float("matrix_rank", x)
    xp = _xp()
    S = svdvals(x)
    if S.shape[-1] == 0:
        return xp.zeros(S.shape[:-1], dtype=xp.int64)
    return xp.sum(xp.astype(xp.greater(S, _cutoff("matrix_rank", x, S, rtol)), xp.int64), axis=-1)


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse: Vh^H diag(1/S above the cutoff, else 0) U^H."""
    x = _float("pinv", x)
    xp = _xp()
    U, S, Vh = svd(x, full_matrices=False)
    lead, (m, n) = x.shape[:-2], x.shape[-2:]
    if S.shape[-1] == 0 or math.prod(lead) == 0:
        return xp.zeros(lead + (n, m), dtype=x.dtype)     # (eye-free: every entry 0)
    keep = xp.greater(S, _cutoff("pinv", x, S, rtol))
    s_inv = xp.where(keep, xp.divide(xp.ones_like(S), xp.where(keep, S, xp.ones_like(S))), xp.zeros_like(S))
    left = contiguous(xp.multiply(_H(Vh), s_inv[..., None, :]))       # V diag(1/S): n x k
    return _k.product(left, contiguous(_H(U)))


def matrix_power(x, n, /):
    """x raised to the integer n (repeated squaring; n < 0: of inv(x); n = 0: the identity)."""
    x = _float("matrix_power", x)
    if isinstance(n, bool) or not isinstance(n, int):
        raise DTypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.matrix_power: expected a stack of square matrices, got shape {x.shape}")
    if n == 0:
        return _eye_like(x.shape[:-2], x.shape[-1], x.shape[-1], x.dtype)
    base = inv(x) if n < 0 else contiguous(x)
    n = abs(n)
    result = None
    while True:
        if n & 1:
            result = base if result is None else _k.product(result, base)
        n >>= 1
        if not n:
            return result if result is not base else base.copy()
        base = _k.product(base, base)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along axis (x1, x2 broadcast; axis counts from the end)."""
    xp = _xp()
    x1, x2 = _arr("cross", x1), _arr("cross", x2)
    nd = min(x1.ndim, x2.ndim)
    if nd == 0 or not -nd <= axis < 0:
        raise ShapeError(f"linalg.cross: axis {axis} must be in [-N, -1] for shapes {x1.shape}, {x2.shape}")
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ShapeError(f"linalg.cross: axis {axis} must have size 3 in both, got {x1.shape} and {x2.shape}")
    shape = layout.broadcast_shapes("linalg.cross", x1.shape, x2.shape)
    a = xp.moveaxis(xp.broadcast_to(x1, shape), axis, -1)
    b = xp.moveaxis(xp.broadcast_to(x2, shape), axis, -1)
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    sub, mul = xp.subtract, xp.multiply
    c = xp.stack([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)), sub(mul(a0, b1), mul(a1, b0))],
                 axis=-1)
    return xp.moveaxis(c, -1, axis)


def diagonal(x, /, *, offset=0):
    """The offset diagonal of each matrix (a strided view: no copy)."""
    x = _arr("diagonal", x)
    if x.ndim < 2:
        raise ShapeError(f"linalg.diagonal: expected a stack of matrices (rank >= 2), got shape {x.shape}")
    offset = layout.as_int("linalg.diagonal", offset, "offset")
    rows, cols = x.shape[-2:]
    sr, sc = x.strides[-2:]
    if offset >= 0:
        size, start = max(0, min(rows, cols - offset)), offset * sc
    else:
        size, start = max(0, min(rows + offset, cols)), -offset * sr
    if size == 0:
        start = 0
    return Array(x.buffer, x.shape[:-2] + (size,), tuple(x.strides[:-2]) + (sr + sc,), x.offset + start, x.dtype)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of each matrix's offset diagonal (the standard's sum dtype rules)."""
    return _xp().sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1, x2, /):
    """x1[i] * x2[j] of two vectors."""
    xp = _xp()
    x1, x2 = _arr("outer", x1), _arr("outer", x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"linalg.outer: expected two vectors, got shapes {x1.shape} and {x2.shape}")
    return xp.multiply(xp.reshape(x1, (x1.shape[0], 1)), xp.reshape(x2, (1, x2.shape[0])))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - the standard's name
    """The ord-norm of vectors along axis (None: all elements), real for complex x: ord 2, 1, inf,
    -inf directly, 0 the count of nonzeros, any other p as exp(log(sum(exp(p log|x|))) / p)."""
    if not isinstance(x, Array):
        raise DTypeError(f"vector_norm: expected a fuelvk.Array, got {type(x).__name__}")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise UnsupportedError(f"vector_norm: ord={ord!r} is not supported; accepted: a real number or +-inf")
    xp = _xp()
    axes = normalize_axes("vector_norm", axis, x.ndim)
    a = xp.abs(x)             # (complex: the real magnitudes)
    if ord == 2:
        return sqrt(_sum(multiply(a, a), axis=axes, keepdims=keepdims))
    if ord == 1:
        return _sum(a, axis=axes, keepdims=keepdims)
    if ord == math.inf:
        return _max(a, axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return _min(a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return _sum(xp.astype(xp.not_equal(a, 0), a.dtype), axis=axes, keepdims=keepdims)
    powered = xp.exp(xp.multiply(xp.log(a), float(ord)))          # |x|^p (0^p: 0 for p > 0, inf below)
    return xp.exp(xp.divide(xp.log(_sum(powered, axis=axes, keepdims=keepdims)), float(ord)))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """The Frobenius norm (ord 'fro') over the last two axes; 1 / -1 / inf / -inf: max / min column
    / row sums; 2 / -2 / 'nuc': largest / smallest / sum of the singular values."""
    if not isinstance(x, Array) or x.ndim < 2:
        raise DTypeError("matrix_norm: expected a fuelvk.Array of rank >= 2")
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims, ord=2)
    if ord in (1, -1, math.inf, -math.inf):
        pick = _max if ord > 0 else _min
        s = _sum(_xp().abs(x), axis=-2 if abs(ord) == 1 else -1, keepdims=True)
        r = pick(s, axis=-1 if abs(ord) == 1 else -2, keepdims=True)
        return r if keepdims else r.reshape(x.shape[:-2])
    if ord in (2, -2, "nuc"):
        S = svdvals(x)
        r = _sum(S, axis=-1) if ord == "nuc" else (_max if ord == 2 else _min)(S, axis=-1)
        return r.reshape(x.shape[:-2] + (1, 1)) if keepdims else r
    raise UnsupportedError(f"matrix_norm: ord={ord!r} is not implemented; accepted: 'fro', 'nuc', 1, -1, 2, -2, "
                           "inf, -inf")
