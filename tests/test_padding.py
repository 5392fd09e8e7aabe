"""pad (constant / reflect / edge) bit for bit against numpy.pad, and pad_backward against torch autograd.

pad_backward of reflect / edge sums every padded copy of an element (a gather, no atomics): the
contention test maps every output element onto one input element and checks the exact sum.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from oracles import assert_bits, assert_close

WIDTHS = [np.dtype(np.bool_), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
MODES = ["constant", "reflect", "edge"]
TORCH_MODE = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}


def bits(shape, dt, rng):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize, dtype=np.uint8).view(dt).reshape(shape)


def np_pad(a, pw, mode, value=0):
    if mode == "constant":
        return np.pad(a, pw, mode, constant_values=np.asarray(value).astype(a.dtype))
    return np.pad(a, pw, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", WIDTHS + [np.dtype(np.int8), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int64)],
                         ids=str)
def test_pad_forward(dt, mode):
    rng = np.random.default_rng(1)
    a = bits((4, 5, 6), dt, rng)
    value = True if dt == np.bool_ else (-3 if dt.kind == "i" else 1.5)
    for pw in (((1, 2), (0, 3), (3, 1)), 2, (1, 3), ((0, 0), (4, 0), (0, 0)), 0, ((3, 3), (4, 4), (5, 5))):
        got = fv.pad(a, pw, mode, **({"constant_values": value} if mode == "constant" else {}))
        assert_bits(got, np_pad(a, pw, mode, value))


@pytest.mark.parametrize("mode", MODES)
def test_pad_views_and_ranks(mode):
    rng = np.random.default_rng(2)
    a = bits((6, 7), np.float32, rng)
    d = fv.asarray(a)
    for nv, dv in ((a.T, d.T), (a[::-1, 1::2], d[::-1, 1::2]), (a[2:, 3:], d[2:, 3:]),
                   (np.broadcast_to(a[1], (5, 7)), d[1].broadcast_to((5, 7))), (a[None, :, 4], d[None, :, 4])):
        pw = [(min(1, n - 1), min(2, n - 1)) for n in nv.shape]
        assert_bits(fv.pad(dv, pw, mode), np_pad(nv, pw, mode))
    for rank in range(0, 8):
        shape = tuple(int(n) for n in rng.integers(2, 4, size=rank))
        x = bits(shape, np.int16, rng)
        pw = [(int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in range(rank)]
        assert_bits(fv.pad(x, pw if rank else 0, mode), np_pad(x, pw if rank else 0, mode))


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", WIDTHS + [np.dtype(np.int8)], ids=str)
def test_pad_constant_paths(dt, path):
    """pad constant on both load paths: empty sources (all fill, nothing to read), sub-word outputs,
    strided views, fill rows above rank 6."""
    rng = np.random.default_rng(5)
    value = True if dt == np.bool_ else (-3 if dt.kind == "i" else np.nan)
    a = bits((5, 9), dt, rng)
    d = fv.asarray(a)
    for nv, dv, pw in ((a, d, ((2, 1), (3, 4))), (a[::-2, 1::3], d[::-2, 1::3], ((0, 3), (5, 0))),
                       (a[1:2, 4:5], d[1:2, 4:5], ((0, 0), (1, 1))), (a[:, :0], d[:, :0], ((1, 0), (2, 1))),
                       (a[:0], d[:0], 1), (a[:, 3], d[:, 3], (0, 0))):
        assert_bits(fv.pad(dv, pw, constant_values=value), np_pad(nv, pw, "constant", value))
    x = bits((2, 1, 2, 1, 2, 1, 3), dt, rng)
    pw = ((1, 1), (0, 1), (1, 0), (0, 0), (1, 0), (0, 1), (2, 5))
    assert_bits(fv.pad(x, pw, constant_values=value), np_pad(x, pw, "constant", value))


@pytest.mark.parametrize("n", [0, 1, 7, 1023, 1025])
def test_pad_sizes(n):
    a = np.arange(n, dtype=np.float32)
    assert_bits(fv.pad(a, (2, 3), constant_values=np.nan), np.pad(a, (2, 3), constant_values=np.nan))
    if n:
        assert_bits(fv.pad(a, (n + 2, 1), "edge"), np.pad(a, (n + 2, 1), "edge"))
    if n > 3:
        assert_bits(fv.pad(a, (n - 1, 3), "reflect"), np.pad(a, (n - 1, 3), "reflect"))


def test_pad_large_image():
    a = np.random.default_rng(3).standard_normal((3, 600, 800)).astype(np.float32)
    for mode in MODES:
        assert_bits(fv.pad(a, ((0, 0), (17, 5), (9, 31)), mode), np.pad(a, ((0, 0), (17, 5), (9, 31)), mode))


def test_pad_errors():
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(fv.ShapeError, match=r"pad: reflect padding needs pads < the dimension.*axis 0 has size 3"):
        fv.pad(a, ((3, 0), (1, 1)), "reflect")
    with pytest.raises(fv.ShapeError, match="pad_width .* does not fit an array of rank 2"):
        fv.pad(a, ((1, 1), (1, 1), (1, 1)))
    with pytest.raises(fv.ShapeError, match="does not fit"):
        fv.pad(a, (1, 2, 3))
    with pytest.raises(fv.ShapeError, match=">= 0"):
        fv.pad(a, -1)
    with pytest.raises(fv.DTypeError, match="pad_width must be integers"):
        fv.pad(a, 1.5)
    with pytest.raises(fv.ShapeError, match="mode 'wrap' is not supported"):
        fv.pad(a, 1, "wrap")
    with pytest.raises(fv.ShapeError, match="edge padding of the empty axis"):
        fv.pad(np.zeros((0, 2), np.float32), 1, "edge")
    with pytest.raises(fv.DTypeError, match="fill value must be a real scalar"):
        fv.pad(a, 1, constant_values=(1, 2))


# -- backward -------------------------------------------------------------------------------------
def torch_pad_grad(in_shape, pw, mode, g):
    """d pad(x)/dx applied to g, via torch autograd in float64."""
    x = torch.zeros(in_shape, dtype=torch.float64, requires_grad=True)
    flat = [p for b, a in reversed(pw) for p in (b, a)]
    if mode == "constant":
        y = torch.nn.functional.pad(x, flat)
    else:   # torch's reflect/replicate want a batch dim and (N, C, ...) layout: pad over all dims via views
        y = torch.nn.functional.pad(x[None, None], flat, mode=TORCH_MODE[mode])[0, 0]
    y.backward(torch.from_numpy(g.astype(np.float64)))
    return x.grad.numpy()


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_pad_backward_atomic_modes(dt, mode, path, launched):
    """Both load paths (grad_out through texels or the storage buffer); rows in the outer pads' bands
    (several preimage rows) and the others (one), strided gradient views."""
    rng = np.random.default_rng(4)
    in_shape, pw = (5, 6, 7), ((1, 2), (3, 2), (0, 6))
    out_shape = tuple(n + b + a for n, (b, a) in zip(in_shape, pw))
    g = rng.uniform(-1, 1, size=out_shape).astype(dt)
    want = torch_pad_grad(in_shape, pw, mode, g)
    assert_close(fv.pad_backward(g, pw, mode), want.astype(dt), dt, scale=4)
    # strided gradient views
    gd = fv.asarray(np.ascontiguousarray(g.transpose(2, 0, 1))).transpose(1, 2, 0)
    assert_close(fv.pad_backward(gd, pw, mode), want.astype(dt), dt, scale=4)
    g2 = rng.uniform(-1, 1, size=(out_shape[0], 2 * out_shape[1], out_shape[2])).astype(dt)
    assert_close(fv.pad_backward(fv.asarray(g2)[:, ::-2], pw, mode),
                 torch_pad_grad(in_shape, pw, mode, g2[:, ::-2]).astype(dt), dt, scale=4)
    fam = f"pad_backward_{'reflect' if mode == 'reflect' else 'replicate'}{'' if path == 'texel' else '_ssbo'}."
    assert any(i.startswith(fam) for i in launched), launched


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_pad_backward_long_rows(dt, mode, path, launched):
    """Rows longer than several runs (64 bytes of grad_in per invocation): runs whose columns each have
    one source take the straight-line path, runs with mirrors / edge runs and a row's ragged last run
    the general one; rows in the outer pads' bands take the odometer."""
    rng = np.random.default_rng(5)
    in_shape, pw = (4, 2, 101), ((1, 1), (0, 0), (2, 3))
    g = rng.uniform(-1, 1, size=tuple(n + b + a for n, (b, a) in zip(in_shape, pw))).astype(dt)
    want = torch_pad_grad(in_shape, pw, mode, g)
    assert_close(fv.pad_backward(g, pw, mode), want.astype(dt), dt, scale=4)
    # columns 3..96 of a row with one source row (reflect: row 0; edge: row 1) have one source each:
    # exactly that gradient element
    r = 0 if mode == "reflect" else 1
    assert_bits(fv.pad_backward(g, pw, mode)[r, :, 3:97], g[r + 1, :, 5:99])
    fam = f"pad_backward_{'reflect' if mode == 'reflect' else 'replicate'}{'' if path == 'texel' else '_ssbo'}."
    assert any(i.startswith(fam) for i in launched), launched


