"""Fused elementwise chains (the fused_ew kernel: post(op(pre(a), b)) in one pass; issue 18 item 4).

Oracles: the unfused composition of fuelvk's own ops, bit for bit (the fused kernel rounds each
intermediate to the element type as the unfused ops store it), and numpy / ml_dtypes computing the
same formula in float64, within tolerance. Every case runs on both load paths (FUELVK_TEXEL_LOADS
forces texel views or storage buffers), over offsets, tails, strided / transposed / broadcast views
and scalar operands.
"""
import numpy as np
import pytest
from oracles import FLOATS, TRANS_TOL, assert_close

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import DTypeError
from fuelvk.kernels import kernel
from fuelvk.ops.elementwise import fused

RNG = np.random.default_rng(4)


def _np_silu(x):
    return x / (1 + np.exp(-x))


def _np_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _data(shape, dt):
    x = (RNG.standard_normal(shape) * 3).astype(dt)
    if x.size >= 4:
        x.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    return x


def _views(dt):
    """(label, fuelvk a, fuelvk b, numpy a, numpy b): the operand layouts the kernel must take."""
    for n in (1, 7, 13, 1029):                       # < 4, tail 3, a texel and a half (f16), groups + tail
        for off in (0, 4, 1):                        # 1: unaligned, the strided path
            ha, hb = _data(n + 8, dt), _data(n + 8, dt)
            yield f"n{n}-off{off}", fv.asarray(ha)[off:off + n], fv.asarray(hb)[off:off + n], ha[off:off + n], \
                hb[off:off + n]
    ha, hb = _data((6, 10), dt), _data((10, 6), dt)
    yield "strided-transposed", fv.asarray(ha)[:, ::2], fv.asarray(hb).T[:, 1::2], ha[:, ::2], hb.T[:, 1::2]
    ha, hb = _data((5, 12), dt), _data((12,), dt)
    yield "broadcast-row", fv.asarray(ha), fv.asarray(hb), ha, hb
    yield "broadcast-col", fv.asarray(ha), fv.asarray(ha)[:, :1], ha, ha[:, :1]
    yield "scalar-b", fv.asarray(ha), 1.5, ha, 1.5
    yield "scalar-a", -0.75, fv.asarray(ha)[1:, 2:], -0.75, ha[1:, 2:]


def _same_bits(got, want):
    """Bit for bit where the unfused result is a number (signed zeros and infinities included); NaN
    where it is NaN. A NaN's sign / payload is not compared: IEEE 754 leaves open which NaN a binary
    op propagates, and the compiler may commute an op or fold a NaN's sign differently once the
    chain is one function (seen in f64: gelu(NaN) * 0 and NaN * NaN)."""
    got, want = (x.numpy() if isinstance(x, fv.Array) else np.asarray(x) for x in (got, want))
    assert got.shape == want.shape and got.dtype == want.dtype
    nan = np.isnan(want.astype(np.float64))
    assert np.isnan(got.astype(np.float64))[nan].all()
    if got.dtype == np.float16:
        # float16: within the transcendental tolerance, not bit for bit. Mesa 25's compiler folds the fused
        # chain's f32 -> f16 -> f32 round trips of the intermediates (silu * b: 1 ulp on ~1/4 of the
        # elements, gelu chains up to 6 ulp near zero crossings; the unfused ops match float64 there);
        # Mesa 22 keeps them and is bit-exact.
        finite = ~nan
        assert_close(got[finite], want[finite], np.float16, TRANS_TOL, scale=4.0)
        return
    g = np.ascontiguousarray(got).view(np.uint8).reshape(got.shape + (-1,))
    w = np.ascontiguousarray(want).view(np.uint8).reshape(want.shape + (-1,))
    assert ((g == w).all(-1) | nan).all()


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_glu_bits_and_values(dt, path):
    for label, a, b, ha, hb in _views(dt):
        for fn, unary, ref in ((fv.silu_mul, fv.silu, _np_silu), (fv.gelu_mul, fv.gelu, _np_gelu)):
            got = fn(a, b)
            # a scalar a is rounded to the array's dtype first (numpy's weak scalar), as the fused op does
            a_arr = fv.asarray(np.full(b.shape, a, dt)) if not isinstance(a, fv.Array) else a
            try:
                _same_bits(got, unary(a_arr) * b)
            except AssertionError:
                raise AssertionError((fn.__name__, label)) from None
            with np.errstate(all="ignore"):
                x = np.asarray(ha, np.float64)
                y = np.asarray(hb, np.float64)
                want = ref(x)
                if dt != np.float64:     # the unfused ops round the activation to dt before the multiply
                    want = want.astype(dt).astype(np.float64)
                want = (want * y).astype(dt)
            assert_close(got, want, dt, TRANS_TOL, scale=4.0)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_pre_and_post(dt, path):
    """The general chain: a unary op after the binary one, and on both sides."""
    ha, hb = _data((3, 37), dt), _data((37,), dt)
    a, b = fv.asarray(ha), fv.asarray(hb)
    _same_bits(fused("add_gelu", a, b, "add", post="gelu"), fv.gelu(a + b))
    _same_bits(fused("chain", a[:, 1:], b[1:], "subtract", pre="tanh", post="abs"), fv.abs(fv.tanh(a[:, 1:]) - b[1:]))
    _same_bits(fused("neg_max", a, b, "maximum", pre="negative"), fv.maximum(-a, b))


