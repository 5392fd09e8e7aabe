"""fuelvk as the Python array API namespace (README "Array API"): creation, manipulation,
statistical, logical, utility and inspection functions, against numpy as the oracle (bit for bit
where the op is exact), with edge cases (empty, 0-d, negative axes, keepdims, dtype=) and typed
errors. The conformance suite itself is run separately (../shared/array-api-tests)."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk.errors import DeviceError, DTypeError, ShapeError, UnsupportedError, ValueCastError


def same(a, b):
    """Bit-exact equality of a fuelvk result and a numpy expectation (shape and dtype too)."""
    a = np.asarray(a)
    b = np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert a.tobytes() == b.tobytes(), (a, b)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)


# -- namespace and inspection --------------------------------------------------------------------
def test_namespace_and_info():
    a = fv.asarray(X)
    assert a.__array_namespace__() is fv and fv.__array_api_version__ == "2024.12"
    info = fv.__array_namespace_info__()
    assert info.devices() == [a.device] == [info.default_device()]
    assert a.to_device(a.device) is a
    assert info.extensions() == ("linalg",) and hasattr(fv, "linalg") and not hasattr(fv, "fft")
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                 "uint64"}
    assert info.default_dtypes()["real floating"] == fv.float32 == fv.asarray(1.5).dtype
    assert fv.asarray([1, 2]).dtype == fv.int64 and fv.asarray(np.float64(1.5)).dtype == fv.float64
    assert fv.isdtype(fv.int8, ("real floating", "signed integer")) and not fv.isdtype(fv.uint8, "signed integer")
    assert fv.result_type(fv.int8, fv.int16) == fv.int16 and fv.result_type(a, 1.0) == fv.float32
    assert fv.can_cast(fv.int8, fv.int64) and not fv.can_cast(fv.float64, fv.float32)
    assert fv.finfo(fv.float32).eps == np.finfo(np.float32).eps and fv.iinfo(fv.int16).max == 32767
    with pytest.raises(DTypeError):
        fv.isdtype(fv.int8, "no such kind")
    with pytest.raises(DeviceError):
        fv.zeros_like(a, device="cpu")
    z = np.array([1 + 2j, -0.0 - 3j], np.complex64)
    same(fv.asarray(z), z)                         # stored as interleaved pairs (arithmetic: test_complex.py)
    assert fv.asarray(1j).dtype == fv.complex64 == info.default_dtypes()["complex floating"]
    same(fv.real(fv.asarray(z)), z.real)
    same(fv.imag(fv.asarray(z)), z.imag)
    same(fv.conj(fv.asarray(z)), np.conj(z))
    with pytest.raises(DTypeError):
        fv.asarray(z) + fv.asarray(np.arange(2))     # integer arrays do not promote with complex ones
    z2 = (np.arange(6) + 1j * np.arange(6)[::-1]).reshape(2, 3)      # complex128: copied as float64 pairs
    same(fv.asarray(z2).T.copy(), z2.T.copy())
    same(fv.repeat(fv.asarray(z2), 2, axis=1), np.repeat(z2, 2, 1))


def test_asarray_copy():
    a = fv.asarray(X)
    assert fv.asarray(a) is a and fv.asarray(a, copy=False) is a
    b = fv.asarray(a, copy=True)
    b[0, 0, 0] = 99.0
    assert a.numpy()[0, 0, 0] == X[0, 0, 0]
    with pytest.raises(ValueCastError):
        fv.asarray(X, copy=False)                  # host data must be uploaded
    with pytest.raises(ValueCastError):
        fv.asarray(a, dtype=fv.float16, copy=False)


# -- creation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 11, 3), {}), ((1.0, 2.0, 0.25), {}), ((5, 0, -2), {}),
                                     ((0,), {}), ((3,), {"dtype": fv.uint8}), ((0.0, 1.0, 0.1), {})])
def test_arange(args, kw):
    expect = np.arange(*args, **kw)
    if expect.dtype == np.float64 and "dtype" not in kw:
        expect = expect.astype(np.float32)           # fuelvk's default float
    same(fv.arange(*args, **kw), expect)


def test_creation():
    same(fv.linspace(0, 1, 7), np.linspace(0, 1, 7).astype(np.float32))
    same(fv.linspace(2, 3, 4, endpoint=False, dtype=fv.float64), np.linspace(2, 3, 4, endpoint=False))
    same(fv.full((2, 3), 7), np.full((2, 3), 7, np.int64))
    same(fv.full((2, 3), -0.0, dtype=fv.float16), np.full((2, 3), -0.0, np.float16))
    same(fv.full((), True), np.full((), True))
    same(fv.full((0, 4), 1.5), np.zeros((0, 4), np.float32))
    same(fv.ones((2, 2), dtype=fv.int8), np.ones((2, 2), np.int8))
    a = fv.asarray(X)
    same(fv.full_like(a, np.nan), np.full_like(X, np.nan))
    same(fv.ones_like(a, dtype=fv.bfloat16), np.ones_like(X, dtype=fv.bfloat16))
    same(fv.zeros_like(a), np.zeros_like(X))
    assert fv.empty_like(a).shape == X.shape
    for n, m, k in [(3, None, 0), (3, 5, 1), (5, 3, -2), (2, 2, 5), (0, 3, 0), (4, 4, -4)]:
        same(fv.eye(n, m, k=k), np.eye(n, m, k, dtype=np.float32))
    g = fv.meshgrid(fv.arange(3), fv.arange(2), indexing="xy")
    for r, e in zip(g, np.meshgrid(np.arange(3), np.arange(2))):
        same(r, e)
    same(fv.from_dlpack(np.arange(4.0)), np.arange(4.0))
    with pytest.raises(ValueCastError):
        fv.full((2,), 300, dtype=fv.uint8)
    with pytest.raises(ShapeError):
        fv.arange(0, 5, 0)
    with pytest.raises(DTypeError):
        fv.linspace(0, 1, 3, dtype=fv.int32)


# -- manipulation --------------------------------------------------------------------------------
def test_manipulation():
    a = fv.asarray(X)
    same(fv.reshape(a, (4, -1)), X.reshape(4, -1))
    same(fv.reshape(a.mT, (-1,)), X.swapaxes(-1, -2).reshape(-1))
    with pytest.raises(ValueCastError):
        fv.reshape(a.mT, (-1,), copy=False)
    same(fv.concat([a, a[:1]], axis=0), np.concatenate([X, X[:1]]))
    same(fv.concat([a, a], axis=None), np.concatenate([X, X], axis=None))
    for ax in (0, 1, -1):
        same(fv.stack([a, a + 1.0], axis=ax), np.stack([X, X + 1], axis=ax))
    same(fv.expand_dims(a, axis=-1), X[..., None])
    same(fv.squeeze(fv.expand_dims(a, axis=1), axis=1), X)
    with pytest.raises(ShapeError):
        fv.squeeze(a, axis=0)
    same(fv.permute_dims(a, (2, 0, 1)), X.transpose(2, 0, 1))
    same(fv.moveaxis(a, 0, -1), np.moveaxis(X, 0, -1))
    same(fv.moveaxis(a, (0, 1), (2, 0)), np.moveaxis(X, (0, 1), (2, 0)))
    same(fv.matrix_transpose(a), np.swapaxes(X, -1, -2))
    r = fv.broadcast_arrays(a[:, :1], fv.asarray(np.ones(5, np.float32)))
    for x, e in zip(r, np.broadcast_arrays(X[:, :1], np.ones(5, np.float32))):
        same(x, e)
    for reps in [(2,), (2, 1, 3), (1, 2, 1, 1), (0, 2)]:
        same(fv.tile(a, reps), np.tile(X, reps))
    same(fv.repeat(a, 2, axis=1), np.repeat(X, 2, axis=1))
    same(fv.repeat(a, 3), np.repeat(X, 3))
    same(fv.repeat(a, fv.asarray(np.array([1, 0, 2, 0])), axis=-2), np.repeat(X, [1, 0, 2, 0], axis=-2))
    same(fv.repeat(fv.asarray(np.float32(2)), 3), np.repeat(np.float32(2), 3))
    parts = fv.unstack(a, axis=1)
    assert len(parts) == 4
    for p, e in zip(parts, [X[:, i] for i in range(4)]):
        same(p, e)
    with pytest.raises(ShapeError):
        fv.stack([a, a[:1]])
    with pytest.raises(ShapeError):
        fv.repeat(a, fv.asarray(np.array([1, 2])), axis=0)


# -- statistical ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_var_std_prod(axis, keepdims):
    x64 = X.astype(np.float64)
    a = fv.asarray(x64)
    for correction in (0, 1):
        np.testing.assert_allclose(fv.var(a, axis=axis, correction=correction, keepdims=keepdims).numpy(),
                                   np.var(x64, axis=axis, ddof=correction, keepdims=keepdims), rtol=1e-12)
        np.testing.assert_allclose(fv.std(a, axis=axis, correction=correction, keepdims=keepdims).numpy(),
                                   np.std(x64, axis=axis, ddof=correction, keepdims=keepdims), rtol=1e-12)
    np.testing.assert_allclose(fv.prod(a, axis=axis, keepdims=keepdims).numpy(),
                               np.prod(x64, axis=axis, keepdims=keepdims), rtol=1e-12)
    r = fv.sum(fv.asarray(X), axis=axis, keepdims=keepdims, dtype=fv.float64)
    assert r.dtype == fv.float64
    np.testing.assert_allclose(r.numpy(), np.sum(X, axis=axis, keepdims=keepdims, dtype=np.float64), rtol=1e-12)
    same(fv.argmax(a, axis=-1 if axis is None else 1, keepdims=keepdims),
         np.argmax(x64, axis=-1 if axis is None else 1, keepdims=keepdims))


def test_statistical_edges():
    empty = fv.asarray(np.zeros((0, 3), np.float32))
    same(fv.prod(empty, axis=0), np.ones(3, np.float32))
    assert np.isnan(fv.var(empty, axis=0).numpy()).all()
    assert np.isinf(fv.var(fv.asarray(np.float32([1.0, 2.0])), correction=2).numpy())   # numpy: s / 0
    same(fv.var(fv.asarray(np.float32(3.0))), np.var(np.float32(3.0)))
    same(fv.prod(fv.asarray(np.float32([2.0, np.nan]))), np.prod(np.float32([2.0, np.nan])))
    same(fv.argmin(fv.asarray(X), keepdims=True), np.argmin(X, keepdims=True))
    same(fv.cumulative_sum(fv.asarray(np.arange(5.0)), include_initial=True),
         np.concatenate([[0.0], np.cumsum(np.arange(5.0))]))
    np.testing.assert_allclose(fv.cumulative_sum(fv.asarray(X), axis=1).numpy(), np.cumsum(X, axis=1),
                               rtol=1e-6, atol=1e-6)   # compensated running sum: not numpy's rounding
    with pytest.raises(ShapeError):
        fv.cumulative_sum(fv.asarray(X))            # axis required above rank 1
    x = fv.asarray(X)
    same(x.sum(axis=0), fv.sum(x, axis=0))
    same(x.max(), fv.max(x))
    same(x.mean(), fv.mean(x))


def test_positive_copies_and_empty_views_are_writable():
    """+x of a broadcast view is a new array (writing it leaves x alone); an empty array's stride-0
    axis repeats nothing, so in-place ops on it work (array-api-tests' test_positive, via |=)."""
    x = fv.broadcast_to(fv.asarray(np.arange(3, dtype=np.float32)), (2, 3))
    y = +x
    y += 1
    same(y, np.arange(3, dtype=np.float32) + np.ones((2, 3), np.float32))
    same(x, np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    m = fv.isnan(fv.asarray(np.zeros((2, 0), np.float32)))
    m |= m
    assert m.shape == (2, 0)
    with pytest.raises(ShapeError, match="broadcast view"):
        x[...] = 1.0


# -- elementwise: rounding, copysign, where, logical, all / any -----------------------------------
ODD = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, np.nan, -np.inf, np.inf, 1e30, -3.7, 2**23 + 0.5],
               np.float64)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_rounding_bit_exact(name, dt):
    x = ODD.astype(dt)
    same(getattr(fv, name)(fv.asarray(x)), getattr(np, name)(x))
    same(getattr(fv, name)(fv.asarray(np.arange(-3, 3, dtype=np.int16))), np.arange(-3, 3, dtype=np.int16))


