"""Elementwise and cast kernels on both load paths (issue 18 item 1): FUELVK_TEXEL_LOADS forces the
texel-view or the storage-buffer path; each must give numpy's bits, incl. offsets, tails (sizes not
a multiple of 4 / 8), half-texel ends and the stub view bound past maxTexelBufferElements."""
import ml_dtypes
import numpy as np
import pytest
from oracles import spy_plans

import fuelvk as fv
from fuelvk import runtime
from fuelvk.ops import _core
from fuelvk.ops.elementwise import affine
from fuelvk.runtime import loadpath

rng = np.random.default_rng(18)
BF16, F8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
FLOATS = [np.float32, np.float16, BF16, np.float64]
SIZES = (1, 7, 12, 13, 1029)        # < 4, tail 3, one texel and a half (f16), odd, several groups + tail
OFFSETS = (0, 4, 8)                 # 4: half a texel for f16 / bf16, a whole one for f32


@pytest.fixture
def seen(monkeypatch):
    """The texel views' sources of every launch_strided plan built during the test."""
    return spy_plans(monkeypatch, lambda plan: [plan[2]])


def bits(a, dt):
    return np.asarray(a).astype(dt, copy=False).view(np.uint8)


def _cases(dt, offsets=OFFSETS):
    for n in SIZES:
        a = (rng.standard_normal(n + 16) * 3).astype(dt)
        b = (rng.standard_normal(n + 16) * 3).astype(dt)
        for off in offsets:
            yield n, off, a, b


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_elementwise_bits(dt, path, seen):
    for n, off, a, b in _cases(dt):
        A, B = fv.asarray(a)[off:off + n], fv.asarray(b)[off:off + n]
        x, y = a[off:off + n], b[off:off + n]
        want = {"add": (x.astype(np.float64) + y).astype(dt) if dt != np.float64 else x + y,
                "multiply_scalar": (x.astype(np.float32) * np.float32(1.5)).astype(dt) if dt != np.float64 else x * 1.5,
                "clip": np.clip(x, dt(-1), dt(2)) if dt == np.float32 else None,
                "affine": x * dt(0.75) + dt(-2.5) if dt in (np.float32, np.float64) else None}
        got = {"add": A + B, "multiply_scalar": A * 1.5, "clip": fv.clip(A, -1.0, 2.0) if dt == np.float32 else None,
               "affine": affine(A, 0.75, -2.5)}
        for op, w in want.items():
            if w is not None:
                assert np.array_equal(bits(got[op].numpy(), dt), bits(w, dt)), (op, n, off)
        # silu / powi: the two paths must agree bit for bit (the other path's result as oracle) and
        # stay within tolerance of numpy
        s = fv.silu(A).numpy().astype(np.float64)
        xs = x.astype(np.float64)
        np.testing.assert_allclose(s, xs / (1 + np.exp(-xs)), rtol=1e-2 if dt in (np.float16, BF16) else 1e-5,
                                   atol=1e-2 if dt in (np.float16, BF16) else 1e-6)
    texel_plans = [v for v in seen if any(k is not None for k in v)]
    assert bool(texel_plans) == (path == "texel"), seen


@pytest.mark.parametrize("op", ["silu", "powi", "exp"])
def test_paths_agree(op, monkeypatch):
    """Ops without an exact numpy twin: the texel path's bits are the storage-buffer path's."""
    x = rng.standard_normal(2051).astype(np.float32)
    f = {"silu": fv.silu, "powi": lambda a: fv.power(a, 3), "exp": fv.exp}[op]
    out = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(loadpath.ENV, flag)
        out[flag] = f(fv.asarray(x)[4:]).numpy()
    assert np.array_equal(out["1"].view(np.uint32), out["0"].view(np.uint32))


CAST_DTS = [np.float32, np.float16, BF16, np.float64, F8]


