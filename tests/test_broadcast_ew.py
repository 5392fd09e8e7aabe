"""Row and column broadcast inputs of the elementwise kernels (ops/_core._broadcast_kind: w [H] against
x [T, H] reads index i % H, v [T, 1] reads i // H through one multiply-high): numpy's bits on both load
paths, either operand, runs of 1, 3, 4, 1000, 1024 elements, offsets and views; and the plans take the
ROW / COL flags (on the LINEAR path where runs and offsets are multiples of 4)."""
import math
import struct

import ml_dtypes
import numpy as np
import pytest
from oracles import spy_plans

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels.elementwise import FLAGS
from fuelvk.ops import _core
from fuelvk.runtime import loadpath

rng = np.random.default_rng(17)
BF16 = ml_dtypes.bfloat16
FLOATS = [np.float32, np.float16, BF16, np.float64]
INNERS = (1, 3, 4, 1000, 1024)
T = 5                                   # rows: one LINEAR workgroup and a part (inner 1024)


@pytest.fixture
def flags(monkeypatch):
    """The Params flags word of every launch_strided chunk planned during the test."""
    return spy_plans(monkeypatch, lambda plan: [struct.unpack_from("<I", push, 8)[0] for _, _, push in plan[0]])


def bits(a, dt):
    return np.asarray(a).astype(dt, copy=False).view(np.uint8)


def want(op, x, y, dt):
    if dt == np.float64:
        return op(x, y)
    return op(x.astype(np.float32), y.astype(np.float32)).astype(dt)    # the kernels compute in f32


def _operands(dt, inner, off):
    """(x [T, inner] with offset off, w [inner] (row), v [T, 1] (col)) as (numpy, device) pairs, each a
    view at element offset `off` into a larger buffer."""
    xs = rng.standard_normal(off + T * inner).astype(dt)
    ws = rng.standard_normal(off + inner).astype(dt)
    vs = rng.standard_normal(off + T).astype(dt)
    X, W, V = fv.asarray(xs), fv.asarray(ws), fv.asarray(vs)
    return ((xs[off:].reshape(T, inner), X[off:].reshape(T, inner)), (ws[off:], W[off:]),
            (vs[off:].reshape(T, 1), V[off:].reshape(T, 1)))


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_broadcast_bits(dt, path, flags):
    ops = [(np.multiply, fv.multiply), (np.subtract, fv.subtract)]
    for inner in INNERS:
        for off in (0, 4, 1):          # aligned (LINEAR), half a texel for half types, unaligned (index path)
            (x, X), (w, W), (v, V) = _operands(dt, inner, off)
            for npop, fop in ops:
                for name, (b, B) in (("row", (w, W)), ("col", (v, V))):
                    for got, exp in ((fop(X, B), want(npop, x, b, dt)), (fop(B, X), want(npop, b, x, dt))):
                        assert np.array_equal(bits(got.numpy(), dt), bits(exp, dt)), (name, inner, off, npop)
            # both operands broadcast (an outer product): the one run length shared
            assert np.array_equal(bits(fv.multiply(V, W).numpy(), dt), bits(want(np.multiply, v, w, dt), dt))
    used = {f & m for f in flags for m in (FLAGS["a_row"], FLAGS["a_col"], FLAGS["b_row"], FLAGS["b_col"])}
    assert {FLAGS["a_row"], FLAGS["a_col"], FLAGS["b_row"], FLAGS["b_col"]} <= used, flags


def test_broadcast_views(flags):
    """Broadcasts of a 3-D x (leading dims merge), a row taken from a matrix, a column from a
    transposed one (stride 1 across rows), a broadcast_to view through a unary op and the fused kernel."""
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    m = rng.standard_normal((4, 8)).astype(np.float32)
    X, M = fv.asarray(x), fv.asarray(m)
    assert np.array_equal((X * M[2]).numpy(), x * m[2])                     # row, offset 16
    assert np.array_equal((X + M.T[:6, 1:2].reshape(2, 3, 1)).numpy(), x + m.T[:6, 1:2].reshape(2, 3, 1))
    assert np.array_equal(fv.negative(fv.broadcast_to(M[1], (6, 8))).numpy(), -np.broadcast_to(m[1], (6, 8)))
    a = fv.asarray(x[0])
    got = fv.ops.elementwise.silu_mul(a, M[3])                             # the fused kernel: same bits
    assert np.array_equal(got.numpy(), (fv.silu(a) * M[3]).numpy())
    assert any(f & (FLAGS["a_row"] | FLAGS["b_row"]) for f in flags)
    assert any(f & FLAGS["b_col"] for f in flags)