@pytest.mark.parametrize("dt", [np.float32, np.float64, fv.bfloat16])
def test_copysign_bit_exact(dt):
    x = ODD.astype(dt)
    y = np.resize(np.array([-1.0, 0.0, -0.0, np.nan, -np.nan, 2.0]), x.shape).astype(dt)
    same(fv.copysign(fv.asarray(x), fv.asarray(y)), np.copysign(x, y))
    same(fv.copysign(fv.asarray(x), -1.0), np.copysign(x, np.asarray(-1.0, dt)))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.uint8, np.int16, np.bool_])
def test_where_bit_exact(dt):
    c = RNG.random((3, 4)) > 0.5
    x = RNG.integers(0, 100, (3, 4)).astype(dt)
    y = RNG.integers(0, 100, (4,)).astype(dt)
    same(fv.where(fv.asarray(c), fv.asarray(x), fv.asarray(y)), np.where(c, x, y))
    same(fv.where(fv.asarray(c[:, :1]), fv.asarray(x), fv.asarray(y)), np.where(c[:, :1], x, y))
    same(fv.where(fv.asarray(c), fv.asarray(x).mT.mT, 1 if dt != np.bool_ else True),
         np.where(c, x, np.ones((), dt)))
    same(fv.where(c, x, y), np.where(c, x, y))    # numpy in -> numpy out


