"""scaled_dot_product_attention (+ backward, attention_route) against a float64 torch reference.

The reference is written here in plain torch math (scores, bottom-right aligned masks, ALiBi,
softcap, softmax; autograd for the backward), and checked itself against torch SDPA where the two
semantics coincide. The shape matrix of issue 7 (GQA 1/4/8, Sq 1/7/128/513, Sk 1/9/4096/5000,
D 32/64/80/128/256, causal, window, ALiBi [Hq] and [B, Hq], softcap, f32/f16/bf16) is covered by
a list of cases in which every value appears, each case run on both forward routes; long-Sk cases
keep B * H small. Tolerances: the per-dtype table of oracles.py; f32 results are scaled up for
f32 accumulation over up to D + Sk terms (FWD_SLACK / BWD_SLACK), half types only round the f32
result once.
"""
import functools
import math

import ml_dtypes
import numpy as np
import pytest
import torch
from oracles import assert_close

import fuelvk as fv
import fuelvk.ops.attention as attention_ops
from fuelvk import runtime
from fuelvk.errors import DTypeError, ShapeError, UnsupportedError
from fuelvk.kernels import FAMILIES
from fuelvk.kernels import attention as attention_kernels
from fuelvk.ops.attention import (
    attention_route,
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)
from fuelvk.runtime import loadpath

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
FWD_SLACK = {F32: 8.0, F16: 1.0, BF16: 1.0}
BWD_SLACK = 32.0
ROUTES = ("single", "tiled", "decode")   # decode: flash_decode's row blocks take any G * Sq (prefill too)
# The kernel tests below check flash-attn's bottom-right causal alignment (ref_forward's); the torch
# contract (top-left, masks, leading dims) has its own tests against torch SDPA.
SDPA = functools.partial(scaled_dot_product_attention, causal_alignment="bottom_right")
BWD = functools.partial(scaled_dot_product_attention_backward, causal_alignment="bottom_right")


# ------------------------------------------------------------------------------------ reference

def ref_forward(q, k, v, is_causal=False, scale=None, window=(-1, -1), alibi_slopes=None, softcap=None):
    """(o, lse) in float64 torch (tensors in, tensors out; differentiable in q, k, v)."""
    Hq, Sq, D = q.shape[1:]
    Hkv, Sk = k.shape[1], k.shape[2]
    k, v = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1)
    s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D) if scale is None else scale)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    rel = torch.arange(Sk)[None, :] - torch.arange(Sq)[:, None] - (Sk - Sq)   # 0 on the bottom-right diagonal
    if alibi_slopes is not None:
        a = torch.as_tensor(np.asarray(alibi_slopes, np.float64))
        s = s - (a[None, :] if a.dim() == 1 else a)[:, :, None, None] * rel.abs()
    wl, wr = window
    wr = 0 if is_causal else wr
    vis = torch.ones(Sq, Sk, dtype=torch.bool)
    if wl >= 0:
        vis &= rel >= -wl
    if wr >= 0:
        vis &= rel <= wr
    s = s.masked_fill(~vis, -math.inf)
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)                                                   # masked -> 0
    lsum = e.sum(-1, keepdim=True)
    o = (e / torch.where(lsum == 0, torch.ones_like(lsum), lsum)) @ v      # rows that see nothing -> 0
    return o, (m + torch.log(lsum)).squeeze(-1)


def t64(x):
    return torch.from_numpy(np.asarray(x).astype(np.float64))


def inputs(B, Hq, Hkv, Sq, Sk, D, dt, seed=0, amp=1.0):
    rng = np.random.default_rng(seed)
    return tuple((amp * rng.standard_normal(s)).astype(dt) for s in ((B, Hq, Sq, D), (B, Hkv, Sk, D), (B, Hkv, Sk, D)))


def check_forward(got, want, dt):
    (o, lse), (wo, wlse) = got, want
    assert o.dtype == dt and lse.dtype == F32
    assert_close(o, wo.numpy(), dt, scale=FWD_SLACK[dt])
    wlse = wlse.numpy()
    assert np.array_equal(np.isneginf(lse), np.isneginf(wlse)), "rows that see no key must have lse = -inf"
    fin = np.isfinite(wlse)
    assert_close(lse[fin], wlse[fin], F32, scale=FWD_SLACK[F32])
    assert np.all(o.astype(np.float32)[~fin] == 0), "rows that see no key must be zeros"


# --------------------------------------------------------------------------------- the reference

