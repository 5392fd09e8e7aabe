"""The "fuelvk" PyTorch device: storage, views, copies, factories, the CPU fallback, aten kernels vs CPU
torch, autograd through aten's formulas, a small MLP trained on the device."""
import copy
import threading
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF

import fuelvk
import fuelvk.torch as ft
from fuelvk.torch import device as D

DEV = "fuelvk"


@pytest.fixture
def no_fallback():
    """The test body must not fall back to the CPU for any op."""
    ft.reset_fallback_stats()
    yield
    assert ft.fallback_stats() == {}


def close(dev, cpu, rtol=1e-5, atol=1e-6, equal_nan=False):
    assert dev.device.type == DEV, dev.device
    got = dev.cpu()
    assert got.dtype == cpu.dtype and got.shape == cpu.shape, (got.dtype, got.shape, cpu.dtype, cpu.shape)
    torch.testing.assert_close(got, cpu, rtol=rtol, atol=atol, equal_nan=equal_nan)


# -- the device and its memory ------------------------------------------------------------------------
def test_registered():
    assert torch._C._get_privateuse1_backend_name() == DEV
    assert torch.fuelvk.is_available() and torch.fuelvk.device_count() == 1
    ft.register_device()   # idempotent
    x = torch.ones(2, device=DEV)
    assert x.device == torch.device("fuelvk:0") and x.is_fuelvk
    for make in (lambda: torch.ones(2, device="fuelvk:1"), lambda: torch.ones(2).to("fuelvk:1")):
        with pytest.raises(fuelvk.DeviceError, match="fuelvk:1: the torch device has one index"):
            make()   # never silently on fuelvk:0


VIEWS = {
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(2, 12),
    "_unsafe_view": lambda x: torch.ops.aten._unsafe_view(x, [24]),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 6), 3),
    "t": lambda x: x[0].t(),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "slice": lambda x: x[:, 1:3, ::2],
    "select": lambda x: x[1, 2],
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "alias": lambda x: torch.ops.aten.alias(x),
    "detach": lambda x: x.detach(),
    "unfold": lambda x: x.unfold(2, 2, 1),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_the_buffer(name, no_fallback):
    cpu = torch.arange(24.).reshape(2, 3, 4)
    x = cpu.to(DEV)
    v = VIEWS[name](x)
    assert D.buffer_of(v) is D.buffer_of(x)   # no copy: the same device memory
    assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
    close(v, VIEWS[name](cpu))
    if name != "expand":   # a write through the view shows in the base
        v.fill_(-1)
        VIEWS[name](cpu).fill_(-1)
        close(x, cpu)


def test_write_through_strided_view(no_fallback):
    cpu = torch.arange(12.).reshape(3, 4)
    x = cpu.to(DEV)
    x[:, 1].copy_(torch.tensor([7., 8., 9.]))
    x[1:, ::2].mul_(10)
    cpu[:, 1] = torch.tensor([7., 8., 9.])
    cpu[1:, ::2] *= 10
    close(x, cpu)


def _tensors_and_views():
    x = torch.randn(64, 64).to(DEV)
    y = (x * 2).t()[1:].sum(0)
    return x, y, y.view(-1).detach()


def test_tensors_give_memory_back():
    _tensors_and_views()   # once first: a kernel route may keep a small buffer for good on its first use
    fuelvk.synchronize()
    before = fuelvk.memory_info()["in_use_bytes"]
    for _ in range(50):
        x, y, z = _tensors_and_views()
    del x, y, z
    fuelvk.synchronize()   # no gc.collect(): tensors hold their buffers in no reference cycle
    assert fuelvk.memory_info()["in_use_bytes"] <= before


# -- copies, factories, printing ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                                   torch.int32, torch.uint8, torch.bool])
def test_round_trip_bits(dtype, no_fallback):
    cpu = (torch.randn(3, 5) * 100).to(dtype)
    x = cpu.to(DEV)
    assert x.dtype == dtype and x.shape == cpu.shape
    assert torch.equal(x.cpu(), cpu) and torch.equal(x.to("cpu"), cpu)
    if dtype != torch.bfloat16:   # (numpy has no bfloat16)
        np.testing.assert_array_equal(x.cpu().numpy(), cpu.numpy())
    assert torch.equal(cpu.t().to(DEV).cpu(), cpu.t())   # a non-contiguous source


def test_copy_directions_and_casts(no_fallback):
    a = torch.randn(4, 3)
    x = torch.empty(4, 3, device=DEV)
    x.copy_(a)                                   # CPU -> device
    close(x, a)
    y = torch.zeros(4, 3, device=DEV, dtype=torch.bfloat16)
    y.copy_(x)                                   # device -> device with a cast
    close(y, a.bfloat16(), rtol=0, atol=0)
    z = torch.empty(4, 3, device=DEV)
    z.copy_(x[0])                                # broadcast
    close(z, a[0].expand(4, 3))
    out = torch.empty(4, 3, dtype=torch.float64)
    out.copy_(x)                                 # device -> CPU with a cast
    assert torch.equal(out, a.double())
    close(x.to(torch.float16), a.half(), rtol=0, atol=0)
    close(x.half().float(), a.half().float(), rtol=0, atol=0)


def test_factories(no_fallback):
    close(torch.zeros(2, 3, device=DEV), torch.zeros(2, 3))
    close(torch.ones(4, device=DEV, dtype=torch.float16), torch.ones(4, dtype=torch.float16))
    close(torch.full((2, 2), 3.5, device=DEV), torch.full((2, 2), 3.5))
    close(torch.arange(7, device=DEV), torch.arange(7))
    close(torch.arange(0, 1, 0.25, device=DEV), torch.arange(0, 1, 0.25))
    e = torch.empty_strided((2, 3), (1, 2), device=DEV)
    assert e.stride() == (1, 2) and e.device.type == DEV
    assert torch.empty(0, 3, device=DEV).shape == (0, 3)
    for f in (torch.rand, torch.randn, lambda *s, **k: torch.randint(-3, 9, s, **k),
              lambda *s, **k: torch.empty(*s, **k).bernoulli_(0.3)):   # host RNG: a seeded device draw
        torch.manual_seed(3)                                               # equals the CPU draw
        d = f(5, 2, device=DEV)
        torch.manual_seed(3)
        close(d, f(5, 2), rtol=0, atol=0)
    x = torch.randn(3, device=DEV)
    close(torch.zeros_like(x), torch.zeros(3))
    x.zero_()
    close(x, torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.uint8, torch.bool, torch.float64,
                                   torch.int64, torch.float32])
def test_fill_bits(dtype, no_fallback):
    value = -2.5 if dtype.is_floating_point else 7 if dtype != torch.bool else True
    for n in (1, 3, 5):
        whole = torch.empty(n, dtype=dtype, device=DEV).fill_(value)      # the transfer unit's fill
        part = torch.zeros(n + 2, dtype=dtype, device=DEV)[1:-1].fill_(value)   # a write through a view
        for t in (whole, part):
            assert torch.equal(t.cpu(), torch.full((n,), value, dtype=dtype))
    assert torch.equal(torch.zeros(3, 2, dtype=torch.bfloat16, device=DEV).cpu(), torch.zeros(3, 2, dtype=torch.bfloat16))


def test_save_and_load(no_fallback):
    import io
    x = torch.randn(3, 4).to(DEV)[1:]
    state = torch.nn.Linear(2, 2).to(DEV).state_dict()
    buf = io.BytesIO()
    torch.save({"x": x, "state": state}, buf)
    for where, want in ((None, DEV), ("cpu", "cpu"), (DEV, DEV)):
        buf.seek(0)
        got = torch.load(buf, map_location=where)
        assert got["x"].device.type == want and got["state"]["weight"].device.type == want
        assert torch.equal(got["x"].cpu(), x.cpu()) and got["x"].storage_offset() == 4
    cpu_buf = io.BytesIO()
    torch.save(x.cpu(), cpu_buf)
    cpu_buf.seek(0)
    close(torch.load(cpu_buf, map_location=DEV), x.cpu(), rtol=0, atol=0)


def test_deepcopy_and_mixed_devices(no_fallback):
    x = torch.randn(3, 4).to(DEV)[1:]
    y = copy.deepcopy(x)                         # torch clones the storage: a new buffer
    assert D.buffer_of(y) is not D.buffer_of(x) and torch.equal(y.cpu(), x.cpu())
    bn = copy.deepcopy(torch.nn.BatchNorm1d(3).to(DEV))
    close(bn.running_var, torch.ones(3))
    with pytest.raises(fuelvk.DeviceError, match="same device"):
        x + torch.ones(2, 4)                     # as torch: no silent mixing of devices
    close(x + torch.tensor(2.0), x.cpu() + 2)    # a 0-d CPU tensor is a scalar