def test_pad_backward_contention_loses_nothing():
    """Every output element maps onto the same input element: the sum must be exact."""
    for dt in (np.float32, np.float64):
        g = np.ones((1, 301, 257), dt)      # fan-in 77357: one pass per padded dim
        got = fv.pad_backward(g, ((0, 0), (150, 150), (128, 128)), "edge")
        assert got.shape == (1, 1, 1) and got.item() == 301 * 257
        g = np.ones((61, 41), dt)           # fan-in 2501: one pass over both dims
        assert fv.pad_backward(g, ((30, 30), (20, 20)), "edge").item() == 61 * 41
    g = np.random.default_rng(7).uniform(-1, 1, (2, 201, 203)).astype(np.float16)
    want = torch_pad_grad((2, 1, 1), ((0, 0), (100, 100), (101, 101)), "edge", g)
    assert_close(fv.pad_backward(g, ((0, 0), (100, 100), (101, 101)), "edge"), want.astype(np.float16), np.float16)
    g = np.random.default_rng(5).integers(-8, 8, size=(2, 1000)).astype(np.float32)
    got = fv.pad_backward(g, ((0, 0), (600, 399)), "edge")
    assert_bits(got, g.sum(1, keepdims=True).astype(np.float32))
    # reflect of 3 elements by (2, 2): out = x2 x1 | x0 x1 x2 | x1 x0 -> counts 2, 3, 2
    assert_bits(fv.pad_backward(np.ones(7, np.float32), (2, 2), "reflect"), np.array([2, 3, 2], np.float32))


