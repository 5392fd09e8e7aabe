"""softmax (+ backward), rms_norm (+ backward), layer_norm (+ backward) against torch CPU in float64.

Forward references: torch on float64 copies of the (rounded) inputs; backward references:
torch.autograd on float64. Tolerances: the per-dtype table, scaled for the output magnitude.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fuelvk as fv
from oracles import FLOATS, TOL, assert_close

rng = np.random.default_rng(99)
IDS = [str(d) for d in FLOATS]
TAGS = fv.dtypes.FLOAT_TAGS


def t64(a, grad=False):
    return torch.tensor(np.asarray(a).astype(np.float64), requires_grad=grad)


def close(got, want, dt, scale=1.0):
    """assert_close with atol scaled to the reference magnitude (outputs are rounded to dt)."""
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    r, a = TOL[np.dtype(dt)]
    mag = max(1.0, float(np.nanmax(np.abs(want)))) if np.isfinite(want).any() else 1.0
    got = got.numpy() if isinstance(got, fv.Array) else np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=r * 2 * scale, atol=a * mag * 4 * scale,
                               equal_nan=True)


SHAPES = [(5, 1), (3, 7), (4, 129), (2, 3, 300), (1, 1000)]


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_softmax_forward_backward(dt, launched):
    for shape in SHAPES:
        x = (rng.standard_normal(shape) * 3).astype(dt)
        g = rng.standard_normal(shape).astype(dt)
        for axis in (-1, 0):
            xt = t64(x, True)
            y = torch.softmax(xt, axis)
            close(fv.softmax(x, axis), y, dt)
            yd = y.detach().numpy().astype(dt)  # backward from the rounded y, as a caller would
            yt = t64(yd)
            want = yt * (t64(g) - (yt * t64(g)).sum(axis, keepdim=True))
            got = fv.softmax_backward(yd, g, axis)
            close(got, want, dt)
            if dt == np.float64:  # y is exact in f64: compare with autograd directly
                ref = torch.autograd.grad(torch.softmax(xt, axis), xt, t64(g))[0]
                close(got, ref, dt)
    tag = TAGS[np.dtype(dt)]
    assert f"softmax.{tag}" in launched and f"softmax_last_dim_backward.{tag}" in launched


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_softmax_stability(dt):
    big = 6e4 if dt == np.float16 else 1e4
    x = np.array([[big, big - 1, -big, 0.0],
                  [-np.inf, 1.0, -np.inf, 2.0],
                  [-np.inf] * 4,
                  [np.inf, 0.0, 1.0, 2.0]]).astype(dt)
    got = np.asarray(fv.softmax(x), np.float64)
    want = torch.softmax(t64(x), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # all -inf / +inf rows: NaN (torch)
    assert np.isnan(got[2]).all()
    ok = ~np.isnan(want)
    r, a = TOL[np.dtype(dt)]
    np.testing.assert_allclose(got[ok], want[ok], rtol=2 * r, atol=a)


def test_softmax_views_and_layout():
    x = rng.standard_normal((6, 8, 10)).astype(np.float32)
    a = fv.asarray(x)
    v = a[::2, 1:, ::-1]
    got = fv.softmax(v, axis=1)
    assert isinstance(got, fv.Array) and got.is_contiguous and got.shape == v.shape
    close(got, torch.softmax(t64(x[::2, 1:, ::-1].copy()), 1), np.float32)
    assert fv.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_rms_norm(dt, launched):
    for shape in SHAPES:
        n = shape[-1]
        x = rng.standard_normal(shape).astype(dt)
        g = rng.standard_normal(shape).astype(dt)
        w = rng.standard_normal(n).astype(dt)
        for weight in (None, w):
            xt, wt = t64(x, True), (t64(weight, True) if weight is not None else None)
            y = F.rms_norm(xt, (n,), wt, eps=1e-6)
            close(fv.rms_norm(x, 1e-6, weight), y, dt)
            y.backward(t64(g))
            got = fv.rms_norm_backward(x, g, 1e-6, weight)
            if weight is None:
                close(got, xt.grad, dt, scale=2)
            else:
                close(got[0], xt.grad, dt, scale=2)
                close(got[1], wt.grad, dt, scale=2)
    tag = TAGS[np.dtype(dt)]
    assert f"rms_norm_last_dim.{tag}" in launched and f"rms_norm_last_dim_backward.{tag}" in launched


@pytest.mark.parametrize("dt", [np.float16, "bfloat16"], ids=["float16", "bfloat16"])
def test_norm_eps_in_compute_type(dt):
    """eps is not rounded to a half type (torch's norms take it in their f32 compute type): rows whose
    x^2 is near eps=1e-6, where float16's 1.013e-6 was 0.3% off forward and 1.3% off backward."""
    dt = fv.dtypes.dtype(dt) if isinstance(dt, str) else np.dtype(dt)
    x = np.array([[0.001], [0.0153], [-0.002], [0.0007]]).astype(dt)
    g = np.array([[1.0], [-1.0], [0.5], [2.0]]).astype(dt)
    r = TOL[dt][0]   # the output's rounding; the old eps was off by more (float16: 3x r forward)
    xt = t64(x, True)
    y = F.rms_norm(xt, (1,), None, eps=1e-6)
    y.backward(t64(g))
    np.testing.assert_allclose(np.asarray(fv.rms_norm(x, 1e-6), np.float64), y.detach().numpy(), rtol=r)
    np.testing.assert_allclose(np.asarray(fv.rms_norm_backward(x, g, 1e-6), np.float64), xt.grad.numpy(),
                               rtol=2 * r)
    xl = np.array([[0.001, -0.001], [0.01, 0.012]]).astype(dt)
    want = F.layer_norm(t64(xl), (2,), eps=1e-6).numpy()
    np.testing.assert_allclose(np.asarray(fv.layer_norm(xl, 1e-6), np.float64), want, rtol=2 * r)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_layer_norm(dt, launched):
    for shape in SHAPES:
        n = shape[-1]
        x = (rng.standard_normal(shape) + 3).astype(dt)  # non-zero mean: the two-pass variance matters
        g = rng.standard_normal(shape).astype(dt)
        w, b = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
        for weight, bias in ((None, None), (w, b), (None, b), (w, None)):
            xt = t64(x, True)
            wt = t64(weight, True) if weight is not None else None
            bt = t64(bias, True) if bias is not None else None
            y = F.layer_norm(xt, (n,), wt, bt, eps=1e-5)
            close(fv.layer_norm(x, 1e-5, weight, bias), y, dt)
            y.backward(t64(g))
            got = fv.layer_norm_backward(x, g, 1e-5, weight, bias)
            if weight is None and bias is None:
                close(got, xt.grad, dt, scale=2)
                continue
            dx, dw, db = got
            close(dx, xt.grad, dt, scale=2)
            assert (dw is None) == (weight is None) and (db is None) == (bias is None)
            if dw is not None:
                close(dw, wt.grad, dt, scale=2)
            if db is not None:
                close(db, bt.grad, dt, scale=2)
    tag = TAGS[np.dtype(dt)]
    assert f"layer_norm_last_dim.{tag}" in launched and f"layer_norm_last_dim_backward.{tag}" in launched


def test_weight_grads_many_rows():
    """More rows than weight-gradient groups: several rows per workgroup, partials reduced after."""
    x = rng.standard_normal((1100, 8)).astype(np.float32)
    g = rng.standard_normal((1100, 8)).astype(np.float32)
    w, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    xt, wt, bt = t64(x, True), t64(w, True), t64(b, True)
    F.layer_norm(xt, (8,), wt, bt, eps=1e-5).backward(t64(g))
    dx, dw, db = fv.layer_norm_backward(x, g, 1e-5, w, b)
    close(dx, xt.grad, np.float32, 2)
    close(dw, wt.grad, np.float32, 4)
    close(db, bt.grad, np.float32, 4)
    xt, wt = t64(x, True), t64(w, True)
    F.rms_norm(xt, (8,), wt, eps=1e-6).backward(t64(g))
    dx, dw = fv.rms_norm_backward(x, g, 1e-6, w)
    close(dw, wt.grad, np.float32, 4)


def test_norm_views_offsets_and_empty():
    x = rng.standard_normal((9, 40)).astype(np.float32)
    a = fv.asarray(x)
    wa = fv.asarray(rng.standard_normal(80).astype(np.float32))[::2]
    got = fv.rms_norm(a[2:, 3:33], 1e-6, wa[3:33])
    close(got, F.rms_norm(t64(x[2:, 3:33]), (30,), t64(wa.numpy()[3:33]), eps=1e-6), np.float32)
    assert fv.layer_norm(np.zeros((0, 4), np.float32)).shape == (0, 4)
    dx, dw, db = fv.layer_norm_backward(np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32), 1e-5,
                                        np.ones(4, np.float32), np.ones(4, np.float32))
    assert dx.shape == (0, 4) and (dw == 0).all() and (db == 0).all()