def test_print_and_item(no_fallback):
    x = torch.tensor([[1.5, -2.0], [3.0, 4.25]]).to(DEV)
    s = repr(x)
    assert "device='fuelvk:0'" in s and "1.5000" in s and "4.2500" in s
    assert x[1, 1].item() == 4.25 and isinstance(x.sum().item(), float)
    assert torch.tensor(True).to(DEV).item() is True
    assert torch.tensor(7).to(DEV).item() == 7


# -- the CPU fallback ---------------------------------------------------------------------------------
def test_fallback_runs_on_cpu_and_counts(monkeypatch):
    monkeypatch.delenv("FUELVK_TORCH_FALLBACK", raising=False)
    ft.reset_fallback_stats()
    cpu = torch.randn(5)
    x = cpu.to(DEV)
    with pytest.warns(ft.FallbackWarning, match="aten::lgamma"):
        close(torch.lgamma(x), torch.lgamma(cpu))
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # once per op
        close(torch.lgamma(x), torch.lgamma(cpu))
    assert ft.fallback_stats()["aten::lgamma.out"] == 2   # lgamma is structured: torch calls lgamma.out
    # in-place and out= ops write their CPU result back into the device tensor
    y = x.clone()
    y.lgamma_()                                  # (lgamma_ also runs as lgamma.out, already warned about)
    close(y, torch.lgamma(cpu))
    assert ft.fallback_stats()["aten::lgamma.out"] == 3
    o = torch.empty(0, device=DEV)
    torch.cumsum(x, 0, out=o)                # resized from 0 elements, as torch does
    close(o, torch.cumsum(cpu, 0))
    # a dtype an implemented op does not cover falls back too (fuelvk's erf is float32-accurate)
    d = cpu.double()
    close(torch.erf(d.to(DEV)), torch.erf(d))
    assert "aten::erf" in ft.fallback_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.FallbackWarning)
        close(torch.fmod(x, 1.5), torch.fmod(cpu, 1.5))   # the boxed fallback gets 1.5 (a wrapped number)
    assert ft.fallback_stats()["aten::fmod.Tensor_out"] == 1   # as a Python float, handed back as a tensor


def test_fallback_conv_and_integer_casts(monkeypatch):
    """Ops torch routes to a backend's own kernel (convolution_overrideable, a cast fuelvk has no kernel
    for) fall back too, instead of torch's NotImplementedError."""
    monkeypatch.delenv("FUELVK_TORCH_FALLBACK", raising=False)
    ft.reset_fallback_stats()
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    xd, wd = (t.detach().to(DEV).requires_grad_() for t in (x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.FallbackWarning)
        yd = TF.conv2d(xd, wd, padding=1)
        yd.sum().backward()
        y = TF.conv2d(x, w, padding=1)
        y.sum().backward()
        close(yd, y, rtol=1e-5, atol=1e-5)
        close(xd.grad, x.grad, rtol=1e-5, atol=1e-5)
        close(wd.grad, w.grad, rtol=1e-5, atol=1e-5)
        v = torch.tensor([1.7, -2.2, 0.0]).to(DEV)
        close(v.long(), torch.tensor([1, -2, 0]))
        close(v.bool(), torch.tensor([True, True, False]))
        close(v.long().float(), torch.tensor([1., -2., 0.]))
    stats = ft.fallback_stats()
    assert "aten::convolution_overrideable" not in stats           # 2-D forward: fuelvk.conv2d
    assert "aten::convolution_backward_overrideable" not in stats  # and its backward
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.FallbackWarning)
        x1, w1 = torch.randn(1, 2, 7), torch.randn(3, 2, 3)
        close(TF.conv1d(x1.to(DEV), w1.to(DEV), stride=2), TF.conv1d(x1, w1, stride=2), rtol=1e-5, atol=1e-5)
        g = torch.randn(2, 4, 6, 6)
        wg = torch.randn(4, 2, 3, 3)
        close(TF.conv2d(g.to(DEV), wg.to(DEV), torch.ones(4).to(DEV), 2, 1, 1, 2),
              TF.conv2d(g, wg, torch.ones(4), 2, 1, 1, 2), rtol=1e-4, atol=1e-4)
    assert "aten::convolution_overrideable" not in ft.fallback_stats()   # (torch runs conv1d as a 2-D one)
    assert "aten::_copy_from" not in stats   # integer / bool casts run on the device (icast kernels)


def test_fallback_off_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("FUELVK_TORCH_FALLBACK", "0")
    x = torch.randn(3).to(DEV)
    with pytest.raises(ft.FallbackError, match=r"aten::lgamma.*FUELVK_TORCH_FALLBACK=0"):
        torch.lgamma(x)
    with pytest.raises(fuelvk.UnsupportedError):
        torch.erf(x.double())
    close(x * 2, x.cpu() * 2)                    # implemented ops still run


# -- aten kernels vs CPU torch ------------------------------------------------------------------------
def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(3, 4, generator=g), "b": torch.randn(3, 4, generator=g),
            "r": torch.randn(4, generator=g), "p": torch.rand(3, 4, generator=g) + 0.5,
            "m": torch.randn(4, 5, generator=g), "bm": torch.randn(2, 3, 4, generator=g),
            "bn": torch.randn(2, 4, 5, generator=g), "w": torch.randn(5, 4, generator=g),
            "bias": torch.randn(5, generator=g), "x3": torch.randn(2, 3, 4, generator=g),
            "mask": torch.rand(3, 4, generator=g) > 0.5, "ids": torch.tensor([[1, 0, 4], [4, 2, 2]]),
            "emb": torch.randn(6, 4, generator=g)}