def test_reference_matches_torch_sdpa():
    """The plain-torch reference agrees with torch SDPA where their semantics coincide."""
    F = torch.nn.functional
    q, k, v = (t64(x) for x in inputs(2, 4, 2, 9, 9, 16, F32))
    for causal in (False, True):
        want = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), is_causal=causal)
        torch.testing.assert_close(ref_forward(q, k, v, is_causal=causal)[0], want, rtol=1e-12, atol=1e-12)
    q2, k2, v2 = (t64(x) for x in inputs(1, 2, 2, 5, 11, 16, F32, seed=1))   # Sq != Sk, no mask
    for scale in (0.3, -0.7, 0.0):                                              # torch takes any finite scale
        torch.testing.assert_close(ref_forward(q2, k2, v2, scale=scale)[0],
                                   F.scaled_dot_product_attention(q2, k2, v2, scale=scale), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------- forward

# (B, Hq, Hkv, Sq, Sk, D, dtype, options): every value of every axis of the matrix.
CASES = [
    (1, 1, 1, 1, 1, 32, F32, {}),
    (2, 4, 1, 7, 9, 64, F16, {"is_causal": True}),                              # GQA 4, bottom-right causal
    (1, 8, 1, 7, 1, 80, BF16, {"is_causal": True}),                             # GQA 8, 6 rows see nothing
    (1, 2, 2, 128, 9, 128, F32, {"window": (3, 2)}),
    (1, 4, 1, 128, 128, 256, BF16, {"is_causal": True, "softcap": 5.0}),
    (2, 2, 1, 513, 9, 32, F16, {"is_causal": True, "alibi_slopes": [0.5, 0.125]}),
    (1, 8, 1, 1, 4096, 128, F32, {"is_causal": True}),                          # decode, GQA 8
    (1, 8, 1, 1, 4096, 64, BF16, {"alibi_slopes": "bh", "softcap": 3.0}),
    (1, 1, 1, 128, 4096, 80, F16, {"is_causal": True, "window": (700, 0), "alibi_slopes": [0.01]}),
    (1, 4, 1, 7, 1000, 256, F32, {"softcap": 30.0, "scale": 0.5}),             # peaky: max moves across tiles
    (1, 1, 1, 513, 5000, 64, F32, {"is_causal": True, "window": (300, 40)}),
    (1, 1, 1, 7, 5000, 32, BF16, {"window": (4995, -1)}),                      # first rows see nothing
    (1, 1, 1, 513, 513, 128, F16, {"is_causal": True, "scale": 0.25}),
    (1, 4, 1, 7, 70, 20, F32, {"is_causal": True}),                           # D % 8 != 0: the tails
    (1, 1, 1, 7, 9, 1, BF16, {}),
]


def _opts(opt, B, Hq):
    o = dict(opt)
    if isinstance(o.get("alibi_slopes"), str):
        o["alibi_slopes"] = np.linspace(0.01, 0.3, B * Hq).reshape(B, Hq)
    return o


def _case_id(c):
    B, Hq, Hkv, Sq, Sk, D, dt, opt = c
    return f"{B}x{Hq}/{Hkv}-{Sq}x{Sk}-d{D}-{dt.name}-" + "-".join(sorted(opt)) if opt else \
        f"{B}x{Hq}/{Hkv}-{Sq}x{Sk}-d{D}-{dt.name}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_forward(case, route):
    B, Hq, Hkv, Sq, Sk, D, dt, opt = case
    if route == "single" and Sk > attention_kernels.SINGLE_SK_MAX:
        with pytest.raises(ShapeError, match="route 'single'"):
            attention_route((B, Hq, Sq, D), (B, Hkv, Sk, D), route=route)
        return
    opt = _opts(opt, B, Hq)
    amp = 2.0 if "scale" in opt else 1.0
    q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, dt, amp=amp)
    got = SDPA(q, k, v, return_lse=True, route=route, **opt)
    check_forward(got, ref_forward(t64(q), t64(k), t64(v), **opt), dt)


def test_forward_matches_torch_sdpa_and_default_route():
    """Sq == Sk causal and no-mask GQA agree with torch SDPA itself (float64) on the auto route."""
    F = torch.nn.functional
    q, k, v = inputs(1, 4, 2, 33, 33, 64, F32, seed=3)
    kk, vv = (t64(x).repeat_interleave(2, 1) for x in (k, v))
    for causal in (False, True):
        want = F.scaled_dot_product_attention(t64(q), kk, vv, is_causal=causal)
        assert_close(SDPA(q, k, v, is_causal=causal), want.numpy(), F32, scale=FWD_SLACK[F32])


def test_return_lse_and_output_types():
    q, k, v = inputs(1, 2, 1, 3, 5, 32, F32)
    o = SDPA(q, k, v)
    assert isinstance(o, np.ndarray) and o.shape == (1, 2, 3, 32)
    o2, lse = SDPA(fv.asarray(q), fv.asarray(k), fv.asarray(v), return_lse=True)
    assert isinstance(o2, fv.Array) and isinstance(lse, fv.Array) and lse.shape == (1, 2, 3)
    wo, wl = ref_forward(t64(q), t64(k), t64(v))
    assert_close(o2, wo.numpy(), F32, scale=FWD_SLACK[F32])
    assert_close(lse, wl.numpy(), F32, scale=FWD_SLACK[F32])


@pytest.mark.parametrize("route", ROUTES)
def test_strided_and_offset_views(route):
    """q from a [B, S, H, D] tensor transposed to [B, H, S, D]; k a slice with an offset; v with
    a non-unit stride along D (copied); all taken without changing the result."""
    rng = np.random.default_rng(5)
    B, Hq, Hkv, Sq, Sk, D = 2, 4, 2, 7, 9, 64
    q_bshd = rng.standard_normal((B, Sq, Hq, D)).astype(F32)
    k_big = rng.standard_normal((B, Hkv + 1, Sk + 5, D)).astype(F32)
    v_wide = rng.standard_normal((B, Hkv, Sk, 2 * D)).astype(F32)
    q = fv.asarray(q_bshd).transpose(0, 2, 1, 3)
    k = fv.asarray(k_big)[:, 1:, 3:3 + Sk]
    v = fv.asarray(v_wide)[..., ::2]
    assert k.offset > 0 and not q.is_contiguous and v.strides[3] == 2
    o, lse = SDPA(q, k, v, is_causal=True, return_lse=True, route=route)
    want = ref_forward(t64(q_bshd.transpose(0, 2, 1, 3)), t64(k_big[:, 1:, 3:3 + Sk]), t64(v_wide[..., ::2]),
                       is_causal=True)
    check_forward((o.numpy(), lse.numpy()), want, F32)


