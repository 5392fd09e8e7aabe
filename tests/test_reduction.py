"""sum/max/min/mean (reduce, reduce_last_dim), argmax/argmin (arg_reduce_*), cumsum.

Oracles: numpy / torch CPU on float64 copies; exact results (max/min/arg/bit patterns) bit for bit.
"""
import math

import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk.kernels.reduction import SHORT_ROW_MAX
from oracles import FLOATS, TOL, assert_bits, assert_close

rng = np.random.default_rng(1234)
IDS = [str(d) for d in FLOATS]


def _sum_close(got, x64, axis, dt, op, keepdims=False):
    """|got - ref| <= rtol * (|ref| + sum|x|): accumulation error is relative to sum|x|."""
    want = getattr(np, op)(x64, axis=axis, keepdims=keepdims)
    scale = np.sum(np.abs(x64), axis=axis, keepdims=keepdims)
    if op == "mean":
        scale = scale / max(x64.size // max(np.size(want), 1), 1)
    got = np.asarray(got, np.float64)
    assert got.shape == np.shape(want)
    r, a = TOL[np.dtype(dt)]
    bad = np.abs(got - want) > r * (np.abs(want) + scale) + a
    assert not bad.any(), f"{op} axis={axis}: got {got[bad][:4]} want {np.asarray(want)[bad][:4]}"


AXES = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_value_reductions_any_axis(dt, launched):
    x = rng.standard_normal((3, 5, 7)).astype(dt)
    x64 = x.astype(np.float64)
    for axis in AXES:
        for keepdims in (False, True):
            for op in ("sum", "mean"):
                _sum_close(getattr(fv, op)(x, axis=axis, keepdims=keepdims), x64, axis, dt, op, keepdims)
            for op in ("max", "min"):
                want = getattr(np, op)(x64, axis=axis, keepdims=keepdims).astype(dt)
                assert_bits(np.asarray(getattr(fv, op)(x, axis=axis, keepdims=keepdims)), np.asarray(want))
    tag = fv.dtypes.FLOAT_TAGS[np.dtype(dt)]
    assert f"reduce_any_dim.{tag}" in launched     # (rows up to SHORT_ROW_MAX: one per invocation)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_value_reductions_views(dt):
    base = rng.standard_normal((6, 9, 11)).astype(dt)
    a = fv.asarray(base)
    views = [(a[1:, ::2, ::-1], base[1:, ::2, ::-1]), (a.transpose(2, 0, 1), base.transpose(2, 0, 1)),
             (a[2], base[2]), (a[:, 3:8], base[:, 3:8])]
    for v, ref in views:
        r64 = ref.astype(np.float64)
        for axis in (None, 0, -1, (0, 1)):
            out = fv.sum(v, axis=axis)
            assert isinstance(out, fv.Array)
            _sum_close(out.numpy(), r64, axis, dt, "sum")
            assert_bits(fv.max(v, axis=axis).numpy(), np.asarray(np.max(r64, axis=axis).astype(dt)))


@pytest.mark.parametrize("n", [1, 7, 129, 257, 1000, 40000])
def test_edge_lengths(n):
    x = rng.uniform(-1, 1, size=(3, n)).astype(np.float32)
    x64 = x.astype(np.float64)
    _sum_close(fv.sum(x, axis=1), x64, 1, np.float32, "sum")
    _sum_close(fv.mean(x), x64, None, np.float32, "mean")
    assert_bits(fv.min(x, axis=-1), x.min(axis=-1))
    assert_bits(fv.argmax(x, axis=1), np.argmax(x, axis=1))


def test_empty_and_scalar():
    z = np.zeros((3, 0), np.float32)
    assert_bits(fv.sum(z, axis=1), np.zeros(3, np.float32))
    assert np.isnan(fv.mean(z, axis=1)).all()
    assert fv.sum(z, axis=0).shape == (0,)
    for op in ("max", "min", "argmax", "argmin"):
        with pytest.raises(fv.ShapeError, match=op):
            getattr(fv, op)(z, axis=1)
    s = np.array(2.5, np.float32)
    assert_bits(fv.sum(s), np.float32(2.5))
    assert fv.argmax(s) == 0


def test_nan_propagates():
    x = rng.standard_normal((4, 300)).astype(np.float32)
    x[1, 17] = np.nan
    for op in ("sum", "max", "min", "mean"):
        got = getattr(fv, op)(x, axis=1)
        want = getattr(np, op)(x, axis=1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.fixture
def row_kernels(monkeypatch):
    """Value reductions of contiguous rows past SHORT_ROW_MAX on the row kernels (reduce,
    reduce_last_dim) instead of the strided kernel (their default)."""
    from fuelvk.ops import reduction as R
    monkeypatch.setattr(R, "VALUE_ROW_MAX", SHORT_ROW_MAX)


@pytest.mark.parametrize("route", ["strided", "rows"])
def test_long_row_routes(route, launched, monkeypatch):
    """1M+ elements, and several rows past SHORT_ROW_MAX, on the strided kernel (chunks of the row over
    invocations + a final pass; the default) and on the row kernels: within tolerance of float64."""
    from fuelvk.ops import reduction as R
    if route == "rows":
        monkeypatch.setattr(R, "VALUE_ROW_MAX", SHORT_ROW_MAX)
    x = rng.uniform(0.5, 1.5, size=(1 << 20) + 3).astype(np.float32)
    y = rng.uniform(-1, 1, size=(3, 3 * SHORT_ROW_MAX + 5)).astype(np.float32)
    for a in (x, y):
        want = a.astype(np.float64).sum(-1)
        np.testing.assert_allclose(np.asarray(fv.sum(a, axis=-1), np.float64), want, rtol=TOL[np.dtype(np.float32)][0],
                                   atol=1e-5 * a.shape[-1] ** 0.5)
        assert_bits(np.asarray(fv.max(a, axis=-1)), np.asarray(a.max(-1)))
        p = rng.uniform(0.99, 1.01, size=a[..., :9999].shape).astype(np.float32)   # products stay finite
        np.testing.assert_allclose(np.asarray(fv.prod(p, axis=-1), np.float64),
                                   np.prod(p.astype(np.float64), axis=-1), rtol=1e-4)
    fams = {"strided": {"reduce_any_dim.f32"}, "rows": {"reduce.f32", "reduce_last_dim.f32"}}[route]
    assert fams <= set(launched), launched


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_long_row_accuracy(dt, launched, row_kernels):
    """1M+ elements, all positive (worst case for a serial sum): within tolerance of a float64 sum."""
    n = (1 << 20) + 3
    scale = 1 / 32 if dt == np.float16 else 1.0  # keep the f16 sum below 65504
    x = (rng.uniform(0.5, 1.5, size=n) * scale).astype(dt)
    want = torch.tensor(x.astype(np.float64)).sum().item()
    r, _ = TOL[np.dtype(dt)]
    got = float(np.asarray(fv.sum(x), np.float64))
    assert abs(got - want) <= r * abs(want), (got, want)
    got = float(np.asarray(fv.mean(x), np.float64))
    assert abs(got - want / n) <= r * abs(want / n)
    assert_bits(np.asarray(fv.max(x)), np.asarray(x.max()))
    # arg over chunks: ties across chunk boundaries keep the lowest index (halves repeat values)
    assert fv.argmax(x) == np.argmax(x) and fv.argmin(x) == np.argmin(x)
    tag = fv.dtypes.FLOAT_TAGS[np.dtype(dt)]
    assert launched.count(f"reduce.{tag}") >= 2  # partials + final pass
    assert launched.count(f"arg_reduce_last_dim.{tag}") >= 4


def test_partials_multi_row(row_kernels):
    """rows longer than a chunk on several rows: the MODE 1/2 passes with row > 0."""
    x = rng.uniform(-1, 1, size=(3, 70001)).astype(np.float16)
    _sum_close(fv.sum(x, axis=1), x.astype(np.float64), 1, np.float16, "sum")
    assert_bits(fv.max(x, axis=-1), x.max(axis=-1))


# -- short rows and leading / middle axes (reduce_any_dim, arg_reduce_any_dim) -------------------
# (shape, axis): leading axes, short rows, a long leading dim (chunks + a final pass over partials),
# a middle axis split in chunks, two reduced axes that collapse, rows past SHORT_ROW_MAX.
srng = np.random.default_rng(77)     # (the module's rng keeps its sequence for the tests below)
STRIDED = [((2, 64, 128), 0), ((2, 300), 0), ((64, 12, 2), -1), ((2100, 9), 0), ((5, 1100, 3), 1),
           ((4, 5, 6), (0, 1)), ((3, 8200), 1)]


def _check_all_ops(x, axis, dt):
    x64 = np.asarray(x, np.float64)
    for op in ("sum", "mean"):
        _sum_close(getattr(fv, op)(x, axis=axis), x64, axis, dt, op)
    for op in ("max", "min"):
        assert_bits(np.asarray(getattr(fv, op)(x, axis=axis)), np.asarray(getattr(np, op)(x64, axis=axis).astype(dt)))
    if not isinstance(axis, tuple):
        for op in ("argmax", "argmin"):
            assert_bits(getattr(fv, op)(x, axis=axis), np.asarray(getattr(np, op)(x64, axis=axis), np.int64))


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_strided_routes(dt, launched, row_kernels):
    for shape, axis in STRIDED:
        x = srng.integers(-8, 8, size=shape).astype(dt)     # many ties for the arg-reductions
        x += srng.uniform(-0.5, 0.5, size=shape).astype(dt) * (srng.uniform(size=shape) < 0.5)
        _check_all_ops(x, axis, dt)
    tag = fv.dtypes.FLOAT_TAGS[np.dtype(dt)]
    assert f"reduce_any_dim.{tag}" in launched and f"arg_reduce_any_dim.{tag}" in launched
    assert f"reduce_last_dim.{tag}" in launched        # (3, 8200) over the last axis: rows
    y = srng.integers(-20, 20, size=(3, 8200)).astype(dt)
    for op in ("argmax", "argmin"):
        assert_bits(getattr(fv, op)(y, axis=-1), getattr(np, op)(y, axis=-1))
    assert f"arg_reduce_last_dim.{tag}" in launched


def test_strided_one_pass_vs_chunks(launched):
    """A long leading dim runs in chunks + a final pass (two dispatches of one variant per call)."""
    x = srng.uniform(-1, 1, size=(2100, 9)).astype(np.float32)
    launched.clear()
    _sum_close(fv.sum(x, axis=0), x.astype(np.float64), 0, np.float32, "sum")
    assert launched == ["reduce_any_dim.f32"] * 2
    launched.clear()
    assert_bits(fv.argmin(x, axis=0), np.argmin(x, axis=0))
    assert launched == ["arg_reduce_any_dim.f32"] * 2
    launched.clear()
    _sum_close(fv.sum(x[:, :4], axis=1), x[:, :4].astype(np.float64), 1, np.float32, "sum")   # short rows
    assert launched == ["reduce_any_dim.f32"]


def test_strided_prod():
    for shape, axis in STRIDED:
        x = srng.uniform(0.97, 1.03, size=shape).astype(np.float32)
        assert_close(fv.prod(x, axis=axis), np.prod(x.astype(np.float64), axis=axis).astype(np.float32),
                     np.float32, scale=4)


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["float32", "float16"])
def test_strided_views(dt, launched):
    """Negative and non-unit strides, offsets and transposes are read in place (no copy)."""
    base = srng.standard_normal((12, 10, 70)).astype(dt)
    a = fv.asarray(base)
    views = [(a[::-1, 2:, ::3], base[::-1, 2:, ::3]), (a.transpose(2, 0, 1), base.transpose(2, 0, 1)),
             (a[3, ::-2], base[3, ::-2]), (a[1:, :, 5:9], base[1:, :, 5:9])]
    launched.clear()
    for v, ref in views:
        for axis in (0, 1, (0, 1)):
            n0 = len(launched)
            r64 = ref.astype(np.float64)
            _sum_close(fv.sum(v, axis=axis).numpy(), r64, axis, dt, "sum")
            assert_bits(fv.max(v, axis=axis).numpy(), np.asarray(np.max(r64, axis=axis).astype(dt)))
            if not isinstance(axis, tuple):
                assert_bits(fv.argmax(v, axis=axis).numpy(), np.argmax(r64, axis=axis))
            else:   # two reduced axes that do not collapse in these views: one copy first (remap's, a launch)
                del launched[n0:]
    assert not [k for k in launched if not k.startswith(("reduce", "arg_reduce"))], launched   # no copies


def test_strided_nan_and_inf():
    x = srng.standard_normal((300, 7)).astype(np.float32)
    x[[40, 250], 2] = np.nan       # two NaNs in different chunks of one column: the first one wins
    x[100, 3] = np.inf
    x[5, 4], x[290, 4] = np.inf, -np.inf
    for op in ("sum", "mean", "max", "min"):
        with np.errstate(invalid="ignore"):          # inf + -inf in numpy's own sum
            want = getattr(np, op)(x, axis=0)
        got = getattr(fv, op)(x, axis=0)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    for op in ("argmax", "argmin"):
        assert_bits(getattr(fv, op)(x, axis=0), getattr(np, op)(x, axis=0))
    s = srng.standard_normal((50, 3)).astype(np.float32)
    s[7, 1] = np.nan
    np.testing.assert_array_equal(np.isnan(fv.max(s, axis=1)), np.isnan(s.max(axis=1)))   # short rows
    assert_bits(fv.argmin(s, axis=1), np.argmin(s, axis=1))


@pytest.fixture
def budget(monkeypatch):
    """budget(n): Device.loop_budget = n for this test."""
    dev = fv.runtime.get().device
    _ = dev.loop_budget   # probe first, so that the monkeypatch restores the real value
    return lambda n: monkeypatch.setattr(dev, "loop_budget", n)


def test_strided_loop_budget(budget, launched):
    """Chunks never exceed Device.loop_budget; a dim longer than budget**2 (chunks of `budget` and a
    final pass over at most `budget` partials) goes to the row kernels instead of a truncated scan."""
    budget(8)
    x = srng.uniform(-1, 1, size=(60, 5)).astype(np.float32)        # 60 <= 8 * 8: 8 chunks of <= 8
    launched.clear()
    _check_all_ops(x, 0, np.float32)
    assert set(launched) == {"reduce_any_dim.f32", "arg_reduce_any_dim.f32"}
    assert launched.count("reduce_any_dim.f32") == 8                 # 4 ops, two passes each
    y = srng.uniform(-1, 1, size=(70, 5)).astype(np.float32)          # 70 > 64: the row kernels
    launched.clear()
    _check_all_ops(y, 0, np.float32)
    assert "reduce_any_dim.f32" not in launched and "arg_reduce_any_dim.f32" not in launched


# -- load paths: 16-byte texel views (TEX 1 / 2) and storage buffers (TEX 0) -------------------------
@pytest.fixture
def tex_seen(monkeypatch):
    """(family, TEX) of every reduction launch during the test that reads x (not the final passes)."""
    from fuelvk.kernels.reduction import MODE_FINAL
    ctx = fv.runtime.get()
    seen, orig = [], ctx.launch

    def spy(v, *a, **k):
        if "TEX" in k and k.get("MODE") != MODE_FINAL:
            seen.append((v.id.split(".")[0], k["TEX"]))
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


def _all_ops(v, ref, axis, dt):
    r64 = np.asarray(ref, np.float64)
    _sum_close(fv.sum(v, axis=axis), r64, axis, dt, "sum")
    _sum_close(fv.mean(v, axis=axis), r64, axis, dt, "mean")
    assert_bits(np.asarray(fv.max(v, axis=axis)), np.asarray(np.max(r64, axis=axis).astype(dt)))
    assert_bits(np.asarray(fv.min(v, axis=axis)), np.asarray(np.min(r64, axis=axis).astype(dt)))
    if not isinstance(axis, tuple):
        assert_bits(fv.argmax(v, axis=axis), np.argmax(r64, axis=axis))
        assert_bits(fv.argmin(v, axis=axis), np.argmin(r64, axis=axis))


@pytest.mark.parametrize("texel", [True, False], ids=["texel", "ssbo"])
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_load_paths(dt, texel, tex_seen, monkeypatch):
    """Each layout takes the load path its alignment allows (and none with texel loads off), with
    the same results: columns as texels (TEX 1), rows as texels (TEX 2), unaligned runs through the
    storage buffer (TEX 0), the row kernel's whole texels with unaligned ends (TEX 1)."""
    from fuelvk.ops import reduction as R
    monkeypatch.setattr(R, "TEXEL_LOADS", texel)
    r = np.random.default_rng(5)
    per = 16 // np.dtype(dt).itemsize
    base = r.integers(-9, 9, size=(40, 3 * per)).astype(dt) + r.uniform(-0.5, 0.5, (40, 3 * per)).astype(dt)
    odd = r.uniform(-1, 1, size=(40, 3 * per + 1)).astype(dt)
    a, ao = fv.asarray(base), fv.asarray(odd)
    flat = r.uniform(-1, 1, size=5000 * per + 8).astype(dt)
    af = fv.asarray(flat)
    cases = [  # (view, reference, axis, TEX of the strided kernels)
        (a[:, :2 * per], base[:, :2 * per], 0, 1),              # columns as texels
        (a[::-1, per:3 * per], base[::-1, per:3 * per], 0, 1),  # the same through a negative stride
        (a[:, 1:2 * per + 1], base[:, 1:2 * per + 1], 0, 0),    # offset by one element
        (af[:40 * per].reshape(40, per), flat[:40 * per].reshape(40, per), 1, 2),   # rows as texels
        (af[1:40 * per + 1].reshape(40, per), flat[1:40 * per + 1].reshape(40, per), 1, 0),
        (ao[:, :2 * per], odd[:, :2 * per], 1, 0),              # rows 3 * per + 1 apart
        (a[:3, :], base[:3, :], 0, 1),                          # d = 3: one pass
        (af[:3000 * per].reshape(3000, per), flat[:3000 * per].reshape(3000, per), 0, 1),  # chunks
        # rows of per / 2 elements, two per texel (f64: rows of 1 element, a size-1 reduced dim: the
        # kept dims are the columns); 41 rows: the last texel is partial (read through x)
        (af[:41 * (per // 2)].reshape(41, per // 2), flat[:41 * (per // 2)].reshape(41, per // 2), 1,
         3 if per > 2 else 0),
        (af[per:per + 48 * (per // 2)].reshape(3, 16, per // 2), flat[per:per + 48 * (per // 2)].reshape(3, 16, per // 2),
         -1, 3 if per > 2 else 1),
        (af[1:1 + 41 * (per // 2)].reshape(41, per // 2), flat[1:1 + 41 * (per // 2)].reshape(41, per // 2), 1, 0),
    ]
    for v, ref, axis, want in cases:
        tex_seen.clear()
        _all_ops(v, ref, axis, dt)
        direct = {t for fam, t in tex_seen if fam.endswith("any_dim")}
        assert direct == {want if texel else 0}, (v.shape, v.strides, v.offset, tex_seen)
    tex_seen.clear()
    monkeypatch.setattr(R, "VALUE_ROW_MAX", SHORT_ROW_MAX)         # a long row on the row kernels
    _all_ops(af[3:-1], flat[3:-1], None, dt)                     # row kernel: ends through x
    assert ("reduce", 1 if texel else 0) in tex_seen, tex_seen
    assert ("arg_reduce_last_dim", 1 if texel else 0) in tex_seen, tex_seen
    tex_seen.clear()
    for op in ("argmax", "argmin"):                              # a reversed row: storage-buffer loads
        assert_bits(getattr(fv, op)(af[-2:2:-1]), getattr(np, op)(flat[-2:2:-1]))
    assert tex_seen == [("arg_reduce_last_dim", 0)] * 2, tex_seen


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_sum_runs_same_bits(dt, tex_seen, monkeypatch):
    """sum / mean add runs of one texel's worth of elements plainly and the runs compensated: the same
    runs on the texel paths (rows TEX 2, columns TEX 1, short rows TEX 3) and on storage-buffer loads,
    so both give the same bits; chunked rows and a ragged last run (storage buffer only) stay close."""
    from fuelvk.ops import reduction as R
    per = 16 // np.dtype(dt).itemsize
    r = np.random.default_rng(15)
    flat = (r.uniform(-1, 1, 9000 * per + 8) * 100).astype(dt)
    af = fv.asarray(flat)
    cases = [(af[:50 * 9 * per].reshape(50, 9 * per), 1, 2), (af[:30 * 2 * per].reshape(30, 2 * per), 0, 1),
             (af[:2100 * per].reshape(2100, per), 0, 1), (af[:4 * 1000 * per].reshape(4, 1000 * per), 1, 2)]
    if per > 2:
        cases.append((af[:41 * (per // 2)].reshape(41, per // 2), 1, 3))
    for v, axis, tex in cases:
        got = {}
        for texel in (True, False):
            monkeypatch.setattr(R, "TEXEL_LOADS", texel)
            tex_seen.clear()
            got[texel] = [np.asarray(f(v, axis=axis)) for f in (fv.sum, fv.mean)]
            assert {t for _, t in tex_seen} == {tex if texel else 0}, (v.shape, axis, tex_seen)
        for a, b in zip(got[True], got[False]):
            assert_bits(a, b)
        ref = np.asarray(v.numpy(), np.float64)
        _sum_close(got[True][0], ref, axis, dt, "sum")
    ragged = af[1:1 + 3 * (1000 * per + 3)].reshape(3, 1000 * per + 3)     # unaligned, a partial last run
    _sum_close(fv.sum(ragged, axis=1), np.asarray(ragged.numpy(), np.float64), 1, dt, "sum")


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_load_paths_prod(dt, tex_seen):
    """prod on the texel paths (values near 1: no overflow): columns, rows, short rows, row kernel."""
    per = 16 // np.dtype(dt).itemsize
    flat = np.random.default_rng(8).uniform(0.95, 1.05, size=1280 * per).astype(dt)
    af = fv.asarray(flat)
    for shape, axis in (((300, 4 * per), 0), ((4 * per, 320), 0), ((300, 4 * per), 1), ((600, 2), 1),
                        ((1280 * per,), None)):
        n = math.prod(shape)
        got = fv.prod(af[:n].reshape(shape), axis=axis)
        assert_close(got, np.prod(flat[:n].reshape(shape).astype(np.float64), axis=axis).astype(dt), dt, scale=4)
    assert {t for _, t in tex_seen} == ({1, 2, 3} if per > 2 else {1, 2}), tex_seen


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_arg_long_rows_texel_nan(dt, tex_seen):
    """Rows past SHORT_ROW_MAX (arg_reduce_last_dim) through texels, with ties and NaN in the unaligned
    head, in whole texels and in the tail: the first NaN, else the lowest extreme index."""
    x = np.random.default_rng(9).integers(-50, 50, size=(4, 9001)).astype(dt)
    x[1, [1, 2]] = np.nan           # head of the view x[:, 1:] (row 1 starts one element past a texel)
    x[2, [4000, 4001, 8999]] = np.nan
    x[3, -1] = np.nan               # tail
    a = fv.asarray(x)
    for op in ("argmax", "argmin"):
        want = getattr(torch, op)(torch.tensor(x[:, 1:].astype(np.float64)), dim=1).numpy()
        assert_bits(getattr(fv, op)(a[:, 1:], axis=1), want)
    assert {t for _, t in tex_seen} == {1}, tex_seen


def test_texel_limit_falls_back(tex_seen, device_limits):
    """A slot over maxTexelBufferElements binds a stub view and reads through the storage buffer."""
    x = np.random.default_rng(6).uniform(-1, 1, (64, 16)).astype(np.float32)    # 256 texels
    device_limits(maxTexelBufferElements=100)
    _all_ops(x, x, 0, np.float32)
    _all_ops(x.reshape(-1), x.reshape(-1), None, np.float32)
    assert tex_seen and {t for _, t in tex_seen} == {0}, tex_seen


# -- arg reductions ----------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_arg_all_routes(dt, launched):
    tag = fv.dtypes.FLOAT_TAGS[np.dtype(dt)]
    cases = [((7, 300), -1), ((50, 40), 0), ((2000, 10), 1), ((5, 6, 7), 1), ((3, 4000, 2), 1), ((9,), None),
             ((4, 5, 6), None)]
    for shape, axis in cases:
        x = rng.integers(-20, 20, size=shape).astype(dt)  # many ties
        for op in ("argmax", "argmin"):
            got = getattr(fv, op)(x, axis=axis)
            want = getattr(np, op)(x, axis=axis)
            assert_bits(got, np.asarray(want, np.int64))
    assert f"arg_reduce_any_dim.{tag}" in launched     # (last-dim rows: test_strided_routes)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_arg_nan_and_views(dt):
    x = rng.standard_normal((6, 200)).astype(dt)
    x[2, [5, 9]] = np.nan
    x[4, 150] = np.nan
    for op in ("argmax", "argmin"):
        want = getattr(torch, op)(torch.tensor(x.astype(np.float64)), dim=1).numpy()
        assert_bits(getattr(fv, op)(x, axis=1), want)
        want0 = getattr(torch, op)(torch.tensor(x.astype(np.float64)), dim=0).numpy()
        assert_bits(getattr(fv, op)(x, axis=0), want0)
    a = fv.asarray(x)
    for v, ref in ((a[::2, ::-3], x[::2, ::-3]), (a.T, x.T), (a[1:4, 7:], x[1:4, 7:])):
        for axis in (0, 1, None):
            got = fv.argmax(v, axis=axis)
            want = torch.argmax(torch.tensor(np.ascontiguousarray(ref).astype(np.float64)),
                                dim=axis).numpy()
            assert_bits(got.numpy(), want.reshape(got.shape))


def test_arg_bad_input():
    with pytest.raises(fv.DTypeError, match="argmax"):
        fv.argmax(np.arange(5, dtype=np.int64))        # (<= 32-bit integers go exactly through float64)
    assert fv.argmax(np.int32([3, -7, 9, 9, 1])) == 2
    with pytest.raises(fv.ShapeError, match="axis"):
        fv.argmin(np.zeros((2, 3), np.float32), axis=2)


def test_reduce_bad_input():
    with pytest.raises(fv.DTypeError, match="sum"):
        fv.sum(np.arange(5, dtype=np.int64))     # (<= 32-bit integers sum exactly through float64)
    with pytest.raises(fv.ShapeError, match="repeated"):
        fv.sum(np.zeros((2, 3), np.float32), axis=(1, -1))
    with pytest.raises(fv.ShapeError, match="out of range"):
        fv.max(np.zeros((2, 3), np.float32), axis=3)


# -- cumsum ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_cumsum_axes_and_views(dt, launched):
    x = rng.standard_normal((4, 5, 130)).astype(dt)
    x64 = x.astype(np.float64)
    for axis in (None, 0, 1, 2, -1):
        assert_close(fv.cumsum(x, axis), np.cumsum(x64, axis).astype(dt), dt, scale=4)
    a = fv.asarray(x)
    for v, ref in ((a[:, ::-2, 3:], x64[:, ::-2, 3:]), (a.transpose(2, 0, 1), x64.transpose(2, 0, 1)),
                   (a[1], x64[1])):
        for axis in (0, -1):
            got = fv.cumsum(v, axis)
            assert isinstance(got, fv.Array) and got.is_contiguous
            assert_close(got, np.cumsum(ref, axis).astype(dt), dt, scale=4)
    assert f"cumsum.{fv.dtypes.FLOAT_TAGS[np.dtype(dt)]}" in launched


def test_cumsum_edges():
    for shape in ((0,), (3, 0), (1,), (129,), (2, 1, 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        assert_close(fv.cumsum(x, -1), np.cumsum(x.astype(np.float64), -1).astype(np.float32), np.float32)
    # more outer dims than the kernel's rank, in a layout that does not collapse
    x = rng.standard_normal((2, 3, 2, 3, 2, 3, 4)).astype(np.float32)
    v = fv.asarray(x).transpose(1, 0, 3, 2, 5, 4, 6)
    assert_close(fv.cumsum(v, 6), np.cumsum(x.transpose(1, 0, 3, 2, 5, 4, 6).astype(np.float64), 6)
                 .astype(np.float32), np.float32)
    with pytest.raises(fv.DTypeError, match="cumsum"):
        fv.cumsum(np.arange(3, dtype=np.int64), 0)


def test_cumsum_long_row_accuracy(launched):
    """A 1M axis: one workgroup per slice (lavapipe stops any invocation after 65535 loop iterations)."""
    n = 1 << 20
    x = rng.uniform(0.5, 1.5, size=n).astype(np.float32)
    got = fv.cumsum(x)
    want = torch.cumsum(torch.tensor(x.astype(np.float64)), 0).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-7)
    x2 = rng.uniform(-1, 1, size=(2, 3000)).astype(np.float32)  # few slices: SCAN route too
    assert_close(fv.cumsum(x2, 1), np.cumsum(x2.astype(np.float64), 1).astype(np.float32), np.float32, scale=4)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_sum_signed_zero(dt, launched):
    """The sum of -0s, and of nothing, is +0, as numpy's float16 / 32 / 64 sum (it starts from +0, not from the
    first element) and torch's (bfloat16 included; numpy's bfloat16 sum, ml_dtypes' generic loop, gives -0)
    on every kernel: one row, rows over invocations, leading axes; mean the same. (cumsum, whose numpy
    result is -0 for a slice led by -0s, is test_row_paths.test_cumsum_signed_zero.)"""
    for shape, axis in [((5,), None), ((70000,), None), ((3, 40000), -1), ((64, 300), 0), ((4, 0), -1), ((0,), None)]:
        x = np.full(shape, -0.0, dt)
        for op in ("sum", "mean"):
            if op == "mean" and 0 in shape:
                continue
            got = np.asarray(getattr(fv, op)(fv.asarray(x), axis=axis).numpy())
            want = getattr(torch, op)(torch.tensor(x.astype(np.float32)), dim=axis if axis is not None else list(range(x.ndim))).numpy()
            if np.dtype(dt).name != "bfloat16":
                assert np.array_equal(np.signbit(getattr(np, op)(x, axis=axis)), np.signbit(want))
            assert got.shape == want.shape and np.array_equal(np.signbit(got), np.signbit(want)) and not (got != 0).any(), (shape, axis, op)
    assert {v.split(".")[0] for v in launched} >= {"reduce_any_dim"}, launched