@pytest.mark.parametrize("dt", WIDTHS + [np.dtype(np.int8), np.dtype(ml_dtypes.bfloat16)], ids=str)
def test_pad_backward_const(dt):
    rng = np.random.default_rng(6)
    g = bits((7, 8, 9), dt, rng)
    pw = ((1, 2), (0, 3), (4, 4))
    assert_bits(fv.pad_backward(g, pw, "constant"), g[1:5, 0:5, 4:5])
    assert_bits(fv.pad_backward(fv.asarray(g)[::-1], pw), g[::-1][1:5, 0:5, 4:5])
    if dt == np.float32:
        ones = np.ones_like(g)
        assert_close(fv.pad_backward(ones, pw, "constant"), torch_pad_grad((4, 5, 1), pw, "constant", ones))


@pytest.mark.parametrize("n", [1, 2, 5, 1025])
def test_pad_backward_sizes(n):
    g = np.random.default_rng(n).standard_normal(n + 3).astype(np.float32)
    assert_close(fv.pad_backward(g, (1, 2), "edge"), torch_pad_grad((n,), ((1, 2),), "edge", g).astype(np.float32))
    if n > 2:
        assert_close(fv.pad_backward(g, (1, 2), "reflect"),
                     torch_pad_grad((n,), ((1, 2),), "reflect", g).astype(np.float32))
    assert fv.pad_backward(np.zeros((0, 4), np.float32), ((0, 0), (1, 1)), "edge").shape == (0, 2)


def test_pad_backward_errors():
    g = np.zeros((4, 5), np.float32)
    with pytest.raises(fv.ShapeError, match="pad_backward: pads .* are larger than the gradient's shape"):
        fv.pad_backward(g, ((3, 3), (0, 0)))
    with pytest.raises(fv.ShapeError, match="pad_backward: reflect padding needs pads < the dimension"):
        fv.pad_backward(g, ((2, 1), (0, 0)), "reflect")
    with pytest.raises(fv.UnsupportedError, match="fan-in above 8192"):
        fv.pad_backward(np.zeros((1, 9000), np.float32), ((0, 0), (8999, 0)), "edge")
    with pytest.raises(fv.DTypeError, match="pad_backward: dtype int32 is not supported"):
        fv.pad_backward(np.zeros((4, 5), np.int32), 1, "edge")
    with pytest.raises(fv.ShapeError, match="does not fit an array of rank 2"):
        fv.pad_backward(g, (1, 1, 1))
