"""Complex arithmetic (shaders/complex.comp, fuelvk.ops.complex, dispatched by fuelvk.api.elementwise)
against numpy: values (the kernels compute in double, so complex64 is within its rounding and
complex128 within a few ulp), C99 Annex G special values (the array API's special cases), promotion,
reductions, matmul and casts."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk.errors import DTypeError

RNG = np.random.default_rng(7)
TOL = {np.complex64: 2e-6, np.complex128: 1e-13}
UNARY = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
         "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh,
         "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
         "acosh": np.arccosh, "atanh": np.arctanh, "square": np.square, "reciprocal": np.reciprocal,
         "negative": np.negative, "abs": np.abs, "sign": lambda z: z / np.abs(z)}


def _z(shape, dt, scale=1.5):
    return ((RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)) * scale).astype(dt)


def close(got, want, dt):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
    assert err.max(initial=0) <= TOL[dt], (err.max(), got, want)


# Every op on complex64; complex128 (the same shader code, double words) on a subset: each (op, dtype)
# is one more pipeline to compile on lavapipe.
@pytest.mark.parametrize("name, dt", [(n, np.complex64) for n in sorted(UNARY)] + [
    (n, np.complex128) for n in ("exp", "log", "sqrt", "sin", "tanh", "asinh", "acos", "atanh", "sign", "abs")])
def test_unary_vs_numpy(name, dt):
    z = _z((4, 5), dt)
    z[0, :3] = [0.3 + 0j, -0.2 + 1e-9j, 1e-7 - 2e-7j]             # near 0: expm1 / log1p / asinh accuracy
    close(getattr(fv, name)(fv.asarray(z)), UNARY[name](z), dt)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_binary_vs_numpy_broadcast_and_scalars(dt):
    a, b = _z((3, 1, 4), dt), _z((5, 4), dt)
    A, B = fv.asarray(a), fv.asarray(b)
    for op, f in ((fv.add, np.add), (fv.subtract, np.subtract), (fv.multiply, np.multiply),
                  (fv.divide, np.divide), (fv.pow, np.power)):
        close(op(A, B), f(a, b), dt)
    close(A * 2.5 - 1j, a * dt(2.5) - dt(1j), dt)
    close(3 / A, dt(3) / a, dt)
    close(A ** 2, a ** 2, dt)
    close(-A, -a, dt)
    close(abs(A), np.abs(a), dt)


def test_promotion():
    z64, f64 = fv.asarray(_z(3, np.complex64)), fv.asarray(np.ones(3))
    f32 = fv.asarray(np.ones(3, np.float32))
    assert (z64 + f64).dtype == fv.complex128 and (z64 + f32).dtype == fv.complex64
    assert (f32 * 1j).dtype == fv.complex64 and (z64 * 2.0).dtype == fv.complex64
    assert (z64 + fv.asarray(_z(3, np.complex128))).dtype == fv.complex128
    with pytest.raises(DTypeError, match="integer"):
        z64 + fv.asarray(np.arange(3))


# The array API's special cases (C99 Annex G): (function, input, expected); NaN compares as NaN,
# signed zeros by sign. (inf, nan) pairs whose sign the standard leaves open are compared by |.|.
INF, NAN, PI = np.inf, np.nan, np.pi
SPECIAL = [
    ("exp", complex(INF, 0), complex(INF, 0)), ("exp", complex(-INF, INF), 0j), ("exp", complex(NAN, 0), complex(NAN, 0)),
    ("exp", complex(1, INF), complex(NAN, NAN)), ("log", complex(-0.0, 0), complex(-INF, PI)),
    ("log", complex(-INF, INF), complex(INF, 3 * PI / 4)), ("log", complex(NAN, INF), complex(INF, NAN)),
    ("sqrt", complex(1, INF), complex(INF, INF)), ("sqrt", complex(-INF, 1), complex(0, INF)),
    ("sqrt", complex(NAN, INF), complex(INF, INF)), ("cosh", complex(0, INF), complex(NAN, 0)),
    ("sinh", complex(INF, INF), complex(INF, NAN)), ("tanh", complex(INF, 2), complex(1, 0)),
    ("tanh", complex(0, NAN), complex(0, NAN)), ("acosh", complex(0, NAN), complex(NAN, PI / 2)),
    ("acosh", complex(-INF, 1), complex(INF, PI)), ("asinh", complex(INF, INF), complex(INF, PI / 4)),
    ("atanh", complex(1, 0), complex(INF, 0)), ("atanh", complex(NAN, INF), complex(0, PI / 2)),
    ("acos", complex(INF, NAN), complex(NAN, INF)), ("expm1", complex(-INF, 1), complex(-1, 0)),
    ("log1p", complex(-1, 0), complex(-INF, 0)),
]


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_special_values(dt):
    z = np.array([s[1] for s in SPECIAL], dt)
    got = {name: getattr(fv, name)(fv.asarray(z)).numpy() for name in {s[0] for s in SPECIAL}}
    for i, (name, _, want) in enumerate(SPECIAL):
        g = got[name][i]
        for gv, wv in ((g.real, want.real), (g.imag, want.imag)):
            if np.isnan(wv):
                assert np.isnan(gv), (name, z[i], g, want)
            elif np.isinf(wv) and name in ("acos", "sqrt"):
                assert np.isinf(gv), (name, z[i], g, want)
            else:
                assert np.isclose(gv, wv, rtol=1e-6, atol=0) or gv == wv, (name, z[i], g, want)
    assert np.signbit(got["log"][4].imag) == np.signbit(PI)                     # log(-0 + 0j): +pi


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_reductions_and_scans(dt):
    z = _z((3, 6), dt, 0.9)
    Z = fv.asarray(z)
    for axis in (None, 0, 1):
        close(fv.sum(Z, axis=axis), z.sum(axis=axis), dt)
        close(fv.mean(Z, axis=axis), z.mean(axis=axis), dt)
        close(fv.prod(Z, axis=axis), z.prod(axis=axis), dt)
    close(fv.cumulative_sum(Z, axis=1), np.cumsum(z, 1), dt)
    close(fv.cumulative_prod(Z, axis=0, include_initial=True), np.concatenate([np.ones((1, 6), dt),
                                                                               np.cumprod(z, 0)]), dt)
    close(fv.sum(Z, dtype=fv.complex128), z.sum(dtype=np.complex128), np.complex64)
    close(fv.prod(fv.asarray(np.zeros((0, 2), dt)), axis=0), np.ones(2, dt), dt)


def test_predicates_round_casts_matmul():
    z = np.array([1 + 2j, complex(NAN, 1), complex(1, INF), complex(NAN, INF), 2.5 - 1.5j], np.complex64)
    Z = fv.asarray(z)
    assert np.array_equal(fv.isnan(Z).numpy(), np.isnan(z)) and np.array_equal(fv.isinf(Z).numpy(), np.isinf(z))
    assert np.array_equal(fv.isfinite(Z).numpy(), np.isfinite(z))
    np.testing.assert_array_equal(fv.round(Z).numpy(), np.round(z))
    assert np.array_equal(Z.astype(fv.complex128).numpy(), z.astype(np.complex128), equal_nan=True)
    assert np.array_equal(fv.astype(fv.asarray(np.arange(3, dtype=np.int16)), fv.complex64).numpy(),
                          np.arange(3).astype(np.complex64))
    with pytest.raises(DTypeError, match="imaginary"):
        Z.astype(fv.float32)
    np.testing.assert_array_equal(fv.full((2, 2), 1 - 2j, dtype=fv.complex128).numpy(), np.full((2, 2), 1 - 2j))
    a, b = _z((3, 4), np.complex64), _z((4, 2), np.complex64)
    close(fv.asarray(a) @ fv.asarray(b), a @ b, np.complex64)
    close(fv.matmul(fv.asarray(a), fv.asarray(b.real.copy())), a @ b.real, np.complex64)


def test_equality_with_scalars_and_real_arrays():
    z = np.array([1 + 0j, 1j, complex(NAN, 0)], np.complex64)
    Z, F = fv.asarray(z), fv.asarray(np.array([1, 0, 2], np.float32))
    for got, want in ((Z == 1, z == 1), (Z != 1j, z != 1j), (Z == Z, z == z), (Z == F, z == F.numpy()),
                      (F == 1j, F.numpy() == 1j)):
        assert np.array_equal(got.numpy(), want)


def test_reflected_pow():
    z = _z(4, np.complex128)
    close(2.0 ** fv.asarray(z), 2.0 ** z, np.complex128)


def test_complex_casts_and_concat_promote():
    """astype between complex dtypes (through the float pairs views, any strides) and concat promoting
    complex64 with complex128 / float64 (array-api-tests' test_concat), all vs numpy."""
    a, b = _z((2, 3), np.complex64), _z((2, 2), np.complex128)
    A, B = fv.asarray(a), fv.asarray(b)
    assert np.array_equal(fv.astype(A[:, ::-2], fv.complex128).numpy(), a[:, ::-2].astype(np.complex128))
    assert np.array_equal(fv.ops.casts.astype(B, fv.complex64).numpy(), b.astype(np.complex64))
    for xs in ((A, B), (B, A), (A, fv.asarray(b.real.copy())), (B, B)):
        want = np.concatenate([x.numpy() for x in xs], axis=1)
        got = fv.concat(list(xs), axis=1)
        assert got.dtype == want.dtype and np.array_equal(got.numpy(), want)
    got = fv.concat([A, B], axis=None)
    assert np.array_equal(got.numpy(), np.concatenate([a.ravel(), b.ravel()]))


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_huge_imaginary_parts(dt):
    """exp / cos / cosh / sin / sinh of a huge imaginary (real for cos) part: sin / cos of the huge
    argument reduce exactly (Payne-Hanek), as array-api-tests' exp(1 + 4.77e15j) needs."""
    z = np.array([1 + 4.7725333e15j, 2 + 7.7631244e15j, 0.5 - 3e30j, 0.25 + 1e300j], np.complex128).astype(dt)
    if dt == np.complex64:
        z = z[:3]
    for name, f in (("exp", np.exp), ("cosh", np.cosh), ("sinh", np.sinh)):
        close(getattr(fv, name)(fv.asarray(z)), f(z), dt)
    w = (z.imag + 1j * z.real).astype(dt)
    close(fv.cos(fv.asarray(w)), np.cos(w), dt)
    close(fv.sin(fv.asarray(w)), np.sin(w), dt)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_flip_and_roll(dt):
    """flip / roll of complex arrays (complex128's 16-byte elements through the float pairs views)."""
    a = _z((2, 3), dt)
    A = fv.asarray(a)
    for axis in (None, 0, -1, (0, 1)):
        assert np.array_equal(fv.flip(A, axis=axis).numpy(), np.flip(a, axis=axis))
    for shift, axis in ((1, None), (-2, None), (2, 1), ((1, 2), (0, 1)), ((1, 2), None)):
        assert np.array_equal(fv.roll(A[:, ::-1], shift, axis=axis).numpy(), np.roll(a[:, ::-1], shift, axis=axis))