@pytest.mark.parametrize("src", CAST_DTS, ids=lambda d: np.dtype(d).name)
def test_cast_bits(src, path, seen):
    for n, off, a, _ in _cases(src, OFFSETS + ((12,) if src is F8 else ())):
        A = fv.asarray(a)[off:off + n]
        for dst in CAST_DTS:
            if dst is not src:
                got = A.astype(dst).numpy()
                assert np.array_equal(bits(got, dst), bits(a[off:off + n].astype(dst), dst)), (dst, n, off)
    assert bool([v for v in seen if any(k is not None for k in v)]) == (path == "texel"), seen


# One icast pair per (source bits, destination bits): every unit / group shape of common/castio.glsl.
ICAST_PAIRS = [("u8", "i8"), ("u8", "i16"), ("i8", "f32"), ("bool", "f64"), ("i16", "u8"), ("u16", "i16"),
               ("i16", "f32"), ("u16", "i64"), ("f32", "i8"), ("i32", "u16"), ("f32", "i32"), ("i32", "f64"),
               ("f64", "u8"), ("i64", "i16"), ("f64", "u32"), ("f64", "i64")]
ICAST_DTS = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32,
             "i64": np.int64, "u32": np.uint32, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("pair", ICAST_PAIRS, ids=lambda p: f"{p[0]}_to_{p[1]}")
def test_icast_bits(pair, path, seen):
    """Integer / bool casts on both paths: sizes with tails of every unit (16 / 8 / 4 elements),
    offsets at each 4-byte word of a texel (a narrow source's unit then spans two texels)."""
    src, dst = (np.dtype(ICAST_DTS[t]) for t in pair)
    if src.kind == "f":     # in dst's range (numpy's float -> int is undefined outside: test_casts)
        info = np.iinfo(dst)
        a = rng.uniform(max(info.min, -1e6), min(info.max, 1e6), 1029 + 16).astype(src)
    elif src.kind == "b":
        a = rng.random(1029 + 16) < 0.5
    else:
        a = rng.integers(0, 256, (1029 + 16) * src.itemsize, dtype=np.uint8).view(src)
    A = fv.asarray(a)
    for n in SIZES + (29, 1029):
        for off in OFFSETS + (12,):
            with np.errstate(all="ignore"):
                want = a[off:off + n].astype(dst)
            assert np.array_equal(bits(A[off:off + n].astype(dst).numpy(), dst), bits(want, dst)), (pair, n, off)
    assert bool([v for v in seen if any(k is not None for k in v)]) == (path == "texel"), seen


