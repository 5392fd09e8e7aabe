"""The per-invocation loop budget (runtime/loopcap.py, Device.loop_budget): the probe, its disk cache
and override, matmul / qmatmul K-splits beyond the real cap, and a forced tiny budget that runs every
split path (matmul / qmatmul K spans, reductions, norms, softmax, cumsum, pad backward, attention)."""
import json

import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import DeviceError
from fuelvk.kernels import matmul as KM
from fuelvk.kernels.quant import matvec_k_loop, matvec_wg
from fuelvk.runtime import loopcap
from oracles import assert_close
from test_quant import QT, block_bytes, gguf, random_blocks


# ---- the probe ----------------------------------------------------------------------------------
def test_probe_finds_the_cap_and_the_budget_is_below_it(ctx):
    rec = loopcap.probe(ctx)
    if "Mesa 22." in ctx.device.driver:   # lavapipe 22.x: the cap this module exists for
        assert rec["cap"] is not None and 60000 < rec["cap"] <= 65535 and rec["scope"] == "invocation"
    if rec["cap"] is None:
        assert loopcap.budget_of(None) is None
    else:
        assert 0 < loopcap.budget_of(rec["cap"]) < rec["cap"]
    budget, record = loopcap.resolve(ctx)
    if record is not None:   # not overridden by FUELVK_LOOP_BUDGET
        assert record == {"cap": rec["cap"], "scope": rec["scope"]}
        assert budget == loopcap.budget_of(rec["cap"])
    info = fv.device_info()
    assert "loop_budget" in info and "loop_cap" in info


def test_probe_is_cached_on_disk(ctx, tmp_path, monkeypatch):
    monkeypatch.delenv(loopcap.ENV, raising=False)
    monkeypatch.setenv("FUELVK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUELVK_PIPELINE_CACHE", "1")
    budget, rec = loopcap.resolve(ctx)
    files = list(tmp_path.glob("loopcap-*.json"))
    assert len(files) == 1 and ctx.device.uuid in files[0].name
    assert json.loads(files[0].read_text())["cap"] == rec["cap"]

    def no_probe(_):
        raise AssertionError("probed although the cap is cached")
    monkeypatch.setattr(loopcap, "probe", no_probe)
    assert loopcap.resolve(ctx) == (budget, rec)
    files[0].write_text(json.dumps({"cap": 1000, "scope": "invocation", "version": loopcap.VERSION}))
    assert loopcap.resolve(ctx)[0] == loopcap.budget_of(1000)
    # FUELVK_PIPELINE_CACHE=0: no read (the probe runs) and no write
    monkeypatch.setattr(loopcap, "probe", lambda c: {"cap": 5000, "scope": "loop"})
    monkeypatch.setenv("FUELVK_PIPELINE_CACHE", "0")
    files[0].unlink()
    assert loopcap.resolve(ctx) == (loopcap.budget_of(5000), {"cap": 5000, "scope": "loop"})
    assert not list(tmp_path.glob("loopcap-*"))


def test_env_override(ctx, monkeypatch):
    monkeypatch.setenv(loopcap.ENV, "123")
    assert loopcap.resolve(ctx) == (123, None)
    monkeypatch.setenv(loopcap.ENV, "none")
    assert loopcap.resolve(ctx) == (None, None)
    for bad in ("0", "-5", "lots"):
        monkeypatch.setenv(loopcap.ENV, bad)
        with pytest.raises(DeviceError, match="FUELVK_LOOP_BUDGET"):
            loopcap.resolve(ctx)


def test_no_split_without_a_budget_or_for_short_k(monkeypatch, launched):
    """Splitting costs dispatches only where needed: one launch without a budget or when K fits."""
    a, b = np.ones((2, 4096), np.float32), np.ones((4096, 3), np.float32)
    monkeypatch.setattr(runtime.get().device, "loop_budget", None)
    assert np.all(fv.matmul(a, b, route="small") == 4096) and launched == ["matmul_small.f32_f32_f32"]
    launched.clear()
    monkeypatch.setattr(runtime.get().device, "loop_budget", 50000)
    assert np.all(fv.matmul(a, b, route="register_tiled") == 4096) and launched == ["matmul.f32_f32_f32"]