OPS = {
    "add": lambda t: t["a"] + t["b"], "add_alpha": lambda t: torch.add(t["a"], t["r"], alpha=2.5),
    "add_scalar": lambda t: t["a"] + 1.5, "radd": lambda t: 2 + t["a"], "sub": lambda t: t["a"] - t["r"],
    "rsub": lambda t: 1 - t["a"], "mul": lambda t: t["a"] * t["b"], "mul_scalar": lambda t: t["a"] * 3,
    "div": lambda t: t["a"] / t["p"], "div_scalar": lambda t: t["a"] / 4, "neg": lambda t: -t["a"],
    "exp": lambda t: t["a"].exp(), "log": lambda t: t["p"].log(), "sqrt": lambda t: t["p"].sqrt(),
    "rsqrt": lambda t: t["p"].rsqrt(), "tanh": lambda t: t["a"].tanh(), "sigmoid": lambda t: t["a"].sigmoid(),
    "silu": lambda t: TF.silu(t["a"]), "relu": lambda t: TF.relu(t["a"]),
    "gelu_tanh": lambda t: TF.gelu(t["a"], approximate="tanh"), "pow2": lambda t: t["a"] ** 2,
    "pow3": lambda t: t["a"].pow(3), "pow_half": lambda t: t["p"] ** 0.5, "abs": lambda t: t["a"].abs(),
    "pow_tensor": lambda t: t["p"] ** t["a"], "pow_float": lambda t: t["p"] ** 1.7,
    "pow_base": lambda t: 2.0 ** t["a"], "pow_inplace": lambda t: t["p"].clone().pow_(t["b"]),
    "pow_neg_base": lambda t: t["a"] ** torch.tensor([2.0, 3.0, -1.0, 0.5]).to(t["a"].device),
    "maximum": lambda t: torch.maximum(t["a"], t["b"]),
    "mm": lambda t: t["a"] @ t["m"], "addmm": lambda t: torch.addmm(t["bias"], t["a"], t["m"], beta=0.5, alpha=2),
    "bmm": lambda t: torch.bmm(t["bm"], t["bn"]), "matmul3d": lambda t: t["x3"] @ t["m"],
    "linear": lambda t: TF.linear(t["x3"], t["w"], t["bias"]), "linear_nobias": lambda t: TF.linear(t["a"], t["w"]),
    "sum": lambda t: t["a"].sum(), "sum_dim": lambda t: t["x3"].sum(1), "sum_keep": lambda t: t["x3"].sum((0, 2), True),
    "mean": lambda t: t["x3"].mean(-1), "mean_all": lambda t: t["a"].mean(), "amax": lambda t: t["x3"].amax(0),
    "amin": lambda t: t["x3"].amin(-1, keepdim=True), "max": lambda t: t["a"].max(),
    "batch_norm_eval": lambda t: TF.batch_norm(t["x3"], t["r"][:3] * 0.1, t["p"][0, :3], t["b"][0, :3], t["r"][1:]),
    "batch_norm_noaffine": lambda t: TF.batch_norm(t["bm"], t["r"][:3], t["p"][0, :3]),
    "var": lambda t: t["x3"].var(1), "std_all": lambda t: t["a"].std(), "var0": lambda t: t["x3"].var((0, 2), correction=0),
    "var_mean": lambda t: torch.var_mean(t["x3"], -1, keepdim=True)[0],
    "std_mean_m": lambda t: torch.std_mean(t["x3"], -1)[1],
    "softmax": lambda t: torch.softmax(t["x3"], -1), "softmax0": lambda t: torch.softmax(t["x3"], 0),
    "log_softmax": lambda t: torch.log_softmax(t["a"], 1),
    "layer_norm": lambda t: TF.layer_norm(t["x3"], (4,), t["r"], t["r"] * 0.5),
    "layer_norm2d": lambda t: TF.layer_norm(t["x3"], (3, 4)),
    "rms_norm": lambda t: TF.rms_norm(t["x3"], (4,), t["r"], 1e-6),
    "embedding": lambda t: TF.embedding(t["ids"], t["emb"]), "cat": lambda t: torch.cat([t["a"], t["b"]], 1),
    "tril": lambda t: t["x3"].tril(), "triu1": lambda t: torch.triu(t["a"], 1),
    "tril_bool": lambda t: torch.ones(2, 5, 5, dtype=torch.bool, device=t["a"].device).tril(-1),
    "safe_softmax": lambda t: torch.ops.aten._safe_softmax(t["a"].masked_fill(t["mask"][:, :1], -float("inf")), -1),
    "argmax": lambda t: t["x3"].argmax(-1), "argmax_all": lambda t: t["a"].argmax(),
    "argmin_keep": lambda t: t["x3"].argmin(1, keepdim=True), "max_dim": lambda t: t["x3"].max(1)[0],
    "max_dim_idx": lambda t: t["x3"].max(1)[1], "min_dim_keep": lambda t: t["x3"].min(-1, keepdim=True)[0],
    "index": lambda t: t["emb"].t()[:, t["ids"]], "index0": lambda t: t["emb"][t["ids"]],
    "index_neg": lambda t: t["a"][:, torch.tensor([-1, 0]).to(t["a"].device)],
    "gather": lambda t: t["x3"].gather(2, torch.tensor([[[3, 0], [1, 1]]]).to(t["a"].device)),
    "scatter_add": lambda t: torch.zeros(3, 5, device=t["a"].device).scatter_add(1, t["ids"][:1].expand(3, 3), t["a"][:, :3]),
    "flip": lambda t: t["x3"].flip(0, 2), "roll": lambda t: t["x3"].roll(1, 2), "roll_flat": lambda t: t["a"].roll(5),
    "clamp": lambda t: t["a"].clamp(-0.5, 0.25), "clamp_min": lambda t: t["a"].clamp(min=0.1),
    "cumsum": lambda t: t["x3"].cumsum(1),
    "cat0": lambda t: torch.cat([t["a"], t["b"], t["a"]]),
    "masked_fill": lambda t: t["a"].masked_fill(t["mask"], -1e9),
    "where_scalar": lambda t: torch.where(t["mask"], t["a"], 0.0),
    "where_scalar_l": lambda t: torch.where(t["mask"], 2.0, t["a"]),
    "where": lambda t: torch.where(t["mask"], t["a"], t["r"]),
    "eq": lambda t: t["a"] == t["b"], "lt": lambda t: t["a"] < t["b"], "ge_scalar": lambda t: t["a"] >= 0.1,
    "ne_scalar": lambda t: t["ids"] != 4, "and": lambda t: t["mask"] & (t["a"] > 0),
    "or": lambda t: torch.logical_or(t["mask"], t["b"][0] > 0),
    "clone": lambda t: t["a"].t().clone(), "contiguous": lambda t: t["a"].t().contiguous(),
    "to_bf16": lambda t: t["a"].to(torch.bfloat16), "to_f64": lambda t: t["a"].double(),
    "lerp": lambda t: torch.lerp(t["a"], t["b"], 0.3), "lerp_hi": lambda t: torch.lerp(t["a"], t["b"], 0.75),
    "addcmul": lambda t: torch.addcmul(t["a"], t["b"], t["p"], value=0.5),
    "addcdiv": lambda t: torch.addcdiv(t["a"], t["b"], t["p"], value=-2),
    "mse": lambda t: TF.mse_loss(t["a"], t["b"]), "mse_sum": lambda t: TF.mse_loss(t["a"], t["b"], reduction="sum"),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_cpu(name, no_fallback):
    t = _inputs()
    want = OPS[name](t)
    got = OPS[name]({k: v.to(DEV) for k, v in t.items()})
    close(got, want, rtol=1e-5, atol=1e-5)


def test_pow_with_a_tensor_exponent_backward(no_fallback):
    """aten's pow derivatives (pow, log, mul) on the device: both gradients as torch CPU's."""
    a, b = torch.rand(3, 4) + 0.5, torch.randn(3, 4)

    def grads(dev):
        x, y = a.to(dev).requires_grad_(), b.to(dev).requires_grad_()
        (x ** y).sum().backward()
        return x.grad, y.grad
    for got, want in zip(grads(DEV), grads("cpu")):
        close(got, want)


def test_where_is_exact(no_fallback):
    special = torch.tensor([-0.0, 0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -3.5, 2.0])
    c = torch.tensor([True, False] * 4)
    for a, b in ((special, special.flip(0)), (special.flip(0), special)):
        want = torch.where(c, a, b)
        got = torch.where(c.to(DEV), a.to(DEV), b.to(DEV)).cpu()
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_in_place_ops(no_fallback):
    t = _inputs()
    for f in (lambda x, y: x.add_(y, alpha=-0.5), lambda x, y: x.mul_(2), lambda x, y: x.sub_(y),
              lambda x, y: x.div_(4), lambda x, y: x.relu_(), lambda x, y: x.masked_fill_(y > 0, 0.25)):
        a, b = t["a"].clone(), t["b"]
        ad = a.to(DEV)
        alias = ad[1:]                           # a view sees the in-place result
        r = f(ad, b.to(DEV))
        assert r is ad
        f(a, b)
        close(ad, a)
        close(alias, a[1:])


GRADS = {
    "silu": lambda x: TF.silu(x), "sigmoid": lambda x: x.sigmoid(), "tanh": lambda x: x.tanh(),
    "relu": lambda x: TF.relu(x), "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"),
    "softmax": lambda x: torch.softmax(x, -1) * torch.arange(4.).to(x.device),
    "log_softmax": lambda x: torch.log_softmax(x, 0) * torch.arange(4.).to(x.device),
    "layer_norm": lambda x: TF.layer_norm(x, (4,), torch.linspace(0.5, 2, 4).to(x.device),
                                          torch.ones(4).to(x.device)) * torch.arange(4.).to(x.device),
    "rms_norm": lambda x: TF.rms_norm(x, (4,)) * torch.arange(4.).to(x.device),
    "mean_exp": lambda x: x.exp().mean(0), "std": lambda x: x.std(1) * torch.arange(3.).to(x.device),
    "gather": lambda x: x.gather(1, torch.tensor([[3, 3], [0, 1], [2, 0]]).to(x.device)) * 2,
    "clamp_cumsum": lambda x: x.clamp(-0.5, 0.5).cumsum(1).flip(0), "pow": lambda x: x ** 2 / 3,
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_backward_matches_cpu(name, no_fallback):
    cpu = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
    dev = cpu.detach().to(DEV).requires_grad_()
    GRADS[name](cpu).sum().backward()
    GRADS[name](dev).sum().backward()
    close(dev.grad, cpu.grad, rtol=1e-4, atol=1e-5)


SDPA = {"plain": {}, "causal": {"is_causal": True}, "scale": {"scale": 0.3},
        "bool_mask": {"attn_mask": (torch.arange(35).reshape(5, 7) % 3 != 0) & (torch.arange(5)[:, None] > 0)},
        "additive_mask": {"attn_mask": torch.linspace(-2, 2, 35).reshape(5, 7)}}


@pytest.mark.parametrize("kind", sorted(SDPA))
def test_sdpa_math_path_forward_backward(kind, no_fallback):
    """torch's math attention (what a device without a fused kernel gets) runs on fuelvk kernels; a
    fully masked row gives 0, as on the CPU."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, n, 4, generator=g, requires_grad=True) for n in (5, 7, 7))
    dev = [t.detach().to(DEV).requires_grad_() for t in (q, k, v)]
    kw = SDPA[kind]
    kwd = {a: (b.to(DEV) if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    o, od = TF.scaled_dot_product_attention(q, k, v, **kw), TF.scaled_dot_product_attention(*dev, **kwd)
    (o * o).sum().backward()
    (od * od).sum().backward()
    close(od, o, rtol=1e-5, atol=1e-5)
    for a, b in zip(dev, (q, k, v)):
        close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_dropout_eval_is_identity(no_fallback):
    """(Training-mode dropout draws its masks on the device: tests/test_rng.py.)"""
    x = torch.randn(4, 6)
    close(TF.dropout(x.to(DEV), 0.3, False), x, rtol=0, atol=0)


CROSS_ENTROPY = {"mean": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
                 "weight": {"weight": torch.linspace(0.1, 1, 7)}, "ignore_index": {"ignore_index": 3}}


@pytest.mark.parametrize("kind", sorted(CROSS_ENTROPY))
def test_cross_entropy_forward_backward(kind, no_fallback):
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(4), requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    target = torch.tensor([1, -100, 6, 0, 3])     # -100: torch's default ignore_index
    kw = CROSS_ENTROPY[kind]
    if "ignore_index" in kw:
        target = target.clamp(min=0)
    kwd = {a: (b.to(DEV) if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    loss, loss_d = TF.cross_entropy(x, target, **kw), TF.cross_entropy(xd, target.to(DEV), **kwd)
    (loss * torch.arange(1., 1 + loss.numel()).reshape(loss.shape)).sum().backward()
    (loss_d * torch.arange(1., 1 + loss.numel()).reshape(loss.shape).to(DEV)).sum().backward()
    close(loss_d, loss, rtol=1e-5, atol=1e-6)
    close(xd.grad, x.grad, rtol=1e-5, atol=1e-6)
    close(~(x > 0).to(DEV), ~(x > 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_against_cpu(dtype, reduction, weighted, no_fallback):
    """nll_loss forward / backward vs torch CPU: ignore_index inside and outside [0, C), rows whose
    log-probs are NaN / -inf but ignored (torch skips them: they must not leak through a 0 weight),
    1-D input, every reduction, class weights, half types."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 5, generator=g).to(dtype)
    x[1] = float("nan")
    x[4, 2] = float("-inf")
    w = torch.rand(5, generator=g).to(dtype) + 0.5 if weighted else None
    for target, ignore in (([0, 3, 4, 1, 0, 2], 3), ([0, -100, 4, 1, -100, 2], -100)):
        if ignore == 3:
            x[1] = x[1].nan_to_num(0)   # row 1 is a valid row in this case
        t = torch.tensor(target)
        xc = x.clone().requires_grad_()
        xd = x.to(DEV).requires_grad_()
        want = TF.nll_loss(xc, t, weight=w, ignore_index=ignore, reduction=reduction)
        got = TF.nll_loss(xd, t.to(DEV), weight=None if w is None else w.to(DEV), ignore_index=ignore,
                          reduction=reduction)
        tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
        close(got, want, **tol)
        seed = torch.arange(1., 1 + want.numel()).reshape(want.shape).to(dtype)
        (want * seed).sum().backward()
        (got * seed.to(DEV)).sum().backward()
        close(xd.grad, xc.grad, **tol)
    v = torch.randn(5, generator=g).log_softmax(0).to(dtype)      # 1-D input, 0-D target
    for tgt in (2, -100):   # mean over no target: 0 / 0 = nan, as torch
        close(TF.nll_loss(v.to(DEV), torch.tensor(tgt).to(DEV), reduction=reduction),
              TF.nll_loss(v, torch.tensor(tgt), reduction=reduction), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_nll_loss_rejects_targets_torch_rejects_in_few_launches(no_fallback):
    """A target outside [0, C) that is not ignore_index is a FuelVKIndexError at the next read, as torch CPU
    raises (a -1 used to wrap to the last class); the forward and backward take one check each and
    few launches."""
    x = torch.randn(3, 5).log_softmax(1)
    for bad in (-1, 5):
        t = torch.tensor([0, bad, 2])
        with pytest.raises((IndexError, RuntimeError)):
            TF.nll_loss(x, t)                                             # torch CPU agrees
        with pytest.raises(fuelvk.FuelVKIndexError, match=rf"index {bad} .*size 5 \(accepted \[0, 5\) or -100"):
            TF.nll_loss(x.to(DEV), t.to(DEV)).item()
    stream = fuelvk.runtime.get().stream
    xd = x.to(DEV).requires_grad_()
    td = torch.tensor([0, -100, 2]).to(DEV)
    fuelvk.synchronize()
    before = stream.dispatches
    loss = TF.nll_loss(xd, td)
    forward = stream.dispatches - before
    loss.backward()
    backward = stream.dispatches - before - forward
    assert forward <= 9 and backward <= 7, (forward, backward)   # were 13 and 13
    close(loss, TF.nll_loss(x, torch.tensor([0, -100, 2])), rtol=1e-6, atol=1e-7)


def test_embedding_backward(no_fallback):
    w = torch.randn(6, 4, requires_grad=True)
    wd = w.detach().to(DEV).requires_grad_()
    ids = torch.tensor([[1, 0, 4], [4, 2, 2]])
    for weight, i in ((w, ids), (wd, ids.to(DEV))):
        (TF.embedding(i, weight, padding_idx=2) * torch.arange(4.).to(weight.device)).sum().backward()
    close(wd.grad, w.grad)


# -- a model on the device ----------------------------------------------------------------------------
OPTIMIZERS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False),
    "sgd_default": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=False),
}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_mlp_trains_like_cpu(optimizer, no_fallback):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.SiLU(), torch.nn.Linear(16, 4))
    dev = copy.deepcopy(cpu).to(DEV)
    assert all(p.device.type == DEV for p in dev.parameters())
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    xd, yd = x.to(DEV), y.to(DEV)
    close(dev(xd), cpu(x), rtol=1e-5, atol=1e-6)
    opt_c, opt_d = OPTIMIZERS[optimizer](cpu.parameters()), OPTIMIZERS[optimizer](dev.parameters())
    for step in range(4):
        losses = []
        for model, opt, xx, yy in ((cpu, opt_c, x, y), (dev, opt_d, xd, yd)):
            opt.zero_grad()
            loss = TF.mse_loss(model(xx), yy) + model(xx).sum() * 1e-2
            loss.backward()
            if step == 0:
                grads = [p.grad for p in model.parameters()]
                if model is dev:
                    for g, gc_ in zip(grads, grads_cpu):
                        close(g, gc_, rtol=1e-4, atol=1e-6)
                else:
                    grads_cpu = grads
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[0])
    for p, q in zip(dev.parameters(), cpu.parameters()):
        close(p.detach(), q.detach(), rtol=1e-4, atol=1e-5)