@pytest.mark.parametrize("route", ROUTES)
def test_zero_size(route):
    for (B, Hq, Hkv, Sq, Sk) in ((0, 2, 1, 3, 4), (1, 0, 0, 3, 4), (1, 2, 1, 0, 4), (1, 2, 1, 3, 0)):
        q, k, v = inputs(B, Hq, Hkv, Sq, Sk, 32, F16)
        o, lse = SDPA(q, k, v, return_lse=True, route=route)
        assert o.shape == (B, Hq, Sq, 32) and o.dtype == F16 and lse.shape == (B, Hq, Sq)
        assert np.all(o == 0) and np.all(np.isneginf(lse))   # Sk = 0: every row sees nothing


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("subgroup", [4, 16])
def test_other_subgroup_sizes(monkeypatch, route, subgroup):
    """The kernels' 8-lane broadcast (SG8 = 1 on lavapipe) has a shuffle form for subgroups of a
    multiple of 8 and a direct form otherwise: both run here by pretending another subgroup size."""
    monkeypatch.setattr(runtime.get().device, "subgroup_size", subgroup)
    q, k, v = inputs(1, 4, 2, 7, 77, 36, F32, seed=2)
    opt = {"window": (50, 3)}
    got = SDPA(q, k, v, return_lse=True, route=route, **opt)
    check_forward(got, ref_forward(t64(q), t64(k), t64(v), **opt), F32)
    if route == "tiled":
        _check_backward(q, k, v, *got, opt, _ref_backward(q, k, v, opt, seed=2), seed=2)


def test_long_keys_split_over_launches():
    """More keys than one tiled launch can take under lavapipe's loop cap (Device.loop_budget):
    the host splits the key range and carries (m, l, acc) between launches."""
    B, Hq, Hkv, Sq, Sk, D = 1, 2, 1, 5, 16000, 64
    budget = runtime.get().device.loop_budget
    per = attention_kernels.tiled_keys_per_launch(D, 8, 64, budget)
    assert budget is None or per < Sk
    q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, F32, seed=7)
    got = SDPA(q, k, v, return_lse=True, is_causal=True, route="tiled")
    check_forward(got, ref_forward(t64(q), t64(k), t64(v), is_causal=True), F32)


@pytest.mark.parametrize("opt", [{"is_causal": True}, {"window": (20, 3), "softcap": 4.0, "alibi_slopes": [0.1, 0.2, 0.3, 0.4]}])
def test_split_launches_small_budget(monkeypatch, opt):
    """Every split path (forward state carry, dQ over key ranges, dK/dV over row ranges) with a
    loop budget small enough to force several launches at small sizes."""
    q, k, v = inputs(1, 4, 2, 150, 300, 32, F32, seed=11, amp=2.0)
    want = ref_forward(t64(q), t64(k), t64(v), **opt)
    want_g = _ref_backward(q, k, v, opt, seed=11)
    monkeypatch.setattr(runtime.get().device, "loop_budget", 700)
    assert attention_kernels.tiled_keys_per_launch(32, 16, 32, 700) < 300 and attention_kernels.bwd_span_per_launch(32, 700) < 300 // 2
    o, lse = SDPA(q, k, v, return_lse=True, route="tiled", **opt)
    check_forward((o, lse), want, F32)
    _check_backward(q, k, v, o, lse, opt, want_g, seed=11)


# ------------------------------------------------------------------------- scale: torch's contract

# Any finite scale, zero and negative included (torch's SDPA and the FlashInfer-Bench references compute
# with it): per route, a shape that runs several key tiles (the online max moves, and with a negative
# scale the largest logit is the most negative dot product) and rows that see no key; decode with its
# keys split one tile per split, so the combine merges partial maxima.
SCALE_SHAPES = {"single": (1, 4, 2, 7, 150, 64), "tiled": (1, 4, 2, 7, 150, 64), "decode": (1, 4, 1, 1, 200, 64)}
SCALE_ROUTES = ("single", "tiled", "decode")


