"""Result layouts of the fuelvk torch device against torch CPU: every op family's result has CPU's strides
(TensorIterator's rule for elementwise ops, empty_like's for clone and the *_like factories, contiguous
where torch makes it so), and reading a result through its storage (as_strided, .view) gives CPU's
elements. Small tensors: the layouts are what is tested."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF

import fuelvk.torch  # noqa: F401  (registers the device)
from fuelvk.torch import _layout

DEV = "fuelvk"


def _maker(dev, seed):
    """make(shape, dtype): a fresh contiguous tensor of seeded values, on the CPU or the device."""
    def make(shape, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g) * 3
        x = x.to(dtype) if dtype != torch.bool else x > 0
        return x.to(DEV) if dev else x
    return make


# Layouts of a (3, 4) or (2, 3, 2, 2) operand: the same views of a fresh tensor on both sides.
LAYOUTS = {
    "contiguous": lambda m, dt: m((3, 4), dt),
    "transposed": lambda m, dt: m((4, 3), dt).t(),
    "sliced": lambda m, dt: m((3, 8), dt)[:, ::2],                 # not dense
    "expanded": lambda m, dt: m((1, 4), dt).expand(3, 4),           # stride 0
    "offset_t": lambda m, dt: m((5, 3), dt)[1:].t(),                # a storage offset, (3, 4)
    "channels_last": lambda m, dt: m((2, 3, 2, 2), dt).contiguous(memory_format=torch.channels_last),
    "permuted3": lambda m, dt: m((4, 2, 3), dt).permute(1, 2, 0),
    "col_t": lambda m, dt: m((1, 3), dt).t(),                       # (3, 1) strides (1, 3)
    "row": lambda m, dt: m((4,), dt),
    "bias4": lambda m, dt: m((3, 1, 1), dt),
}


def _storage_read(r):
    """r's elements in storage order (r dense): what as_strided / data_ptr arithmetic reads."""
    return r.as_strided((r.numel(),), (1,), r.storage_offset())


def _dense(t):
    return _layout.non_overlapping_and_dense(tuple(t.shape), t.stride())


def check_same(cpu, dev):
    """dev (a fuelvk result) has cpu's shape, dtype, strides and values, also read through its storage."""
    if isinstance(cpu, (tuple, list)):
        for c, d in zip(cpu, dev):
            check_same(c, d)
        return
    assert dev.device.type == DEV
    assert dev.shape == cpu.shape and dev.dtype == cpu.dtype, (dev.shape, dev.dtype, cpu.shape, cpu.dtype)
    assert dev.stride() == cpu.stride(), f"strides {dev.stride()} on {DEV}, {cpu.stride()} on the CPU"
    got = dev.cpu()
    torch.testing.assert_close(got, cpu, equal_nan=True, rtol=2e-3, atol=2e-3)
    if _dense(cpu) and cpu.numel():
        torch.testing.assert_close(_storage_read(dev).cpu(), _storage_read(cpu), equal_nan=True, rtol=2e-3, atol=2e-3)


def _run(op, layouts, dtype=torch.float32):
    """op over operands of these layouts on the CPU and the device: same strides and values, or both raise."""
    cpu_in = [LAYOUTS[n](_maker(False, i), dtype) for i, n in enumerate(layouts)]
    dev_in = [LAYOUTS[n](_maker(True, i), dtype) for i, n in enumerate(layouts)]
    try:
        cpu = op(*cpu_in)
    except RuntimeError:
        with pytest.raises(Exception):
            op(*dev_in)
        return
    check_same(cpu, op(*dev_in))


def test_issue_example():
    """The report this file answers: a transposed tensor plus 1 kept CPU's layout, and as_strided reads
    the same elements."""
    x = torch.arange(12.).reshape(3, 4).t()
    z = x.to(DEV) + 1
    assert z.stride() == (1, 4) == (x + 1).stride()
    assert z.as_strided((3,), (1,)).cpu().tolist() == [1.0, 2.0, 3.0]
    assert x.to(DEV).stride() == (1, 4) and x.to(DEV).cpu().stride() == (1, 4)
    assert x.to(DEV).clone().stride() == (1, 4)