class TinyBlock(torch.nn.Module):
    """Embedding, LayerNorm, causal attention (torch's math path), dropout, GELU(tanh) MLP, LM head."""

    def __init__(self, d=16, heads=2, vocab=11):
        super().__init__()
        nn = torch.nn
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(8, d) * 0.1)
        self.ln1, self.qkv, self.o = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.pr = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head, self.heads, self.drop = nn.Linear(d, vocab, bias=False), heads, nn.Dropout(0.1)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids) + self.pos[:t]
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(x.shape[-1], -1))
        a = TF.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        x = x + self.drop(self.o(a))
        return self.head(x + self.pr(TF.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class _MaskOf(torch.nn.Module):
    """Dropout with a given mask: the CPU twin applies the mask the device's dropout drew."""

    def __init__(self, p):
        super().__init__()
        self.p, self.mask = p, None

    def forward(self, x):
        return x * self.mask * (1 / (1 - self.p))


def test_tiny_transformer_trains_like_cpu(no_fallback):
    """Forward, backward and AdamW steps of a GPT-style block (dropout on: the CPU run applies the masks
    the device drew) track the CPU run."""
    torch.manual_seed(0)
    cpu = TinyBlock()
    dev = copy.deepcopy(cpu).to(DEV)
    cpu.drop = _MaskOf(dev.drop.p)
    dev.drop.register_forward_hook(lambda m, i, o: setattr(cpu.drop, "mask", (o != 0).cpu().to(o.dtype)))
    ids, tgt = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=False) for m in (cpu, dev)]
    for step in range(3):
        losses = []
        for model, opt, i, t in ((dev, opts[1], ids.to(DEV), tgt.to(DEV)), (cpu, opts[0], ids, tgt)):
            opt.zero_grad()
            loss = TF.cross_entropy(model(i).flatten(0, 1), t.flatten())
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-5 * losses[0], losses
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        if name != "qkv.bias":   # the key bias has a zero gradient (softmax ignores it): Adam scales its
            close(p.detach(), q.detach(), rtol=1e-4, atol=1e-5)   # rounding noise up to lr-sized steps