@pytest.mark.parametrize("pair", [("f32", "bf16"), ("f8e4m3fn", "f16"), ("f64", "f32"), ("i16", "f32"), ("f32", "u8")])
def test_cast_constant_input(pair, path):
    """A constant (all strides 0) input takes the LINEAR path with no texel view: every element is
    its one element's cast, whatever its offset."""
    names = {"f32": np.float32, "bf16": BF16, "f8e4m3fn": F8, "f16": np.float16, "f64": np.float64, "i16": np.int16,
             "u8": np.uint8}
    src, dst = names[pair[0]], names[pair[1]]
    a = (np.arange(40) * 1.7 * (-1) ** np.arange(40) % 100).astype(src)   # in [0, 100): u8 too
    A = fv.asarray(a)
    for off in (0, 3, 37):
        for n in (5, 300, 1029):
            got = A[off].broadcast_to((n,)).astype(dst).numpy()
            assert np.array_equal(bits(got, dst), bits(np.broadcast_to(a[off], (n,)).astype(dst), dst)), (off, n)


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_take_rows_bits(dt, path, launched):
    """take / index_select: rows of whole texels read through x's texel view on the texel path (one
    texel per invocation, at x's texel offset), other rows (not whole texels, an offset inside a
    texel) through gather's texel reads and word stores there; the storage path through the
    view-less twin; numpy's bits, i32 / i64 / negative ids."""
    per = 16 // np.dtype(dt).itemsize
    flat = (rng.integers(0, 255, 7 * 9 * 3 * per + per + 2) if np.dtype(dt).kind == "u"
            else rng.standard_normal(7 * 9 * 3 * per + per + 2) * 3).astype(dt)
    F = fv.asarray(flat)
    n = 7 * 9 * 3 * per
    cases = [(flat[:n].reshape(7, 9, 3 * per), F[:n].reshape(7, 9, 3 * per)),             # whole texels
             (flat[per:per + n].reshape(7, 9, 3 * per), F[per:per + n].reshape(7, 9, 3 * per)),   # texel offset
             (flat[1:1 + n].reshape(7, 9, 3 * per), F[1:1 + n].reshape(7, 9, 3 * per)),   # inside a texel
             (flat[:7 * 9 * (per + 1)].reshape(7, 9, per + 1), F[:7 * 9 * (per + 1)].reshape(7, 9, per + 1))]
    ids = [np.array([3, -1, 0, 3, 6], np.int64), np.array([[2, 0], [5, 5]], np.int32), np.array([], np.int32)]
    for v, V in cases:
        for axis in (0, 1):
            for idx in ids:
                got = fv.take(V, fv.asarray(idx), axis).numpy()
                assert np.array_equal(bits(got, dt), bits(np.take(v, idx, axis), dt)), (v.shape, axis, idx)
    assert any(i.startswith("index_select.") for i in launched) == (path == "texel"), launched
    if path == "texel":
        assert any(i.startswith("gather.") for i in launched), launched
    else:
        assert any(i.startswith("index_select_ssbo.") for i in launched), launched