@pytest.mark.parametrize("scale", [-0.35, 0.0], ids=["negative", "zero"])
@pytest.mark.parametrize("route", SCALE_ROUTES)
def test_any_finite_scale_forward(decode_launches, route, scale):
    B, Hq, Hkv, Sq, Sk, D = SCALE_SHAPES[route]
    for dt, opt in ((F32, {"is_causal": True, "window": (90, -1)}), (BF16, {"softcap": 3.0})):
        opt = dict(opt, scale=scale)
        q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, dt, seed=3)
        decode_launches.clear()
        got = SDPA(q, k, v, return_lse=True, route=route, **opt)
        check_forward(got, ref_forward(t64(q), t64(k), t64(v), **opt), dt)
        if route == "decode":
            assert decode_launches[0][2] > 1, "the decode keys must be split (combine path)"
    if scale == 0:   # every visible key weighs the same: o = mean of v, lse = log(count)
        q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, F32, seed=4)
        o, lse = SDPA(q, k, v, return_lse=True, route=route, scale=0.0)
        np.testing.assert_allclose(lse, np.full(lse.shape, math.log(Sk)), rtol=1e-6)
        want = np.repeat(v.mean(axis=2, keepdims=True, dtype=np.float64), Hq // Hkv, axis=1)
        assert_close(o, np.broadcast_to(want, o.shape), F32, scale=FWD_SLACK[F32])


@pytest.mark.parametrize("scale", [-0.35, 0.0], ids=["negative", "zero"])
def test_any_finite_scale_backward(scale):
    """The fused backward (causal with rows that see nothing, softcap) and the math route (attn_mask)
    forward + backward against torch SDPA's autograd in float64."""
    for opt in ({"is_causal": True, "scale": scale}, {"softcap": 2.0, "scale": scale}):
        q, k, v = inputs(1, 4, 2, 9, 7, 32, F32, seed=6, amp=1.5)
        want_g = _ref_backward(q, k, v, opt, seed=6)
        o, lse = SDPA(q, k, v, return_lse=True, **opt)
        check_forward((o, lse), ref_forward(t64(q), t64(k), t64(v), **opt), F32)
        _check_backward(q, k, v, o, lse, opt, want_g, seed=6)
    q, k, v = inputs(1, 2, 2, 5, 11, 16, F32, seed=8)
    mask = np.random.default_rng(8).random((5, 11)) < 0.7
    assert attention_route(q, k, attn_mask=mask) == "math"
    o, lse = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, return_lse=True)
    tq, tk, tv = (t64(x).requires_grad_() for x in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask), scale=scale)
    assert_close(o, want.detach().numpy(), F32, scale=FWD_SLACK[F32])
    do = np.random.default_rng(9).standard_normal(o.shape).astype(F32)
    want.backward(t64(do))
    got = scaled_dot_product_attention_backward(do, q, k, v, o, lse, attn_mask=mask, scale=scale)
    for g, w in zip(got, (tq.grad, tk.grad, tv.grad)):
        assert_close(g, w.numpy(), F32, scale=BWD_SLACK)


# ------------------------------------------------------------------------------- flash-decoding

# (B, Hq, Hkv, Sq, Sk, D, dtype, options, splits): the decode route with its key splits forced down to
# one tile each (a CPU device would take one split here). Splits of 64 keys (32 for D <= 32): 200 keys
# end in a split of 8; the window leaves the first 4 of 5 splits of every row without a visible key (m = -inf merged);
# one key, with rows that see nothing (Sq > Sk); D = 20 (dims past the last 8 and a partial texel
# column); 16 rows per kv head (RG * D8 > 128: the query tile stays in shared memory, read through
# bcast8).
DECODE_CASES = [
    (1, 8, 2, 1, 200, 64, F32, {"is_causal": True}, 4),
    (1, 4, 1, 1, 300, 128, F16, {"window": (40, -1)}, 5),
    (2, 2, 1, 3, 1, 32, BF16, {"is_causal": True, "softcap": 3.0, "alibi_slopes": [0.1, 0.2]}, 1),
    (1, 2, 2, 5, 150, 20, F32, {"alibi_slopes": "bh"}, 5),                   # D <= 32: tiles of 32 keys
    (1, 16, 1, 1, 100, 64, F16, {}, 2),
]


@pytest.fixture
def decode_launches(monkeypatch):
    """Forces one tile per split (decode_target huge, DECODE_MIN_SPLIT_TILES 1) and records
    (variant id, TEX, nsplit) of every flash_decode / combine launch."""
    monkeypatch.setattr(attention_ops, "decode_target", lambda device: 1 << 20)
    monkeypatch.setattr(attention_kernels, "DECODE_MIN_SPLIT_TILES", 1)
    ctx = runtime.get()
    seen, orig = [], ctx.launch

    def spy(v, *a, **k):
        if v.id.startswith("flash_decode"):
            seen.append((v.id, k.get("TEX"), k["nsplit"]))
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


def _decode_both_paths(monkeypatch, launches, run):
    """run() on the decode route with texel loads forced on and off: the results must carry identical
    bits; returns path 1's results and its launches."""
    out, seen = {}, {}
    for flag in ("1", "0"):
        monkeypatch.setenv(loadpath.ENV, flag)
        launches.clear()
        out[flag] = [r.numpy() if isinstance(r, fv.Array) else np.asarray(r) for r in run()]
        seen[flag] = list(launches)
    for a, b in zip(out["1"], out["0"]):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), "texel and storage-buffer paths differ"
    tex_views = attention_kernels.DECODE_TEXELS["k"] | attention_kernels.DECODE_TEXELS["v"]
    assert all(t & tex_views == 0 for i, t, _ in seen["0"] if t is not None)
    return out["1"], seen["1"]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: _case_id(c[:8]))
