"""conv2d: im2col bit-exact vs a numpy im2col (every width, strided/offset x, asymmetric geometry),
conv2d vs torch.nn.functional.conv2d on a table of cases, and typed errors."""
import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fuelvk as fv
from fuelvk.errors import DTypeError, ShapeError
from fuelvk.ops.conv import conv2d, im2col
from oracles import assert_bits, assert_close

rng = np.random.default_rng(11)


def np_im2col(x, kh, kw, stride, pads, dil, groups):
    """Reference patches [B * groups, C / groups * kh * kw, h_out * w_out] (pads: top, bottom, left, right)."""
    b, c, h, w = x.shape
    xp = np.zeros((b, c, h + pads[0] + pads[1], w + pads[2] + pads[3]), x.dtype)
    xp[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + w] = x
    ho = (xp.shape[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (xp.shape[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    cols = np.empty((b, c, kh, kw, ho, wo), x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dil[0]: i * dil[0] + stride[0] * (ho - 1) + 1: stride[0],
                                  j * dil[1]: j * dil[1] + stride[1] * (wo - 1) + 1: stride[1]]
    return cols.reshape(b * groups, c // groups * kh * kw, ho * wo)


IM2COL_CASES = [  # x shape, (kh, kw), stride, padding as (t, b, l, r), dilation, groups
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 4, 7, 6), (3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),
    ((1, 3, 9, 5), (3, 3), (1, 2), (1, 1, 1, 1), (2, 1), 1),
    ((3, 6, 5, 8), (5, 5), (3, 2), (2, 2, 0, 3), (1, 1), 3),
    # patch rows (h_out * w_out) of 49 / 81 / 99: an invocation's span of output words (8 words: 16-64
    # elements by width) enters the next patch row mid-span, padding on both sides of the crossing
    ((2, 3, 7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 9, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    ((2, 2, 12, 11), (3, 2), (1, 1), (1, 0, 2, 1), (2, 1), 1),
]


@pytest.fixture
def im2col_families(monkeypatch):
    """The im2col families launched during the test (`im2col`: x through texels, or `im2col_ssbo`)."""
    ctx, seen = fv.runtime.get(), set()
    real = ctx.launch

    def spy(variant, *a, **k):
        if variant.source == "im2col.comp":
            seen.add(variant.family)
        return real(variant, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16, np.float16, np.float64], ids=str)
def test_im2col_matches_numpy(dt, path, im2col_families):
    """Both load paths (x through texels or the storage buffer), patch rows shorter than an output
    word and outputs smaller than one (1x1)."""
    for shape, k, s, p, d, g in IM2COL_CASES:
        x = rng.standard_normal(shape).astype(dt)
        assert_bits(im2col(x, k, s, p, d, g), np_im2col(x, *k, s, p, d, g))
    # channels-last storage viewed as NCHW, and an offset batch slice: read in place
    shape, k, s, p, d, g = IM2COL_CASES[1]
    nhwc = rng.standard_normal((shape[0] + 1, shape[2], shape[3], shape[1])).astype(dt)
    xa = fv.asarray(nhwc).permute(0, 3, 1, 2)[1:]
    want = np_im2col(np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2)[1:]), *k, s, p, d, g)
    assert_bits(im2col(xa, k, s, p, d, g), want)
    assert im2col_families == {"im2col" if path == "texel" else "im2col_ssbo"}


def test_im2col_empty_image_all_padding():
    """h = 0 with padding: every patch element is padding (zeros), nothing is read from x."""
    x = np.zeros((1, 2, 0, 3), np.float32)
    assert_bits(im2col(x, (2, 3), 1, 1), np_im2col(x, 2, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1))


def test_im2col_large():
    x = rng.standard_normal((2, 8, 33, 31)).astype(np.float32)
    assert_bits(im2col(x, (3, 3), 1, 1), np_im2col(x, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1))


# x shape, w shape, stride, padding, dilation, groups, bias
CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1, True),
    ((2, 4, 9, 7), (6, 2, 3, 3), 2, 1, 1, 2, False),          # groups, stride 2, non-square
    ((2, 6, 10, 10), (6, 1, 3, 3), 1, 1, 1, 6, True),         # depthwise
    ((1, 2, 11, 9), (3, 2, 3, 2), (2, 1), (2, 0), 1, 1, True),  # asymmetric stride / padding
    ((1, 3, 12, 12), (2, 3, 3, 3), 1, 2, 2, 1, False),        # dilation
    ((3, 5, 6, 4), (7, 5, 1, 1), 1, 0, 1, 1, True),           # 1x1 (no im2col)
    ((1, 3, 16, 15), (4, 3, 7, 7), 2, 3, 1, 1, True),         # 7x7 stem
    ((2, 4, 5, 5), (4, 4, 3, 3), 1, "same", 1, 1, False),
    ((1, 4, 6, 6), (2, 4, 2, 2), 1, "valid", 1, 1, True),
    ((3, 6, 5), (2, 3, 3, 3), 1, 1, 1, 1, True),              # unbatched [C, H, W]
]


def _torch_conv(x, w, b, stride, padding, dilation, groups):
    """torch CPU conv2d in x's dtype (bf16 runs through float32 views: numpy has no torch bf16)."""
    bf16 = np.dtype(x.dtype) == ml_dtypes.bfloat16
    t = (lambda a: None if a is None else (torch.from_numpy(np.asarray(a, np.float32)).bfloat16() if bf16
                                           else torch.from_numpy(np.asarray(a))))
    y = F.conv2d(t(x), t(w), t(b), stride, padding, dilation, groups)
    return y.float().numpy().astype(x.dtype) if bf16 else y.numpy()


@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16, np.float16], ids=str)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d_matches_torch(dt, case):
    pytest.importorskip("fuelvk.ops.matmul", reason="conv2d's GEMM is fuelvk.ops.matmul")
    xs, ws, s, p, d, g, has_b = CONV_CASES[case]
    x = rng.standard_normal(xs).astype(dt)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dt)
    b = rng.standard_normal(ws[0]).astype(dt) if has_b else None
    want = _torch_conv(x, w, b, s, p, d, g)
    got = conv2d(fv.asarray(x), fv.asarray(w), None if b is None else fv.asarray(b), s, p, d, g)
    assert isinstance(got, fv.Array) and got.dtype == np.dtype(dt)
    # f32 GEMM accumulation order differs from torch's: tolerance scaled by the reduction length
    kd = ws[1] * ws[2] * ws[3]
    assert_close(got, want, dt, scale=1.0 if dt != np.float32 else 4 * np.sqrt(kd))


