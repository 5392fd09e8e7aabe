"""clip (clamp kernel), power with an integer exponent (powi) and the in-place add_assign_scaled."""
import numpy as np
import pytest

import fuelvk as fv
from oracles import assert_bits, assert_close

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.0, -1.0, 0.5], np.float32)


def views(a):
    d = fv.asarray(a)
    return [(a, d), (a.T, d.T), (a[::-1, ::2], d[::-1, ::2]), (a[2], d[2]), (a[1:, 3:], d[1:, 3:]),
            (np.broadcast_to(a[:1], (3,) + a.shape), d[:1].broadcast_to((3,) + a.shape))]


# -- clip -----------------------------------------------------------------------------------------
def test_clip_values_and_views():
    rng = np.random.default_rng(1)
    a = rng.uniform(-3, 3, size=(9, 13)).astype(np.float32)
    a[0, :SPECIAL.size] = SPECIAL
    for nv, dv in views(a):
        for lo, hi in ((-1.0, 1.0), (0.0, 0.0), (-np.inf, 0.5), (2.5, np.inf), (-0.25, 1e30)):
            got = fv.clip(dv, lo, hi)
            assert isinstance(got, fv.Array)
            # + 0.0 folds -0 into +0: the sign of a zero clamped against a zero bound is unspecified
            # (numpy keeps -0.0 for clip(-0.0, 0.0, 0.0); the device's max() may return +0.0)
            zero = np.float32(0.0)
            assert_bits(got.numpy() + zero, np.clip(nv, np.float32(lo), np.float32(hi)) + zero)


@pytest.mark.parametrize("n", [0, 1, 7, 1023, 1025, 100_003])
def test_clip_sizes(n):
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    assert_bits(fv.clip(a, -0.5, 0.75), np.clip(a, np.float32(-0.5), np.float32(0.75)))


def test_clip_nan_stays_nan_and_errors():
    got = fv.clip(np.array([np.nan, -np.nan, 5.0], np.float32), -1.0, 1.0)
    assert np.isnan(got[:2]).all() and got[2] == 1.0
    # Any real dtype (the array API's clip): float64 and integers through maximum / minimum.
    d = np.array([-2.5, 0.25, 3.0])
    assert_bits(fv.clip(d, 0.0, 1.0), np.clip(d, 0.0, 1.0))
    assert_bits(fv.clip(np.array([-3, 1, 9], np.int32), 0, 4), np.array([0, 1, 4], np.int32))
    with pytest.raises(fv.DTypeError, match="clip: x must have a real numeric dtype"):
        fv.clip(np.zeros(3, np.bool_), 0, 1)


# -- power ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 16, 31, -1, -2, -3, -7])
def test_power_integer_exponents(n):
    rng = np.random.default_rng(abs(n) + 2)
    a = rng.uniform(-2, 2, size=(7, 13)).astype(np.float32)
    want = np.power(a.astype(np.float64), n)
    for nv, dv in views(a):
        got = fv.power(dv, n)
        assert_close(got, np.power(nv.astype(np.float64), n).astype(np.float32), np.float32, scale=4 * max(abs(n), 1))
    if n in (0, 1, 2, -1):     # one or zero roundings: exact
        with np.errstate(divide="ignore"):
            assert_bits(fv.power(a, n), np.power(a, np.float32(n)) if n >= 0 else (np.float32(1) / a))
    assert want.shape == (7, 13)


def test_power_specials():
    with np.errstate(all="ignore"):
        a = SPECIAL
        assert_bits(fv.power(a, 0), np.ones_like(a))                 # x**0 == 1, NaN included (numpy)
        assert_bits(fv.power(a, 2), a * a)
        assert_bits(fv.power(np.array([0.0, -0.0], np.float32), -1), np.array([np.inf, -np.inf], np.float32))
        assert_bits(fv.power(np.array([0.0], np.float32), -2), np.array([np.inf], np.float32))
        assert_bits(fv.power(np.array([2.0, -2.0], np.float32), 127), np.array([2.0 ** 127, -2.0 ** 127], np.float32))
        assert_bits(fv.power(np.array([2.0], np.float32), 128), np.array([np.inf], np.float32))
        d = fv.asarray(np.array([3.0], np.float32))
        assert_bits(d ** 3, np.array([27.0], np.float32))


def test_power_beyond_powi_is_pow():
    """What powi does not take (a float or huge exponent, a non-float32 base) is the array API's pow."""
    x = np.array([0.5, 2.0, 3.0], np.float32)
    assert_close(fv.power(x, 2.5), np.power(x, np.float32(2.5)), np.float32, scale=4)
    assert_bits(fv.power(np.array([1.0, -1.0, 0.5], np.float32), 2 ** 40), np.array([1.0, 1.0, 0.0], np.float32))
    h = np.array([0.5, -2.0, 3.0], np.float16)
    assert_bits(fv.power(h, 2), h * h)


