"""The linalg extension's factorizations on the device (shaders/linalg.comp, kernels/linalg.py):
one workgroup factorizes one matrix of a batch. fuelvk.linalg (api/linalg.py) composes the public
functions from these runners and the elementwise / reduction / matmul ops.

float32 / complex64 compute in float32, float64 / complex128 in float64 (shaderFloat64: DTypeError
without it); every mode takes complex (eigh: Hermitian). Inputs are
stacks [..., m, n] (made contiguous); outputs are fresh contiguous arrays. Singular or not positive
definite inputs raise LinAlgError after the factorization (the one download: a flag per matrix).
"""
import math

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..errors import DTypeError, LinAlgError, ShapeError
from ..kernels import kernel
from ..kernels.linalg import FLAGS, JACOBI_SWEEPS, MAXN, MODES, step_costs
from ._core import contiguous, new_like

__all__ = []   # reached through fuelvk.linalg (the array API's names)

PRODUCT_OUTPUTS = 1024     # outputs per product workgroup (a big product spreads over many workgroups)
# Loop iterations per invocation in one launch where the device has no loop cap: keeps each launch
# of a long factorization (a 512-column Jacobi runs minutes on one workgroup) under GPU watchdogs.
LAUNCH_ITERATIONS = 1 << 22

_TAGS = {_dt.float32: "f32", _dt.float64: "f64", _dt.complex64: "c64", _dt.complex128: "c128"}
REAL = {_dt.float32: _dt.float32, _dt.float64: _dt.float64, _dt.complex64: _dt.float32,
        _dt.complex128: _dt.float64}


def tag_of(op, x):
    """The kernel tag of x's dtype, or DTypeError naming what op accepts."""
    tag = _TAGS.get(x.dtype)
    if tag is None:
        raise DTypeError(f"linalg.{op}: dtype {x.dtype} is not supported; accepted: float32, float64, complex64, "
                         "complex128")
    if tag in ("f64", "c128") and "float64" not in runtime.get().device.features:
        raise DTypeError(f"linalg.{op}: {x.dtype} needs shaderFloat64, which {runtime.get().device.name} "
                         "does not have; use float32 / complex64")
    return tag


def _check_matrix(op, x, square):
    if x.ndim < 2:
        raise ShapeError(f"linalg.{op}: expected a stack of matrices (rank >= 2), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.{op}: expected square matrices, got shape {x.shape}")