def test_conv2d_views_numpy_and_asymmetric_4_pad():
    pytest.importorskip("fuelvk.ops.matmul", reason="conv2d's GEMM is fuelvk.ops.matmul")
    x = rng.standard_normal((2, 5, 7, 4)).astype(np.float32)   # NHWC storage
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    xa = fv.asarray(x).permute(0, 3, 1, 2)
    want = _torch_conv(x.transpose(0, 3, 1, 2), w, None, 1, 1, 1, 1)
    assert_close(conv2d(xa, fv.asarray(w), padding=1), want, scale=20)
    # numpy in -> numpy out; (top, bottom, left, right) padding == torch on an F.pad-ed input
    xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = conv2d(xn, w, padding=(1, 0, 2, 1))
    assert isinstance(got, np.ndarray)
    want = F.conv2d(F.pad(torch.from_numpy(xn), (2, 1, 1, 0)), torch.from_numpy(w)).numpy()
    assert_close(got, want, scale=20)
    assert conv2d(np.zeros((0, 4, 5, 5), np.float32), w).shape == (0, 3, 3, 3)


def test_conv2d_larger():
    pytest.importorskip("fuelvk.ops.matmul", reason="conv2d's GEMM is fuelvk.ops.matmul")
    x = rng.standard_normal((2, 16, 20, 20)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    assert_close(conv2d(x, w, b, padding=1), _torch_conv(x, w, b, 1, 1, 1, 1), scale=50)


def test_bad_input():
    x = np.ones((1, 4, 6, 6), np.float32)
    with pytest.raises(ShapeError, match="expects 6 input channels"):
        conv2d(x, np.ones((2, 3, 3, 3), np.float32), groups=2)       # mismatched channels
    with pytest.raises(ShapeError, match="dividing the 4 input channels"):
        conv2d(x, np.ones((3, 4, 3, 3), np.float32), groups=3)
    with pytest.raises(ShapeError, match="Cout divisible"):
        conv2d(x, np.ones((3, 2, 3, 3), np.float32), groups=2)
    with pytest.raises(ShapeError, match="bias must have shape"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(DTypeError, match="share a dtype"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float16))
    with pytest.raises(DTypeError, match="accepted"):
        conv2d(x.astype(np.int32), np.ones((2, 4, 3, 3), np.int32))
    with pytest.raises(DTypeError, match="conv2d: dtype float64"):
        conv2d(x.astype(np.float64), np.ones((2, 4, 3, 3), np.float64))
    with pytest.raises(ShapeError, match="smaller than the dilated kernel"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), dilation=3)
    with pytest.raises(ShapeError, match="'same' needs stride 1"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), stride=2, padding="same")
    with pytest.raises(ShapeError, match="padding must be"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), padding="full")
    with pytest.raises(ShapeError, match="non-negative"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), padding=-1)
    with pytest.raises(ShapeError, match=">= 1"):
        conv2d(x, np.ones((2, 4, 3, 3), np.float32), stride=0)
    with pytest.raises(ShapeError, match=r"expected x \[B, C, H, W\]"):
        conv2d(np.ones((4, 6), np.float32), np.ones((2, 4, 3, 3), np.float32))