UNARY = {
    "neg": torch.neg, "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 1), "sqrt": lambda x: x.abs().sqrt(),
    "rsqrt": lambda x: (x.abs() + 1).rsqrt(), "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": TF.silu,
    "relu": torch.relu, "abs": torch.abs, "sin": torch.sin, "cos": torch.cos, "reciprocal": torch.reciprocal,
    "sign": torch.sign, "erf": torch.erf, "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"),
    "gelu": TF.gelu, "square": lambda x: x ** 2, "pow3": lambda x: x ** 3, "pow_half": lambda x: x.abs() ** 0.5,
    "pow_m1": lambda x: x ** -1, "pow_1": lambda x: x ** 1, "clamp": lambda x: x.clamp(-1, 1),
    "clamp_min": lambda x: x.clamp_min(0.5), "clamp_max": lambda x: x.clamp_max(0.5),
    "to_f16": lambda x: x.to(torch.float16), "to_bf16": lambda x: x.to(torch.bfloat16),
    "to_f64": lambda x: x.double(), "to_int": lambda x: x.to(torch.int32),
    "clone": torch.clone, "contiguous": lambda x: x.contiguous(),
    "clone_contiguous": lambda x: x.clone(memory_format=torch.contiguous_format),
    "empty_like_shape": lambda x: torch.empty_like(x).fill_(2), "zeros_like": torch.zeros_like,
    "ones_like": torch.ones_like, "full_like": lambda x: torch.full_like(x, 7.0),
    "mul_scalar": lambda x: x * 2, "add_scalar": lambda x: x + 1, "rsub": lambda x: 1 - x,
    "div_scalar": lambda x: x / 3, "radd_alpha": lambda x: torch.add(x, 2, alpha=3),
    "remainder": lambda x: x % 2, "floor_divide": lambda x: x // 2, "pow_scalar_base": lambda x: 2 ** x,
    "lt_scalar": lambda x: x < 0.5, "eq_scalar": lambda x: x == 0, "ne_scalar": lambda x: x != 0,
    "logical_not": torch.logical_not, "masked_fill": lambda x: x.masked_fill(x > 0, 0.5),
    "where_scalar": lambda x: torch.where(x > 0, x, 0.0), "type_as": lambda x: x.type_as(x.half()),
    "dropout_eval": lambda x: TF.dropout(x, 0.5, training=False), "lerp": lambda x: torch.lerp(x, x * 2, 0.25),
    "add_inplace": lambda x: x.clone().add_(1), "mul_inplace_view": lambda x: x.clone().mul_(x),
    "sigmoid_backward": lambda x: torch.ops.aten.sigmoid_backward(x, x),
    "tanh_backward": lambda x: torch.ops.aten.tanh_backward(x, x),
    "silu_backward": lambda x: torch.ops.aten.silu_backward(x, x),
    "threshold_backward": lambda x: torch.ops.aten.threshold_backward(x, x, 0.0),
    "gelu_backward": lambda x: torch.ops.aten.gelu_backward(x, x, approximate="tanh"),
}


@pytest.mark.parametrize("layout", ["transposed", "sliced", "offset_t", "channels_last", "col_t"])
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_layout(op, layout):
    _run(UNARY[op], [layout])


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": lambda a, b: a.abs() ** b, "remainder": torch.remainder,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2), "lt": torch.lt, "ge": torch.ge, "eq": torch.eq,
    "logical_and": torch.logical_and, "where": lambda a, b: torch.where(a > b, a, b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5), "addcdiv": lambda a, b: torch.addcdiv(a, a, b.abs() + 1),
    "clamp_t": lambda a, b: a.clamp_min(b), "masked_fill_t": lambda a, b: a.masked_fill(b > 0, 1.0),
    "copy_into": lambda a, b: a.clone().copy_(b),
}

# (first operand, second operand) layouts, same shape or broadcasting against each other
PAIRS = [("contiguous", "transposed"), ("transposed", "contiguous"), ("transposed", "transposed"),
         ("sliced", "transposed"), ("expanded", "transposed"), ("channels_last", "channels_last"),
         ("permuted3", "permuted3"), ("col_t", "row"), ("transposed", "row"), ("row", "transposed"),
         ("col_t", "col_t"), ("channels_last", "bias4")]
@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_layout(op, pair):
    _run(BINARY[op], pair)


INT_OPS = {"bitwise_not": lambda a, b: ~a, "bitwise_and": lambda a, b: a & b, "add": lambda a, b: a + b,
           "mul_scalar": lambda a, b: a * 3, "lt": lambda a, b: a < b, "neg": lambda a, b: -a}


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "col_t"])
@pytest.mark.parametrize("op", list(INT_OPS))
def test_integer_layout(op, layout):
    _run(INT_OPS[op], [layout, layout], torch.int32)


