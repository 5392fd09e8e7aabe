"""numpy semantics that used to differ silently (issue 14, items 5 and 6): bool indices, comparisons,
in-place operators, clip's edge cases, fill values that do not fit, and the typed errors of odd input.
Oracles: numpy (bit-exact where the operation is exact) and torch CPU for tensor input."""
import operator

import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import (DTypeError, FormatError, FuelVKError, FuelVKMemoryError, ShapeError, UnsupportedError,
                           ValueCastError)
from fuelvk.kernels import FAMILIES
from oracles import assert_bits

CMP = {"equal": operator.eq, "not_equal": operator.ne, "less": operator.lt, "less_equal": operator.le,
       "greater": operator.gt, "greater_equal": operator.ge}
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, ml_dtypes.float8_e4m3fn, np.int8, np.int16,
          np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.bool_]


def _pool(dt):
    """Values that stress a comparison of dt: NaN (both signs), +-inf, +-0, denormals, extremes."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([True, False])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 7], dt)
    with np.errstate(all="ignore"):
        vals = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 1e-310, 1e-300, 1.0, -1.0,
                         2.5, -3.0, 448.0, 65504.0, 3e38]).astype(dt)
    return vals


# -- bool indices ---------------------------------------------------------------------------------
BOOL_KEYS = [True, False, (True, True), (True, False), (1, slice(None), True), (slice(None), 1, True),
             (True, slice(None), 1), (slice(None), True, None), (None, True, 1), np.bool_(True), np.bool_(False),
             (1, 2, 3, True), (True, 1, 2, 3), (Ellipsis, True), (True, Ellipsis, 1), (slice(None), np.False_, 2)]


@pytest.mark.parametrize("key", BOOL_KEYS, ids=repr)
def test_bool_index_is_a_0d_mask(key):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = fv.asarray(x)[key].numpy()
    want = x[key]
    assert got.shape == want.shape
    assert_bits(got, want)


def test_bool_index_of_0d_and_copy():
    s = fv.asarray(np.array(3.0, np.float32))
    assert s[True].shape == (1,) and s[False].shape == (0,)
    x = fv.asarray(np.arange(6, dtype=np.float32))
    y = x[True]                     # advanced indexing: a copy, as numpy's
    y[...] = -1.0
    assert_bits(x.numpy(), np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("key", [True, False, (slice(None), True, 1), (1, True), (np.True_, Ellipsis, 0)], ids=repr)
def test_bool_index_setitem(key):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = fv.asarray(x)
    a[key] = 5
    x[key] = 5
    assert_bits(a.numpy(), x)


@pytest.mark.parametrize("call", [lambda a: fv.zeros(True), lambda a: fv.zeros((2, True)),
                                  lambda a: a.reshape(True, 24), lambda a: fv.sum(a, axis=True),
                                  lambda a: a.transpose(True, 0, 2), lambda a: fv.empty(np.False_)])
def test_bool_is_not_an_integer_where_numpy_refuses_it(call):
    with pytest.raises(FuelVKError) as e:
        call(fv.asarray(np.zeros((2, 3, 4), np.float32)))
    assert isinstance(e.value, (TypeError, ValueError)) and "bool" in str(e.value)


# -- comparisons ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_comparisons_match_numpy_bit_for_bit(dt):
    rng = np.random.default_rng(7)
    pool = _pool(dt)
    a, b = rng.choice(pool, (8, 9)), rng.choice(pool, (8, 9))
    A, B = fv.asarray(a), fv.asarray(b)
    s = pool[len(pool) // 2]
    for name, pyop in CMP.items():
        f, ref = getattr(fv, name), getattr(np, name)
        cases = [
            (f(A, B), ref(a, b)),
            (pyop(A, B), ref(a, b)),                                            # the operator
            (f(A[::2, ::-3], B[1::2, 3:6]), ref(a[::2, ::-3], b[1::2, 3:6])),  # strided, negative step
            (f(A, B[:1]), ref(a, b[:1])), (f(A[:, :1], B[2]), ref(a[:, :1], b[2])),  # broadcasting
            (f(A.T, s), ref(a.T, s)), (f(s, A), ref(s, a)),                     # numpy scalars either side
            (pyop(s, A), ref(s, a)),
            (f(a, b), ref(a, b)),                                               # numpy in -> numpy out
        ]
        for got, want in cases:
            got = got.numpy() if isinstance(got, fv.Array) else got
            assert isinstance(got, np.ndarray) and got.dtype == np.bool_ and got.shape == want.shape, name
            assert np.array_equal(got, want), (name, np.argwhere(got != want)[:4])


def test_comparison_large_and_rank_7():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5003).astype(np.float32).round(1)
    y = rng.standard_normal(5003).astype(np.float32).round(1)
    assert np.array_equal(fv.less_equal(x, x[::-1]), x <= x[::-1])
    assert np.array_equal(fv.less(x, y), x < y)                       # 4-wide path + a 3-element tail
    X, Y, Z = fv.asarray(x), fv.asarray(y), fv.asarray(np.float32(0.1))
    for got, want in [(X[4:] >= Y[:-4], x[4:] >= y[:-4]), (X[1:] != Y[1:], x[1:] != y[1:]),
                      (fv.greater(X, Z), x > np.float32(0.1)), (fv.equal(Z, X[8:]), np.float32(0.1) == x[8:])]:
        assert np.array_equal(got.numpy(), want)
    y = rng.integers(-3, 3, (2,) * 7).astype(np.int32)
    Y = fv.asarray(y)
    assert np.array_equal((Y.transpose(6, 5, 4, 3, 2, 1, 0) == Y).numpy(), y.transpose(6, 5, 4, 3, 2, 1, 0) == y)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_integer_arrays_against_any_python_scalar(dt):
    """numpy 2 compares out-of-range integers correctly and float bounds exactly."""
    x = _pool(dt)
    scalars = [0, 1, -1, 300, -300, 2**31, -2**40, 2**70, True, 2.5, -0.5, 1.0, np.nan, np.inf, -np.inf]
    for s in scalars:
        if dt == np.int64 and isinstance(s, float):
            continue                                   # numpy rounds int64 to float64: refused below
        for name in CMP:
            f, ref = getattr(fv, name), getattr(np, name)
            try:
                want = ref(x, s)
            except OverflowError:                      # numpy: bool vs 2**70 (promoted to int64)
                continue
            assert np.array_equal(f(x, s), want), (name, s)
            assert np.array_equal(f(s, fv.asarray(x)).numpy(), ref(s, x)), (name, s)
    with pytest.raises(DTypeError, match="int64"):
        fv.less(np.arange(3), 2.5)


def test_comparison_promotion_and_refusals():
    a16 = np.array([1.0, 2049.0, np.nan], np.float16)
    b32 = np.array([1.0, 2049.0, np.nan], np.float32)
    assert np.array_equal(fv.equal(a16, b32), a16 == b32)                        # float promotion
    assert np.array_equal(fv.equal(a16, 2049), a16 == 2049)                      # weak scalar rounds to f16
    assert np.array_equal(fv.less(a16, np.float64(2048.5)), a16 < np.float64(2048.5))   # strong scalar promotes
    i32, f32 = np.array([1, 16777217, -3], np.int32), np.array([1.0, 16777216.0, -3.5], np.float32)
    assert np.array_equal(fv.equal(i32, f32), i32 == f32)       # promoted to float64 (icast.comp), as numpy
    with pytest.raises(ShapeError, match="do not broadcast"):
        fv.less(np.zeros(3, np.float32), np.zeros(4, np.float32))


def test_array_equality_and_hash():
    x = np.arange(5, dtype=np.float32)
    a, b = fv.asarray(x), fv.asarray(x)
    eq = a == b
    assert isinstance(eq, fv.Array) and eq.dtype == np.bool_ and bool(fv.asarray(eq.numpy().all()))
    assert (a != b).numpy().sum() == 0
    assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2     # hashing stays by identity (torch.Tensor's choice)
    assert (a == None) is False and (a != "x") is True and a not in [None, "x"]   # noqa: E711
    lt = x[::-1] < a                                     # numpy on the left defers to the Array
    assert isinstance(lt, fv.Array) and np.array_equal(lt.numpy(), x[::-1] < x)
    assert fv.less(1, 2.5) and not fv.equal(True, 2) and fv.greater_equal(np.float16(3), 3)
    with pytest.raises(DTypeError):
        a < None  # noqa: B015


def test_compare_kernels_declare_the_features_their_spirv_needs():
    from fuelvk.runtime.pipelines import spv_dir
    from test_elementwise_w64 import CAP_FEATURE, _capabilities
    for v in FAMILIES["compare"].variants.values():
        need = {CAP_FEATURE[c] for c in _capabilities(spv_dir() / v.spv) if c in CAP_FEATURE}
        assert need <= set(v.features), (v.id, need, v.features)


# -- in-place operators ---------------------------------------------------------------------------
def test_inplace_operators_write_through_views_and_aliases():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    X = fv.asarray(x)
    alias, view = X, X[1:, ::-2]
    v = x[1:, ::-2]
    X += 1
    x += 1
    assert X is alias
    view *= 3.0
    v *= 3.0
    view -= fv.asarray(np.float32([0.5, 0.25]))
    v -= np.float32([0.5, 0.25])
    view /= 7.0
    v /= 7.0
    X **= 2
    x **= 2
    assert_bits(X.numpy(), x)
    X[1:] += X[:-1]          # overlapping source and destination: numpy's result (as if copied first)
    x[1:] += x[:-1]
    assert_bits(X.numpy(), x)
    m = np.arange(16, dtype=np.float32).reshape(4, 4) / 8
    M = fv.asarray(m)
    M @= M
    m @= m
    np.testing.assert_allclose(M.numpy(), m, rtol=1e-6)


def test_inplace_casting_follows_same_kind():
    h = np.array([1.5, 2.25, -3.0], np.float16)
    H = fv.asarray(h)
    alias = H
    H += np.float32([1e-3, 7.0, 0.1])            # computed in f32, rounded into f16 as numpy
    h += np.float32([1e-3, 7.0, 0.1])
    assert H is alias and H.dtype == np.float16
    assert_bits(H.numpy(), h)
    with pytest.raises(TypeError) as e:
        i = fv.asarray(np.arange(3, dtype=np.int32))
        i += 1.5
    assert isinstance(e.value, FuelVKError)
    X = fv.asarray(np.zeros((3,), np.float32))
    with pytest.raises(ShapeError, match="does not fit"):
        X += np.zeros((2, 3), np.float32)
    B = fv.asarray(np.zeros(1, np.float32)).broadcast_to((4,))
    with pytest.raises(ShapeError, match="broadcast view"):
        B += 1.0


# -- clip -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (1.0, -1.0), (np.nan, 1.0), (0.0, np.nan),
                                   (-np.nan, 1.0), (np.nan, -np.nan), (-np.inf, np.inf), (3.0, 3.0)], ids=repr)
def test_clip_edge_cases_match_numpy(lo, hi):
    rng = np.random.default_rng(3)
    x = rng.choice(np.array([-0.0, 0.0, np.nan, -np.nan, 2, -3, 0.5, np.inf, -np.inf, 1e-45], np.float32), 1030)
    for v in (x, x[::-3]):
        assert_bits(fv.clip(v, lo, hi), np.clip(v, np.float32(lo), np.float32(hi)))


# -- fill values that do not fit ------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: fv.masked_fill(np.zeros(4, np.int32), np.array([1, 0, 1, 0], bool), np.nan),
    lambda: fv.masked_fill(np.zeros(4, np.uint8), np.array([1, 0, 1, 0], bool), 300),
    lambda: fv.masked_fill(np.zeros(4, np.int64), np.array([1, 0, 1, 0], bool), np.inf),
    lambda: fv.pad(np.zeros(3, np.int8), 1, constant_values=np.nan),
    lambda: fv.pad(np.zeros(3, np.uint16), 1, constant_values=-1),
    lambda: fv.asarray(np.zeros(3, np.int32)).__setitem__(0, np.nan),
    lambda: fv.asarray(np.zeros(3, np.int32)).__setitem__(slice(None), 2**40),
    lambda: fv.asarray(np.zeros(3, np.uint8)).__setitem__(1, np.float32(-1.0)),
], ids=["masked_fill-i32-nan", "masked_fill-u8-300", "masked_fill-i64-inf", "pad-i8-nan", "pad-u16-neg",
        "setitem-i32-nan", "setitem-i32-2**40", "setitem-u8-neg"])
def test_fill_values_that_do_not_fit_raise(call):
    with pytest.raises(ValueCastError) as e:
        call()
    assert isinstance(e.value, ValueError) and isinstance(e.value, OverflowError)
    assert any(d in str(e.value) for d in ("int8", "int32", "int64", "uint8", "uint16"))


def test_fill_values_that_fit_are_cast_as_numpy():
    m = np.array([1, 0, 1, 0], bool)
    assert_bits(fv.masked_fill(np.zeros(4, np.int32), m, 2.7), np.where(m, np.int32(2), np.int32(0)))
    a, x = fv.asarray(np.zeros(3, np.int16)), np.zeros(3, np.int16)
    a[0], x[0] = np.float32(-3.9), np.float32(-3.9)
    a[1], x[1] = True, True
    assert_bits(a.numpy(), x)
    with np.errstate(over="ignore"):
        h = np.zeros(2, np.float16)
        h[0] = 1e6
    H = fv.asarray(np.zeros(2, np.float16))
    H[0] = 1e6
    assert_bits(H.numpy(), h)
    assert_bits(fv.pad(np.zeros(2, np.uint8), 1, constant_values=255), np.pad(np.zeros(2, np.uint8), 1,
                                                                             constant_values=255))


# -- typed errors for odd input (item 6) ----------------------------------------------------------
def _garbage_gguf(tmp_path):
    p = tmp_path / "garbage.gguf"
    p.write_bytes(bytes(range(256)) * 4)
    return fv.quant.load_gguf(str(p))


def _qmatmul_route(_):
    w = fv.quant.quantize(np.ones((4, 32), np.float32), "q8_0")
    return fv.quant.qmatmul(np.ones((2, 32), np.float32), w, "q8_0", (4, 32), route="x")


TYPED = {  # name: (call(tmp_path), FuelVKError subclass, builtin base numpy code would catch)
    "zeros(3.5)": (lambda t: fv.zeros(3.5), DTypeError, TypeError),
    "zeros(None)": (lambda t: fv.zeros(None), DTypeError, TypeError),
    "ragged list": (lambda t: fv.asarray([[1.0], [1.0, 2.0]]), ShapeError, ValueError),
    "ragged list to an op": (lambda t: fv.exp([[1.0], [1.0, 2.0]]), ShapeError, ValueError),
    "affine(X, 'a', 1)": (lambda t: fv.affine(fv.asarray(np.ones(3, np.float32)), "a", 1), DTypeError, TypeError),
    "qmatmul(route='x')": (_qmatmul_route, UnsupportedError, NotImplementedError),
    "matmul(route='x')": (lambda t: fv.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), route="x"),
                          UnsupportedError, NotImplementedError),
    "load_gguf(garbage)": (_garbage_gguf, FormatError, ValueError),
    "X[::0]": (lambda t: fv.asarray(np.ones(3, np.float32))[::0], ShapeError, ValueError),
    "len(0-d)": (lambda t: len(fv.asarray(np.float32(1))), DTypeError, TypeError),
    "int X ** -1": (lambda t: fv.asarray(np.ones(3, np.int32)) ** fv.asarray(np.array([-1], np.int32)),
                    ValueCastError, ValueError),      # numpy: integers to negative integer powers
    "float X << 1": (lambda t: fv.asarray(np.ones(3, np.float32)) << 1, DTypeError, TypeError),
}


@pytest.mark.parametrize("name", list(TYPED))
def test_odd_input_raises_a_typed_error(name, tmp_path):
    call, cls, base = TYPED[name]
    with pytest.raises(cls) as e:
        call(tmp_path)
    assert isinstance(e.value, FuelVKError) and isinstance(e.value, base)


def test_odd_input_that_now_works():
    x = np.float32([-1.0, 0.0, 2.0, np.nan])
    X = fv.asarray(x)
    assert np.array_equal((X < 0).numpy(), x < 0) and np.array_equal((0 <= X).numpy(), 0 <= x)
    torch = pytest.importorskip("torch")
    t = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).T   # strided bf16 tensor
    a = fv.asarray(t)
    assert a.dtype == fv.bfloat16 and a.shape == (5, 3)
    assert np.array_equal(a.numpy().view(np.int16), t.contiguous().view(torch.int16).numpy())
    f8 = torch.linspace(-3, 3, 7).to(torch.float8_e4m3fn)
    assert np.array_equal(fv.asarray(f8).numpy().view(np.uint8), f8.view(torch.uint8).numpy())


def test_upload_out_of_memory_names_the_op(monkeypatch):
    pool = runtime.get().pool

    def refuse(nbytes, *a, **k):
        raise FuelVKMemoryError(f"cannot allocate {nbytes} bytes")
    monkeypatch.setattr(pool, "alloc", refuse)
    with pytest.raises(FuelVKMemoryError, match=r"^rms_norm: uploading input 0 \(shape \(2, 8\)\): cannot allocate"):
        fv.rms_norm(np.ones((2, 8), np.float32), weight=np.ones(8, np.float32))