def test_where_edges():
    same(fv.where(fv.asarray(np.zeros((0, 2), bool)), 1.0, 2.0), np.zeros((0, 2), np.float32))
    nan = np.array([np.nan, -0.0], np.float32)
    same(fv.where(fv.asarray(np.array([True, True])), fv.asarray(nan), 0.0), nan)
    with pytest.raises(DTypeError):
        fv.where(fv.asarray(np.ones(2, np.float32)), 1.0, 2.0)
    with pytest.raises(ShapeError):
        fv.where(fv.asarray(np.ones(2, bool)), fv.asarray(np.ones(3, np.float32)), 0.0)


def test_logical_and_bitwise_bool():
    a = RNG.random((4, 5)) > 0.5
    b = RNG.random((5,)) > 0.3
    A, B = fv.asarray(a), fv.asarray(b)
    same(fv.logical_and(A, B), a & b)
    same(fv.logical_or(A, B), a | b)
    same(fv.logical_xor(A, B), a ^ b)
    same(fv.logical_not(A), ~a)
    same(A & B, a & b)
    same(A | B, a | b)
    same(A ^ B, a ^ b)
    same(~A, ~a)
    f = np.array([0.0, -0.0, np.nan, 2.0], np.float32)
    same(fv.logical_and(fv.asarray(f), True), np.logical_and(f, True))
    with pytest.raises(DTypeError):
        fv.bitwise_and(fv.asarray(np.arange(3.0)), fv.asarray(np.arange(3.0)))
    with pytest.raises(DTypeError):
        fv.bitwise_left_shift(fv.asarray(np.arange(3.0)), 1)   # the standard's shifts: integers only
    same(fv.asarray(np.arange(3, dtype=np.float32)) // 2, np.arange(3, dtype=np.float32) // 2)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_all_any(axis):
    x = (RNG.random((6, 7)) > 0.8).astype(np.float32)
    x[2] = 1.0
    x[:, 3] = np.nan              # NaN is true
    for fn in ("all", "any"):
        for keepdims in (False, True):
            same(getattr(fv, fn)(fv.asarray(x), axis=axis, keepdims=keepdims),
                 getattr(np, fn)(x, axis=axis, keepdims=keepdims))
    same(fv.all(fv.asarray(np.zeros((0,), bool))), np.True_)
    same(fv.any(fv.asarray(np.zeros((2, 0), bool)), axis=1), np.zeros(2, bool))
    same(fv.asarray(x).all(), np.all(x))


def test_isnan_isinf_isfinite_diff():
    x = ODD.astype(np.float32)
    for fn in ("isnan", "isinf", "isfinite"):
        same(getattr(fv, fn)(fv.asarray(x)), getattr(np, fn)(x))
        same(getattr(fv, fn)(fv.asarray(np.arange(3))), getattr(np, fn)(np.arange(3)))
    y = np.cumsum(RNG.standard_normal((4, 6)), axis=1)
    for n in (0, 1, 2, 7):
        same(fv.diff(fv.asarray(y), n=n), np.diff(y, n=n))
    same(fv.diff(fv.asarray(y), axis=0, prepend=fv.asarray(y[:1])), np.diff(y, axis=0, prepend=y[:1]))


def test_linalg_composed():
    a = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    b = RNG.standard_normal((4, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(fv.tensordot(fv.asarray(a), fv.asarray(b)).numpy(), np.tensordot(a, b),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fv.tensordot(fv.asarray(a), fv.asarray(b), axes=([1], [0])).numpy(),
                               np.tensordot(a, b, axes=([1], [0])), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fv.vecdot(fv.asarray(a), fv.asarray(a[0]), axis=-1).numpy(),
                               np.sum(a * a[0], axis=-1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError):
        fv.tensordot(fv.asarray(a), fv.asarray(b), axes=([0], [0]))


# -- the remaining real elementwise functions (to a few ulp; nextafter exact) --------------------
MATH_X = np.array([-0.9, -1e-8, 0, -0.0, 1e-8, 0.5, 0.99, 3.0, 50.0, np.inf, -np.inf, np.nan])
NP_NAME = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
           "atanh": "arctanh", "atan2": "arctan2"}
RTOL = {np.float32: 4e-6, np.float64: 1e-13, np.float16: 1e-3}


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", ["log1p", "expm1", "log2", "log10", "tan", "sinh", "cosh", "asinh", "acosh", "atanh",
                                  "asin", "acos", "atan"])
def test_unary_math(name, dt):
    x = MATH_X.astype(dt)
    with np.errstate(all="ignore"):
        expect = getattr(np, NP_NAME.get(name, name))(x)
    got = getattr(fv, name)(fv.asarray(x)).numpy()
    assert got.dtype == expect.dtype
    np.testing.assert_allclose(got, expect, rtol=RTOL[dt], atol=0, equal_nan=True)
    assert np.array_equal(np.signbit(got[np.isnan(got) == 0][:1]), np.signbit(expect[np.isnan(expect) == 0][:1]))


def test_odd_functions_keep_the_sign_of_zero():
    z = np.array([-0.0, 0.0], np.float32)
    for name in ("sin", "tanh", "log1p", "expm1", "tan", "sinh", "asinh", "atanh", "asin", "atan"):
        assert np.signbit(getattr(fv, name)(fv.asarray(z)).numpy()).tolist() == [True, False], name


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", ["hypot", "logaddexp", "atan2", "nextafter"])
def test_binary_math(name, dt):
    x = MATH_X.astype(dt)
    y = np.resize(np.array([1.0, -2.0, np.inf, 0.0, -0.0, np.nan, -np.inf]), x.shape).astype(dt)
    if name == "nextafter" and dt == np.float16:
        with pytest.raises(DTypeError):          # the kernel computes half types in f32: not exact
            fv.nextafter(fv.asarray(x), fv.asarray(y))
        return
    with np.errstate(all="ignore"):
        expect = getattr(np, NP_NAME.get(name, name))(x, y)
    got = getattr(fv, name)(fv.asarray(x), fv.asarray(y))
    if name == "nextafter":
        same(got, expect)
    else:
        np.testing.assert_allclose(got.numpy(), expect, rtol=RTOL[dt], atol=0, equal_nan=True)
    # atan2's signed zeros and quadrants follow C99
    if name == "atan2":
        z = np.array([0.0, -0.0, 0.0, -0.0], dt)
        w = np.array([0.0, 0.0, -0.0, -0.0], dt)
        same(fv.atan2(fv.asarray(z), fv.asarray(w)), np.arctan2(z, w))


def test_linalg_norms_and_dlpack():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    A = fv.asarray(a)
    np.testing.assert_allclose(fv.linalg.vector_norm(A, axis=1).numpy(), np.linalg.norm(a, axis=1), rtol=1e-6)
    np.testing.assert_allclose(fv.linalg.vector_norm(A, ord=fv.inf).numpy(), np.abs(a).max(), rtol=0)
    np.testing.assert_allclose(fv.linalg.matrix_norm(A).numpy(), np.linalg.norm(a), rtol=1e-6)
    np.testing.assert_allclose(fv.linalg.matrix_norm(A, ord=1).numpy(), np.linalg.norm(a, 1), rtol=1e-6)
    np.testing.assert_allclose(fv.linalg.matrix_norm(A, ord="nuc").numpy(), np.linalg.norm(a, "nuc"), rtol=1e-5)
    same(np.from_dlpack(A), a)
    same(np.from_dlpack(A[1:, ::-2].T), a[1:, ::-2].T)
    assert fv.from_dlpack(A, copy=False) is A
    with pytest.raises(ValueCastError):
        fv.from_dlpack(np.arange(3), copy=False)
    if A.buffer.mapped is None:          # device-local memory: only a host copy can be exported
        with pytest.raises(BufferError):
            A.__dlpack__(copy=False)
        return
    shared = np.from_dlpack(fv.exp(A))   # mapped memory: zero-copy; the view keeps the buffer alive
    fv.asarray(np.zeros((3, 4), np.float32)) + 1.0
    same(shared, fv.exp(A))
    B = fv.asarray(a)
    view = np.from_dlpack(B)
    B[0, 0] = 5.0                        # the same memory (a later device write: visible once synchronized)
    fv.synchronize()
    assert view[0, 0] == 5.0
    assert A.__dlpack__(copy=False) is not None


# -- sorting (bitonic kernel: stable, NaN last, -0 == +0) -----------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float16, fv.bfloat16, fv.float8_e4m3fn, np.int8, np.int16,
                                np.int32, np.uint8, np.uint16, np.uint32, np.bool_])