def _mul_plan():
    """_core._plan of an f32 multiply on this device with texel views allowed for every operand:
    plan(out, inputs) -> (pipes, writes, views)."""
    ctx = runtime.get()
    mul = fv.kernels.elementwise.variant("binary", "f32", ctx.device.features)

    def plan(out, ins):
        return _core._plan(ctx, mul, out, ins, {"OP": 2}, _core.ZERO2, _core.ZERO2, 0,
                           (True, True) + tuple(x.buffer.size // 16 for x in [out] + ins))
    return plan


def test_plan_linear(monkeypatch):
    """ROW inputs with runs and offsets of multiples of 4 and COL inputs with runs of multiples of 4
    run LINEAR (4 elements per access: a quarter of the groups); others the index path; a ROW input
    reads through its texel view."""
    monkeypatch.setenv(loadpath.ENV, "1")
    plan = _mul_plan()
    o = fv.asarray(np.zeros((256, 64), np.float32))
    x = fv.asarray(np.ones((256, 64), np.float32))
    w = fv.asarray(np.ones(68, np.float32))
    v = fv.asarray(np.ones((256, 1), np.float32))
    lin = plan(o, [x, x])[0][0][1]
    for ins in ([x, w[:64]], [w[4:], x], [x, v], [v, x]):
        (_, groups, _), = plan(o, ins)[0]
        assert groups == lin, ins
    assert plan(o, [x, w[4:]])[2] == (1, 2, 0)                               # the row's view is bound
    (_, groups, _), = plan(o, [x, w[1:65]])[0]                               # unaligned row: index path
    assert groups != lin
    o3 = fv.asarray(np.zeros((256, 3), np.float32))
    (_, groups, push), = plan(o3, [fv.asarray(np.ones((256, 3), np.float32)), w[:3]])[0]
    assert struct.unpack_from("<I", push, 8)[0] & FLAGS["b_row"]           # run 3: ROW on the index path


def test_divider_exact():
    """(i * magic) >> shift == i // d for the largest i of a chunk, around every multiple of d."""
    for d, n in ((3, 1 << 31), (1000, 1 << 31), (1024, 5120), (7, 100), ((1 << 30) + 1, 1 << 31), (65537, 1 << 31)):
        magic, shift = _core.divider(d, n)
        assert magic < 1 << 32
        for i in [n - 1, n - 2, 0, 1] + [k * d + e for k in (1, (n - 1) // d) for e in (-1, 0, 1)]:
            if 0 <= i < n:
                assert (i * magic) >> shift == i // d, (d, n, i)


@pytest.fixture
def strided_modes(monkeypatch):
    """The STRIDED specialization (elementwise.comp) of every indexed launch planned during the test."""
    seen = []
    real = _core._strided_mode

    def spy(strided, n):
        seen.append(real(strided, n))
        return seen[-1]
    monkeypatch.setattr(_core, "_strided_mode", spy)
    monkeypatch.setattr(runtime.get(), "plans", {})
    return seen


@pytest.mark.parametrize("fast_max", [None, 0])
def test_strided_index_division(fast_max, strided_modes, monkeypatch):
    """The indexed path's strided inputs (transposed, sliced views): with up to 2**20 elements the index
    divides through a float estimate corrected by one (STRIDED 2), beyond it (here: the limit lowered to
    0) by integer division (STRIDED 1). Values equal to their own index: any misplaced element shows.
    Shapes: the largest quotients (2 and 3 columns over 2**20 elements), a dim of 41 (float32(1 / 41)
    rounds down: through a rounded reciprocal i * (1 / 41) lands below k for thousands of multiples
    i = 41 k; lavapipe divides exactly, drivers with the spec's 2.5 ulp division need the correction), odd and power-of-two dims, rank 4 (a rotary q view times a broadcast cos)."""
    if fast_max is not None:
        monkeypatch.setattr(_core, "_FAST_DIV_MAX", fast_max)
    for shape in ((2, 1 << 19), (3, 349525), (25575, 41), (7, 5, 3)):
        if fast_max is not None and math.prod(shape) > 4096:
            continue     # the integer division needs no size to prove it: keep CI small
        n = math.prod(shape)
        x = np.arange(n, dtype=np.float32).reshape(shape)
        got = fv.negative(fv.asarray(x).T)
        np.testing.assert_array_equal(got.numpy(), -x.T)
    q = rng.standard_normal((2, 6, 3, 10)).astype(np.float32)          # [B, S, H, D] -> [B, H, S, D]
    cos = rng.standard_normal((1, 1, 6, 10)).astype(np.float32)
    qd = fv.asarray(q).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(fv.multiply(qd, fv.asarray(cos)).numpy(), q.transpose(0, 2, 1, 3) * cos)
    np.testing.assert_array_equal(fv.negative(qd[..., 5:]).numpy(), -q.transpose(0, 2, 1, 3)[..., 5:])
    want_mode = 2 if fast_max is None else 1
    assert strided_modes and set(strided_modes) == {want_mode}, strided_modes


def test_indexed_without_strided_inputs(strided_modes):
    """An indexed launch whose inputs are all contiguous or constant (too small for LINEAR, or an odd
    offset) compiles no strided index (STRIDED 0), with the same bits."""
    x = rng.standard_normal(40).astype(np.float32)
    xd = fv.asarray(x)
    np.testing.assert_array_equal(fv.add(xd[1:], xd[:-1]).numpy(), x[1:] + x[:-1])
    np.testing.assert_array_equal(fv.multiply(xd[3:30], 2.0).numpy(), x[3:30] * np.float32(2.0))
    assert strided_modes and set(strided_modes) == {0}, strided_modes


@pytest.mark.parametrize("dt", FLOATS)
def test_strided_units_linear(dt, path, monkeypatch):
    """Strided inputs whose innermost stride is 1 with that dim's extent, the offset and the other
    strides multiples of 4 (a transposed [B, S, H, D] -> [B, H, S, D] view, a head-sliced one) run
    LINEAR, one strided index per 4 elements (a quarter of the groups), beside contiguous, ROW and
    constant operands: numpy's bits; an odd offset or extent keeps the index path."""
    ctx = runtime.get()
    monkeypatch.setattr(ctx, "plans", {})
    groups = []
    real = _core._plan

    def spy(*a, **k):
        plan = real(*a, **k)
        groups.extend(g[0] for _, g, _ in plan[0])
        return plan
    monkeypatch.setattr(_core, "_plan", spy)
    q = rng.standard_normal((2, 16, 4, 64)).astype(dt)      # 8192 elements: LINEAR 2 groups, indexed 8
    cos = rng.standard_normal((1, 1, 16, 64)).astype(dt)
    row = rng.standard_normal(64).astype(dt)
    qd = fv.asarray(q).transpose(0, 2, 1, 3)
    qn = q.transpose(0, 2, 1, 3)
    cases = [(fv.multiply, qd, fv.asarray(cos), qn, cos), (fv.add, fv.asarray(row), qd, row, qn),
             (fv.subtract, qd, qd[:, ::-1], qn, qn[:, ::-1]), (fv.multiply, qd[..., 4:36], 3.0, qn[..., 4:36], 3.0),
             (fv.multiply, qd, fv.copy(qd), qn, qn)]
    for f, x, y, xn, yn in cases:
        groups.clear()
        got = f(x, y)
        w = want(getattr(np, f.__name__), xn, np.asarray(yn, dt) if np.ndim(yn) == 0 else yn, dt)
        assert bits(got.numpy(), dt).tobytes() == bits(w, dt).tobytes(), f.__name__
        assert groups and groups[0] == -(-w.size // (_core.WG * _core.EPT * 4)), (f.__name__, groups)
    for x, xn in ((qd[..., 1:33], qn[..., 1:33]), (qd[..., :30], qn[..., :30])):   # odd offset / extent
        groups.clear()
        assert bits(fv.negative(x).numpy(), dt).tobytes() == bits(-xn, dt).tobytes()
        assert groups[0] == -(-xn.size // (_core.WG * _core.EPT))


# -- MID broadcasts: runs repeated over a middle dim (ops/_core._mid_kind) ---------------------------------
MID_FLAGS = (FLAGS["a_mid"], FLAGS["b_mid"])


def _view(x, off):
    """x as a device view at element offset `off` into a larger buffer."""
    flat = np.concatenate([rng.standard_normal(off).astype(x.dtype), x.ravel()])
    return fv.asarray(flat)[off:].reshape(x.shape)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mid_bits(dt, path, flags):
    """The rotary q [B, H, S, D] * cos [B, 1, S, D] (either operand first) and transformers Llama's
    h [B, S, D] * g [B, 1, D], B in 1..3: numpy's bits on both load paths, odd sizes (index path),
    multiples of 4 (LINEAR), offsets 0 / 4 / 1, a transposed q; for B > 1 the MID flags are taken."""
    ops = [(np.multiply, fv.multiply), (np.subtract, fv.subtract)]
    for B in (1, 2, 3):
        for H, S, D in ((3, 5, 7), (2, 3, 8)):
            q = rng.standard_normal((B, H, S, D)).astype(dt)
            cos = rng.standard_normal((B, 1, S, D)).astype(dt)
            g = rng.standard_normal((B, 1, D)).astype(dt)
            h = q.reshape(B, H * S, D)
            qt = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
            for off in (0, 4, 1):
                Q, C, G, Hd = _view(q, off), _view(cos, off), _view(g, off), _view(h, off)
                QT = _view(qt, off).transpose(0, 2, 1, 3)
                for npop, fop in ops:
                    for x, y, X, Y in ((q, cos, Q, C), (cos, q, C, Q), (h, g, Hd, G), (g, h, G, Hd),
                                       (q, cos, QT, C)):
                        got = fop(X, Y).numpy()
                        assert np.array_equal(bits(got, dt), bits(want(npop, x, y, dt), dt)), (B, H, S, D, off)
    assert set(MID_FLAGS) <= {f & m for f in flags for m in MID_FLAGS}, flags


def test_mid_mixed(flags):
    """A MID operand beside a COL one (the shared run word is the COL's), beside a ROW one, through a
    unary op on a broadcast_to view and the fused kernel; an aligned MID read runs LINEAR."""
    B, H, R = 3, 4, 12
    a = rng.standard_normal((B, 1, R)).astype(np.float32)
    col = rng.standard_normal((B, H, 1)).astype(np.float32)
    row = rng.standard_normal((H, R)).astype(np.float32)
    A, Col, Row = fv.asarray(a), fv.asarray(col), fv.asarray(row)
    assert np.array_equal((A * Col).numpy(), a * col)
    assert np.array_equal((Col - A).numpy(), col - a)
    assert np.array_equal((A + Row).numpy(), a + row)
    assert np.array_equal(fv.exp(fv.broadcast_to(A, (B, H, R))).numpy(), fv.exp(fv.asarray(
        np.ascontiguousarray(np.broadcast_to(a, (B, H, R))))).numpy())
    x = fv.asarray(rng.standard_normal((B, H, R)).astype(np.float32))
    got = fv.ops.elementwise.silu_mul(x, A)
    assert np.array_equal(got.numpy(), (fv.silu(x) * fv.asarray(np.broadcast_to(a, (B, H, R)).copy())).numpy())
    assert any(f & FLAGS["a_mid"] and f & FLAGS["b_col"] for f in flags), flags
    assert any(f & FLAGS["b_mid"] and f & FLAGS["a_col"] for f in flags), flags
    assert any(f & FLAGS["a_mid"] and f & FLAGS["b_row"] for f in flags), flags


def test_mid_plan_linear(monkeypatch):
    """An aligned MID operand (run and offset multiples of 4) runs LINEAR with its texel view bound, as
    the contiguous product of that shape does, also beside a strided unit operand (a transposed q,
    whose view is bound too); an odd run keeps the index path."""
    monkeypatch.setenv(loadpath.ENV, "1")
    plan = _mul_plan()
    o = fv.asarray(np.zeros((2, 8, 16, 16), np.float32))                  # 4096: one LINEAR group
    q = fv.asarray(np.ones((2, 8, 16, 16), np.float32))
    cos = fv.asarray(np.ones((2, 1, 16, 16), np.float32))
    lin = plan(o, [q, q])[0][0][1]
    (_, groups, push), = plan(o, [q, cos])[0]
    assert groups == lin and struct.unpack_from("<I", push, 8)[0] & FLAGS["b_mid"]
    assert plan(o, [q, cos])[2] == (1, 2, 0)                               # cos's view is bound
    qt = fv.asarray(np.ones((2, 16, 8, 16), np.float32)).transpose(0, 2, 1, 3)  # a strided unit input
    (_, groups, _), = plan(o, [qt, cos])[0]
    assert groups == lin and plan(o, [qt, cos])[2] == (1, 2, 0)           # both views bound
    assert plan(o, [qt[:, ::-1], cos])[2] == (1, 2, 0)                      # negative strides too
    (_, groups, push), = plan(fv.asarray(np.zeros((2, 8, 15, 17), np.float32)),     # run 255: index path
                              [fv.asarray(np.ones((2, 1, 15, 17), np.float32)),
                               fv.asarray(np.ones((2, 8, 15, 17), np.float32))])[0]
    assert groups[0] == 4 * lin[0] and struct.unpack_from("<I", push, 8)[0] & FLAGS["a_mid"]


def test_mid_kind():
    """Which (collapsed) stride patterns are MID broadcasts, with their run and period."""
    assert _core._mid_kind((2, 8, 64), (64, 0, 1)) == (64, 512)
    assert _core._mid_kind((2, 8, 16, 4), (64, 0, 4, 1)) == (64, 512)           # uncollapsed tail
    assert _core._mid_kind((3, 2, 4, 5), (5, 0, 0, 1)) == (5, 40)              # two stride-0 dims
    assert _core._mid_kind((3, 2, 4, 5), (10, 5, 0, 1)) == (5, 20)             # two leading dims
    for shape, strides in (((2, 8, 64), (0, 64, 1)), ((2, 8, 64), (128, 0, 1)), ((2, 8, 64), (64, 0, 2)),
                           ((8, 64), (0, 1)), ((2, 3, 8, 4), (0, 32, 0, 1)), ((2, 8, 64), (64, 1, 0))):
        assert _core._mid_kind(shape, strides) is None, (shape, strides)


# -- two-level MID broadcasts: stride-0 dims in two places (ops/_core._mid2_kind) ---------------------------
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mid2_bits(dt, path, flags):
    """x [1, H, 1, D] (ROW + MID) and [B, 1, S, 1] (COL + MID) against [B, H, S, D], either operand first:
    numpy's bits on both load paths, odd sizes (index path), multiples of 4 (LINEAR), offsets 0 / 4 / 1;
    the ROW + MID and COL + MID flags are taken (no general strided index)."""
    for B, H, S, D in ((2, 3, 5, 7), (2, 3, 4, 8), (3, 2, 8, 4)):
        q = rng.standard_normal((B, H, S, D)).astype(dt)
        Q = fv.asarray(q)
        for shape in ((1, H, 1, D), (B, 1, S, 1)):
            y = rng.standard_normal(shape).astype(dt)
            for off in (0, 4, 1):
                Y = _view(y, off)
                for npop, fop in ((np.multiply, fv.multiply), (np.subtract, fv.subtract)):
                    for a, b, A, Bd in ((q, y, Q, Y), (y, q, Y, Q)):
                        got = fop(A, Bd).numpy()
                        assert np.array_equal(bits(got, dt), bits(want(npop, a, b, dt), dt)), (B, H, S, D, shape, off)
    for x in "ab":
        for kind in ("row", "col"):
            assert any(f & FLAGS[f"{x}_mid"] and f & FLAGS[f"{x}_{kind}"] for f in flags), (x, kind, flags)


def test_mid2_plan_linear(monkeypatch):
    """Aligned two-level MID operands run LINEAR (the contiguous product's grid): ROW + MID with its texel
    view bound, COL + MID reading single elements (no view); a ROW beside them of another run is refused
    (the run word is shared) and takes the strided index."""
    monkeypatch.setenv(loadpath.ENV, "1")
    plan = _mul_plan()
    o = fv.asarray(np.zeros((2, 8, 16, 16), np.float32))
    q = fv.asarray(np.ones((2, 8, 16, 16), np.float32))
    lin = plan(o, [q, q])[0][0][1]
    for shape, kind in (((1, 8, 1, 16), "b_row"), ((2, 1, 16, 1), "b_col")):
        y = fv.asarray(np.ones(shape, np.float32))
        (_, groups, push), = plan(o, [q, y])[0]
        f = struct.unpack_from("<I", push, 8)[0]
        assert groups == lin and f & FLAGS["b_mid"] and f & FLAGS[kind], (shape, f)
        assert plan(o, [q, y])[2] == ((1, 2, 0) if kind == "b_row" else (1, None, 0))
    row = fv.asarray(np.ones((16, 16), np.float32))                    # ROW run 256 first: x's would be 2048
    (_, _, push), = plan(o, [row, fv.asarray(np.ones((1, 8, 1, 16), np.float32))])[0]
    f = struct.unpack_from("<I", push, 8)[0]
    assert f & FLAGS["a_row"] and not f & FLAGS["b_mid"], f


def test_mid2_kind():
    """Which (collapsed) stride patterns are two-level MID broadcasts."""
    assert _core._mid2_kind((2, 3, 5, 7), (0, 7, 0, 1)) == ("row", 105, (7, 35))
    assert _core._mid2_kind((2, 3, 5, 7), (5, 0, 1, 0)) == ("col", 7, (5, 15))
    assert _core._mid2_kind((4, 2, 3, 5, 7), (0, 0, 7, 0, 1)) == ("row", 105, (7, 35))
    for shape, strides in (((2, 3, 5, 7), (0, 7, 0, 2)), ((2, 3, 5, 7), (0, 0, 7, 1)), ((2, 3, 5, 7), (5, 1, 0, 0)),
                           ((3, 5, 7), (0, 7, 1)), ((2, 3, 5, 7), (35, 0, 7, 1))):
        assert _core._mid2_kind(shape, strides) is None, (shape, strides)



def test_output_overlapping_an_input_is_refused():
    """launch_strided's kernels may reread an element another invocation already wrote (the LINEAR path
    recomputes its last unit), so an output overlapping an input of the same buffer is a LaunchError,
    exact alias or partial; disjoint windows of one buffer run (bits vs numpy)."""
    from fuelvk.errors import LaunchError
    from fuelvk.kernels.elementwise import UNARY
    from fuelvk.ops.elementwise import variant
    neg = variant("unary", "f32", runtime.get().device.features)
    spec = {"OP": UNARY["negative"]}
    host = np.arange(64, dtype=np.float32)
    buf = fv.asarray(host)
    for out, x in ((buf, buf), (buf[8:40], buf[30:62]), (buf[::2], buf[1::2])):
        with pytest.raises(LaunchError, match="overlaps an input"):
            _core.launch_strided(neg, out, [x], spec)
    np.testing.assert_array_equal(buf.numpy(), host)
    _core.launch_strided(neg, buf[0:32], [buf[32:64]], spec)
    np.testing.assert_array_equal(buf.numpy(), np.concatenate([-host[32:], host[32:]]))
