"""unary / binary / affine in f32, f16, bf16, f64 against numpy (ml_dtypes for bf16)."""

import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk.kernels.elementwise import UNARY_OPS, BINARY_OPS
from oracles import FLOATS, TRANS_TOL, assert_bits, assert_close

RNG = np.random.default_rng(1234)


def _ref_unary(name, x64):
    """float64 reference for each unary op (torch semantics where numpy has no function)."""
    t = torch.from_numpy(x64)
    return {
        "negative": lambda: -x64, "square": lambda: x64 * x64, "sqrt": lambda: np.sqrt(x64),
        "exp": lambda: np.exp(x64), "log": lambda: np.log(x64), "sin": lambda: np.sin(x64),
        "cos": lambda: np.cos(x64), "tanh": lambda: np.tanh(x64),
        "sigmoid": lambda: torch.sigmoid(t).numpy(), "silu": lambda: torch.nn.functional.silu(t).numpy(),
        "gelu": lambda: torch.nn.functional.gelu(t, approximate="tanh").numpy(),
        "relu": lambda: torch.relu(t).numpy(), "heaviside": lambda: np.heaviside(x64, 0.0),
        "abs": lambda: np.abs(x64), "sign": lambda: np.sign(x64), "reciprocal": lambda: 1.0 / x64,
    }[name]()


EXACT_UNARY = {"negative", "relu", "heaviside", "abs", "sign"}
POSITIVE = {"sqrt", "log"}


def _inputs(name, shape, dt):
    lo, hi = (0.05, 4.0) if name in POSITIVE else (-4.0, 4.0)
    return RNG.uniform(lo, hi, size=shape).astype(dt)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("name", UNARY_OPS)