@pytest.mark.parametrize("shape,axis", [((7,), -1), ((3, 33), 1), ((5, 4, 3), 0), ((1,), 0), ((2, 0), 1)])
def test_sort_argsort_stable(dt, shape, axis):
    x = RNG.integers(0 if np.dtype(dt).kind in "ub" else -5, 5, shape).astype(dt)   # many ties
    is_float = np.dtype(dt).kind == "f" or dt in (fv.bfloat16, fv.float8_e4m3fn)
    if is_float:
        flat = x.reshape(-1)
        if flat.size > 3:
            flat[:3] = np.array([np.nan, -0.0, 0.0], np.float32).astype(dt)
    ref = x.astype(np.float32) if is_float else x          # (float32 holds the narrow floats exactly)
    order = np.argsort(ref, axis=axis, kind="stable")
    same(fv.argsort(fv.asarray(x), axis=axis), order)
    same(fv.sort(fv.asarray(x), axis=axis), np.take_along_axis(x, order, axis=axis))
    # descending, stable: ties keep their input order (NaNs first, the reverse of ascending's NaN-last)
    n = x.shape[axis]
    expect = n - 1 - np.flip(np.argsort(np.flip(ref, axis=axis), axis=axis, kind="stable"), axis=axis)
    same(fv.argsort(fv.asarray(x), axis=axis, descending=True), expect)


