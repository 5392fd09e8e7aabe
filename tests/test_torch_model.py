"""fuelvk.torch beyond single ops: a compiled model, in-place ops, the weight cache, the boundary."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF
from oracles import assert_bits, assert_close

import fuelvk
import fuelvk.torch as ft

F = torch.ops.fuelvk
V, D, H, S = 16, 16, 2, 6


def _params():
    g = torch.Generator().manual_seed(0)
    shapes = {"emb": (V, D), "wn": (D,), "wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, V)}
    return {k: (torch.randn(s, generator=g) * 0.5).requires_grad_() for k, s in shapes.items()}


def _heads(x):
    return x.reshape(1, S, H, D // H).transpose(1, 2)


def model_fuelvk(ids, target, p):
    """embedding -> rms_norm -> causal attention -> matmul -> softmax, all torch.ops.fuelvk."""
    x = F.take(p["emb"], ids, 0)
    h = F.rms_norm(x, 1e-5, p["wn"])
    q, k, v = (_heads(F.matmul(h, p[w])) for w in ("wq", "wk", "wv"))
    o = F.scaled_dot_product_attention(q, k, v, True, None, [-1, -1], None, None)[0]
    probs = F.softmax(F.matmul(o.transpose(1, 2).reshape(S, D), p["wo"]), -1)
    return F.sum(F.multiply(probs, target), None, False)


def model_torch(ids, target, p):
    x = TF.embedding(ids, p["emb"])
    h = TF.rms_norm(x, (D,), p["wn"], 1e-5)
    q, k, v = (_heads(h @ p[w]) for w in ("wq", "wk", "wv"))
    o = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
    probs = torch.softmax(o.transpose(1, 2).reshape(S, D) @ p["wo"], -1)
    return (probs * target).sum()


def _run(fn, ids, target):
    p = _params()
    loss = fn(ids, target, p)
    loss.backward()
    return loss.detach(), {k: v.grad for k, v in p.items()}


def test_compiled_model_matches_eager_and_torch():
    ids = torch.tensor([3, 1, 4, 1, 5, 9])
    target = torch.rand(S, V, generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    compiled = torch.compile(model_fuelvk, fullgraph=True)
    l_c, g_c = _run(compiled, ids, target)
    l_e, g_e = _run(model_fuelvk, ids, target)
    l_t, g_t = _run(model_torch, ids, target)
    assert_close(l_c.numpy(), l_e.numpy(), scale=4)    # same kernels, maybe a different graph order
    assert_close(l_e.numpy(), l_t.numpy(), scale=32)
    for k in g_t:
        assert g_e[k] is not None and g_c[k] is not None, k
        assert_close(g_c[k].numpy(), g_e[k].numpy(), scale=4)
        np.testing.assert_allclose(g_e[k].numpy(), g_t[k].numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


def test_backward_keeps_outputs_only_when_the_formula_reads_them():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    y = F.matmul(a, b)
    assert [t.data_ptr() for t in y.grad_fn.saved_tensors] == [a.data_ptr(), b.data_ptr()]
    y = F.exp(a)
    assert y.data_ptr() in [t.data_ptr() for t in y.grad_fn.saved_tensors]


def test_attention_wrapper_matches_torch_sdpa():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 4, 5, 16, generator=g) for _ in range(3))
    got = ft.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# -- in-place ops: opcheck and the torch oracle --------------------------------------------------------
def _inplace_cases():
    g = torch.Generator().manual_seed(2)
    r = lambda *s: torch.randn(s, generator=g)
    idx = torch.tensor([[0, 2, 1, 0], [2, 2, 0, 1]])
    return [
        ("add_assign_scaled", (r(3, 4), r(4), 0.25), lambda d, s, c: d.add_(s * c)),
        ("slice_write_", (r(4, 6), r(4, 3), 1, 1, 6, 2), lambda d, v, *a: d[:, 1:6:2].copy_(v)),
        ("scatter_add_", (r(3, 4), 0, idx, r(2, 4)), lambda b, dim, i, s: b.scatter_add_(dim, i, s)),
        ("index_add_", (r(5, 2), 0, torch.tensor([1, 1, 4]), r(3, 2)), lambda b, dim, i, s: b.index_add_(dim, i, s)),
    ]


@pytest.mark.parametrize("name,args,ref", _inplace_cases(), ids=[c[0] for c in _inplace_cases()])
def test_inplace(name, args, ref):
    torch.library.opcheck(getattr(F, name).default, args)
    dst, want = args[0].clone(), args[0].clone()
    version = dst._version
    assert getattr(F, name)(dst, *args[1:]) is None
    ref(want, *args[1:])
    assert dst._version > version   # the mutation is visible to autograd and the weight cache
    assert_close(dst.numpy(), want.numpy(), scale=2)


# -- the weight cache ---------------------------------------------------------------------------------
@pytest.fixture
def cache(monkeypatch):
    c = ft.WeightCache(max_entries=2)
    monkeypatch.setattr(ft._bridge, "WEIGHTS", c)
    monkeypatch.setattr(ft.WeightCache, "MIN_BYTES", 0)
    return c


def test_weight_cache_reuses_and_invalidates(cache, monkeypatch):
    x = torch.randn(3, 8)
    w = torch.nn.Parameter(torch.randn(8, 5))
    y0 = F.matmul(x, w)
    y1 = F.matmul(x, w)
    assert (cache.misses, cache.hits) == (1, 1)     # x (no weight) is never looked up
    assert torch.equal(y0, y1)
    with torch.no_grad():
        w.mul_(2)               # in-place write: new version, so a new upload
    y2 = F.matmul(x, w)
    assert cache.misses == 2
    assert_close(y2.detach().numpy(), (x @ w).detach().numpy(), scale=8)
    for _ in range(3):          # bounded: least recently used entries go first
        F.matmul(x, torch.nn.Parameter(torch.randn(8, 5)))
    assert len(cache.entries) <= 2
    monkeypatch.setattr(cache, "enabled", False)
    F.matmul(x, w)
    assert cache.misses == 5    # disabled: no look-up at all


def test_weight_cache_takes_only_weights(cache):
    """Plain tensors may be scratch buffers that compiled code rewrites without a version bump."""
    x, w = torch.randn(2, 4), torch.randn(4, 3)
    F.matmul(x, w)
    F.matmul(x, w)
    assert cache.misses == cache.hits == 0
    ft.keep_uploaded(w)
    F.matmul(x, w)
    F.matmul(x, w)
    assert (cache.misses, cache.hits) == (1, 1)


def test_weight_cache_never_hands_out_an_array_an_op_writes(cache):
    """add_scaled writes into its dst on the device: a Parameter dst must not be the cached Array."""
    p = torch.nn.Parameter(torch.ones(4))
    src = torch.full((4,), 2.0)
    F.matmul(p, torch.ones(4, 1))                       # p is now cached
    out = F.add_scaled(p, src, 0.5)
    assert torch.equal(out, torch.full((4,), 2.0))
    assert torch.equal(F.matmul(p, torch.ones(4, 1)), torch.full((1,), 4.0))   # the cached copy is intact


def test_sgd_step_through_add_assign_scaled_reaches_the_next_forward(cache):
    x = torch.randn(2, 4)
    w = torch.nn.Parameter(torch.randn(4, 3))
    F.sum(F.matmul(x, w), None, False).backward()
    assert_close(w.grad.numpy(), x.sum(0)[:, None].expand(4, 3).numpy(), scale=4)
    before = w.detach().clone()
    with torch.no_grad():
        F.add_assign_scaled(w, w.grad, -0.5)
    assert_close(w.detach().numpy(), (before - 0.5 * w.grad).numpy())
    assert_close(F.matmul(x, w).detach().numpy(), (x @ w).detach().numpy(), scale=8)
    # misses: w in the forward, w.mT (a view of it) in the backward, w after the update (a new version)
    assert cache.misses == 3


def test_weight_cache_ignores_freed_storage(cache):
    x = torch.randn(2, 4)
    w = torch.nn.Parameter(torch.randn(4, 3))
    F.matmul(x, w)
    key = next(iter(cache.entries))
    del w                        # storage freed: its entry must never be hit again
    assert cache.entries[key][0].expired()
    w2 = torch.nn.Parameter(torch.randn(4, 3))
    assert_close(F.matmul(x, w2).detach().numpy(), (x @ w2).detach().numpy(), scale=8)
    assert key not in cache.entries or cache.hits == 0


# -- the boundary -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float16])
def test_bits_cross_the_boundary(dtype):
    """Every bit pattern (NaN payloads, -0, subnormals) survives torch -> fuelvk -> torch."""
    width = torch.int16 if dtype.itemsize == 2 else torch.uint8
    raw = torch.arange(-(1 << 15) if width == torch.int16 else 0, 1 << 15 if width == torch.int16 else 256,
                       dtype=torch.int32).to(width)
    t = raw.view(dtype)
    back = F.copy(t[::3])        # a strided view in, a contiguous copy out (the device's copy kernel)
    assert back.dtype == dtype
    assert torch.equal(back.view(width), raw[::3])
    assert_bits(ft.to_numpy(t), ft.to_numpy(ft.to_tensor(ft.to_array(t))))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16,
                                   torch.uint32, torch.bool, torch.float64])
def test_other_dtypes_cross_the_boundary(dtype):
    raw = torch.arange(-40, 40, 3, dtype=torch.int64)
    t = (raw % 2 == 0) if dtype == torch.bool else raw.to(dtype)
    back = F.flip(t, None)
    assert back.dtype == dtype     # (torch has no flip for uint16/uint32: compare as int64)
    assert torch.equal(back.to(torch.int64), t.to(torch.int64).flip(0))


def test_bad_input_raises_typed_errors():
    with pytest.raises(fuelvk.DTypeError, match="clip"):
        F.clip(torch.ones(3, dtype=torch.float64), 0.0, 1.0)    # float32 only
    with pytest.raises(fuelvk.DTypeError, match="complex"):
        F.exp(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(fuelvk.ShapeError, match="matmul"):
        F.matmul(torch.ones(2, 3), torch.ones(4, 5))


def test_fuelvk_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import fuelvk, numpy as np\n"
            "assert float(fuelvk.sum(np.ones(3, np.float32))) == 3\n"
            "try:\n    import fuelvk.torch\nexcept ImportError as e:\n    print('ok', e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok") and "PyTorch" in out.stdout