def test_threads(no_fallback):
    errors = []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            a, b = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
            for _ in range(5):
                got = (a.to(DEV) @ b.to(DEV)).relu().sum(0).cpu()
                torch.testing.assert_close(got, (a @ b).relu().sum(0), rtol=1e-5, atol=1e-5)
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


# -- torch.ops.fuelvk on device tensors, torch.compile -----------------------------------------------------
def test_custom_ops_take_device_tensors_without_transfers(monkeypatch, no_fallback):
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    xd, wd = x.to(DEV), w.to(DEV)
    ctx = fuelvk.runtime.get()
    moved = []
    monkeypatch.setattr(ctx, "upload", lambda *a, **k: moved.append("upload"))
    monkeypatch.setattr(ctx, "download", lambda *a, **k: moved.append("download"))
    y = torch.ops.fuelvk.softmax(torch.ops.fuelvk.matmul(xd, wd), -1)
    r = xd.clone().requires_grad_()
    torch.ops.fuelvk.sum(torch.ops.fuelvk.silu(r), None, False).backward()
    assert moved == [] and y.device.type == DEV and r.grad.device.type == DEV
    monkeypatch.undo()
    close(y, torch.ops.fuelvk.softmax(torch.ops.fuelvk.matmul(x, w), -1), rtol=0, atol=0)
    close(r.grad, torch.func.grad(lambda t: TF.silu(t).sum())(x), rtol=1e-5, atol=1e-6)


def test_compile_aot_eager_on_device(no_fallback):
    def f(x, w):
        return torch.softmax(x @ w, -1) * 2 + torch.ops.fuelvk.exp(x).sum()
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    g = torch.compile(f, backend="aot_eager", fullgraph=True)
    close(g(x.to(DEV), w.to(DEV)), f(x, w), rtol=1e-5, atol=1e-5)


# -- integers, indexing, sorting, optimizers (what HF generate() and training reach) -------------------
def _ints():
    return torch.tensor([[1, 2, 3], [4, 5, -(2 ** 40)]]), torch.tensor([[0, 1, 1], [1, 0, 1]], dtype=torch.bool)


INT_OPS = {
    "add": lambda a, m: a + 1, "mul_wraps": lambda a, m: a * a, "rsub": lambda a, m: 1 - a,
    "true_div": lambda a, m: a / 2, "and": lambda a, m: a & 3, "xor": lambda a, m: a ^ a.flip(1),
    "bool_mul": lambda a, m: m * m.flip(0), "bool_add": lambda a, m: m + m.flip(0), "not": lambda a, m: ~m,
    "sum": lambda a, m: a.sum(), "sum_dim": lambda a, m: a.sum(1), "bool_sum": lambda a, m: m.sum(0),
    "cumsum": lambda a, m: a.cumsum(1), "mask_cumsum": lambda a, m: m.long().cumsum(-1),
    "max": lambda a, m: a.max(), "min": lambda a, m: a.min(), "amax": lambda a, m: a.amax(0),
    "any": lambda a, m: m.any(), "all_dim": lambda a, m: m.all(1), "any_int": lambda a, m: a.any(0),
    "isin": lambda a, m: torch.isin(a, torch.tensor([3, 5]).to(a.device)),
    "isin_invert": lambda a, m: torch.isin(a, torch.tensor([3, 5]).to(a.device), invert=True),
    "eq": lambda a, m: a == 5, "logical_and": lambda a, m: torch.logical_and(a, m),
    "remainder": lambda a, m: a % 3, "remainder_neg": lambda a, m: a % -3, "floor_divide": lambda a, m: a // 3,
    "floor_divide_t": lambda a, m: a // a.flip(0), "bool_and_scalar": lambda a, m: m & True,
    "scatter_bool": lambda a, m: m.scatter(1, torch.tensor([[2], [0]]).to(m.device), m[:, :1]),
    "scatter_int64": lambda a, m: a.scatter(1, torch.tensor([[2, 0], [1, 2]]).to(a.device), a.flip(1)[:, :2]),
}


@pytest.mark.parametrize("name", sorted(INT_OPS))
def test_integer_ops_exact(name, no_fallback):
    a, m = _ints()
    close(INT_OPS[name](a.to(DEV), m.to(DEV)), INT_OPS[name](a, m), rtol=0, atol=0)


_X = torch.arange(60.).reshape(3, 4, 5) * 0.37 % 1.9
INDEX_KEYS = {
    "one": lambda i, j, m: (i,), "second": lambda i, j, m: (slice(None), j), "two": lambda i, j, m: (i, j),
    "apart": lambda i, j, m: (i, slice(None), j), "last_two": lambda i, j, m: (slice(None), i, j),
    "mask": lambda i, j, m: (m,), "ellipsis": lambda i, j, m: (Ellipsis, j),
}


def _keys(name, dev):
    i, j, m = torch.tensor([[0, 2], [1, -1]]), torch.tensor([1, 3]), _X[..., 0] > 0.8
    key = INDEX_KEYS[name](i, j, m)
    return tuple(k.to(DEV) if dev and isinstance(k, torch.Tensor) else k for k in key)


@pytest.mark.parametrize("name", sorted(INDEX_KEYS))
def test_advanced_index_and_put(name, no_fallback):
    x = _X.clone()
    xd = x.to(DEV)
    close(xd[_keys(name, True)], x[_keys(name, False)], rtol=0, atol=0)
    if name not in ("two", "apart", "last_two", "one"):   # (those index a row twice: covered by accumulate)
        xd[_keys(name, True)] = -1.5
        x[_keys(name, False)] = -1.5
        close(xd, x, rtol=0, atol=0)
    v = torch.arange(float(x[_keys(name, False)].numel())).reshape(x[_keys(name, False)].shape)
    torch.ops.aten.index_put_(x, _index_list(_keys(name, False), x.dim()), v, True)
    torch.ops.aten.index_put_(xd, _index_list(_keys(name, True), x.dim()), v.to(DEV), True)
    close(xd, x, rtol=0, atol=1e-6)


def _index_list(key, ndim):
    """A getitem key as index_put_'s list (None for a full slice, the ellipsis expanded)."""
    if key[0] is Ellipsis:
        key = (slice(None),) * (ndim - len(key) + 1) + key[1:]
    return tuple(None if isinstance(k, slice) else k for k in key)


def test_index_put_unique_rows_and_scatter(no_fallback):
    x = _X[0].clone()
    xd = x.to(DEV)
    m = x > 1.0
    x[m] = torch.tensor(7.0)
    xd[m.to(DEV)] = torch.tensor(7.0)   # a CPU 0-d value, as torch's setitem makes it
    close(xd, x, rtol=0, atol=0)
    rows, v = torch.tensor([2, 0]), torch.randn(2, 5)
    x[rows] = v
    xd[rows.to(DEV)] = v.to(DEV)
    close(xd, x, rtol=0, atol=0)
    idx = torch.tensor([[0, 1], [2, 3], [4, 0], [1, 2]])
    src = torch.randn(4, 3)
    close(xd.scatter(1, idx.to(DEV), src.to(DEV)), x.scatter(1, idx, src), rtol=0, atol=0)
    close(xd.scatter(1, idx.to(DEV), 2.5), x.scatter(1, idx, 2.5), rtol=0, atol=0)


def test_multinomial_draws_what_the_cpu_draws(no_fallback):
    p = torch.softmax(torch.randn(3, 10, generator=torch.Generator().manual_seed(0)), -1)
    for n, replacement in ((1, False), (1, True), (4, False)):
        torch.manual_seed(5)
        want = torch.multinomial(p, n, replacement)
        torch.manual_seed(5)
        close(torch.multinomial(p.to(DEV), n, replacement), want, rtol=0, atol=0)


def test_sort_topk(no_fallback):
    x = torch.randperm(24, generator=torch.Generator().manual_seed(0)).float().reshape(4, 6)
    xd = x.to(DEV)
    for got, want in ((xd.sort(1), x.sort(1)), (xd.sort(0, descending=True), x.sort(0, descending=True)),
                      (xd.topk(3), x.topk(3)), (xd.topk(2, 0, largest=False), x.topk(2, 0, largest=False))):
        close(got[0], want[0], rtol=0, atol=0)
        close(got[1], want[1], rtol=0, atol=0)
    close(xd.argsort(1), x.argsort(1), rtol=0, atol=0)


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.AdamW(p, lr=0.1), lambda p: torch.optim.AdamW(p, lr=0.1, foreach=True),
    lambda p: torch.optim.Adam(p, lr=0.1, amsgrad=True),
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)],
    ids=["adamw", "adamw_foreach", "adam_amsgrad", "sgd_nesterov"])