@pytest.mark.parametrize("op", ["softmax", "rms_norm", "layer_norm"])
def test_long_row(op):
    """A 1M-element row: compensated + tree-reduced sums stay within tolerance of float64 torch."""
    n = 1 << 20
    x = rng.uniform(-2, 2, size=(1, n)).astype(np.float32) + (2.0 if op == "layer_norm" else 0.0)
    xt = t64(x)
    want = {"softmax": lambda: torch.softmax(xt, -1), "rms_norm": lambda: F.rms_norm(xt, (n,), eps=1e-6),
            "layer_norm": lambda: F.layer_norm(xt, (n,), eps=1e-5)}[op]()
    got = getattr(fv, op)(x)
    np.testing.assert_allclose(got.astype(np.float64), want.numpy(), rtol=2e-6,
                               atol=1e-6 * float(np.abs(want.numpy()).max()))


def test_bad_input():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(fv.ShapeError, match=r"weight has shape \(5,\)"):
        fv.rms_norm(x, 1e-6, np.ones(5, np.float32))
    with pytest.raises(fv.DTypeError, match="weight has dtype float16"):
        fv.layer_norm(x, 1e-5, np.ones(4, np.float16))
    with pytest.raises(fv.ShapeError, match="grad has shape"):
        fv.softmax_backward(x, np.zeros((3, 5), np.float32))
    with pytest.raises(fv.ShapeError, match="grad has shape"):
        fv.layer_norm_backward(x, np.zeros((4, 3), np.float32))
    with pytest.raises(fv.DTypeError, match="softmax"):
        fv.softmax(np.zeros(3, np.int32))
    with pytest.raises(fv.ShapeError, match="axis"):
        fv.softmax(x, axis=2)
    with pytest.raises(fv.ShapeError, match="0-d"):
        fv.rms_norm(np.float32(1.0))
    assert_close(fv.softmax(np.zeros(3, np.float32)), np.full(3, 1 / 3, np.float32), np.float32)