def test_unary(name, dt):
    x = _inputs(name, (3, 257), dt)
    got = getattr(fv, name)(x)
    assert isinstance(got, np.ndarray) and got.dtype == dt and got.shape == x.shape
    want = _ref_unary(name, x.astype(np.float64)).astype(dt)
    if name in EXACT_UNARY or (name == "square" and dt != np.float64):
        assert_bits(got, want)
    else:
        # the reference rounded to dt, so allow one rounding of dt on top of the math tolerance
        assert_close(got, want, dt, table=TRANS_TOL, scale=2.0)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_rsqrt_bits(dt):
    """ops.elementwise.rsqrt (the PyTorch device's aten.rsqrt): 1 / sqrt(x) with two roundings in the
    compute type (f32 for half types, rounded once to dt), numpy's and torch CPU's bits; NaN for x < 0."""
    from fuelvk.ops.elementwise import rsqrt
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0, 10, 600), np.exp(rng.normal(0, 20, 600)),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-40, 4.0, 1.0]]).astype(dt)
    got = rsqrt(x)
    wide = np.float64 if dt == np.float64 else np.float32
    with np.errstate(all="ignore"):
        want = (1 / np.sqrt(x.astype(wide))).astype(dt)
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    assert_bits(got[~nan], want[~nan])
    if dt in (np.float32, np.float64):   # torch CPU's f16 / bf16 kernels are 1 ulp off that in ~0.02% of inputs
        ref = torch.rsqrt(torch.from_numpy(x[~nan])).numpy()
        assert_bits(got[~nan], ref)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_unary_special_values(dt):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 80.0, -80.0], dtype=dt)
    assert_bits(fv.negative(x), -x)
    assert_bits(fv.abs(x), np.abs(x))
    np.testing.assert_array_equal(fv.sign(x), np.sign(x))
    np.testing.assert_array_equal(fv.relu(x), torch.relu(torch.from_numpy(x.astype(np.float64))).numpy().astype(dt))
    np.testing.assert_array_equal(fv.heaviside(x, 0.5), np.heaviside(x, np.asarray(0.5, dt)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.isnan(fv.tanh(x)), np.isnan(x))      # no NaN from large |x|
        np.testing.assert_array_equal(fv.tanh(x)[np.isfinite(x)] ** 2 <= 1, True)
        assert_close(fv.sigmoid(x), torch.sigmoid(torch.from_numpy(x.astype(np.float64))).numpy().astype(dt), dt,
                     table=TRANS_TOL, scale=2.0)
        np.testing.assert_array_equal(fv.reciprocal(x)[:4], (1 / x.astype(np.float64))[:4].astype(dt))


def _ref_binary(name, a, b):
    return {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
            "maximum": np.maximum, "minimum": np.minimum}[name](a, b)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("name", BINARY_OPS[:6])   # the arithmetic ones; the array API's math: test_array_api
def test_binary_broadcast(name, dt):
    a = RNG.uniform(-3, 3, size=(4, 1, 33)).astype(dt)
    b = RNG.uniform(0.5, 3, size=(5, 1)).astype(dt)
    got = getattr(fv, name)(a, b)
    # numpy computes half types in f32 and rounds: the same single rounding as the kernel
    want = _ref_binary(name, a.astype(np.float64), b.astype(np.float64)).astype(dt)
    assert got.shape == (4, 5, 33)
    if name == "divide":
        assert_close(got, want, dt)
    else:
        assert_bits(got, want)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_maximum_minimum_nan(dt):
    a = np.array([np.nan, 1.0, np.nan, -np.inf], dt)
    b = np.array([1.0, np.nan, np.nan, 2.0], dt)
    np.testing.assert_array_equal(fv.maximum(a, b), np.maximum(a, b))
    np.testing.assert_array_equal(fv.minimum(a, b), np.minimum(a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_scalar_operands(dt):
    x = RNG.uniform(-3, 3, size=(7, 9)).astype(dt)
    xa = fv.asarray(x)
    s = np.asarray(0.3, dt).astype(np.float64)  # numpy's weak scalar: 0.3 rounded to dt first
    assert_bits(xa + 0.3, (x.astype(np.float64) + s).astype(dt))
    assert_bits(0.3 - xa, (s - x.astype(np.float64)).astype(dt))
    assert_bits(xa * 2, (x * np.asarray(2, dt)).astype(dt))
    assert_close(1.5 / xa, (1.5 / x.astype(np.float64)).astype(dt), dt)
    assert_bits(fv.maximum(xa, 0.0), np.maximum(x, np.asarray(0, dt)))
    assert isinstance(xa + 1, fv.Array)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_affine(dt):
    x = RNG.uniform(-3, 3, size=(1000,)).astype(dt)
    got = fv.affine(x, 1.5, -0.25)
    x64 = x.astype(np.float64)
    if dt == np.float64:
        assert_bits(got, x64 * 1.5 - 0.25)
    else:
        # two f32 roundings then one to dt; compare within one ulp of dt
        assert_close(got, (x64 * 1.5 - 0.25).astype(dt), dt)


VIEWS = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "negative_step": lambda a: a[::-1, ::-2],
    "sliced_offset": lambda a: a[3:, 5:-1],
    "broadcast": lambda a: a[:1].broadcast_to(a.shape) if isinstance(a, fv.Array) else np.broadcast_to(a[:1], a.shape),
}


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("view", VIEWS)
def test_views(dt, view):
    host = RNG.uniform(0.5, 2, size=(16, 23)).astype(dt)
    dev = fv.asarray(host)
    v_dev, v_host = VIEWS[view](dev), VIEWS[view](host)
    assert_bits(fv.negative(v_dev), -v_host)
    assert_close(fv.exp(v_dev), np.exp(v_host.astype(np.float64)).astype(dt), dt, table=TRANS_TOL, scale=2)
    assert_bits(fv.add(v_dev, v_dev), (v_host.astype(np.float64) * 2).astype(dt))
    other = RNG.uniform(0.5, 2, size=v_host.shape).astype(dt)
    assert_bits(fv.multiply(v_dev, other), (v_host.astype(np.float64) * other).astype(dt))
    assert_bits(fv.subtract(other, v_dev), (other.astype(np.float64) - v_host).astype(dt))


@pytest.mark.parametrize("n", [0, 1, 7, 255, 256, 257, 1023, 1025, 4097])
def test_sizes(n):
    x = RNG.uniform(-1, 1, size=n).astype(np.float32)
    y = RNG.uniform(-1, 1, size=n).astype(np.float32)
    assert_bits(fv.add(x, y), x + y)
    assert_bits(fv.negative(x), -x)
    # unaligned offsets take the general (non-vec4) path: same answers
    xa = fv.asarray(np.concatenate([[0], x]).astype(np.float32))[1:]
    assert_bits(fv.add(xa, y), x + y)


def test_large_size():
    n = 1_000_003
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    assert_bits(fv.add(x, y), x + y)
    assert_bits(fv.maximum(x[::-1], y), np.maximum(x[::-1], y))


@pytest.mark.parametrize("rank", range(0, 8))
def test_ranks(rank):
    shape = (2, 3, 1, 4, 2, 3, 2)[:rank]
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.standard_normal(shape[-2:] if rank >= 2 else shape).astype(np.float32)
    assert_bits(fv.add(x, y), x + y)
    # a permuted view whose dims cannot collapse exercises rank > 6 splitting at rank 7
    perm = tuple(reversed(range(rank)))
    xd = fv.asarray(x).transpose(perm)
    assert_bits(fv.negative(xd), -np.transpose(x, perm))


def test_grid_split_over_y(monkeypatch):
    """More workgroups than maxComputeWorkGroupCount[0]: the grid is split over y."""
    from fuelvk import runtime
    ctx = runtime.get()
    monkeypatch.setattr(ctx, "max_groups", (3, 65535, 65535))
    x = RNG.standard_normal(50_001).astype(np.float32)
    assert_bits(fv.negative(x), -x)
    assert_bits(fv.negative(x[::-1]), -x[::-1])


def test_array_in_array_out_and_operators():
    a = fv.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = (a + a) * 2.0 - 1.0
    assert isinstance(b, fv.Array)
    np.testing.assert_array_equal(b.numpy(), (np.arange(6).reshape(2, 3) * 4 - 1).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(-a), -np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(abs(-a).numpy(), a.numpy())


def test_errors():
    x = np.ones(4, np.float32)
    with pytest.raises(fv.ShapeError, match="add: shapes"):
        fv.add(np.ones((2, 3), np.float32), np.ones((4,), np.float32))
    with pytest.raises(fv.DTypeError, match="negative: dtype bool"):
        fv.negative(np.ones(3, np.bool_))        # (integers run shaders/intops.comp)
    with pytest.raises(TypeError):  # DTypeError is a TypeError
        fv.exp(np.ones(3, np.int64))
    with pytest.raises(fv.DTypeError, match="exp: dtype complex64 is not supported"):
        fv.exp(np.ones(3, np.complex64))         # stored (the array API names it), no complex math yet
    with pytest.raises(fv.DTypeError, match="pow: dtype bool"):
        fv.power(np.ones(3, np.bool_), 2.0)      # (a float exponent is the array API's pow)
    with pytest.raises(fv.DTypeError, match="clip: x must have a real numeric dtype"):
        fv.clip(np.ones(3, np.bool_), 0, 1)


def test_f64_transcendentals_full_range():
    """math64.glsl: near correctly rounded double exp/log/sin/cos/tanh over wide ranges."""
    x = np.concatenate([RNG.uniform(-700, 700, 2000), RNG.uniform(-1e-3, 1e-3, 500)])
    np.testing.assert_allclose(fv.exp(x), np.exp(x), rtol=1e-15)
    y = np.exp(RNG.uniform(-700, 700, 2000))
    np.testing.assert_allclose(fv.log(y), np.log(y), rtol=1e-15, atol=1e-15)
    z = RNG.uniform(-1e4, 1e4, 2000)
    np.testing.assert_allclose(fv.sin(z), np.sin(z), atol=1e-15)
    np.testing.assert_allclose(fv.cos(z), np.cos(z), atol=1e-15)
    np.testing.assert_allclose(fv.tanh(x[:2000] / 30), np.tanh(x[:2000] / 30), rtol=1e-15)
    np.testing.assert_allclose(fv.tanh(x[2000:]), np.tanh(x[2000:]), rtol=1e-15)   # no cancellation near 0
    special = np.array([np.nan, np.inf, -np.inf, 710.0, -746.0, 0.0])
    with np.errstate(all="ignore"):   # the reference exp(710) overflows to inf, as it should
        np.testing.assert_array_equal(fv.exp(special), np.exp(special))
        lg = np.array([0.0, -1.0, np.inf, np.nan, 1.0])
        np.testing.assert_array_equal(fv.log(lg), np.log(lg))
        np.testing.assert_array_equal(fv.sin(np.array([np.inf, np.nan, 0.0])), np.sin(np.array([np.inf, np.nan, 0.0])))


def test_f64_sin_cos_huge_arguments():
    """Payne-Hanek from 2^12 (math64.glsl ph_reduce): sin / cos of doubles up to the largest finite one
    within 1 ulp of numpy's (glibc's exact reduction), both signs, at the 2^12 switch too."""
    x = np.concatenate([2.0 ** RNG.uniform(11, 1023, 600), [2.0**12, np.nextafter(2.0**12, 0), 4.7725333e15,
                                                             1e22, np.finfo(np.float64).max]])
    x = np.concatenate([x, -x])
    np.testing.assert_allclose(fv.sin(x), np.sin(x), rtol=0, atol=2.3e-16)
    np.testing.assert_allclose(fv.cos(x), np.cos(x), rtol=0, atol=2.3e-16)


def test_f32_sin_cos_huge_arguments():
    """float32 sin / cos from |x| >= 256 reduce by Payne-Hanek (trigred.glsl), then the builtins on
    [-pi/4, pi/4]: within ~1 ulp of the exact value up to float32's max (lavapipe's cos(5.57e10) was 1.0)."""
    x = np.concatenate([(2.0 ** RNG.uniform(7, 127.9, 600)).astype(np.float32), np.float32([256, 5.566665e10, 3.4e38])])
    x = np.concatenate([x, -x])
    for name in ("sin", "cos"):
        np.testing.assert_allclose(getattr(fv, name)(x), getattr(np, name)(x.astype(np.float64)), rtol=0, atol=1.2e-7)
    # tan = sin / cos of the same reduction: an error d in the reduced angle moves tan by (1 + tan^2) d
    want = np.tan(x.astype(np.float64))
    np.testing.assert_array_less(np.abs(fv.tan(x) - want), 2.4e-7 * (np.abs(want) + 1 + want * want))


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
def test_float64_rounding_bit_exact_over_the_whole_range(name):
    """Doubles round exactly at every magnitude up to 2^53 (ties to even, -0 kept), where the device's
    own double trunc / roundEven are wrong (lavapipe: trunc(2^30 + 0.5), roundEven(-1.5), trunc(-0.5))."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.integers(-2**52, 2**52, 4000) / 2.0, rng.integers(-100, 100, 400) + 0.5,
                        rng.standard_normal(400), [2**52 - 0.5, -(2**52 - 0.5), 2**53 + 2, 0.49999999999999994,
                                                   -0.5, -0.0, 0.0, 5e-324, -5e-324, np.inf, -np.inf, np.nan]])
    got = getattr(fv, name)(x)
    assert got.view(np.uint64).tolist() == getattr(np, name)(x).view(np.uint64).tolist()


# ---- op ids and flag bits: named constants shared with the shaders ------------------------------------

def _cases(shader, function):
    """The OP_<NAME> case labels in `function`'s body in shaders/<shader>."""
    import re
    from pathlib import Path
    src = (Path(__file__).resolve().parents[1] / "shaders" / shader).read_text()
    body = re.search(rf"\b{function}\([^)]*\) {{\n(.*?)\n}}\n", src, re.S).group(1)
    return re.findall(r"case OP_(\w+):", body)


def test_op_tables_unique_and_every_op_has_its_shader_case():
    """Each table is one shader switch: ids unique within it, every op named by exactly one
    `case OP_<NAME>:` and no case without a table entry (adding an op cannot collide or go missing)."""
    from fuelvk.kernels import elementwise as E, intops as I
    for table, shader, function in ((E.UNARY, "elementwise.comp", "apply_unary_op"),
                                    (E.BINARY, "elementwise.comp", "apply_binary"),
                                    (E.COMPARE, "compare.comp", "compare"),
                                    (I.INT_BINARY, "intops.comp", "apply_binary"),
                                    (I.INT_UNARY, "intops.comp", "apply_unary")):
        assert sorted(table.values()) == list(range(len(table))), table
        cases = _cases(shader, function)
        assert sorted(cases) == sorted(n.upper() for n in table), (shader, function)
    from fuelvk.kernels.movement import WRITE_FLAGS
    for flags in (E.FLAGS, WRITE_FLAGS):
        bits = list(flags.values())
        assert len(set(bits)) == len(bits) and all(b & (b - 1) == 0 for b in bits)
    assert E.FLAGS["b_contiguous"] == E.FLAGS["a_contiguous"] << E.FLAG_B_SHIFT
    assert E.FLAGS["b_constant"] == E.FLAGS["a_constant"] << E.FLAG_B_SHIFT


def test_shader_sees_the_table_ids():
    """The compiled variants carry the tables as defines (what the shader's names expand to)."""
    from fuelvk.kernels import kernel
    from fuelvk.kernels import elementwise as E
    unary = dict(kernel("unary", "f32").defines)
    assert all(unary[f"OP_{n.upper()}"] == i for n, i in E.UNARY.items())
    assert dict(kernel("affine", "f32").defines)["FIXED_OP"] == E.UNARY["affine"]
    binary = dict(kernel("binary", "f32").defines)
    assert all(binary[f"OP_{n.upper()}"] == i for n, i in E.BINARY.items())
    assert all(binary[f"FLAG_{n.upper()}"] == b for n, b in E.FLAGS.items())


def test_launch_strided_refuses_unknown_spec_constant_and_wrong_inputs():
    """launch_strided binds by the kernel's names: a misspelt spec constant or a missing input is a
    LaunchError naming what the kernel takes, never a launch with a default."""
    from fuelvk.errors import LaunchError
    from fuelvk.kernels import kernel
    from fuelvk.ops._core import launch_strided, new_like
    x = fv.asarray(np.ones(8, np.float32))
    out = new_like((8,), np.dtype(np.float32))
    with pytest.raises(LaunchError, match="OPS"):
        launch_strided(kernel("unary", "f32"), out, [x], {"OPS": 0})
    with pytest.raises(LaunchError, match="in_b"):
        launch_strided(kernel("binary", "f32"), out, [x], {"OP": 0})
    from fuelvk.kernels.elementwise import UNARY
    launch_strided(kernel("unary", "f32"), out, [x], {"OP": UNARY["exp"]})
    np.testing.assert_allclose(out.numpy(), np.exp(np.ones(8, np.float32)), rtol=1e-6)