def test_decode_splits(monkeypatch, decode_launches, case):
    B, Hq, Hkv, Sq, Sk, D, dt, opt, splits = case
    opt = _opts(opt, B, Hq)
    q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, dt, seed=Sk)
    assert attention_route(q, k, is_causal=opt.get("is_causal", False), causal_alignment="bottom_right") == "decode"
    got, seen = _decode_both_paths(monkeypatch, decode_launches, lambda: SDPA(q, k, v, return_lse=True, **opt))
    check_forward(got, ref_forward(t64(q), t64(k), t64(v), **opt), dt)
    main = [x for x in seen if not x[0].startswith("flash_decode_combine")]
    assert [n for _, _, n in main] == [splits]
    assert any(x[0].startswith("flash_decode_combine") for x in seen) == (splits > 1)
    tex = main[0][1]
    if loadpath.texel_paths(runtime.get())[0]:   # forced on: K, V and the score tile through views
        assert tex & 7 == 7


@pytest.mark.parametrize("subgroup", [4, 16])
def test_decode_other_subgroup_sizes(monkeypatch, subgroup):
    """16 rows per kv head keep the query tile in shared memory (no QREG), read through bcast8's
    shuffle form (subgroups of a multiple of 8) or directly (other sizes)."""
    monkeypatch.setattr(runtime.get().device, "subgroup_size", subgroup)
    q, k, v = inputs(1, 16, 1, 1, 100, 64, F32, seed=4)
    got = SDPA(q, k, v, return_lse=True, route="decode")
    check_forward(got, ref_forward(t64(q), t64(k), t64(v)), F32)


def test_decode_unaligned_views(monkeypatch, decode_launches):
    """K / V rows that are no whole 16-byte chunks (a row stride of D + 1, an odd offset) read element by
    element (no TEX_KC / TEX_VC), on both load paths, split."""
    B, Hq, Hkv, Sq, Sk, D = 1, 4, 1, 1, 140, 64
    rng = np.random.default_rng(9)
    q = rng.standard_normal((B, Hq, Sq, D)).astype(F32)
    kbig = rng.standard_normal((B, Hkv, Sk, D + 1)).astype(F32)
    vflat = rng.standard_normal(B * Hkv * Sk * D + 1).astype(F32)
    k, v = fv.asarray(kbig)[..., 1:], fv.asarray(vflat)[1:].reshape(B, Hkv, Sk, D)
    assert k.strides[2] % 4 and v.offset % 4
    got, seen = _decode_both_paths(monkeypatch, decode_launches, lambda: SDPA(q, k, v, return_lse=True))
    check_forward(got, ref_forward(t64(q), t64(kbig[..., 1:]), t64(vflat[1:].reshape(B, Hkv, Sk, D))), F32)
    chunks = attention_kernels.DECODE_CHUNKS["kc"] | attention_kernels.DECODE_CHUNKS["vc"]
    assert seen[0][2] == 3 and seen[0][1] & chunks == 0


def test_decode_split_count():
    """decode_splits: splits of whole tiles covering every key, about `target` workgroups, at least
    DECODE_MIN_SPLIT_TILES tiles each, more where the loop budget caps a split's keys."""
    m = attention_kernels.DECODE_MIN_SPLIT_TILES
    for sk, blocks, cap, target in ((1, 1, None, 64), (200, 1, None, 64), (4096, 8, None, 128), (4096, 8, None, 2),
                                    (5000, 1, 640, 1), (513, 3, None, 1000)):
        n, per = attention_kernels.decode_splits(sk, blocks, 64, cap, target)
        assert per % 64 == 0 and n * per >= sk > (n - 1) * per
        assert n == 1 or per >= m * 64 or (cap is not None and per <= cap)
        if cap is not None:
            assert per <= cap
        if cap is None and sk >= 64 * m * 2:
            assert n > 1 or blocks >= target
    assert attention_kernels.decode_splits(4096, 8, 64, None, 128) == (16, 256)
    dev = runtime.get().device
    want = len(__import__("os").sched_getaffinity(0)) if dev.device_type == "cpu" else attention_kernels.DECODE_TARGET_GROUPS
    assert attention_kernels.decode_target(dev) == want


# ---------------------------------------------------------------------------------- backward

def _ref_backward(q, k, v, opt, seed):
    q64, k64, v64 = (t64(x).requires_grad_() for x in (q, k, v))
    o, _ = ref_forward(q64, k64, v64, **opt)
    do = np.random.default_rng(seed + 1).standard_normal(o.shape).astype(F32)
    o.backward(t64(do))
    return do, (q64.grad.numpy(), k64.grad.numpy(), v64.grad.numpy())


def _check_backward(q, k, v, o, lse, opt, want_g, seed):
    do, want = want_g
    got = BWD(do, q, k, v, o, lse, **opt)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.dtype == F32 and g.shape == w.shape, name
        assert_close(g, w, F32, scale=BWD_SLACK)


BWD_CASES = [
    (1, 1, 1, 1, 1, 32, {}),
    (2, 4, 1, 7, 9, 64, {"is_causal": True}),
    (1, 8, 1, 7, 1, 80, {"is_causal": True}),                                  # rows that see nothing
    (1, 2, 2, 128, 9, 128, {"window": (3, 2), "alibi_slopes": "bh"}),
    (1, 4, 1, 9, 128, 256, {"is_causal": True, "softcap": 2.0, "scale": 0.5}),
    (1, 8, 1, 128, 160, 32, {"is_causal": True, "alibi_slopes": np.linspace(0.02, 0.2, 8)}),
    (1, 4, 1, 7, 5000, 64, {"window": (2000, 100)}),
    (1, 2, 1, 513, 9, 80, {"is_causal": True}),                                # 504 rows see nothing
    (1, 4, 1, 7, 4096, 32, {"is_causal": True}),
]