def test_one_dispatch():
    a = fv.asarray(_data(4096, np.float32))
    b = fv.asarray(_data(4096, np.float32))
    st = runtime.get().stream
    fv.synchronize()
    n0 = st.dispatches
    fv.silu_mul(a, b)
    assert st.dispatches - n0 == 1


def test_numpy_in_numpy_out():
    ha, hb = _data(9, np.float32), _data(9, np.float32)
    got = fv.silu_mul(ha, hb)
    assert isinstance(got, np.ndarray)
    _same_bits(got, (fv.silu(fv.asarray(ha)) * fv.asarray(hb)).numpy())


def test_errors():
    a = fv.asarray(np.ones(4, np.float32))
    with pytest.raises(DTypeError, match="heaviside.*cannot be fused; fusable unary ops"):
        fused("f", a, a, "add", pre="heaviside")
    with pytest.raises(DTypeError, match="'exp' is not a binary op"):
        fused("f", a, a, "exp")
    with pytest.raises(DTypeError, match="silu_mul: dtype int32 is not supported"):
        fv.silu_mul(fv.asarray(np.ones(4, np.int32)), fv.asarray(np.ones(4, np.int32)))
    with pytest.raises(fv.errors.ShapeError):
        fv.silu_mul(a, fv.asarray(np.ones(3, np.float32)))


@pytest.mark.parametrize("n", [4099, 9], ids=["texel-sized", "small"])
def test_without_int64(n, monkeypatch):
    """The plain fused families (no 64-bit words), with and without texel views, where the device
    lacks shaderInt64."""
    ctx = runtime.get()
    monkeypatch.setattr(ctx.device, "features", set(ctx.device.features) - {"int64"})
    monkeypatch.setattr(ctx, "plans", {})
    made = []
    get = ctx.pipelines.get
    monkeypatch.setattr(ctx.pipelines, "get", lambda v, spec=(): (made.append(v.family), get(v, spec))[1])
    for dt in FLOATS:
        ha, hb = _data(n, dt), _data(n, dt)
        a, b = fv.asarray(ha)[1:], fv.asarray(hb)[1:]
        if dt == np.float64:   # the binary table's f64 switch steps through 53-bit integer mantissas (fmod):
            # such a device refuses the pipeline (pipelines._create); one created above stays cached here
            assert "int64" in kernel("fused_ew", "f64").features
            continue
        _same_bits(fv.silu_mul(a[3:], b[3:]), fv.silu(a[3:]) * b[3:])      # offset 4: LINEAR
        _same_bits(fv.gelu_mul(a, b), fv.gelu(a) * b)                      # offset 1: strided
    fused_fams = {f for f in made if f.startswith("fused_ew")}
    assert fused_fams <= {"fused_ew", "fused_ew_ssbo"} and fused_fams, made