def test_optimizer_steps_on_device(make, no_fallback):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    md = copy.deepcopy(m).to(DEV)
    oc, od = make(m.parameters()), make(md.parameters())
    x = torch.randn(5, 4)
    for _ in range(3):
        for model, opt, inp in ((m, oc, x), (md, od, x.to(DEV))):
            opt.zero_grad()
            model(inp).square().sum().backward()
            opt.step()
    close(md.weight, m.weight, rtol=1e-5, atol=1e-5)
    close(md.bias, m.bias, rtol=1e-5, atol=1e-5)


def _same_output_and_grads(o, od, host_inputs, dev_inputs, dtype):
    """The device SDPA output and its input gradients (of sum(o^2)) against torch CPU's."""
    o.float().square().sum().backward()
    od.float().square().sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    close(od, o, rtol=tol, atol=tol)
    for a, b in zip(dev_inputs, host_inputs):
        close(a.grad, b.grad, rtol=5 * tol, atol=5 * tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["causal", "bool_mask", "additive_mask"])
def test_sdpa_gqa_dtypes_forward_backward(kind, dtype, no_fallback):
    """enable_gqa (4 query heads on 2 kv heads), Sq 5 != Sk 7 (causal aligned top-left, as torch)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=g).to(dtype).requires_grad_()
    k, v = (torch.randn(2, 2, 7, 8, generator=g).to(dtype).requires_grad_() for _ in range(2))
    kw = {"causal": {"is_causal": True}, "bool_mask": {"attn_mask": torch.rand(5, 7, generator=g) > 0.3},
          "additive_mask": {"attn_mask": torch.randn(5, 7, generator=g).to(dtype)}}[kind]
    dev = [t.detach().to(DEV).requires_grad_() for t in (q, k, v)]
    o = TF.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
    od = TF.scaled_dot_product_attention(*dev, enable_gqa=True, **{a: b.to(DEV) for a, b in kw.items()
                                                                    if isinstance(b, torch.Tensor)},
                                         **{a: b for a, b in kw.items() if not isinstance(b, torch.Tensor)})
    _same_output_and_grads(o, od, (q, k, v), dev, dtype)


def test_erf_gelu_maxpool(no_fallback):
    x = torch.randn(2, 3, 9, 10) * 2
    xd = x.to(DEV).requires_grad_()
    xc = x.clone().requires_grad_()
    close(torch.erf(xd), torch.erf(x), rtol=0, atol=1e-6)
    TF.gelu(xd).sum().backward()
    TF.gelu(xc).sum().backward()
    close(xd.grad, xc.grad, rtol=0, atol=1e-5)
    x[0, 0, :3, :3] = -float("inf")   # an all -inf window points at its first cell inside the input, as torch
    for kw in ({"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 2},
               {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, {"kernel_size": 3, "dilation": 2},
               {"kernel_size": 3, "dilation": 2, "padding": 1}):
        got, want = TF.max_pool2d(x.to(DEV), return_indices=True, **kw), TF.max_pool2d(x, return_indices=True, **kw)
        close(got[0], want[0], rtol=0, atol=0)
        close(got[1], want[1], rtol=0, atol=0)


CONVS = [(2, 3, 7, 8, 4, 3, 1, 1, 1, 1), (2, 3, 9, 9, 4, 3, 2, 1, 1, 1), (1, 4, 8, 7, 6, 3, 2, 0, 2, 2),
         (2, 2, 6, 6, 3, 1, 2, 0, 1, 1), (1, 3, 11, 10, 2, 5, 3, 4, 1, 1), (1, 2, 8, 8, 2, 7, 2, 3, 1, 1)]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "n{}c{}h{}w{}o{}k{}s{}p{}d{}g{}".format(*c))
def test_conv2d_backward(case, no_fallback):
    """Strides, paddings larger than the kernel reach, dilation, groups, 1x1 and 7x7 kernels."""
    n, c, h, w, o, k, s, p, d, g = case
    gen = torch.Generator().manual_seed(0)
    x, wt, b = (torch.randn(*shape, generator=gen, requires_grad=True)
                for shape in ((n, c, h, w), (o, c // g, k, k), (o,)))
    xd, wd, bd = (t.detach().to(DEV).requires_grad_() for t in (x, wt, b))
    y, yd = TF.conv2d(x, wt, b, s, p, d, g), TF.conv2d(xd, wd, bd, s, p, d, g)
    gy = torch.randn(y.shape, generator=gen)
    y.backward(gy)
    yd.backward(gy.to(DEV))
    for dev, cpu in ((xd, x), (wd, wt), (bd, b)):
        close(dev.grad, cpu.grad, rtol=1e-4, atol=1e-4)


def test_batch_norm_train_and_eval(no_fallback):
    bn, bnd = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3).to(DEV)
    x = torch.randn(4, 3, 5, 5, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    for _ in range(2):   # running statistics updated twice
        y, yd = bn(x), bnd(xd)
    gy = torch.randn(y.shape)
    y.backward(gy)
    yd.backward(gy.to(DEV))
    close(yd, y, rtol=1e-5, atol=1e-5)
    for dev, cpu in ((xd.grad, x.grad), (bnd.weight.grad, bn.weight.grad), (bnd.bias.grad, bn.bias.grad),
                     (bnd.running_mean, bn.running_mean), (bnd.running_var, bn.running_var)):
        close(dev, cpu, rtol=1e-5, atol=1e-5)
    bn.eval()
    bnd.eval()
    x.grad = xd.grad = None
    y, yd = bn(x), bnd(xd)
    y.backward(gy)
    yd.backward(gy.to(DEV))
    close(yd, y, rtol=1e-5, atol=1e-5)
    close(xd.grad, x.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["plain", "causal", "gqa_causal", "scale"])
def test_sdpa_fused_route_forward_backward(kind, dtype, no_fallback):
    """Without a mask (causal with Sq == Sk) SDPA takes fuelvk's fused kernel ("overrideable" backend)."""
    from torch.nn.attention import SDPBackend
    g = torch.Generator().manual_seed(3)
    hk = 2 if kind == "gqa_causal" else 4
    q = torch.randn(2, 4, 6, 8, generator=g).to(dtype).requires_grad_()
    k, v = (torch.randn(2, hk, 6, 8, generator=g).to(dtype).requires_grad_() for _ in range(2))
    kw = {"plain": {}, "causal": {"is_causal": True}, "gqa_causal": {"is_causal": True, "enable_gqa": True},
          "scale": {"scale": 0.3}}[kind]
    dev = [t.detach().to(DEV).requires_grad_() for t in (q, k, v)]
    assert torch.ops.aten._fused_sdp_choice(*dev, **kw) == int(SDPBackend.OVERRIDEABLE)
    o, od = TF.scaled_dot_product_attention(q, k, v, **kw), TF.scaled_dot_product_attention(*dev, **kw)
    _same_output_and_grads(o, od, (q, k, v), dev, dtype)


def test_sdpa_composed_kernels_compile_and_inference_mode(no_fallback):
    """fuelvk's own decomposition of SDPA (causal GQA: scale, one batched matmul per kv head group, the
    causal masked_fill, softmax, p @ v; no copies of k / v) under autograd, inference mode (its
    PrivateUse1 registration) and torch.compile's fake tensors."""
    import fuelvk as fv
    from fuelvk import runtime
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 6, 8, generator=g)
    k, v = (torch.randn(2, 2, 9, 8, generator=g) for _ in range(2))

    def f(q, k, v):
        return TF.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    want = f(q, k, v)
    qd, kd, vd = (t.to(DEV) for t in (q, k, v))
    stream = runtime.get().stream
    fv.synchronize()
    before = stream.dispatches
    got = f(qd, kd, vd)
    assert stream.dispatches - before <= 6, stream.dispatches - before
    close(got, want, rtol=1e-5, atol=1e-5)
    with torch.inference_mode():
        close(f(qd, kd, vd), want, rtol=1e-5, atol=1e-5)
    close(torch.compile(f, backend="aot_eager", fullgraph=True)(qd, kd, vd), want, rtol=1e-5, atol=1e-5)


def test_sdpa_causal_bias_cache_is_bounded(no_fallback, monkeypatch):
    """The composed path's causal masks are cached additive biases, one per (sq, sk, dtype), at most
    _CAUSAL_BIASES per device, none over _CAUSAL_BIAS_MAX elements; every length still matches torch CPU
    (top-left alignment)."""
    from fuelvk import runtime
    from fuelvk.torch import _aten_nn
    g = torch.Generator().manual_seed(9)
    for sk in range(2, 2 + _aten_nn._CAUSAL_BIASES + 3):
        q = torch.randn(1, 2, 2, 8, generator=g)
        k, v = (torch.randn(1, 2, sk, 8, generator=g) for _ in range(2))
        close(TF.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), is_causal=True),
              TF.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-5, atol=1e-6)
        assert len(_aten_nn._causal_biases[runtime.get()]) <= _aten_nn._CAUSAL_BIASES
    monkeypatch.setattr(_aten_nn, "_CAUSAL_BIAS_MAX", 2 * 7 - 1)   # a mask past it is built per call
    _aten_nn._causal_biases.clear()
    q = torch.randn(1, 2, 2, 8, generator=g)
    k, v = (torch.randn(1, 2, 7, 8, generator=g) for _ in range(2))
    close(TF.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), is_causal=True),
          TF.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-5, atol=1e-6)
    assert not _aten_nn._causal_biases.get(runtime.get())