# Ops torch makes contiguous (or lays out by its own rule): must not follow the inputs' layout.
OWN_LAYOUT = {
    "softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, 0),
    "sum_keepdim": lambda x: x.sum(1, keepdim=True), "sum0": lambda x: x.sum(0),
    "mean_keepdim": lambda x: x.mean(0, keepdim=True), "amax_keepdim": lambda x: x.amax(-1, keepdim=True),
    "max_dim": lambda x: x.max(1, keepdim=True), "argmax": lambda x: x.argmax(0, keepdim=True),
    "var": lambda x: x.var(1, keepdim=True), "cumsum": lambda x: x.cumsum(0), "matmul": lambda x: x @ x.mT,
    "sort": lambda x: x.sort(-1), "topk": lambda x: x.topk(1, 0), "flip": lambda x: x.flip(0),
    "cat": lambda x: torch.cat([x, x], 1), "reshape": lambda x: x.reshape(-1), "tril": torch.tril,
    "layer_norm": lambda x: TF.layer_norm(x, x.shape[-1:]), "index_select": lambda x: x.index_select(0, torch.tensor([1, 0], device=x.device)),
    "roll": lambda x: x.roll(1, 0), "gather": lambda x: x.gather(0, torch.zeros_like(x, dtype=torch.int64)),
    "scatter": lambda x: x.scatter(0, torch.zeros_like(x, dtype=torch.int64)[:1], 5.0),
    "index": lambda x: x[torch.tensor([0, 0], device=x.device)],
    "index_mid": lambda x: x[:, torch.tensor([[0], [0]], device=x.device)],
    "index2": lambda x: x[torch.tensor([0, 1], device=x.device), torch.tensor([[0], [0]], device=x.device)], "repeat": lambda x: x.repeat(2, 1),
    "masked_select": lambda x: x[x > 0], "nonzero": lambda x: (x > 0).nonzero(), "mv": lambda x: x.mT @ x[..., 0],
}


@pytest.mark.parametrize("layout", ["transposed", "col_t", "permuted3"])
@pytest.mark.parametrize("op", list(OWN_LAYOUT))
def test_own_layout(op, layout):
    _run(OWN_LAYOUT[op], [layout])


@pytest.mark.parametrize("layout", [n for n in LAYOUTS if n not in ("row", "bias4")])
def test_transfer_keeps_strides(layout):
    """.to(fuelvk) and .cpu() keep a dense tensor's strides (empty_like's rule otherwise), as torch does."""
    x = LAYOUTS[layout](_maker(False, 3), torch.float32)
    d = x.to(DEV)
    want = x.clone()   # CPU's own .to() of this layout (preserve_format): clone's strides
    assert d.stride() == want.stride()
    back = d.cpu()
    assert back.stride() == want.stride() and torch.equal(back, x)


def test_view_of_result():
    """A .view() CPU allows on a result that kept a transposed layout works on the device too."""
    x = torch.arange(24.).reshape(4, 6)
    cpu = (x.t() * 2).t().view(24)
    dev = (x.to(DEV).t() * 2).t().view(24)
    assert torch.equal(dev.cpu(), cpu)
    a = (x.view(6, 4).t() * 2).as_strided((3, 3), (1, 4), 1)
    b = (x.to(DEV).view(6, 4).t() * 2).as_strided((3, 3), (1, 4), 1)
    assert torch.equal(b.cpu(), a)


def test_iterator_strides_rule():
    """The rule against torch CPU's TensorIterator over odd layouts: size-1 dims with large
    strides, empty dims, broadcasting on both sides, a scalar, three operands (addcmul)."""
    cases = [
        [((3, 1), (1, 3)), None],
        [((2, 1, 3), (3, 100, 1)), None],
        [((2, 1, 3), (3, 100, 1)), ((2, 1, 3), (3, 100, 1))],
        [((2, 1, 3), (3, 100, 1))],
        [((0, 3), (1, 0)), None],
        [((2, 0, 3), (1, 6, 2)), None],
        [((3, 1), (1, 1)), ((1, 4), (4, 1))],
        [((3, 4), (1, 3)), ((3, 4), (4, 1)), ((4,), (1,))],
        [((2, 3, 4), (1, 8, 2)), ((3, 1), (1, 1))],
        [((2, 3, 2, 2), (12, 1, 6, 3)), ((3, 1, 1), (1, 1, 1))],
        [((2, 3, 2, 2), (12, 1, 6, 3)), ((2, 3, 2, 2), (12, 1, 6, 3))],
        [((4, 3), (1, 4)), ((4, 3), (1, 4))],
        [((4, 3), (1, 4)), ((4, 3), (3, 1))],
    ]
    for ops in cases:
        ts = [torch.empty_strided(o[0], o[1]) if o else 1.0 for o in ops]
        want = (torch.neg(ts[0]) if len(ts) == 1 else torch.add(*ts) if len(ts) == 2 else torch.addcmul(*ts))
        got = _layout.iterator_strides(tuple(want.shape), [o if o else ((), ()) for o in ops])
        assert got == want.stride(), (ops, got, want.stride())