# ---- matmul / qmatmul at K beyond the real cap (65,535 loop iterations on lavapipe 22.x) -----------
def _ref(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("route,M,K", [
    ("auto", 2, 600_000),            # register tile: 8 K per iteration, wrong past 524,280 unsplit
    ("matvec", 1, 600_000),
    ("tiled", 2, 40_000),            # ~100 iterations per 32 K: wrong past 20,960
    ("small", 16, 20_000),           # 4 outputs per lane, each a K loop: wrong past 16,376
    ("small", 2, 70_000),
])
def test_matmul_k_beyond_the_cap(route, M, K):
    rng = np.random.default_rng(K + M)
    a = rng.integers(-2, 3, (M, K)).astype(np.float32)
    b = rng.integers(-2, 3, (K, 3)).astype(np.float32)
    got = fv.matmul(a, b, route=None if route == "auto" else route)
    np.testing.assert_array_equal(got, _ref(a, b))   # small integers: every partial sum is exact


def test_matmul_ksplit_matvec_beyond_the_cap():
    """matvec with B contiguous along K (x @ W.T): lanes take 64 K per iteration, wrong past ~4.19M."""
    K = 4_400_000
    x = np.ones((1, K), np.float32)
    w = np.ones((2, K), np.float32)
    w[1, ::2] = -1
    np.testing.assert_array_equal(fv.matmul(x, w.T), [[K, 0]])


def test_matmul_split_half_output_rounds_once():
    """f16 out: span partials are f32, summed and cast once (equal to the unsplit f32 result, rounded)."""
    rng = np.random.default_rng(3)
    K = 600_000
    a = rng.uniform(-1, 1, (2, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, 2)).astype(np.float16)
    want = _ref(a, b)
    assert_close(fv.matmul(a, b), want.astype(np.float16), np.float16, scale=4)
    assert_close(fv.matmul(a, b, out_dtype=np.float32), want, np.float32, scale=50)


def _qweights(kind, n, k):
    """Random GGML blocks of W [n, k] (small finite scales) and their gguf dequantization (float64)."""
    qk, _ = block_bytes(kind)
    q = random_blocks(kind, n, k // qk)
    return q, gguf.quants.dequantize(q, QT[kind]).astype(np.float64).reshape(n, k)


@pytest.mark.parametrize("kind", ["q8_0", "q4_k"])
def test_qmatmul_tiled_k_beyond_the_cap(kind):
    """A real down-projection K (53,248): the tiled kernel runs ~56 iterations per 32 K, wrong past
    K = 37,472 unsplit."""
    K = 53_248
    q, wd = _qweights(kind, 2, K)
    x = np.random.default_rng(2).uniform(-1, 1, (3, K)).astype(np.float32)
    got = fv.qmatmul(x, q, kind=kind)
    np.testing.assert_allclose(got, x.astype(np.float64) @ wd.T, rtol=1e-4, atol=1e-3)


# ---- a forced tiny budget runs every split path ----------------------------------------------------
@pytest.fixture
def budget(monkeypatch):
    """budget(n): Device.loop_budget = n for this test (as FUELVK_LOOP_BUDGET=n would set it)."""
    dev = runtime.get().device
    dev.loop_budget   # probe first, so that the monkeypatch restores the real value
    return lambda n: monkeypatch.setattr(dev, "loop_budget", n)


@pytest.mark.parametrize("route,M,N", [("matvec", 1, 5), ("register_tiled", 3, 5), ("tiled", 3, 5),
                                       ("small", 3, 5)])
@pytest.mark.parametrize("dts", [(np.float32, np.float32, None), (np.float16, np.float16, None),
                                 ("bfloat16", "bfloat16", np.float32)], ids=["f32", "f16", "bf16_f32"])
def test_matmul_split_paths(budget, launched, route, M, N, dts):
    import ml_dtypes
    da, db, out = (ml_dtypes.bfloat16 if d == "bfloat16" else d for d in dts)
    rng = np.random.default_rng(M * N)
    K = 333
    a = rng.uniform(-1, 1, (2, M, K)).astype(da)
    b = rng.uniform(-1, 1, (K, N)).astype(db)
    budget(40)
    got = fv.matmul(a, b, out, route=route)
    family = KM.ROUTES[route]
    n_kernel = sum(v.startswith(family + ".") for v in launched)
    assert n_kernel >= 3, launched        # several K spans ...
    assert any(v.startswith("reduce") for v in launched)   # ... and their sum
    want = _ref(a, b)
    dt = np.dtype(out or da)
    assert got.dtype == dt
    assert_close(got, want.astype(dt), dt, scale=20)


def test_matmul_split_paths_views(budget):
    """Span offsets on strided / flipped / batched (GQA) operands, the K-contiguous and the
    transposed matvec."""
    rng = np.random.default_rng(9)
    K = 517
    w = rng.uniform(-1, 1, (7, K)).astype(np.float32)
    x = rng.uniform(-1, 1, (3, 2 * K)).astype(np.float32)
    budget(30)
    assert_close(fv.matmul(x[:1, ::2], w.T), _ref(x[:1, ::2], w.T), np.float32, scale=20)
    assert_close(fv.matmul(x[:, ::-2], w.T), _ref(x[:, ::-2], w.T), np.float32, scale=20)
    assert_close(fv.matmul(x[:, ::2], w[2]), _ref(x[:, ::2], w[2]), np.float32, scale=20)   # N == 1
    q = rng.uniform(-1, 1, (1, 4, 3, K)).astype(np.float32)
    kt = rng.uniform(-1, 1, (1, 2, K, 6)).astype(np.float32)
    want = _ref(q, np.repeat(kt, 2, axis=1))
    assert_close(fv.matmul(q, kt, n_rep=2), want, np.float32, scale=20)


@pytest.mark.parametrize("kind", ["q4_0", "q6_k"])
@pytest.mark.parametrize("route,M", [("matvec", 1), ("matvec", 2), ("tiled", 3)])
def test_qmatmul_split_paths(budget, launched, kind, route, M):
    K = 4096
    q, wd = _qweights(kind, 5, K)
    x = np.random.default_rng(5).uniform(-1, 1, (M, K)).astype(np.float32)
    budget(65)   # qmatvec: one step of its lanes (32 elements each) per launch; tiled: one block
    got = fv.qmatmul(x, q, kind=kind, route=route)
    n = sum(v.startswith(("qmatvec.", "qmatmul_tiled.")) for v in launched)
    step = matvec_k_loop(matvec_wg(runtime.get().device))[0]
    assert n == (M * -(-K // step) if route == "matvec" else K // block_bytes(kind)[0]), launched
    np.testing.assert_allclose(got, x.astype(np.float64) @ wd.T, rtol=1e-4, atol=1e-4)


def test_reduction_split_paths(budget):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (3, 5000)).astype(np.float32)
    budget(8)
    np.testing.assert_array_equal(fv.argmax(x, axis=1), np.argmax(x, axis=1))
    np.testing.assert_array_equal(fv.argmax(x.T.copy(), axis=0), np.argmax(x.T, axis=0))
    np.testing.assert_array_equal(fv.argmin(x, axis=1), np.argmin(x, axis=1))
    assert_close(fv.sum(x, axis=1), x.astype(np.float64).sum(1), np.float32, scale=10)
    c = rng.uniform(-1, 1, (2, 3000)).astype(np.float32)
    assert_close(fv.cumsum(c, axis=1), np.cumsum(c.astype(np.float64), axis=1), np.float32, scale=200)


def test_norm_and_softmax_split_paths(budget):
    rng = np.random.default_rng(12)
    x = rng.uniform(-2, 2, (37, 2048)).astype(np.float32)
    g = rng.uniform(-1, 1, x.shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 2048).astype(np.float32)
    bias = rng.uniform(-1, 1, 2048).astype(np.float32)
    budget(8)
    xt, gt = torch.tensor(x, dtype=torch.float64, requires_grad=True), torch.tensor(g, dtype=torch.float64)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    s = torch.softmax(xt, -1)
    assert_close(fv.softmax(x), s.detach().numpy(), np.float32, scale=10)
    (ds,) = torch.autograd.grad(s, xt, gt)
    y = s.detach().numpy().astype(np.float32)
    assert_close(fv.softmax_backward(y, g), ds.numpy(), np.float32, scale=50)
    r = torch.nn.functional.rms_norm(xt, (2048,), wt, eps=1e-6)
    assert_close(fv.rms_norm(x, 1e-6, w), r.detach().numpy(), np.float32, scale=10)
    dx, dw = torch.autograd.grad(r, (xt, wt), gt)
    got = fv.rms_norm_backward(x, g, 1e-6, w)
    assert_close(got[0], dx.numpy(), np.float32, scale=50)
    assert_close(got[1], dw.numpy(), np.float32, scale=100)
    ln = torch.nn.functional.layer_norm(xt, (2048,), wt, bt, eps=1e-5)
    assert_close(fv.layer_norm(x, 1e-5, w, bias), ln.detach().numpy(), np.float32, scale=10)
    dx, dw, db = torch.autograd.grad(ln, (xt, wt, bt), gt)
    got = fv.layer_norm_backward(x, g, 1e-5, w, bias)
    for gg, ww in zip(got, (dx, dw, db)):
        assert_close(gg, ww.numpy(), np.float32, scale=100)


def test_pad_backward_split_path(budget):
    """A fan-in over the budget's preimage limit goes one padded dim at a time."""
    g = np.random.default_rng(13).integers(-4, 5, (40, 50)).astype(np.float32)
    want = np.zeros((1, 1), np.float64)
    want[0, 0] = g.sum()
    budget(100)     # rank 2: a pass gathers <= 100 // 4 = 25 preimages; one dim's fan-in of 40 is too many
    with pytest.raises(fv.UnsupportedError, match="fan-in above 25"):
        fv.pad_backward(g, ((39, 0), (49, 0)), "edge")
    budget(200)     # limit 50: per-dim passes of fan-in 40 and 50
    np.testing.assert_array_equal(fv.pad_backward(g, ((39, 0), (49, 0)), "edge"), want.astype(np.float32))
    xp = torch.zeros((1, 1, 6, 9), dtype=torch.float64, requires_grad=True)
    gr = np.random.default_rng(14).uniform(-1, 1, (10, 13)).astype(np.float32)
    out = torch.nn.functional.pad(xp, (2, 2, 2, 2), mode="reflect")
    (want_r,) = torch.autograd.grad(out, xp, torch.tensor(gr, dtype=torch.float64)[None, None])
    budget(16)      # reflect fan-in 9 > 16 // 4: per-dim passes
    assert_close(fv.pad_backward(gr, ((2, 2), (2, 2)), "reflect"), want_r.numpy()[0, 0], np.float32, scale=4)


def test_attention_split_paths(budget):
    """Tiled forward over key spans, dQ over key ranges and dK / dV over row ranges."""
    rng = np.random.default_rng(15)
    q, k, v = (rng.uniform(-1, 1, (1, 2, s, 16)).astype(np.float32) for s in (40, 90, 90))
    do = rng.uniform(-1, 1, q.shape).astype(np.float32)
    ts = [torch.tensor(t, dtype=torch.float64, requires_grad=True) for t in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*ts)
    grads = torch.autograd.grad(ref, ts, torch.tensor(do, dtype=torch.float64))
    budget(300)
    o, lse = fv.scaled_dot_product_attention(q, k, v, return_lse=True, route="tiled")
    assert_close(o, ref.detach().numpy(), np.float32, scale=20)
    got = fv.scaled_dot_product_attention_backward(do, q, k, v, o, lse)
    for g, want in zip(got, grads):
        assert_close(g, want.numpy(), np.float32, scale=100)