# -- add_assign_scaled ----------------------------------------------------------------------------
def test_add_assign_scaled_contiguous_is_exact():
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 1023, 1025, 100_003):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        d = fv.asarray(a)
        r = fv.add_assign_scaled(d, fv.asarray(b), -0.3)
        assert r is d
        assert_bits(d, a + b * np.float32(-0.3))        # two roundings, as numpy (no fused multiply-add)


def test_add_assign_scaled_views():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((8, 10)).astype(np.float32)
    src = rng.standard_normal((10, 8)).astype(np.float32)
    d = fv.asarray(base)
    view = d[::-1, 1::2]                                # dst: a strided, negative-step view, in place
    fv.add_assign_scaled(view, fv.asarray(src).T[::-1, 1::2], 2.0)
    want = base.copy()
    want[::-1, 1::2] += src.T[::-1, 1::2] * np.float32(2.0)
    assert_bits(d, want)
    row = rng.standard_normal(10).astype(np.float32)    # src broadcast over rows
    fv.add_assign_scaled(d, row, 0.5)
    want += row * np.float32(0.5)
    assert_bits(d, want)
    fv.add_assign_scaled(d, d, 1.0)                     # aliasing itself: each element doubles
    assert_bits(d, want + want)
    h = base.copy()                                     # numpy dst: updated in place, returned
    out = fv.add_assign_scaled(h, src.T, 1.5)
    assert out is h
    assert_bits(h, base + src.T * np.float32(1.5))


def test_add_assign_scaled_errors():
    d = fv.asarray(np.zeros((3, 4), np.float32))
    with pytest.raises(fv.DTypeError, match="add_assign_scaled: float32 only"):
        fv.add_assign_scaled(d, np.zeros((3, 4), np.float64), 1.0)
    with pytest.raises(fv.DTypeError, match="float32 only"):
        fv.add_assign_scaled(fv.asarray(np.zeros(3, np.float16)), np.zeros(3, np.float16), 1.0)
    with pytest.raises(fv.ShapeError, match="could not broadcast a value of shape \\(4, 3\\)"):
        fv.add_assign_scaled(d, np.zeros((4, 3), np.float32), 1.0)
    with pytest.raises(fv.ShapeError, match="cannot write into a broadcast view"):
        fv.add_assign_scaled(d[:1].broadcast_to((3, 4)), np.zeros((3, 4), np.float32), 1.0)
    with pytest.raises(fv.DTypeError, match="add_assign_scaled: dst must be"):
        fv.add_assign_scaled([1.0], np.zeros(1, np.float32), 1.0)
    assert_bits(d, np.zeros((3, 4), np.float32))


# -- exp2: a unary op added by four files (kernel table, shader case, op record, this test) -----------
@pytest.mark.parametrize("dt, lo, hi", [(np.float32, -120, 120), (np.float64, -1000, 1000), (np.float16, -14, 15)])
def test_exp2(dt, lo, hi):
    rng = np.random.default_rng(7)
    ints = np.arange(lo, hi + 1)
    x = np.concatenate([ints, rng.uniform(lo, hi, 300), [0.5, -0.5, -0.0, np.inf, -np.inf, np.nan, 2000, -2000]])
    x = x.astype(dt)
    with np.errstate(over="ignore"):
        want = np.exp2(x)
    got = fv.exp2(x)
    assert_bits(got[: len(ints)], want[: len(ints)])                 # powers of two: exact
    assert_bits(got[-6:], want[-6:])                                   # inf, 0, nan, overflow, underflow
    np.testing.assert_allclose(got, want, rtol={np.float32: 4e-7, np.float64: 1e-15, np.float16: 1e-3}[dt])
    dev = fv.asarray(x)
    assert_bits(fv.exp2(dev[1::3]).numpy(), got[1::3])                 # a strided, offset view in place


def test_exp2_is_everywhere_a_record_reaches():
    """Its spec, torch op, bench cases and FlashInfer-Bench Definition come from the record alone."""
    torch = pytest.importorskip("torch")
    import fuelvk.torch  # noqa: F401
    from fuelvk.bench import cases
    from fuelvk.definitions.export import export_one
    from fuelvk.specs import load_specs
    spec = next(s for s in load_specs().values() if s.fuelvk_api == "exp2")
    assert spec.ref_api == "numpy.exp2"
    t = torch.tensor([-1.0, 0.0, 3.0])
    assert torch.equal(torch.ops.fuelvk.exp2(t), torch.exp2(t))
    assert cases.select(["exp2"])
    defn, rows = export_one(spec, small=True)
    assert defn["name"].startswith("exp2") and "exp2" in defn["reference"] and rows