def test_sdpa_head_dim_past_the_fused_kernel_takes_the_math_path(no_fallback):
    from torch.nn.attention import SDPBackend
    q = torch.randn(1, 1, 3, 320)
    qd = q.to(DEV)
    assert torch.ops.aten._fused_sdp_choice(qd, qd, qd) == int(SDPBackend.MATH)
    close(TF.scaled_dot_product_attention(qd, qd, qd), TF.scaled_dot_product_attention(q, q, q), rtol=1e-5, atol=1e-5)


# -- index bounds: checked on the device, raised at the next synchronize --------------------------------
def _host_waits(fn):
    """(fn()'s result, host waits (stream synchronizes) while fn ran)."""
    stream = fuelvk.runtime.get().stream
    fuelvk.synchronize()
    waits = [0]
    sync = stream.synchronize

    def counting():
        waits[0] += 1
        return sync()
    stream.synchronize = counting
    try:
        out = fn()
    finally:
        del stream.synchronize
    return out, waits[0]


def test_index_bounds_checked_without_a_host_wait(no_fallback):
    """In range: embedding and cross_entropy (forward and backward) never wait for the device; the
    results match CPU torch."""
    torch.manual_seed(0)
    w = torch.randn(10, 4, requires_grad=True)
    ids, target = torch.tensor([[0, 9, 3], [3, 3, 1]]), torch.tensor([2, 9, 0, 5, 5, 1])
    wd = w.detach().to(DEV).requires_grad_()

    def step(weight, i, t):
        logits = TF.embedding(i, weight).reshape(6, 4) @ weight.t()
        loss = TF.cross_entropy(logits, t)
        loss.backward()
        return loss
    loss, waits = _host_waits(lambda: step(wd, ids.to(DEV), target.to(DEV)))
    assert waits == 0
    want = step(w, ids, target)
    close(loss.detach(), want.detach(), rtol=1e-5)
    close(wd.grad, w.grad, rtol=1e-5)


@pytest.mark.parametrize("bad", [10, -11, -1])
def test_index_out_of_range_raises_at_the_next_sync(bad):
    """An out-of-range index raises FuelVKIndexError (an IndexError) at the next synchronize, before any
    result computed from it reaches the host; later work is unaffected. A negative index is out of
    range too (torch's embedding / index_select raise; numpy's take would wrap it)."""
    w = torch.randn(10, 4).to(DEV)
    ids = torch.tensor([1, bad]).to(DEV)
    out, waits = _host_waits(lambda: TF.embedding(ids, w) * 2)
    assert waits == 0
    with pytest.raises(fuelvk.FuelVKIndexError, match=rf"index {bad} .*out of bounds for an axis of size 10"):
        out.cpu()
    target = torch.tensor([0, 7]).to(DEV)   # nll_loss: targets in [0, classes)
    loss = TF.cross_entropy(torch.randn(2, 5).to(DEV), target)
    with pytest.raises(IndexError, match="index 7 .*size 5"):
        loss.item()
    ok = TF.embedding(torch.tensor([9, 0]).to(DEV), w)   # the check is not sticky
    torch.testing.assert_close(ok.cpu(), w.cpu()[[9, 0]])
    with pytest.raises(IndexError):
        torch.index_select(w.cpu(), 0, torch.tensor([1, bad]))       # torch CPU agrees
    with pytest.raises(fuelvk.FuelVKIndexError, match=rf"index {bad} "):
        torch.index_select(w, 0, torch.tensor([1, bad])).cpu()       # host indices: at the call


# -- launch plans (_plans.py) -----------------------------------------------------------------------------
def test_plans_replay_with_new_operands_and_values(no_fallback):
    """The third call of a kernel on the same layouts replays its plan: results follow the new operands,
    scalars key plans (-0.0 is not 0.0), and operands sharing a buffer key their own plan."""
    from fuelvk.torch import _plans
    a, b = torch.randn(3, 40), torch.randn(3, 40)
    before = _plans.stats["replayed"]
    for scale in (2.0, 2.0, 2.0, 3.0, -0.0, 0.0, -0.0):
        x, y = a.to(DEV), (b * scale).to(DEV)
        close(x * y + x @ y.t().contiguous()[:, :1], a * (b * scale) + a @ (b * scale).t()[:, :1], rtol=1e-5)
        close(y * scale, b * scale * scale, rtol=0, atol=0)
        got = (x * -0.0 if scale == -0.0 else x * 0.0).cpu()
        assert torch.equal(torch.signbit(got), torch.signbit(a * (-0.0 if scale == -0.0 else 0.0)))
    x = a.to(DEV)
    for y in (x, b.to(DEV), x, b.to(DEV)):   # x * x and x * y share a key only with their own kind
        close(x * y, a * y.cpu(), rtol=0, atol=0)
    assert _plans.stats["replayed"] > before


def test_plans_keep_value_checks(no_fallback):
    """Kernels that check index values on the device are planned with their check (a fresh slot each
    replay): a bad index after many good calls of the same layout still raises, in every kernel that
    checks (index_select, nll_loss forward and backward), and the call after it is clean."""
    from fuelvk.torch import _plans
    w = torch.randn(6, 3).to(DEV)
    x = torch.randn(4, 6).log_softmax(1)
    xd = x.to(DEV)
    g = torch.ones(())
    before = _plans.stats["replayed"]
    for i in range(4):
        close(torch.index_select(w, 0, torch.tensor([i, 5]).to(DEV)), w.cpu()[[i, 5]], rtol=0, atol=0)
        t = torch.tensor([i, 5, -100, 0])
        out, total = torch.ops.aten.nll_loss_forward(xd, t.to(DEV), None, 1, -100)
        want, want_total = torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)
        close(out, want, rtol=1e-6, atol=1e-7)
        close(total, want_total, rtol=0, atol=0)
        close(torch.ops.aten.nll_loss_backward(g.to(DEV), xd, t.to(DEV), None, 1, -100, total),
              torch.ops.aten.nll_loss_backward(g, x, t, None, 1, -100, want_total), rtol=0, atol=0)
    assert _plans.stats["replayed"] - before >= 6   # index_select, forward, backward: calls 3 and 4
    with pytest.raises(IndexError, match="index 6"):
        torch.index_select(w, 0, torch.tensor([1, 6]).to(DEV)).cpu()
    bad = torch.tensor([1, 6, -100, -1]).to(DEV)
    with pytest.raises(IndexError, match=r"index -1 .*2 bad of 4"):
        torch.ops.aten.nll_loss_forward(xd, bad, None, 1, -100)[0].cpu()
    with pytest.raises(IndexError, match=r"index -1 .*2 bad of 4"):
        torch.ops.aten.nll_loss_backward(g.to(DEV), xd, bad, None, 1, -100, total).cpu()
    close(torch.index_select(w, 0, torch.tensor([2, 0]).to(DEV)), w.cpu()[[2, 0]], rtol=0, atol=0)


@pytest.mark.parametrize("shape, dim, start, end", [((4, 10, 6), 1, 2, 7), ((4, 10, 6), -1, -4, None), ((5,), 0, 0, 5),
                                                    ((3, 8), 1, 6, 100), ((3, 8), 1, -100, 3), ((3, 0, 2), 1, 0, 0),
                                                    ((2, 6), 1, 4, 2)])
def test_slice_backward_pads(no_fallback, shape, dim, start, end):
    """The gradient of a slice is one zero-pad kernel; bit-exact against CPU torch, empty slices included."""
    x = torch.randn(shape, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    key = [slice(None)] * len(shape)
    key[dim] = slice(start, end)
    for t in (x, xd):
        y = t[tuple(key)]
        (y * torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape).to(t.device)).sum().backward()
    close(xd.grad, x.grad, rtol=0, atol=0)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_rsqrt_one_launch(dt, no_fallback):
    """aten.rsqrt and pow(x, -0.5) (HF RMSNorm's) are one launch of 1 / sqrt(x) (they were sqrt then
    reciprocal: two launches, and in half types a rounding between them): torch CPU's bits in f32;
    half types compute in f32 and round once (torch CPU's half kernels differ by 1 ulp on ~0.02% of
    inputs, so against the f32 result rounded)."""
    from fuelvk import runtime
    x = (torch.rand(3, 40, generator=torch.Generator().manual_seed(3)) * 50 + 1e-3).to(dt)
    want = torch.rsqrt(x) if dt == torch.float32 else torch.rsqrt(x.float()).to(dt)
    xd = x.to(DEV)
    stream = runtime.get().stream
    for f, launches in ((torch.rsqrt, 1), (lambda t: t.pow(-0.5), 1), (lambda t: t.clone().rsqrt_(), 2)):
        f(xd)
        fuelvk.synchronize()
        before = stream.dispatches
        got = f(xd)
        assert stream.dispatches - before == launches
        assert torch.equal(got.cpu(), want)


