"""fp8_block_matmul (shaders/fp8_block_matmul.comp, fuelvk/ops/moe.py): the MoE solution's kernel,
x @ W.T with W float8_e4m3fn dequantized per element by its block's float32 scale inside the kernel.

Oracle: torch CPU in float64 on the expanded weight (fp8 -> float64 exactly, times the scale).
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import DTypeError, ShapeError
from fuelvk.ops.moe import fp8_block_matmul


def _stack(e, n, k, seed=0, every_byte=True):
    """(fp8 stack [e, n, k] as torch, as a fuelvk Array): randn clamped as FlashInfer-Bench draws it;
    with every_byte, expert 0's first rows hold all 256 codes (subnormals, +-448, both NaNs, -0)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(e, n, k, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    if every_byte:
        codes = torch.arange(256, dtype=torch.uint8)
        w.view(torch.uint8)[0].view(-1)[:256] = codes
    return w, fv.asarray(w.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn))


def _expand(w, s, bn, bk):
    n, k = w.shape
    rows = torch.arange(n) // bn
    cols = torch.arange(k) // bk
    return w.double() * s.double()[rows][:, cols]


def _check(got, x, w, s, bn, bk):
    ref = x.double() @ _expand(w, s, bn, bk).T
    bound = x.double().abs() @ _expand(w, s, bn, bk).abs().nan_to_num(0).T   # f32 summation error scale
    nan = torch.isnan(ref).numpy()
    assert (np.isnan(got) == nan).all()
    err = np.abs(got[~nan] - ref.numpy()[~nan])
    k = x.shape[1]   # f32 summation of k products: |error| <= k * 2^-24 * sum |terms| (and the dequant rounding)
    assert (err <= (k + 2) * 2.0**-24 * bound.numpy()[~nan]).all(), err.max()


@pytest.mark.parametrize("block,k", [(128, 262), ((64, 128), 260), ((32, 96), 256)])
def test_matches_float64_expansion(block, k):
    """Each expert of a stack, partial edge blocks, every fp8 code; x @ W.T against the float64
    product of the expanded weight.  k picks the load path: 262 bytes (expert views not word-aligned),
    260 32-bit words, 256 16-byte texels."""
    bn, bk = (block, block) if isinstance(block, int) else block
    e, n, m = 3, 150, 5
    w, wd = _stack(e, n, k)
    g = torch.Generator().manual_seed(1)
    s = torch.rand(e, -(-n // bn), -(-k // bk), generator=g) + 0.25
    x = torch.randn(m, k, generator=g)
    sd, xd = fv.asarray(s.numpy()), fv.asarray(x.numpy())
    for i in range(e):
        got = fp8_block_matmul(xd, wd[i], sd[i], block).numpy()
        assert got.shape == (m, n) and got.dtype == np.float32
        _check(got, x, w[i], s[i], bn, bk)


def test_k_split_by_the_loop_budget(monkeypatch):
    """A device loop budget under K: the sum runs in K spans (float32 partials), same result."""
    w, wd = _stack(1, 40, 512, seed=2, every_byte=False)
    s = torch.rand(1, 1, 4) + 0.5
    x = torch.randn(3, 512)
    whole = fp8_block_matmul(fv.asarray(x.numpy()), wd[0], fv.asarray(s[0].numpy())).numpy()
    dev = runtime.get().device
    assert dev.loop_budget is None or dev.loop_budget > 1000   # probed first: the monkeypatch restores it
    monkeypatch.setattr(dev, "loop_budget", 100)
    split = fp8_block_matmul(fv.asarray(x.numpy()), wd[0], fv.asarray(s[0].numpy())).numpy()
    _check(split, x, w[0], s[0], 128, 128)
    np.testing.assert_allclose(split, whole, rtol=1e-5, atol=1e-4)


def test_a_stack_over_one_binding_binds_one_expert(device_limits):
    """The expert stack is larger than one binding (shrunk to 256 KiB here; the dataset's 402 MB
    gemm1 stack is over lavapipe's 128 MiB): each expert's bytes are bound as a window."""
    w, wd = _stack(6, 256, 384, seed=3, every_byte=False)        # 6 x 96 KiB
    s = torch.rand(6, 2, 3) + 0.5
    x = torch.randn(2, 384)
    device_limits(maxStorageBufferRange=1 << 18)
    for i in (0, 5):
        got = fp8_block_matmul(fv.asarray(x.numpy()), wd[i], fv.asarray(s[i].numpy())).numpy()
        _check(got, x, w[i], s[i], 128, 128)


def test_empty_and_bad_inputs():
    _, wd = _stack(1, 128, 128, every_byte=False)
    s = fv.asarray(np.ones((1, 1), np.float32))
    assert fp8_block_matmul(np.zeros((0, 128), np.float32), wd[0], s).shape == (0, 128)
    with pytest.raises(DTypeError, match="float8_e4m3fn"):
        fp8_block_matmul(np.zeros((2, 128), np.float32), np.zeros((128, 128), np.float32), s)
    with pytest.raises(DTypeError, match="x float32"):
        fp8_block_matmul(np.zeros((2, 128), np.float16), wd[0], s)
    with pytest.raises(ShapeError, match=r"scale .* must be \(2, 1\)"):
        fp8_block_matmul(np.zeros((2, 128), np.float32), wd[0], s, block=(64, 128))
    with pytest.raises(ShapeError, match="x \\[M, K\\]"):
        fp8_block_matmul(np.zeros((2, 64), np.float32), wd[0], s)