def _run(op, mode, x, m, n, k, outs, flags=0, blocks=1):
    """Launch `mode` over the stack x (contiguous [batch, m, n]) in step groups within the loop
    budget. outs: binding name -> Array (w, v, t, vals, info, o2; absent ones get a one-word stub).
    Returns the info words (uint32 [2 * batch]) array."""
    ctx = runtime.get()
    batch = math.prod(x.shape[:-2])
    words = 2 if x.dtype.kind == "c" else 1
    for arr in [x] + list(outs.values()):
        if (arr.offset + arr.size) * words >= 2**32:
            raise ShapeError(f"linalg.{op}: {x.shape} needs more than the kernel's 2^32 indexable words")
    info = new_like((2 * batch,), _dt.uint32)
    stub = new_like((1,), x.dtype if x.dtype.kind != "c" else REAL[x.dtype])
    binds = {name: outs.get(name, stub) for name in ("w", "v", "t", "vals", "o2")}
    costs = step_costs(mode, -(-m // blocks), n, k)
    budget = ctx.device.loop_budget or LAUNCH_ITERATIONS
    v = kernel("linalg", tag_of(op, x))
    s0 = 0
    while s0 < len(costs):
        s1, used = s0, 0
        while s1 < len(costs) and used + costs[s1] <= budget:
            used += costs[s1]
            s1 += 1
        if s1 == s0:
            raise ShapeError(f"linalg.{op}: a {m}x{n} matrix needs {costs[s0]} loop iterations per invocation in "
                             f"one step, over the {budget} one launch may run (the device's loop budget or "
                             "LAUNCH_ITERATIONS); smaller matrices fit")
        ctx.launch(v, ctx.groups(batch * blocks), a=x, info=info, batch=batch, m=m, n=n, k=k, s0=s0, s1=s1,
                   off_a=x.offset, flags=flags, blocks=blocks, MODE=MODES[mode], **binds)
        s0 = s1
    return info


def _failed(info, batch):
    """Whether any matrix set its failure flag (info[b] != 0): the one download of these ops."""
    return bool(np.asarray(info)[:batch].any())


def _stack(x):
    """(contiguous x, batch shape, batch size)."""
    x = contiguous(x)
    return x, x.shape[:-2], math.prod(x.shape[:-2])


def cholesky(x):
    """Lower Cholesky factor of each (Hermitian positive definite) matrix, from its lower triangle."""
    _check_matrix("cholesky", x, True)
    x, lead, batch = _stack(x)
    n = x.shape[-1]
    w = new_like(x.shape, x.dtype)
    if x.size == 0:
        return w
    info = _run("cholesky", "cholesky", x, n, n, 0, {"w": w})
    if _failed(info, batch):
        raise LinAlgError("linalg.cholesky: a matrix is not positive definite (a pivot <= 0 or NaN)")
    return w


def lu_det(x):
    """(sign of det [batch], |U_ii| [batch, n] real) of each square matrix (LU, partial pivoting)."""
    _check_matrix("det", x, True)
    x, lead, batch = _stack(x)
    n = x.shape[-1]
    sign = new_like(lead, x.dtype)
    absd = new_like(lead + (n,), REAL[x.dtype])
    if batch and n:
        _run("det", "lu", x, n, n, 0, {"w": new_like(x.shape, x.dtype), "t": sign, "vals": absd})
    return sign, absd


def solve(a, b, inverse=False):
    """X with A X = B for contiguous stacks a [batch, n, n] and b [batch, n, k] of one dtype (b is
    overwritten: pass a fresh copy); inverse: b is ignored and X = A^-1. LinAlgError if a matrix is
    exactly singular (a zero pivot)."""
    op = "inv" if inverse else "solve"
    n = a.shape[-1]
    batch = math.prod(a.shape[:-2])
    k = n if inverse else b.shape[-1]
    out = new_like(a.shape, a.dtype) if inverse else b
    if batch == 0 or n == 0 or k == 0:
        return out
    info = _run(op, "lu", a, n, n, k,
                {"w": new_like(a.shape, a.dtype), "v": out, "t": new_like((batch,), a.dtype),
                 "vals": new_like((batch, n), REAL[a.dtype])}, flags=FLAGS["INV"] if inverse else 0)
    if _failed(info, batch):
        raise LinAlgError(f"linalg.{op}: a matrix is singular (an exactly zero pivot)")
    return out


def qr(x, complete):
    """(Q, R) of each matrix (Householder); R's diagonal is real and >= 0. complete: Q is m x m and
    R m x n, else Q is m x k and R k x n (k = min(m, n))."""
    _check_matrix("qr", x, False)
    x, lead, batch = _stack(x)
    m, n = x.shape[-2:]
    kk = min(m, n)
    qc = m if complete else kk
    q = new_like(lead + (m, qc), x.dtype)
    w = new_like(x.shape, x.dtype)
    if batch and m and n:
        _run("qr", "qr", x, m, n, qc, {"w": w, "v": q, "t": new_like((batch * m * kk,), x.dtype),
                                        "vals": new_like((batch * kk,), REAL[x.dtype])})
        return q, w if complete else contiguous(w[..., :kk, :])
    return None   # the caller builds the empty / identity results


def _jacobi(op, mode, x, m, n):
    if n > MAXN:
        raise ShapeError(f"linalg.{op}: {n} columns exceed the Jacobi kernel's {MAXN} (its shared arrays)")
    batch = x.size // (m * n)
    lead = x.shape[:-2]
    outs = {"w": new_like((batch * m * n,), x.dtype), "t": new_like((batch * n * n,), x.dtype),
            "vals": new_like(lead + (n,), REAL[x.dtype]), "v": new_like(lead + (m, n), x.dtype),
            "o2": new_like(lead + (n, n), x.dtype)}
    _run(op, mode, x, m, n, JACOBI_SWEEPS, outs)
    return outs


def eigh(x):
    """(eigenvalues ascending [.., n] (real), eigenvectors [.., n, n] as columns) of each symmetric /
    Hermitian matrix (its lower triangle), by cyclic Jacobi."""
    _check_matrix("eigh", x, True)
    x, lead, batch = _stack(x)
    n = x.shape[-1]
    if batch == 0 or n == 0:
        return new_like(lead + (n,), REAL[x.dtype]), new_like(x.shape, x.dtype)
    outs = _jacobi("eigh", "eigh", x, n, n)
    return outs["vals"], outs["v"]


def svd_parts(x):
    """For contiguous x [.., m, n] with m >= n > 0: (S descending [.., n], B = A V with columns in
    that order [.., m, n], Vh [.., n, n]) by one-sided Jacobi; U is B's QR factor."""
    m, n = x.shape[-2:]
    outs = _jacobi("svd", "svd", x, m, n)
    return outs["vals"], outs["v"], outs["o2"]


def product(a, b):
    """a @ b for contiguous stacks a [.., m, k] and b [.., k, n] of one dtype and batch shape: matmul
    of float64 / complex128 (the matmul kernels have no such tile) and the compositions' products
    (matrix_power, pinv). Each matrix's rows are split over workgroups of about PRODUCT_ROWS_OUT
    outputs."""
    m, kd = a.shape[-2:]
    n = b.shape[-1]
    out = new_like(a.shape[:-2] + (m, n), a.dtype)
    if out.size:
        per = max(1, min(m, PRODUCT_OUTPUTS // max(n, 1)))
        _run("matmul", "product", a, m, n, kd, {"w": out, "t": b}, blocks=-(-m // per))
    return out