_I64, _U64 = np.iinfo(np.int64), np.iinfo(np.uint64)
_EDGES64 = {   # edges that differ only in the low word, beyond 2^53, near the extremes, float specials
    np.int64: [_I64.min, _I64.min + 1, _I64.max, _I64.max - 1, 2**53, 2**53 + 1, -(2**53) - 1, -(2**32), 2**32 - 1,
               -1, 0, 1],
    np.uint64: [_U64.max, _U64.max - 1, 2**63, 2**63 - 1, 2**53, 2**53 + 1, 2**32, 2**32 - 1, 0, 1],
    np.float64: [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2250738585072009e-308,
                 -2.2250738585072014e-308, 2.0**53, 2.0**53 + 2, np.nextafter(1.0, 2.0), 1.0, -1.0, 1e308, -1e308]}


@pytest.mark.parametrize("dt", [np.int64, np.uint64, np.float64])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((13,), 0), ((64,), -1), ((3, 37), 0), ((4, 5, 33), 1)])
def test_sort_64bit_keys(dt, shape, axis):
    """64-bit keys (two 32-bit words, no int64/float64 shader arithmetic): numpy's stable order."""
    n = int(np.prod(shape))
    edges = RNG.choice(np.array(_EDGES64[dt], dt), n)                              # repeats: ties
    bits = RNG.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)             # any bit pattern:
    x = np.where(RNG.random(n) < 0.5, edges, bits.view(dt)).reshape(shape)         # NaN payloads, subnormals
    same(fv.argsort(fv.asarray(x), axis=axis), np.argsort(x, axis=axis, kind="stable"))
    same(fv.sort(fv.asarray(x), axis=axis), np.sort(x, axis=axis, kind="stable"))
    # descending, stable (ties and NaNs in input order; NaNs first, the reverse of ascending's NaN-last)
    m = x.shape[axis]
    expect = m - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)
    same(fv.argsort(fv.asarray(x), axis=axis, descending=True), expect)
    same(fv.sort(fv.asarray(x), axis=axis, descending=True), np.take_along_axis(x, expect, axis=axis))
    flat = x.reshape(-1)
    same(fv.sort(fv.asarray(flat)[n // 2:]), np.sort(flat[n // 2:], kind="stable"))   # a view at an offset


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((13,), 0), ((4, 37), 1)])
def test_sort_complex(dt, shape, axis):
    """numpy's complex order: a NaN in either part after the rest (R+Rj < R+nanj < nan+Rj < nan+nanj)."""
    parts = np.array([0.0, -0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf])
    x = np.empty(shape, dt)
    x.real, x.imag = RNG.choice(parts, shape), RNG.choice(parts, shape)
    same(fv.argsort(fv.asarray(x), axis=axis), np.argsort(x, axis=axis, kind="stable"))
    same(fv.sort(fv.asarray(x), axis=axis), np.sort(x, axis=axis, kind="stable"))
    m = x.shape[axis]
    expect = m - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)
    same(fv.argsort(fv.asarray(x), axis=axis, descending=True), expect)


