"""RoPE vs a torch reference (x * cos + rotate_half(x) * sin in float32 / float64, cast back):
bit-exact for every dtype, layout (contiguous, lazy [0,2,1,3] permute, offsets, flips, rank 2..5),
NeoX and GPT-J pairing, partial rotary dims, full and half tables, broadcast tables."""
import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk.errors import DTypeError, ShapeError
from oracles import FLOATS, assert_bits

rng = np.random.default_rng(7)


def torch_rope(x, cos, sin, interleaved=False, rot=None, half=False):
    """The reference: computed in float32 (float64 for f64) from upcast inputs, cast to x's dtype."""
    dt = np.dtype(x.dtype)
    ct = torch.float64 if dt == np.float64 else torch.float32
    up = (lambda a: torch.from_numpy(np.asarray(a).astype(np.float64 if ct == torch.float64 else np.float32)))
    xt, c, s = up(x), up(cos), up(sin)
    rot = rot or xt.shape[-1]
    if half:  # expand half tables to the full HF form
        c, s = ((t.repeat_interleave(2, -1) if interleaved else torch.cat((t, t), -1)) for t in (c, s))
    xr, xp = xt[..., :rot], xt[..., rot:]
    if interleaved:
        rh = torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2)
    else:
        h = rot // 2
        rh = torch.cat((-xr[..., h:], xr[..., :h]), -1)
    y = torch.cat((xr * c + rh * s, xp), -1).numpy()
    return y.astype(dt)


