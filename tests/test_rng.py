"""Random numbers on the device (shaders/rng.comp, Philox4x32-10) and the torch device's dropout, whose
masks it draws: bits against a host Philox (checked on Random123's known answers), keep rates within
binomial bounds, scaling, the backward's reuse of the mask, reproducibility under torch.manual_seed."""
import math

import numpy as np
import pytest

import fuelvk as fv
from fuelvk.ops import rng

M = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Random123's philox4x32_10 on the host (the oracle)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M, p1 & M, ((p0 >> 32) ^ c3 ^ k1) & M, p0 & M
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return [c0, c1, c2, c3]


def test_host_philox_matches_random123_known_answers():
    assert philox4x32_10([0] * 4, [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10([M] * 4, [M, M]) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


@pytest.mark.parametrize("n, key, ctr", [(8, 0, 0), (37, (0x299F31D0 << 32) | 0xA4093822, 5), (1, 2 ** 64 - 1, M)])
def test_words_are_philox_bit_for_bit(n, key, ctr):
    got = rng.philox_words(n, key, ctr).numpy()
    want = [w for i in range(-(-n // 4)) for w in philox4x32_10([i, ctr, 0, 0], [key & M, key >> 32])][:n]
    assert got.dtype == np.uint32 and got.tolist() == want


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_keep_mask_rate_and_bits(keep):
    """The mask is word < round(keep * 2^32) of the same words; its rate is within 5 sigma of keep."""
    n, key = 20011, 77
    mask = rng.keep_mask((n,), keep, key).numpy()
    assert mask.dtype == np.bool_ and mask.shape == (n,)
    thr = min(round(keep * 2 ** 32), M)
    words = rng.philox_words(n, key).numpy()
    want = np.ones(n, bool) if keep == 1.0 else words < thr
    assert (mask == want).all()
    sigma = math.sqrt(n * keep * (1 - keep))
    assert abs(int(mask.sum()) - n * keep) <= 5 * sigma + 1e-9


def test_keep_mask_errors():
    with pytest.raises(fv.ShapeError, match="outside"):
        rng.keep_mask((4,), 1.5, 0)
    with pytest.raises(fv.ShapeError, match="64-bit"):
        rng.philox_words(4, -1)


# -- the torch device's dropout ------------------------------------------------------------------------
def _dropout(x, p, seed):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    return torch.nn.functional.dropout(x, p, True)


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_on_the_device(p):
    """Keep rate within binomial bounds, kept values scaled by exactly 1 / (1 - p), the backward reusing
    the forward's mask, the same seed giving the same mask and the next call a new one."""
    torch = pytest.importorskip("torch")
    import fuelvk.torch as ft
    ft.reset_fallback_stats()
    x = (torch.rand(64, 129) + 0.5).to("fuelvk").requires_grad_()   # no zeros: a zero output is a drop
    out = _dropout(x, p, 3)
    (out * 2).sum().backward()
    o, g, xc = out.detach().cpu(), x.grad.cpu(), x.detach().cpu()
    kept = o != 0
    n, keep = kept.numel(), 1 - p
    assert abs(int(kept.sum()) - n * keep) <= 5 * math.sqrt(n * keep * p)
    torch.testing.assert_close(o[kept], xc[kept] * (1 / keep), rtol=0, atol=0)
    torch.testing.assert_close(g, kept.float() * (2 / keep), rtol=0, atol=0)   # the same mask
    with torch.no_grad():
        again, other = _dropout(x, p, 3).cpu(), _dropout(x, p, 4).cpu()
        nxt = torch.nn.functional.dropout(x, p, True).cpu()
    torch.testing.assert_close(again, o, rtol=0, atol=0)
    assert not torch.equal(other != 0, kept) and not torch.equal(nxt != 0, other != 0)
    assert ft.fallback_stats() == {}


def test_dropout_eval_and_edges():
    torch = pytest.importorskip("torch")
    import fuelvk.torch  # noqa: F401
    x = torch.randn(5, 7).to("fuelvk")
    drop = torch.nn.Dropout(0.4).to("fuelvk").eval()
    torch.testing.assert_close(drop(x).cpu(), x.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(_dropout(x, 0.0, 0).cpu(), x.cpu(), rtol=0, atol=0)
    assert not _dropout(x, 1.0, 0).cpu().any()
    half = _dropout(torch.ones(4, 8, dtype=torch.bfloat16).to("fuelvk"), 0.5, 0).cpu()
    assert half.dtype == torch.bfloat16 and set(half.unique().tolist()) <= {0.0, 2.0}