def test_unique_64bit():
    x = np.array([2**53 + 1, 2**53, _I64.min, 2**53 + 1, _I64.max, _I64.min, 7, 2**53], np.int64)
    same(fv.unique_values(fv.asarray(x.reshape(2, 4))), np.unique(x))
    v, c = fv.unique_counts(fv.asarray(x))
    e = np.unique(x, return_counts=True)
    same(v, e[0])
    same(c, e[1])
    y = np.array([1.0, np.nan, -0.0, 0.0, 2.0**53, 2.0**53 + 2, np.nan, 1.0], np.float64)
    e = np.unique(y, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    for g, ex in zip(fv.unique_all(fv.asarray(y)), e):
        same(g, ex)
    u = np.array([_U64.max, 0, _U64.max, 2**63], np.uint64)
    same(fv.unique_values(fv.asarray(u)), np.unique(u))
    for dt in (np.complex64, np.complex128):   # complex128: take gathers each float64 part on its own
        z = np.array([1 + 1j, np.nan, 1 + 1j, 2, 2 - 0j, complex(1, np.nan), 5e-324j], dt)
        e = np.unique(z, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
        for g, ex in zip(fv.unique_all(fv.asarray(z)), e):
            same(g, ex)
        same(fv.take(fv.asarray(z.reshape(7, 1)), fv.asarray(np.array([6, 0, -2])), axis=0),
             np.take(z.reshape(7, 1), [6, 0, -2], axis=0))


def test_sort_long_row_and_errors():
    x = RNG.standard_normal(5000).astype(np.float32)      # not a power of two: padded to 8192
    x[::7] = x[1]                                          # ties across the row
    same(fv.argsort(fv.asarray(x)), np.argsort(x, kind="stable"))
    same(fv.sort(fv.asarray(x[::-3])), np.sort(x[::-3]))   # a strided view
    with pytest.raises(ShapeError):
        fv.sort(fv.asarray(np.float32(1)))


# -- integer arithmetic (shaders/intops.comp): bit-exact against numpy, edges included ---------------
INT_BINARY = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
              ("floor_divide", np.floor_divide), ("remainder", np.remainder), ("maximum", np.maximum),
              ("minimum", np.minimum), ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
              ("bitwise_xor", np.bitwise_xor)]


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_integer_ops_bit_exact(dt):
    info = np.iinfo(dt)
    edge = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 7, 3], dtype=dt)
    x = np.concatenate([edge.repeat(7), RNG.integers(info.min, info.max, 30, dtype=dt, endpoint=True)])
    y = np.concatenate([np.tile(edge, 7), RNG.integers(info.min, info.max, 30, dtype=dt, endpoint=True)])
    X, Y = fv.asarray(x), fv.asarray(y)
    with np.errstate(all="ignore"):     # overflow wraps, // 0 and % 0 give 0 (numpy's integer rules)
        for name, f in INT_BINARY:
            same(getattr(fv, name)(X, Y), f(x, y))
        sh = (np.arange(x.size) % info.bits).astype(dt)
        same(fv.bitwise_left_shift(X, fv.asarray(sh)), np.left_shift(x, sh))
        same(fv.bitwise_right_shift(X, fv.asarray(sh)), np.right_shift(x, sh))
        for name, f in [("negative", np.negative), ("abs", np.abs), ("square", np.square), ("sign", np.sign),
                        ("bitwise_invert", np.invert)]:
            same(getattr(fv, name)(X), f(x))
        same(X + 3, x + dt(3))
        same(5 - X, dt(5) - x)
        same(X // 2, x // dt(2))
        same(X % 3, x % dt(3))
        same(X[:, None] * Y[None, :5], x[:, None] * y[None, :5])          # broadcasting
        same(~X & X, ~x & x)
        same(X ^ 1, x ^ dt(1))


def test_integer_true_divide_is_float64():
    a, b = np.array([1, -7, 0, 5], np.int16), np.array([2, 2, 0, -3], np.int16)
    with np.errstate(all="ignore"):
        same(fv.asarray(a) / fv.asarray(b), a / b)
        same(fv.asarray(a) / 4, a / 4)


def test_integer_errors():
    a = fv.asarray(np.arange(4, dtype=np.int32))
    same(a + fv.asarray(np.arange(4, dtype=np.int16)), np.arange(4, dtype=np.int32) * 2)   # promoted (icast.comp)
    with pytest.raises(DTypeError):
        a * 1.5                                           # numpy would promote to float64
    with pytest.raises(ValueCastError):
        a + 2**40                                         # out of int32's range (numpy: OverflowError)
    with pytest.raises(ValueCastError):
        a ** fv.asarray(np.array([1, -1, 2, 0], np.int32))   # integers to negative powers (numpy's ValueError)
    with pytest.raises(ValueCastError):
        a ** -1


# -- casts with an integer side, integer reductions, data-dependent shapes ------------------------
INTS = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("src", INTS)
def test_integer_casts_bit_exact(src):
    if src == np.bool_:
        x = RNG.random(40) > 0.5
    else:
        info = np.iinfo(src)
        x = np.concatenate([[info.min, info.max, 0, 1], RNG.integers(info.min, info.max, 36, dtype=src)]).astype(src)
    for dst in INTS + [np.float32, np.float64, np.float16, fv.bfloat16]:
        with np.errstate(all="ignore"):
            same(fv.asarray(x).astype(dst), x.astype(dst))
    f = np.array([0.0, -0.0, 1.5, -1.5, -2.7, 100.9, 0.49, -0.99, np.nan, 1e30], np.float32)
    got = fv.asarray(f).astype(src).numpy()
    lo, hi = (0, 1) if src == np.bool_ else (np.iinfo(src).min, np.iinfo(src).max)
    ok = (f >= lo) & (f <= hi) if src != np.bool_ else np.isfinite(f)
    same(got[ok], f[ok].astype(src))                     # in range: numpy's truncation
    if src != np.bool_:                                  # undefined in numpy: NaN -> 0, saturation
        assert got[8] == 0 and got[9] == hi


def test_mixed_dtype_promotion_and_int_reductions():
    a = np.arange(-3, 5, dtype=np.int8)
    b = np.arange(8, dtype=np.int16)
    same(fv.asarray(a) + fv.asarray(b), a + b)
    same(fv.asarray(a) * fv.asarray(b.astype(np.float32)), a * b.astype(np.float32))
    same(fv.asarray(a) < fv.asarray(b), a < b)
    x = RNG.integers(-1000, 1000, (4, 9)).astype(np.int32)
    for axis in (None, 0, 1):
        same(fv.sum(fv.asarray(x), axis=axis), np.sum(x, axis=axis))
        same(fv.max(fv.asarray(x), axis=axis), np.max(x, axis=axis))
        same(fv.min(fv.asarray(x), axis=axis, keepdims=True), np.min(x, axis=axis, keepdims=True))
    same(fv.sum(fv.asarray(x.astype(np.uint16))), np.sum(x.astype(np.uint16)))
    same(fv.sum(fv.asarray(x > 0), axis=0), np.sum(x > 0, axis=0))


def test_nonzero_unique_boolean_index():
    x = RNG.integers(-2, 3, (4, 5, 3)).astype(np.float32)
    x[0, 0, 0] = np.nan
    for got, exp in zip(fv.nonzero(fv.asarray(x)), np.nonzero(x)):
        same(got, exp)
    same(fv.count_nonzero(fv.asarray(x), axis=(0, 2)), np.count_nonzero(x, axis=(0, 2)))
    same(fv.asarray(x)[fv.asarray(x > 0)], x[x > 0])
    same(fv.asarray(x)[fv.asarray(x[:, 0, 0] > 0)], x[x[:, 0, 0] > 0])
    same(fv.asarray(x)[fv.asarray(np.array([3, 0, -1]))], x[[3, 0, -1]])
    assert all(g.shape == (0,) for g in fv.nonzero(fv.asarray(np.zeros((2, 2), np.float32))))
    y = np.array([3, 1, 2, 3, 1, np.nan, np.nan, -0.0, 0.0, 2], np.float32)
    vals, idx, inv, cnt = fv.unique_all(fv.asarray(y))
    e = np.unique(y, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    for g, ex in zip((vals, idx, inv, cnt), e):
        same(g, ex)
    # Of -0.0 and +0.0 (equal) the first in a stable sort is kept, as numpy's unique with return_index
    # does; numpy >= 2.3's plain unique (hash-based) may keep the other one, so e[0] is the oracle.
    same(fv.unique_values(fv.asarray(y.reshape(2, 5))), e[0])
    v, c = fv.unique_counts(fv.asarray(np.array([5, 5, 5], np.int32)))
    same(v, np.array([5], np.int32))
    same(c, np.array([3]))
    v, i = fv.unique_inverse(fv.asarray(np.zeros((0,), np.float32)))
    assert v.shape == (0,) and i.shape == (0,)
    with pytest.raises(IndexError):            # numpy's and the standard's error for a mask that does not fit
        fv.asarray(x)[fv.asarray(np.array([True, False]))]


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    x1 = np.sort(RNG.integers(-5, 5, 40).astype(np.float32))
    x1[-2:] = np.nan
    x2 = np.concatenate([RNG.integers(-7, 7, 30), [np.nan, -0.0, 0.0]]).astype(np.float32).reshape(3, 11)
    same(fv.searchsorted(fv.asarray(x1), fv.asarray(x2), side=side), np.searchsorted(x1, x2, side=side))
    s = RNG.permutation(x1.size)
    same(fv.searchsorted(fv.asarray(x1[s]), fv.asarray(x2), side=side, sorter=fv.asarray(np.argsort(s))),
         np.searchsorted(x1, x2, side=side))
    i = np.arange(0, 20, 2, dtype=np.int32)
    same(fv.searchsorted(fv.asarray(i), fv.asarray(np.array([3, 4, -1, 99], np.int32)), side=side),
         np.searchsorted(i, np.array([3, 4, -1, 99], np.int32), side=side))


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 3000), 1), ((300, 5), 0)])   # serial and SCAN paths
def test_cumulative_prod(shape, axis):
    x = RNG.uniform(0.9, 1.1, shape)
    got = fv.cumulative_prod(fv.asarray(x), axis=axis)
    np.testing.assert_allclose(got.numpy(), np.cumprod(x, axis=axis), rtol=1e-12)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(fv.cumulative_prod(fv.asarray(x32), axis=axis, include_initial=True).numpy(),
                               np.concatenate([np.ones_like(np.take(x32, [0], axis=axis)),
                                               np.cumprod(x32.astype(np.float64), axis=axis)], axis=axis),
                               rtol=2e-5)
    same(fv.cumulative_prod(fv.asarray(np.array([2.0, np.nan, 3.0]))), np.cumprod([2.0, np.nan, 3.0]))


