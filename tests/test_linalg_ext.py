"""fuelvk.linalg's factorizations and compositions (shaders/linalg.comp) against numpy (float64 as the
oracle): batches, 1x1, non-square QR / SVD, singular and not positive definite input, the
reconstructions, float32 / float64 and complex where the function takes it, and the loop-budget
split of every mode (a tiny budget forces one step per launch)."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels.linalg import MAXN

L = fv.linalg
REAL = [np.float32, np.float64]
ALL = REAL + [np.complex64, np.complex128]
RTOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-11, np.complex128: 1e-11}


def rand(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def close(got, want, dt, scale=1.0):
    got = np.asarray(got)
    assert got.shape == np.shape(want), f"shape {got.shape} != {np.shape(want)}"
    tol = RTOL[dt] * scale
    np.testing.assert_allclose(got.astype(np.complex128), np.asarray(want, np.complex128), rtol=tol, atol=tol)


def H(x):
    return np.conj(np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("dt", ALL)
def test_cholesky(dt):
    a = rand((2, 3, 5, 5), dt)
    spd = (a @ H(a) + 5 * np.eye(5)).astype(dt)
    lo = L.cholesky(fv.asarray(spd))
    close(lo, np.linalg.cholesky(spd.astype(np.complex128)), dt)
    assert np.array_equal(np.asarray(lo), np.tril(np.asarray(lo)))
    up = np.asarray(L.cholesky(fv.asarray(spd), upper=True))
    assert np.array_equal(up, np.triu(up))
    close(H(up) @ up, spd, dt, 10)
    close(L.cholesky(fv.asarray(np.array([[4.0]], dt))), [[2.0]], dt)


def test_cholesky_not_positive_definite():
    with pytest.raises(fv.LinAlgError, match="not positive definite"):
        L.cholesky(fv.asarray(np.array([[[1.0, 0], [0, 1]], [[1.0, 2], [2, 1]]])))


@pytest.mark.parametrize("dt", ALL)
def test_det_slogdet(dt):
    a = rand((3, 4, 4), dt)
    want = np.linalg.det(a.astype(np.complex128))
    close(L.det(fv.asarray(a)), want, dt, 10)
    sign, logabs = L.slogdet(fv.asarray(a))
    s2, l2 = np.linalg.slogdet(a.astype(np.complex128))
    assert np.asarray(logabs).dtype == np.zeros(1, dt).real.dtype
    close(sign, s2, dt, 10)
    close(logabs, l2, dt, 10)


def test_det_singular_1x1_and_empty():
    sing = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    assert np.asarray(L.det(fv.asarray(sing))).tolist() == [0.0, 0.0]
    sign, logabs = L.slogdet(fv.asarray(sing))
    assert np.asarray(sign).tolist() == [0.0, 0.0] and np.asarray(logabs).tolist() == [-np.inf, -np.inf]
    close(L.det(fv.asarray(np.array([[-3.0]], np.float32))), -3.0, np.float32)
    assert np.asarray(L.det(fv.asarray(np.zeros((2, 0, 0))))).tolist() == [1.0, 1.0]
    assert L.det(fv.asarray(np.zeros((0, 3, 3)))).shape == (0,)


@pytest.mark.parametrize("dt", ALL)
def test_solve_and_inv(dt):
    a = rand((2, 1, 4, 4), dt, 1)
    b = rand((3, 4, 2), dt, 2)
    close(L.solve(fv.asarray(a), fv.asarray(b)), np.linalg.solve(a.astype(np.complex128), b), dt, 10)
    v = rand((4,), dt, 3)
    close(L.solve(fv.asarray(a), fv.asarray(v)), np.linalg.solve(a.astype(np.complex128), v[:, None])[..., 0], dt, 10)
    close(L.inv(fv.asarray(a)), np.linalg.inv(a.astype(np.complex128)), dt, 10)


def test_solve_inv_singular_raise():
    sing = fv.asarray(np.array([[1.0, 2.0], [2.0, 4.0]], np.float32))
    with pytest.raises(fv.LinAlgError, match="singular"):
        L.inv(sing)
    with pytest.raises(fv.LinAlgError, match="singular"):
        L.solve(sing, fv.asarray(np.ones(2, np.float32)))
    with pytest.raises(fv.ShapeError):
        L.solve(sing, fv.asarray(np.ones(3, np.float32)))


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("shape", [(2, 6, 4), (4, 6), (1, 1), (3, 3)])
def test_qr(dt, shape):
    a = rand(shape, dt, 4)
    m, n = shape[-2:]
    for mode, qc in (("reduced", min(m, n)), ("complete", m)):
        q, r = L.qr(fv.asarray(a), mode=mode)
        q, r = np.asarray(q), np.asarray(r)
        assert q.shape == shape[:-2] + (m, qc) and r.shape == shape[:-2] + (qc, n)
        assert np.array_equal(r, np.triu(r))
        d = np.diagonal(r, axis1=-2, axis2=-1)
        assert np.all(d.real >= 0) and np.all(d.imag == 0)
        close(q @ r, a, dt, 10)
        close(H(q) @ q, np.broadcast_to(np.eye(qc), q.shape[:-2] + (qc, qc)), dt, 10)


@pytest.mark.parametrize("dt", ALL)
def test_eigh(dt):
    a = rand((3, 5, 5), dt, 5)
    lower = np.tril(a, -1) + np.diagonal(a, 0, -2, -1).real[..., None] * np.eye(5)
    sym = (lower + H(np.tril(a, -1))).astype(dt)         # the Hermitian matrix the lower triangle means
    w, v = L.eigh(fv.asarray(a))                          # reads the lower triangle only (as numpy)
    w, v = np.asarray(w), np.asarray(v)
    close(w, np.linalg.eigvalsh(sym.astype(np.complex128)), dt, 10)
    assert np.all(np.diff(w, axis=-1) >= 0)
    assert w.dtype == np.zeros(1, dt).real.dtype
    close(H(v) @ v, np.broadcast_to(np.eye(5), v.shape), dt, 10)
    close(sym @ v, v * w[..., None, :], dt, 20)
    close(L.eigvalsh(fv.asarray(sym)), np.linalg.eigvalsh(sym.astype(np.complex128)), dt, 10)
    w1, v1 = L.eigh(fv.asarray(np.array([[2.0]], dt)))
    assert np.asarray(w1).tolist() == [2.0] and np.asarray(v1).tolist() == [[1.0]]


def test_eigh_repeated_eigenvalues():
    w, v = L.eigh(fv.asarray(np.eye(4)))
    assert np.asarray(w).tolist() == [1.0] * 4
    close(np.asarray(v) @ np.asarray(v).T, np.eye(4), np.float64)


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("shape", [(2, 6, 4), (2, 4, 6), (1, 1), (3, 3)])
def test_svd(dt, shape):
    a = rand(shape, dt, 6)
    m, n = shape[-2:]
    k = min(m, n)
    want = np.linalg.svd(a.astype(np.complex128), compute_uv=False)
    for full in (True, False):
        u, s, vh = (np.asarray(t) for t in L.svd(fv.asarray(a), full_matrices=full))
        assert s.dtype == np.zeros(1, dt).real.dtype
        assert u.shape == shape[:-2] + ((m, m) if full else (m, k))
        assert vh.shape == shape[:-2] + ((n, n) if full else (k, n))
        close(s, want, dt, 10)
        assert np.all(np.diff(s, axis=-1) <= 0)
        close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dt, 10)
        close(H(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2), dt, 10)
        close(vh @ H(vh), np.broadcast_to(np.eye(vh.shape[-2]), vh.shape[:-2] + (vh.shape[-2],) * 2), dt, 10)
    close(L.svdvals(fv.asarray(a)), want, dt, 10)


def test_svd_rank_deficient_rank_pinv():
    a = rand((2, 5, 2), np.float64, 7) @ rand((2, 2, 4), np.float64, 8)    # rank 2
    u, s, vh = (np.asarray(t) for t in L.svd(fv.asarray(a)))
    close(u.swapaxes(-1, -2) @ u, np.broadcast_to(np.eye(5), (2, 5, 5)), np.float64, 10)
    close((u[..., :4] * s[..., None, :]) @ vh, a, np.float64, 10)
    assert np.asarray(L.matrix_rank(fv.asarray(a))).tolist() == [2, 2]
    close(L.pinv(fv.asarray(a)), np.linalg.pinv(a), np.float64, 100)
    close(L.pinv(fv.asarray(a.astype(np.float32))), np.linalg.pinv(a), np.float32, 100)
    close(L.matrix_norm(fv.asarray(a), ord=2), np.linalg.norm(a, 2, axis=(-2, -1)), np.float64, 10)
    close(L.matrix_norm(fv.asarray(a), ord="nuc"), np.linalg.norm(a, "nuc", axis=(-2, -1)), np.float64, 10)
    c = (a * (1 + 2j)).astype(np.complex64)                                # rank 2, complex
    close(L.pinv(fv.asarray(c)), np.linalg.pinv(c.astype(np.complex128), rtol=5 * np.finfo(np.float32).eps), np.complex64, 100)
    assert np.asarray(L.matrix_rank(fv.asarray(c))).tolist() == np.linalg.matrix_rank(c).tolist()
    close(L.matrix_norm(fv.asarray(c), ord=-2), np.linalg.norm(c, -2, axis=(-2, -1)), np.float32, 100)


def test_matrix_rank_rtol_array():
    a = np.stack([np.diag([1.0, 1e-3, 0.0]), np.diag([1.0, 0.5, 0.25])])
    got = L.matrix_rank(fv.asarray(a), rtol=fv.asarray(np.array([1e-2, 0.3])))
    assert np.asarray(got).tolist() == [1, 2]
    assert np.asarray(L.matrix_rank(fv.asarray(a))).tolist() == [2, 3]


@pytest.mark.parametrize("dt", ALL)
def test_matrix_power(dt):
    a = rand((2, 3, 3), dt, 9)
    for n in (0, 1, 2, 5, -1, -3):
        close(L.matrix_power(fv.asarray(a), n), np.linalg.matrix_power(a.astype(np.complex128), n), dt, 100)


def test_compositions_exact():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for off in (-5, -1, 0, 2, 9):
        d = L.diagonal(fv.asarray(x), offset=off)
        assert np.array_equal(np.asarray(d), np.diagonal(x, off, -2, -1))
        assert np.array_equal(np.asarray(L.trace(fv.asarray(x), offset=off)), np.trace(x, off, -2, -1))
    a, b = np.arange(6.0).reshape(2, 3), np.array([[1.0], [2.0]]) + np.array([0.0, 5.0, -1.0])
    assert np.array_equal(np.asarray(L.cross(fv.asarray(a), fv.asarray(b))), np.cross(a, b))
    assert np.array_equal(np.asarray(L.cross(fv.asarray(a.T), fv.asarray(b.T), axis=-2)), np.cross(a.T, b.T, axis=-2))
    with pytest.raises(fv.ShapeError):
        L.cross(fv.asarray(np.ones((2, 4))), fv.asarray(np.ones((2, 4))))
    u, v = np.arange(3, dtype=np.int64), np.arange(4, dtype=np.int64) - 2
    assert np.array_equal(np.asarray(L.outer(fv.asarray(u), fv.asarray(v))), np.outer(u, v))


def test_vecdot_conjugates_and_checks_lengths():
    got = L.vecdot(fv.asarray(np.array([1j, 2j, 3j])), fv.asarray(np.array([1, 2j, 3])))
    assert complex(np.asarray(got)) == 4 - 10j
    with pytest.raises(fv.ShapeError):
        L.vecdot(fv.asarray(np.ones((2, 1))), fv.asarray(np.ones((2, 3))))


def test_dtypes_refused():
    with pytest.raises(fv.DTypeError):
        L.inv(fv.asarray(np.eye(2, dtype=np.int32)))
    with pytest.raises(fv.DTypeError):
        L.svd(fv.asarray(np.eye(2, dtype=np.float16)))
    with pytest.raises(fv.ShapeError, match="Jacobi"):
        L.eigvalsh(fv.asarray(np.zeros((MAXN + 1, MAXN + 1), np.float32)))


def test_tiny_loop_budget_splits_every_mode(monkeypatch):
    """A budget of one or two steps per launch: every mode runs over many launches and agrees bit for
    bit; a step over the budget raises."""
    a = rand((2, 5, 5), np.float64, 10)
    spd = a @ H(a) + 5 * np.eye(5)
    full = [np.asarray(t) for t in (L.cholesky(fv.asarray(spd)), L.inv(fv.asarray(a)), L.qr(fv.asarray(a)).R,
                                    L.eigh(fv.asarray(spd)).eigenvectors, L.svd(fv.asarray(a)).U,
                                    L.matrix_power(fv.asarray(a), 40))]
    monkeypatch.setattr(runtime.get().device, "loop_budget", 80)
    split = [np.asarray(t) for t in (L.cholesky(fv.asarray(spd)), L.inv(fv.asarray(a)), L.qr(fv.asarray(a)).R,
                                     L.eigh(fv.asarray(spd)).eigenvectors, L.svd(fv.asarray(a)).U,
                                     L.matrix_power(fv.asarray(a), 40))]
    for f, s in zip(full, split):
        assert np.array_equal(f, s)
    monkeypatch.setattr(runtime.get().device, "loop_budget", 20)
    with pytest.raises(fv.ShapeError, match="loop budget"):
        L.qr(fv.asarray(a))


def test_launches_packed_to_the_device_budget():
    """Sizes whose steps fill several launches up to the real loop budget: the cost model must bound
    what the shader runs (lavapipe silently stops loops past its cap)."""
    a = rand((48, 48), np.float32, 11)
    close(L.svdvals(fv.asarray(a)), np.linalg.svd(a.astype(np.float64), compute_uv=False), np.float32, 10)
    b = rand((64, 64), np.float32, 12)
    close(L.inv(fv.asarray(b)) @ fv.asarray(b), np.eye(64), np.float32, 50)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64])
def test_vector_norm_every_ord(dt):
    x = rand((3, 4), dt, 13)
    x[0, 1] = 0
    for o in (0, 1, 2, -1, -2, 2.5, -2.5, 3, np.inf, -np.inf):
        for axis in (None, 1, (0, 1)):
            flat = axis != 1                                  # (numpy's 2-axis norm is a matrix norm)
            with np.errstate(divide="ignore"):                # (negative ord over a zero: inf, then 0)
                want = np.linalg.norm(x.ravel() if flat else x, ord=o, axis=None if flat else axis)
            close(L.vector_norm(fv.asarray(x), ord=o, axis=axis), want, dt, 10)


@pytest.mark.parametrize("dt", [np.float64, np.complex128, np.int32, np.uint8, np.int64])
def test_matmul_dtypes_without_a_matmul_tile(dt):
    """float64 / complex128 through the linalg product kernel, integers by multiply + sum (wrapping as
    numpy); 1-D operands, broadcast stacks, empty contractions."""
    for sa, sb in (((3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                   ((2, 0, 3), (3, 4)), ((2, 3, 0), (0, 4))):
        a, b = rand(sa, dt, 14) * 40, rand(sb, dt, 15) * 40
        a, b = a.astype(dt), b.astype(dt)
        got, want = np.asarray(L.matmul(fv.asarray(a), fv.asarray(b))), a @ b
        assert got.dtype == want.dtype and got.shape == want.shape
        if np.dtype(dt).kind in "iu":
            assert np.array_equal(got, want)
        else:
            close(got, want, dt, 10)
    with pytest.raises(fv.ShapeError):
        L.matmul(fv.asarray(np.ones((2, 3))), fv.asarray(np.ones((2, 3))))


def test_product_spreads_rows_over_workgroups():
    a, b = rand((70, 300), np.float64, 16), rand((300, 20), np.float64, 17)
    close(L.matmul(fv.asarray(a), fv.asarray(b)), a @ b, np.float64, 10)


def test_matmul_empty_operands_any_dtype():
    for dt in (np.complex64, np.float32, np.int16):
        for sa, sb in (((0,), (0,)), ((2, 0), (0, 3)), ((0, 3), (3, 2)), ((3,), (3, 0))):
            a, b = np.zeros(sa, dt), np.zeros(sb, dt)
            got = np.asarray(L.matmul(fv.asarray(a), fv.asarray(b)))
            assert got.shape == (a @ b).shape and got.dtype == (a @ b).dtype and not got.any()


def test_no_loop_cap_one_launch(monkeypatch):
    """A device without a loop cap: steps still group under LAUNCH_ITERATIONS, results unchanged."""
    a = rand((3, 6, 6), np.float64, 18)
    want = [np.asarray(L.inv(fv.asarray(a))), np.asarray(L.svdvals(fv.asarray(a)))]
    monkeypatch.setattr(runtime.get().device, "loop_budget", None)
    got = [np.asarray(L.inv(fv.asarray(a))), np.asarray(L.svdvals(fv.asarray(a)))]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