@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: _case_id(c[:6] + (F32, c[6])))
def test_backward(case):
    B, Hq, Hkv, Sq, Sk, D, opt = case
    opt = _opts(opt, B, Hq)
    q, k, v = inputs(B, Hq, Hkv, Sq, Sk, D, F32, seed=Sq + Sk, amp=1.5)
    want_g = _ref_backward(q, k, v, opt, seed=Sq + Sk)
    o, lse = SDPA(q, k, v, return_lse=True, **opt)
    _check_backward(q, k, v, o, lse, opt, want_g, seed=Sq + Sk)


def test_backward_zero_size():
    q, k, v = inputs(1, 2, 1, 0, 5, 32, F32)
    o, lse = SDPA(q, k, v, return_lse=True)
    dq, dk, dv = scaled_dot_product_attention_backward(o, q, k, v, o, lse)
    assert dq.shape == (1, 2, 0, 32) and np.all(dk == 0) and np.all(dv == 0) and dk.shape == (1, 1, 5, 32)
    q, k, v = inputs(1, 2, 1, 3, 0, 32, F32)
    o, lse = SDPA(q, k, v, return_lse=True)
    dq, dk, dv = scaled_dot_product_attention_backward(o, q, k, v, o, lse)
    assert np.all(dq == 0) and dq.shape == (1, 2, 3, 32) and dk.shape == (1, 1, 0, 32)


# ------------------------------------------------------------------------------------- routes

@pytest.mark.parametrize("device_type", ["cpu", "discrete"])
def test_route_picker(monkeypatch, device_type):
    """decode takes up to 16 query rows per kv head everywhere and every row count on a CPU device
    (flash_decode's row blocks of CPU_DECODE_ROWS rows beat the tiled kernel there)."""
    monkeypatch.setattr(runtime.get().device, "device_type", device_type)
    many = "decode" if device_type == "cpu" else "tiled"
    assert attention_route((1, 8, 1, 128), (1, 8, 4096, 128)) == "decode"      # decode, one row per kv head
    assert attention_route((1, 32, 1, 128), (1, 8, 4096, 128)) == "decode"     # GQA decode: 4 rows share K/V
    assert attention_route((1, 8, 1, 128), (1, 8, 5000, 128)) == "decode"      # no score row limit
    assert attention_route((1, 64, 1, 128), (1, 2, 5000, 128)) == many         # 32 rows per kv head
    assert attention_route((1, 8, 512, 64), (1, 8, 512, 64)) == many           # prefill
    assert attention_route((1, 8, 1, 128), (1, 8, 4096, 128), route="single") == "single"
    assert attention_route((1, 8, 512, 64), (1, 8, 512, 64), route="decode") == "decode"
    assert attention_route((1, 8, 512, 64), (1, 8, 512, 64), route="single") == "single"
    assert attention_route((1, 8, 1, 64), (1, 8, 9, 64), route="TILED") == "tiled"
    monkeypatch.setattr(runtime.get().device.limits, "maxComputeSharedMemorySize", 1024)
    with pytest.raises(UnsupportedError, match="route 'decode' needs"):
        attention_route((1, 8, 512, 64), (1, 8, 512, 64), route="decode")


def test_decode_row_blocks_of_a_gpu(monkeypatch):
    """Forced decode with many rows per kv head on a non-CPU device: row blocks of 16 rows (the query
    tile in shared memory), several per kv head, the last one partial; keys split for the GPU's target."""
    monkeypatch.setattr(runtime.get().device, "device_type", "discrete")
    opt = {"is_causal": True, "window": (30, -1)}
    q, k, v = inputs(1, 4, 2, 19, 150, 64, F16, seed=12)
    got = SDPA(q, k, v, return_lse=True, route="decode", **opt)
    check_forward(got, ref_forward(t64(q), t64(k), t64(v), **opt), F16)


def test_route_env(monkeypatch):
    monkeypatch.setenv("FUELVK_ATTENTION_ROUTE", "tiled")
    assert attention_route((1, 8, 1, 64), (1, 8, 9, 64)) == "tiled"
    monkeypatch.setenv("FUELVK_ATTENTION_ROUTE", "single")
    assert attention_route((1, 8, 512, 64), (1, 8, 512, 64)) == "single"


def test_kernels_listed():
    names = {v.name for fam in ("flash_attn", "flash_attention", "flash_attn_backward_q", "flash_attn_backward_k",
                                "flash_attn_backward_v", "flash_decode", "flash_decode_combine")
             for v in FAMILIES[fam].variants.values()}
    assert {"flash_attn_f32", "flash_attn_bf16", "flash_attn_f16", "flash_attention", "flash_attention_f16",
            "flash_attention_bf16", "flash_attn_backward_q_f32", "flash_attn_backward_k_f32",
            "flash_attn_backward_v_f32", "flash_decode_f32", "flash_decode_f16", "flash_decode_bf16",
            "flash_decode_combine_f32", "flash_decode_combine_f16", "flash_decode_combine_bf16"} <= names


# -------------------------------------------------------------------------------- bad input