# -- clip, integer products, advanced indexing (fuelvk.api.elementwise / statistical / indexing) ----
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int8, np.uint16])
def test_clip_standard_signature(dt):
    h = np.array([0, 3, 120, 7, 1, 5], dt)
    if dt in (np.float32, np.float64):
        h[1] = np.nan
    x = fv.asarray(h)
    lo, hi = np.array([1, 2, 2, 2, 0, 9], dt), np.array(6, dt)
    same(fv.clip(x, 2, 6), np.clip(h, 2, 6))                    # numpy's positional use
    same(fv.clip(x, max=5), np.clip(h, None, 5))
    same(fv.clip(x, min=1), np.clip(h, 1, None))
    same(fv.clip(x, min=fv.asarray(lo), max=fv.asarray(hi)), np.clip(h, lo, hi))
    same(fv.clip(x), h)
    if dt == np.int8:
        same(fv.clip(x, -1000, 1000), h)                         # bounds outside the dtype cannot bind
    with pytest.raises(ShapeError):
        fv.clip(x, min=fv.asarray(np.zeros(4, dt)))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.bool_])
def test_integer_prod_exact(dt):
    h = (RNG.integers(1, 7, (3, 7)) * np.array([1, -1])[RNG.integers(0, 2, (3, 7))]).astype(dt)
    if dt == np.int64:
        h[0, 0] = 2**62 + 3                                        # wraps, as numpy
    x = fv.asarray(h)
    odt = np.uint64 if h.dtype.kind == "u" else np.int64
    for axis in (None, 0, 1, (0, 1)):
        same(fv.prod(x, axis=axis), np.prod(h, axis=axis, dtype=odt))
    same(fv.prod(x, axis=1, keepdims=True, dtype=fv.int32), np.prod(h, axis=1, keepdims=True, dtype=np.int32))
    same(fv.cumulative_prod(x, axis=1), np.cumprod(h, axis=1, dtype=odt))
    same(fv.cumulative_prod(x, axis=0, include_initial=True),
         np.concatenate([np.ones((1, 7), odt), np.cumprod(h, axis=0, dtype=odt)]))
    same(fv.prod(fv.asarray(np.zeros((0, 3), dt)), axis=0), np.ones(3, odt))


@pytest.mark.parametrize("dt", [np.int64, np.uint64])
def test_wide_integer_sum_max_min(dt):
    info = np.iinfo(dt)
    h = np.array([[info.max, 3, 5], [7, info.min, 1], [2, 2, info.max - 1]], dt)
    x = fv.asarray(h)
    for name in ("sum", "max", "min"):
        for axis in (None, 0, 1):
            same(getattr(fv, name)(x, axis=axis), getattr(np, name)(h, axis=axis))
    with pytest.raises(ShapeError):
        fv.max(fv.asarray(np.zeros((0, 2), dt)), axis=0)