def test_plan_choice(monkeypatch):
    """Which operands go through texel views: aligned contiguous ones whose texels lie in the view
    (outputs: f32 / f64 only); an unaligned offset, a constant input, a half texel past the buffer's
    end do not."""
    monkeypatch.setenv(loadpath.ENV, "1")
    ctx = runtime.get()
    add = fv.kernels.elementwise.variant("binary", "f32", ctx.device.features)
    add16 = fv.kernels.elementwise.variant("binary", "f16", ctx.device.features)

    def views(v, out, ins):
        return _core._plan(ctx, v, out, ins, {"OP": 0}, _core.ZERO2, _core.ZERO2, 0,
                           (True, True) + tuple(x.buffer.size // 16 for x in [out] + ins))[2]
    a = fv.asarray(np.ones(64, np.float32))
    o = fv.asarray(np.zeros(64, np.float32))
    assert views(add, o, [a, a]) == (1, 2, 0)   # the bound buffers' indices: a, b, out
    assert views(add, o[:60], [a[4:], a[:60]]) == (1, 2, 0)
    assert views(add, o[:63], [a[1:], a[:63]]) == ()       # unaligned: not LINEAR, the view-less twin
    c = fv.asarray(np.ones(1, np.float32)).broadcast_to((64,))
    assert views(add, o, [a, c]) == (1, None, 0)                             # constant b: stub
    # f16 elements 8 .. 11 lie in the second half of texel 1: a buffer of one whole texel cannot
    # serve them through its view (the pool may round slots up, so asked of the rule directly)
    assert not _core._texel_ok(0, 2, 12, 1)
    assert _core._texel_ok(0, 2, 12, 2) and _core._texel_ok(0, 2, 8, 1) and _core._texel_ok(4, 2, 4, 1)
    assert not _core._texel_ok(0, 4, 64, 0)                                   # no whole texel: stub
    h = fv.asarray(np.ones(64, np.float16))
    assert views(add16, fv.asarray(np.zeros(60, np.float16)), [h[4:], h[:60]]) == (1, 2, None)   # f16 stores: SSBO


def test_texel_limit_falls_back(path, seen, device_limits):
    """Inputs over maxTexelBufferElements bind the stub view and read through storage buffers."""
    device_limits(maxTexelBufferElements=100)                               # 1024 f32 = 256 texels
    x = rng.standard_normal(1024).astype(np.float32)
    y = rng.standard_normal(1024).astype(np.float32)
    assert np.array_equal((fv.asarray(x) + fv.asarray(y)).numpy(), x + y)
    assert np.array_equal(fv.asarray(x).astype(np.float16).numpy(), x.astype(np.float16))
    assert seen and all(k is None for v in seen for k in v), seen


def test_probe_record():
    """The probe's choice is the faster path it measured (no device name involved)."""
    dev = runtime.get().device
    rec = dev.load_probe if dev.texel_loads is not None else None
    assert rec is not None and rec["ssbo_ms"] > 0 and rec["texel_ms"] > 0
    assert rec["ssbo_store_ms"] > 0 and rec["texel_store_ms"] > 0
    assert (dev.texel_loads, dev.texel_stores) == loadpath.decide(rec)


def test_independent_dispatches_need_no_barrier(path):
    """Texel views (and the stub bound for unused ones) add no false write-after-write hazards."""
    st = runtime.get().stream
    a = fv.asarray(np.arange(64, dtype=np.float32))
    fv.synchronize()
    b0 = st.barriers
    outs = [fv.add(a, a) for _ in range(20)] + [fv.silu(a) for _ in range(5)]
    assert st.barriers == b0
    np.testing.assert_array_equal(outs[0].numpy(), 2 * np.arange(64, dtype=np.float32))


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["float16", "bfloat16"])
def test_half_specials_agree(dt, monkeypatch):
    """Subnormals, signed zeros, infinities and NaN payloads widen the same through a texel's halves
    as through 16-bit storage loads."""
    words = np.array([0x0001, 0x03FF, 0x8001, 0x8000, 0x0000, 0x7C00, 0xFC00, 0x7E01, 0xFD55, 0x3C00, 0x7F81,
                      0xFF80, 0x0080, 0x8080, 0x7BFF, 0x0400], np.uint16)
    x = np.tile(words, 4).view(dt)
    out = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(loadpath.ENV, flag)
        X = fv.asarray(x)[4:]
        out[flag] = [r.numpy().view(np.uint16) for r in (-X, X + X, X.astype(np.float32), X.astype(np.float64))]
    for t, s in zip(out["1"], out["0"]):
        assert np.array_equal(t, s)
    finite = ~np.isnan(x[4:].astype(np.float32))     # NaN payloads: the kernel's (both paths agree above)
    assert np.array_equal(out["1"][0][finite], x[4:].view(np.uint16)[finite] ^ 0x8000)   # negation flips the sign


def test_small_launches_bind_no_views(monkeypatch):
    """Unforced, a launch moving fewer than TEXEL_MIN_BYTES per operand runs the storage-only twin
    (no texel views bound), below LINEAR_MIN elements on the index path; a bigger one reads through
    texels where the device's probe chose them."""
    from fuelvk.kernels.elementwise import LINEAR
    monkeypatch.delenv(loadpath.ENV, raising=False)
    ctx = runtime.get()
    monkeypatch.setattr(ctx, "plans", {})
    made, get = [], ctx.pipelines.get
    monkeypatch.setattr(ctx.pipelines, "get", lambda v, spec=(): (
        made.append((v.family, (ctx.pipelines.signature(v).spec_ids.get(LINEAR), 1) in spec)), get(v, spec))[1])
    for n in (64, _core.LINEAR_MIN, loadpath.TEXEL_MIN_BYTES // 4):
        x = np.arange(n, dtype=np.float32)
        made.clear()
        np.testing.assert_array_equal((fv.asarray(x) + fv.asarray(x)).numpy(), x + x)
        (family, linear), = made
        assert linear == (n >= _core.LINEAR_MIN), (n, made)
        texel = n * 4 >= loadpath.TEXEL_MIN_BYTES and loadpath.texel_paths(ctx)[0]
        assert family.endswith("_ssbo") != bool(texel), (n, made)