def tables(shape, dt):
    ang = rng.uniform(0, 6.3, shape)
    return np.cos(ang).astype(dt), np.sin(ang).astype(dt)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_layouts(dt, interleaved):
    b, s, h, d = 2, 5, 3, 16
    base = rng.standard_normal((b, s, h, d)).astype(dt)
    cos, sin = tables((s, d), dt)
    c, sn = fv.asarray(cos), fv.asarray(sin)
    cases = {
        "contiguous": (np.ascontiguousarray(base.transpose(0, 2, 1, 3)), None),
        "permute0213": (base.transpose(0, 2, 1, 3), fv.asarray(base).permute(0, 2, 1, 3)),
    }
    big = rng.standard_normal((3, h, s, d)).astype(dt)
    cases["offset"] = (big[1:], fv.asarray(big)[1:])
    cases["flip"] = (big[:, ::-1], fv.asarray(big).flip(1))
    x2 = rng.standard_normal((s, d)).astype(dt)
    cases["rank2"] = (x2, None)
    x5 = rng.standard_normal((2, 2, h, s, d)).astype(dt)
    cases["rank5"] = (x5, fv.asarray(x5))
    cases["rank5_view"] = (x5.transpose(1, 0, 2, 3, 4), fv.asarray(x5).permute(1, 0, 2, 3, 4))
    for name, (xn, xa) in cases.items():
        want = torch_rope(xn, cos, sin, interleaved)
        got = fv.rope(xa if xa is not None else fv.asarray(np.ascontiguousarray(xn)), c, sn, interleaved=interleaved)
        assert isinstance(got, fv.Array), name
        try:
            assert_bits(got, want)
        except AssertionError as e:
            raise AssertionError(f"layout {name}: {e}") from None
    # numpy in -> numpy out
    assert_bits(fv.rope(x2, cos, sin, interleaved=interleaved), torch_rope(x2, cos, sin, interleaved))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_partial_rotary_half_and_broadcast_tables(dt, interleaved):
    b, h, s = 2, 2, 3
    for d, rot in [(16, 8), (10, 4), (9, 4), (2, 2), (12, 12)]:   # incl. odd pass-through tail
        x = rng.standard_normal((b, h, s, d)).astype(dt)
        cos, sin = tables((s, rot), dt)
        assert_bits(fv.rope(x, cos, sin, interleaved=interleaved, rotary_dim=rot),
                    torch_rope(x, cos, sin, interleaved, rot))
        hc, hs = tables((s, rot // 2), dt)                             # half tables
        assert_bits(fv.rope(x, hc, hs, interleaved=interleaved, rotary_dim=rot),
                    torch_rope(x, hc, hs, interleaved, rot, half=True))
        bc, bs = tables((b, 1, s, rot), dt)                            # per-batch positions (HF)
        assert_bits(fv.rope(x, bc, bs, interleaved=interleaved), torch_rope(x, bc, bs, interleaved, rot))


def test_edge_sizes_and_large():
    dt = np.float32
    for shape in [(1, 2), (1, 1, 1, 4), (3, 1, 7, 6)]:
        x = rng.standard_normal(shape).astype(dt)
        cos, sin = tables(shape[-2:], dt)
        assert_bits(fv.rope(x, cos, sin), torch_rope(x, cos, sin))
    empty = fv.rope(np.zeros((2, 0, 8), dt), np.zeros((0, 8), dt), np.zeros((0, 8), dt))
    assert empty.shape == (2, 0, 8)
    x = rng.standard_normal((1, 8, 257, 64)).astype(ml_dtypes.bfloat16)  # > many workgroups
    cos, sin = tables((257, 64), ml_dtypes.bfloat16)
    assert_bits(fv.rope(x, cos, sin), torch_rope(x, cos, sin))


def test_bad_input():
    x = np.ones((2, 4, 8), np.float32)
    c = np.ones((4, 8), np.float32)
    with pytest.raises(DTypeError, match="cos/sin of x's dtype"):
        fv.rope(x, c.astype(np.float16), c.astype(np.float16))
    with pytest.raises(DTypeError, match="accepted"):
        fv.rope(x.astype(np.int32), c.astype(np.int32), c.astype(np.int32))
    with pytest.raises(ShapeError, match="even"):
        fv.rope(x, c[:, :3], c[:, :3])
    with pytest.raises(ShapeError, match="even and in"):
        fv.rope(x, c, c, rotary_dim=10)
    with pytest.raises(ShapeError, match="full tables"):
        fv.rope(x, c[:, :6], c[:, :6], rotary_dim=8)
    with pytest.raises(ShapeError, match="same shape"):
        fv.rope(x, c, c[:3])
    with pytest.raises(ShapeError, match="does not broadcast"):
        fv.rope(x, np.ones((5, 8), np.float32), np.ones((5, 8), np.float32))
    with pytest.raises(ShapeError, match="rank >= 2"):
        fv.rope(np.ones(8, np.float32), c[0], c[0])
    with pytest.raises(ShapeError, match="may vary only"):
        x5 = np.ones((2, 2, 2, 4, 8), np.float32)
        fv.rope(x5, np.ones((2, 1, 1, 4, 8), np.float32), np.ones((2, 1, 1, 4, 8), np.float32))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_heads_per_invocation(dt, interleaved, monkeypatch):
    """Several heads' rows per invocation (tables shared over the heads, on a CPU device: HEADS > 1, the
    table entries read once) and one row per invocation (tables varying over the heads, or a GPU):
    bit-exact on both load paths, for head counts that HEADS does not divide, a permuted x, x offset by
    one element, a partial rotary dim with half tables and a pass-through tail."""
    from fuelvk import runtime
    from fuelvk.kernels.rope import ROPE_CPU_HEADS
    from fuelvk.runtime import loadpath
    ctx = runtime.get()
    heads, orig = [], ctx.launch

    def spy(v, *a, **k):
        heads.append(k["HEADS"])
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    cpu = ctx.device.device_type == "cpu"
    b, h, s = 2, ROPE_CPU_HEADS + 2, 5
    for d, rot, half, tshape, off, perm in [(16, 16, False, (s,), 0, False), (16, 16, False, (s,), 0, True),
                                            (20, 12, True, (s,), 1, False), (16, 16, False, (h, s), 0, False),
                                            (16, 16, False, (b, 1, s), 1, True)]:
        n = b * h * s * d
        flat = rng.standard_normal(n + off).astype(dt)
        if perm:      # [b, s, h, d] viewed as [b, h, s, d]
            xn = flat[off:].reshape(b, s, h, d).transpose(0, 2, 1, 3)
            xa = fv.asarray(flat)[off:].reshape(b, s, h, d).permute(0, 2, 1, 3)
        else:
            xn = flat[off:].reshape(b, h, s, d)
            xa = fv.asarray(flat)[off:].reshape(b, h, s, d)
        cos, sin = tables(tshape + (rot // 2 if half else rot,), dt)
        want = torch_rope(xn, cos, sin, interleaved, rot, half)
        shared = len(tshape) != 2
        for flag in ("1", "0"):
            monkeypatch.setenv(loadpath.ENV, flag)
            heads.clear()
            got = fv.rope(xa, cos, sin, interleaved=interleaved, rotary_dim=rot)
            assert_bits(got, want)
            assert heads == [ROPE_CPU_HEADS if shared and cpu else 1], (tshape, heads)
    monkeypatch.setattr(ctx.device, "device_type", "discrete")      # a GPU: one row per invocation
    heads.clear()
    assert_bits(fv.rope(xa, cos, sin, interleaved=interleaved), torch_rope(xn, cos, sin, interleaved))
    assert heads == [1]