@pytest.mark.parametrize("dt", [np.int64, np.uint64])
def test_wide_integer_argmax_argmin(dt):
    """64-bit argmax / argmin (max tree, then the lowest index equal to it): ties take the lowest index."""
    info = np.iinfo(dt)
    h = np.array([[info.max, 3, info.max], [7, info.min, info.min], [2, 2, info.max - 1]], dt)
    for a in (h, h[:, ::-1], h[0, 0]):
        for axis in [None] + list(range(a.ndim)):
            for name in ("argmax", "argmin"):
                same(getattr(fv, name)(fv.asarray(a), axis=axis, keepdims=True),
                     getattr(np, name)(a, axis=axis, keepdims=True))
                same(getattr(fv, name)(fv.asarray(a), axis=axis), getattr(np, name)(a, axis=axis))
    with pytest.raises(ShapeError):
        fv.argmax(fv.asarray(np.zeros((0, 2), dt)), axis=0)


@pytest.mark.parametrize("src", [np.uint64, np.int16, np.uint8, np.bool_])
def test_integer_sum_with_dtype_wraps(src):
    """sum(x, dtype=an integer dtype): cast, then add wrapping in that dtype (numpy's), wider or narrower."""
    h = (np.arange(-70, 50) * 977).astype(src).reshape(6, 20)
    for dt in (np.uint8, np.int8, np.uint32, np.int64, np.uint64):
        for axis in (None, 1):
            same(fv.sum(fv.asarray(h), axis=axis, dtype=dt), np.sum(h, axis=axis, dtype=dt))
    same(fv.sum(fv.asarray(np.array(0, np.uint64)), dtype=fv.uint8), np.sum(np.array(0, np.uint64), dtype=np.uint8))


def test_clip_broadcasts_count_nonzero_complex_expand_dims_range():
    """clip's result takes x's and the bounds' broadcast shape (numpy's); count_nonzero of complex
    counts either component; expand_dims out of [-ndim-1, ndim] is an IndexError (the standard's)."""
    h, lo = np.arange(3, dtype=np.float32), np.array([[1], [2]], np.float32)
    same(fv.clip(fv.asarray(h), min=fv.asarray(lo)), np.clip(h, lo, None))
    assert fv.clip(fv.asarray(np.zeros(0, np.float32)), max=fv.asarray(np.zeros((0, 0), np.float32))).shape == (0, 0)
    z = np.array([[0, 1j, 0], [2, 0, 1 + 1j]], np.complex64)
    for axis in (None, 1):
        same(fv.count_nonzero(fv.asarray(z), axis=axis), np.count_nonzero(z, axis=axis))
    with pytest.raises(IndexError):
        fv.expand_dims(fv.asarray(np.float32(1)), axis=-2)
    assert fv.expand_dims(fv.asarray(h), axis=-2).shape == (1, 3)


def test_integer_array_index_mixes():
    h = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    x = fv.asarray(h)
    i, j = np.array([[0, 2], [1, -1]]), np.array([3, -4])
    for key in [(i,), (1, j), (i, j), (i, slice(None), j), (slice(None), i), (None, 1, j, slice(1, 3)),
                (Ellipsis, j), (slice(None), i, j), (0, 1, j), (i, j, 2),
                (0, -3, j), (-1, -4, j), (i, -2, -5)]:     # negative ints before / after the array index
        fkey = tuple(fv.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
        same(x[fkey], h[key])
    same(x[[0, 2]], h[[0, 2]])
    same(x[fv.asarray(np.array(1)), fv.asarray(np.array(2)), fv.asarray(np.array(3))], h[1, 2, 3])
    with pytest.raises(IndexError, match="out of bounds"):   # device indices: raised at the read (next sync)
        np.asarray(x[fv.asarray(np.array([0, 3]))])
    with pytest.raises(IndexError, match="out of bounds"):
        np.asarray(x[fv.asarray(np.array([0])), 4])
    with pytest.raises(IndexError, match="integer or bool"):
        x[fv.asarray(np.array([0.5]))]


def test_boolean_mask_get_and_set():
    h = RNG.standard_normal((3, 4)).astype(np.float32)
    x = fv.asarray(h)
    m = h > 0
    same(x[fv.asarray(m)], h[m])
    same(x[fv.asarray(m[:, 0])], h[m[:, 0]])
    same(x[fv.asarray(np.array(True))], h[None])
    same(x[fv.asarray(np.array(False))], h[None][:0])
    assert x[fv.asarray(np.zeros((0, 4), bool))].shape == (0,)
    with pytest.raises(IndexError):
        x[fv.asarray(np.ones((2, 4), bool))]
    y, e = fv.asarray(h.copy()), h.copy()
    y[fv.asarray(m)] = -1.5
    e[m] = -1.5
    same(y, e)
    y[fv.asarray(m[:, 0])] = fv.asarray(np.float32(7))
    e[m[:, 0]] = 7
    same(y, e)


def test_count_nonzero_and_nonzero_of_complex():
    """A complex element is nonzero when either part is (NaN counts; -0 does not)."""
    h = np.array([[0, 1j, 0], [2, -0.0, complex(np.nan, 0)]], np.complex64)
    x = fv.asarray(h)
    assert int(fv.count_nonzero(x).numpy()) == np.count_nonzero(h)
    same(fv.count_nonzero(x, axis=1), np.count_nonzero(h, axis=1))
    for got, want in zip(fv.nonzero(x), np.nonzero(h)):
        same(got, want)