def _qkv(Hq=4, Hkv=2, D=32, dts=(F32, F32, F32), Sk=9):
    q, k, v = inputs(1, Hq, Hkv, 3, Sk, D, F32)
    return q.astype(dts[0]), k.astype(dts[1]), v.astype(dts[2])


@pytest.mark.parametrize("args, kw, err, match", [
    (_qkv(Hq=3, Hkv=2), {}, ShapeError, "multiple of kv heads"),
    (_qkv(Hq=4, Hkv=0), {}, ShapeError, "multiple of kv heads"),
    (_qkv(D=320), {}, ShapeError, "head dim D=320"),
    (_qkv(dts=(F32, F16, F32)), {}, DTypeError, "share one dtype"),
    (_qkv(dts=(np.float64,) * 3), {}, DTypeError, "not supported"),
    (_qkv(), {"window": (-2, 0)}, ShapeError, "window"),
    (_qkv(), {"window": (1.5, 0)}, ShapeError, "window"),
    (_qkv(), {"window": (1, 2, 3)}, ShapeError, "window"),
    (_qkv(), {"scale": float("nan")}, ShapeError, "scale"),
    (_qkv(), {"scale": float("-inf")}, ShapeError, "scale"),
    (_qkv(), {"scale": True}, ShapeError, "scale"),
    (_qkv(), {"scale": "x"}, ShapeError, "scale"),
    (_qkv(), {"softcap": -1.0}, ShapeError, "softcap"),
    (_qkv(), {"softcap": float("inf")}, ShapeError, "softcap"),
    (_qkv(), {"alibi_slopes": [0.1, 0.2]}, ShapeError, "alibi_slopes"),
    (_qkv(), {"route": "fast"}, UnsupportedError, "unknown route 'fast'"),
    (_qkv(Sk=5000), {"route": "single"}, ShapeError, "route 'single'"),
], ids=lambda x: None)
def test_bad_input(args, kw, err, match):
    with pytest.raises(err, match=match) as e:
        SDPA(*args, **kw)
    assert "scaled_dot_product_attention" in str(e.value)