DECODE_SDPA = {  # (Hq, Hk, Sq, Sk, kwargs): calls with G * Sq <= 4 rows per kv head
    "decode": (4, 2, 1, 9, {"enable_gqa": True}), "decode_mha": (2, 2, 1, 5, {}),
    "two_rows": (4, 2, 2, 7, {"enable_gqa": True, "scale": 0.3}),
    "causal_band": (2, 1, 2, 2, {"enable_gqa": True, "is_causal": True}),        # Sq == Sk: top-left = band
    "causal_sq_gt_sk": (2, 2, 3, 2, {"is_causal": True}),                         # rows below the band see more
    "causal_sq_lt_sk": (2, 2, 1, 6, {"is_causal": True}),                         # top-left Sq < Sk: composed
    "bool_mask": (2, 2, 1, 6, {"attn_mask": torch.tensor([[True, False, True, True, False, True]])}),
    "additive_mask": (2, 2, 1, 6, {"attn_mask": torch.linspace(-2, 1, 6).reshape(1, 6)}),
    "prefill": (4, 2, 8, 8, {"enable_gqa": True, "is_causal": True}),              # 16 rows: composed
}
FUSED_DECODE = {"decode", "decode_mha", "two_rows", "causal_band", "causal_sq_gt_sk"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("kind", sorted(DECODE_SDPA))
def test_sdpa_without_graph_takes_the_fused_kernel_where_cheaper(kind, dtype, no_fallback, monkeypatch):
    """A call that builds no autograd graph and that the fused kernel expresses takes it on a CPU device
    when each kv head has at most one decode row block (G * Sq <= 4: generate()'s decode steps), torch's
    CPU result either way; masks, top-left causal with Sq < Sk, longer prefills and calls needing grads
    keep the composed path."""
    import fuelvk as fv
    from fuelvk.torch import _aten_nn
    hq, hk, sq, sk, kw = DECODE_SDPA[kind]
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, hq, sq, 16, generator=g).to(dtype)
    k, v = (torch.randn(2, hk, sk, 16, generator=g).to(dtype) for _ in range(2))
    kw = {a: (b.to(dtype) if isinstance(b, torch.Tensor) and b.is_floating_point() else b) for a, b in kw.items()}
    kwd = {a: (b.to(DEV) if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    calls = []
    fused = fv.scaled_dot_product_attention
    monkeypatch.setattr(_aten_nn.fv, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused(*a, **k))
    want = TF.scaled_dot_product_attention(q.float(), k.float(), v.float(), **{
        a: (b.float() if isinstance(b, torch.Tensor) and b.is_floating_point() else b) for a, b in kw.items()})
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    with torch.no_grad():
        got = TF.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), **kwd)
    assert got.dtype == dtype and got.shape == want.shape
    close(got.float(), want, rtol=tol, atol=tol)
    assert len(calls) == (kind in FUSED_DECODE), kind
    if dtype != torch.float32:
        return
    calls.clear()
    dev = [t.to(DEV).requires_grad_() for t in (q, k, v)]   # a graph to build: the composed path
    od = TF.scaled_dot_product_attention(*dev, **kwd)
    assert not calls and od.grad_fn is not None
    od.float().sum().backward()
    assert all(t.grad is not None for t in dev)


# -- differential audit against torch CPU: cases that gave a silent wrong answer (or none of CPU's errors) --
def _both(f, x):
    return f(x.clone()), f(x.to(DEV))


def _bits_equal(cpu, dev):
    dev = dev.cpu()
    assert dev.dtype == cpu.dtype and dev.shape == cpu.shape, (dev.dtype, dev.shape, cpu.dtype, cpu.shape)
    if cpu.is_floating_point():   # -0.0 and 0.0 differ; NaNs match NaNs
        assert torch.equal(cpu.isnan(), dev.isnan())
        c, d = cpu.nan_to_num(0.0), dev.nan_to_num(0.0)
        assert torch.equal(c, d) and torch.equal(c.signbit(), d.signbit()), (dev, cpu)
    else:
        assert torch.equal(cpu, dev), (dev, cpu)


_Z = torch.tensor([0.0, -0.0, 1.5, float("nan")])
SAME_AS_CPU = {
    "maximum_ties": (lambda x: torch.maximum(x, -x), _Z),        # torch keeps the first operand on -0/0 ties
    "minimum_ties": (lambda x: torch.minimum(x, -x), _Z),
    "maximum_bf16": (lambda x: torch.maximum(x, -x), _Z.bfloat16()),
    "clamp_min_ties": (lambda x: x.clamp(min=0.0), _Z),
    "clamp_max_ties": (lambda x: x.clamp(max=-0.0), _Z),
    "clamp_min_op": (lambda x: torch.clamp_min(x, 0.0), _Z),
    "sign_nan": (torch.sign, _Z),                                  # torch: (0 < x) - (x < 0) = 0 for NaN
    "cumsum_0d": (lambda x: x.cumsum(0), torch.tensor(2.5)),       # was shape (1,)
    "uint8_add_wraps": (lambda x: x + 300, torch.arange(4, dtype=torch.uint8)),
    "uint8_mul_neg": (lambda x: x * -1, torch.arange(4, dtype=torch.uint8)),
    "uint8_eq_wraps": (lambda x: x == 256, torch.arange(4, dtype=torch.uint8)),
    "int8_floordiv_wraps": (lambda x: x // 300, torch.arange(4, dtype=torch.int8)),
    "masked_fill_broadcasts_self": (lambda x: x.masked_fill(torch.ones(3, 4, dtype=torch.bool, device=x.device), 2.0),
                                    torch.arange(4.)),
    "sum_out_dtype": (lambda x: torch.sum(x, 0, out=torch.empty((), dtype=torch.int64, device=x.device)),
                      torch.arange(6.)),
}


@pytest.mark.parametrize("case", list(SAME_AS_CPU))
def test_same_as_cpu(case):
    f, x = SAME_AS_CPU[case]
    cpu, dev = _both(f, x)
    _bits_equal(cpu, dev)


REFUSED_AS_ON_CPU = {
    "out_float_into_int": lambda x: torch.add(x, 1, out=torch.empty(6, dtype=torch.int32, device=x.device)),
    "out_exp_into_int": lambda x: torch.exp(x, out=torch.empty(6, dtype=torch.int64, device=x.device)),
    "inplace_int_mul_float": lambda x: x.long().mul_(1.5),
    "inplace_int_add_float_tensor": lambda x: x.long().add_(x),
    "inplace_bool_add_int": lambda x: (x > 2).add_(1),
    "int_floordiv_zero": lambda x: x.long() // 0,
    "int_remainder_zero": lambda x: x.long() % 0,
    "int_floordiv_zero_tensor": lambda x: x.long() // (x.long() - 1),
    "inplace_partial_overlap": lambda x: x[1:].add_(x[:-1]),
    "inplace_transposed_self": lambda x: x[:4].view(2, 2).add_(x[:4].view(2, 2).t()),
    "out_overlaps_input": lambda x: torch.add(x[:4], 1, out=x[1:5]),
}


@pytest.mark.parametrize("case", list(REFUSED_AS_ON_CPU))
def test_refused_as_on_cpu(case):
    """torch CPU raises a RuntimeError; the device raises one too (fuelvk's, without running on the CPU)."""
    f = REFUSED_AS_ON_CPU[case]
    with pytest.raises(RuntimeError):
        f(torch.arange(6.))
    ft.reset_fallback_stats()
    with pytest.raises(RuntimeError) as e:
        f(torch.arange(6.).to(DEV))
    assert isinstance(e.value, fuelvk.FuelVKError) and ft.fallback_stats() == {}, e.value


def test_overlap_check_allows_same_view():
    """x.add_(x) and an out= that is exactly an input are full overlaps, allowed as on the CPU."""
    x = torch.arange(6.).to(DEV)
    x.add_(x)
    torch.mul(x, 2, out=x)
    assert x.cpu().tolist() == [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