def test_bad_shapes():
    q, k, v = _qkv()
    with pytest.raises(ShapeError, match="same shape"):
        SDPA(q, k, v[:, :, :5])
    with pytest.raises(ShapeError, match="share batch and head dim"):
        SDPA(q, k[:, :, :, :16], v[:, :, :, :16])
    with pytest.raises(ShapeError, match=r"\[\.\.\., H, S, D\]"):
        SDPA(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(ShapeError, match="must broadcast"):
        SDPA(q[None].repeat(2, 0), k[None].repeat(3, 0), v[None].repeat(3, 0))


def test_backward_bad_input():
    q, k, v = _qkv()
    o, lse = SDPA(q, k, v, return_lse=True)
    bwd = scaled_dot_product_attention_backward
    with pytest.raises(DTypeError, match="share one dtype|not supported"):
        bwd(o.astype(F16), q.astype(F16), k.astype(F16), v.astype(F16), o.astype(F16), lse)
    with pytest.raises(ShapeError, match="lse must have shape"):
        bwd(o, q, k, v, o, lse[:, :, :2])
    with pytest.raises(ShapeError, match="do must have shape"):
        bwd(o[:, :1], q, k, v, o, lse)


# ------------------------------------------------------------------- torch's contract (math path too)

def torch_sdpa(q, k, v, **kw):
    """torch SDPA in float64 on the CPU (GQA by enable_gqa), the oracle of the torch contract."""
    F = torch.nn.functional
    mask = kw.pop("attn_mask", None)
    if mask is not None:
        mask = torch.from_numpy(np.asarray(mask)) if np.asarray(mask).dtype == bool else t64(mask)
    gqa = q.ndim > 3 and q.shape[-3] != k.shape[-3]
    return F.scaled_dot_product_attention(t64(q), t64(k), t64(v), attn_mask=mask, enable_gqa=gqa, **kw).numpy()


def _rand(*shape, seed=0, dt=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dt)


@pytest.mark.parametrize("causal", [False, True])
def test_torch_leading_dims(causal):
    """3-d [B, S, D] and 5-d inputs, and leading dims that broadcast as torch's do (a 3-d q on 4-d k / v,
    as in torch's OpInfo samples; a 1 against 3) give torch's results and shapes."""
    for shapes in (((2, 5, 8), (2, 7, 8)), ((2, 3, 4, 6, 8), (2, 3, 2, 5, 8)), ((4, 3, 8), (2, 4, 6, 8)),
                   ((1, 2, 4, 6, 8), (3, 1, 2, 5, 8))):
        q, k = _rand(*shapes[0], seed=1), _rand(*shapes[1], seed=2)
        v = _rand(*shapes[1], seed=3)
        o, lse = scaled_dot_product_attention(q, k, v, is_causal=causal, return_lse=True)
        want = torch_sdpa(q, k, v, is_causal=causal)
        assert o.shape == want.shape and lse.shape == want.shape[:-1]
        assert_close(o, want, F32, scale=FWD_SLACK[F32])


def test_torch_top_left_causal():
    """is_causal is top-left (torch's) when Sq != Sk: Sq < Sk takes the math path, Sq > Sk the fused
    kernels' band; causal_alignment="bottom_right" keeps flash-attn's mask (the kernels' behaviour)."""
    for Sq, Sk, route in ((3, 7, "math"), (7, 3, "decode"), (5, 5, "decode")):
        q, k, v = _rand(1, 4, Sq, 16, seed=Sq), _rand(1, 2, Sk, 16, seed=Sk), _rand(1, 2, Sk, 16, seed=9)
        assert attention_route(q, k, is_causal=True) == route
        o, lse = scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True)
        assert_close(o, torch_sdpa(q, k, v, is_causal=True), F32, scale=FWD_SLACK[F32])
        want = ref_forward(t64(q), t64(k), t64(v), is_causal=True)        # bottom-right
        check_forward(SDPA(q, k, v, is_causal=True, return_lse=True), want, F32)
        # lse of the top-left math / kernel path: torch's logsumexp of the visible scores
        s = (t64(q) @ t64(k).repeat_interleave(2, 1).transpose(-1, -2)) / 4.0
        s = s.masked_fill(torch.arange(Sk)[None, :] > torch.arange(Sq)[:, None], -math.inf)
        assert_close(lse, torch.logsumexp(s, -1).numpy(), F32, scale=FWD_SLACK[F32])
    # Sq < Sk top-left has no fused backward: the math route's (tests/test_torch_ops.py: masks too)
    q3 = np.ascontiguousarray(q[..., :3, :])
    o, lse = scaled_dot_product_attention(q3, k, v, is_causal=True, return_lse=True)
    tq, tk, tv = (t64(x).requires_grad_() for x in (q3, k, v))
    torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True).backward(t64(o))
    for got, want in zip(scaled_dot_product_attention_backward(o, q3, k, v, o, lse, is_causal=True),
                         (tq.grad, tk.grad, tv.grad)):
        assert_close(got, want.numpy(), F32, scale=FWD_SLACK[F32])


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_torch_masks(kind):
    """bool (True = attend) and additive masks of broadcast shapes, GQA, rows fully masked (zeros,
    lse = -inf, as torch's math SDPA gives zeros) against torch SDPA in float64."""
    rng = np.random.default_rng(5)
    q, k, v = _rand(2, 4, 6, 16, seed=1), _rand(2, 2, 5, 16, seed=2), _rand(2, 2, 5, 16, seed=3)
    for shape in ((6, 5), (2, 1, 6, 5), (4, 1, 5), (2, 4, 6, 5)):
        m = rng.random(shape) > 0.4
        if len(shape) == 2:
            m[1] = False                                                   # a row that sees no key
        mask = m if kind == "bool" else np.where(m, rng.standard_normal(shape), -np.inf).astype(F32)
        assert attention_route(q, k, attn_mask=mask) == "math"
        o, lse = scaled_dot_product_attention(q, k, v, attn_mask=mask, return_lse=True)
        want = torch_sdpa(q, k, v, attn_mask=mask)
        assert_close(o, want, F32, scale=FWD_SLACK[F32])
        if len(shape) == 2:
            assert np.all(o[:, :, 1] == 0) and np.all(np.isneginf(lse[:, :, 1]))
    # mask and top-left causal together (torch takes one or the other), on 3-d inputs
    q3, k3, v3 = q[:, 0], k[:, 0], v[:, 0]
    m = rng.random((2, 6, 5)) > 0.3
    got = scaled_dot_product_attention(q3, k3, v3, attn_mask=m, is_causal=True, causal_alignment="top_left")
    want = torch_sdpa(q3, k3, v3, attn_mask=m & np.tril(np.ones((6, 5), bool)))   # torch refuses both at once
    assert_close(got, want, F32, scale=FWD_SLACK[F32])


@pytest.mark.parametrize("dt", [F16, BF16])
def test_torch_mask_half(dt):
    """f16 / bf16 with a mask: f32 scores and softmax, the result in the input dtype."""
    q, k, v = (_rand(1, 2, 5, 32, seed=s).astype(dt) for s in (1, 2, 3))
    m = np.tril(np.ones((5, 5), bool), 1)
    o = scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert o.dtype == dt
    assert_close(o, torch_sdpa(q, k, v, attn_mask=m), dt, scale=FWD_SLACK[dt])


def test_torch_bad_mask():
    q, k, v = _qkv()
    with pytest.raises(ShapeError, match="attn_mask"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 8), bool))
    with pytest.raises(DTypeError, match="attn_mask"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 9), np.int32))
    with pytest.raises(UnsupportedError, match="math path"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 9), bool), route="tiled")
    with pytest.raises(UnsupportedError, match="do not combine"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 9), bool), softcap=2.0)
    with pytest.raises(UnsupportedError, match="causal_alignment"):
        scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment="diagonal")


def test_torch_top_left_causal_backward():
    """Sq > Sk top-left causal runs the fused backward with the kernels' band (right = Sq - Sk), on
    3-d inputs: gradients match torch autograd in float64."""
    q, k, v = _rand(2, 7, 16, seed=1), _rand(2, 4, 16, seed=2), _rand(2, 4, 16, seed=3)
    o, lse = scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True)
    do = _rand(*o.shape, seed=4)
    got = scaled_dot_product_attention_backward(do, q, k, v, o, lse, is_causal=True)
    tq, tk, tv = (t64(x).requires_grad_() for x in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(t64(do))
    for g, w in zip(got, (tq.grad, tk.grad, tv.grad)):
        assert g.shape == w.shape
        assert_close(g, w.numpy(), F32, scale=BWD_SLACK)
