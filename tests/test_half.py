"""f16 <-> f32 conversions (shaders/common/half.glsl, issue 18): per direction the integer form or the
device's own, chosen per device by runtime/halfconv.py's probe (Device.half_native, the HALF_NATIVE
mask). Each form against numpy through half_probe.comp (its scalar and pair functions): every f16
pattern widened, f32 patterns at and around every f16 rounding boundary of both signs narrowed (ties
to even, subnormals, overflow, inf); the integer forms give numpy's bits for NaNs too, the native
ones a NaN. f16 kernels forced onto each choice give identical bits for every non-NaN and NaNs in
the same places; casts give numpy's bits, NaN payloads included, under every choice."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels import kernel
from fuelvk.runtime import halfconv

rng = np.random.default_rng(1618)
MASKS = (0, halfconv.WIDEN, halfconv.NARROW, halfconv.WIDEN | halfconv.NARROW)


def widen_ref(words):
    """numpy's f16 -> f32 bits of both halves of each u32 word; NaN keeps its payload (not quieted)."""
    h = np.stack([words & 0xFFFF, words >> 16], axis=1).reshape(-1).astype(np.uint32)
    out = h.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    a = h & 0x7FFF
    return np.where(a > 0x7C00, ((h & 0x8000) << 16) | 0x7F800000 | (a << 13), out).astype(np.uint32)


def narrow_ref(u):
    """numpy's f32 -> f16 bits (RNE, subnormals, overflow to inf); NaN: the payload's top 10 bits, 1 if
    they are all zero (numpy's rule), sign kept."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = u.view(np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    a = u & 0x7FFFFFFF
    nan = ((u >> 16) & 0x8000) | 0x7C00 | np.maximum((a >> 13) & 0x3FF, 1)
    return np.where(a > 0x7F800000, nan, out).astype(np.uint32)


def boundary_sweep():
    """f32 bit patterns for narrowing: every finite f16 magnitude, the midpoint to the next one (a tie;
    65520 above 65504) and 1, 2 and 4096 f32 ulps either side of both, both signs, plus
    halfconv.check_inputs()'s specials."""
    lo = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    hi = np.arange(1, 0x7C01, dtype=np.uint16).view(np.float16).astype(np.float32)
    hi[-1] = 65520.0
    mid = ((lo.astype(np.float64) + hi) / 2).astype(np.float32)
    assert np.all(mid.astype(np.float64) * 2 == lo.astype(np.float64) + hi)      # exact ties
    base = np.concatenate([lo.view(np.uint32), mid.view(np.uint32)]).astype(np.int64)
    pats = np.concatenate([base + d for d in (0, -1, 1, -2, 2, -4096, 4096)])
    pats = pats[(pats >= 0) & (pats <= 0x7F800000)].astype(np.uint32)
    pats = np.concatenate([pats, pats | 0x80000000, halfconv.check_inputs()[1]])
    return np.concatenate([pats, np.zeros(len(pats) % 2, np.uint32)])


def exact_native():
    """The native directions exact on this device (the probe's check; FUELVK_HALF_NATIVE skips the
    probe, so it is run here when the setting made the choice)."""
    ctx = runtime.get()
    ctx.device.half_native
    rec = ctx.device.half_probe or halfconv.probe(ctx)
    return (halfconv.WIDEN if rec["widen_exact"] else 0) | (halfconv.NARROW if rec["narrow_exact"] else 0)


def skip_inexact(mask):
    if mask & ~exact_native():
        pytest.skip(f"this device's own f16 conversion is not exact (halfconv probe): kernels never use "
                    f"HALF_NATIVE = {mask} here")


def check_form(got, want, native, is_nan):
    """native: numpy's bits for every non-NaN, a NaN where numpy has one; integer: numpy's bits."""
    if native:
        nan = is_nan(want)
        assert np.all(is_nan(got[nan]))
        got, want = got[~nan], want[~nan]
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(i), hex(int(want[i])), hex(int(got[i]))) for i in bad[:8]]


@pytest.mark.parametrize("mask", MASKS)
def test_every_f16_widened_exactly(mask):
    skip_inexact(mask)
    words = np.arange(1 << 16, dtype=np.uint32)
    words = words[0::2] | (words[1::2] << 16)
    wide, _ = halfconv.run_check(runtime.get(), words, np.zeros(2 * len(words), np.uint32), mask)
    check_form(wide, widen_ref(words), mask & halfconv.WIDEN, halfconv.f32_nan)


@pytest.mark.parametrize("mask", MASKS)
def test_narrowing_at_every_rounding_boundary(mask):
    skip_inexact(mask)
    floats = boundary_sweep()
    _, narrow = halfconv.run_check(runtime.get(), np.zeros(len(floats) // 2, np.uint32), floats, mask)
    check_form(narrow, narrow_ref(floats), mask & halfconv.NARROW, halfconv.f16_nan)


def test_sweep_catches_wrong_rounding():
    """The sweep's reference is sharp: truncation or ties away from zero differ from it."""
    floats = boundary_sweep()
    want = narrow_ref(floats)
    a = (floats & 0x7FFFFFFF).astype(np.int64)
    normal = (a >= 113 << 23) & (a < 0x477FF000)
    b = a - (112 << 23)
    trunc = (b >> 13)
    away = (b + 0x1000) >> 13
    assert np.any(trunc[normal] != want[normal] & 0x7FFF)
    assert np.any(away[normal] != want[normal] & 0x7FFF)


def test_probe_verdict_and_choice(ctx):
    rec = halfconv.probe(ctx)
    assert set(rec) == {"widen_exact", "narrow_exact", "ms"}
    words, floats = halfconv.check_inputs()
    wide, narrow = halfconv.run_check(ctx, words, floats, halfconv.WIDEN | halfconv.NARROW)
    assert rec["widen_exact"] == halfconv.same(wide, widen_ref(words), halfconv.f32_nan)
    assert rec["narrow_exact"] == halfconv.same(narrow, narrow_ref(floats), halfconv.f16_nan)
    exact = (halfconv.WIDEN if rec["widen_exact"] else 0) | (halfconv.NARROW if rec["narrow_exact"] else 0)
    assert sorted(rec["ms"]) == [str(m) for m in range(4) if m & exact == m]
    assert all(ms > 0 for ms in rec["ms"].values())
    assert halfconv.decide(rec) & ~exact == 0
    ms = {"0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0}
    both = {"widen_exact": True, "narrow_exact": True}
    assert halfconv.decide(dict(both, ms=ms)) == 3                              # a tie keeps native
    assert halfconv.decide(dict(both, ms=dict(ms, **{"1": 0.8}))) == 1          # integer narrowing wins
    assert halfconv.decide(dict(both, ms=dict(ms, **{"1": 0.8, "0": 0.7}))) == 0
    assert halfconv.decide(dict(both, ms=dict(ms, **{"2": 0.85}))) == 2
    assert halfconv.decide({"widen_exact": False, "narrow_exact": True, "ms": {"0": 5.0, "2": 1.0}}) == 2
    assert halfconv.decide({"widen_exact": False, "narrow_exact": False, "ms": {"0": 5.0}}) == 0


def test_probe_detects_a_wrong_native_form():
    """same() refuses flushed subnormals, a rounding off by one ulp and a NaN that became a number."""
    words = np.arange(1 << 16, dtype=np.uint32)
    words = words[0::2] | (words[1::2] << 16)
    ref = widen_ref(words)
    assert halfconv.same(ref.copy(), ref, halfconv.f32_nan)
    flushed = ref.copy()
    flushed[(ref & 0x7F800000) < (113 << 23)] &= 0x80000000
    assert not halfconv.same(flushed, ref, halfconv.f32_nan)
    quiet = ref | np.where(halfconv.f32_nan(ref), 0x400000, 0).astype(np.uint32)   # quieting is allowed
    assert halfconv.same(quiet, ref, halfconv.f32_nan)
    floats = boundary_sweep()
    nref = narrow_ref(floats)
    off = nref.copy()
    off[len(off) // 3] ^= 1
    assert not halfconv.same(off, nref, halfconv.f16_nan)
    lost = nref.copy()
    lost[halfconv.f16_nan(lost)] = 0x7C00
    assert not halfconv.same(lost, nref, halfconv.f16_nan)


def test_setting_overrides_the_probe(ctx, monkeypatch):
    for value, mask in (("1", 3), ("0", 0)):
        monkeypatch.setenv(halfconv.ENV, value)
        assert halfconv.resolve(ctx) == (mask, None)


def test_pipelines_take_the_device_choice(ctx, monkeypatch):
    """HALF_NATIVE comes from Device.half_native unless the launch sets it; kernels without f16 have none."""
    pc = ctx.pipelines
    f16, f32 = kernel("unary", "f16"), kernel("unary", "f32")
    cid = pc.meta(f16.id)["spec_names"][halfconv.SPEC]
    for mask in MASKS:
        monkeypatch.setattr(ctx.device, "_half_native", mask)
        assert dict(pc.specialization(f16, ((1, 1),))) == {1: 1, cid: mask}
        assert dict(pc.specialization(f16, ((cid, 3 - mask),))) == {cid: 3 - mask}
        assert pc.specialization(f32, ((1, 1),)) == ((1, 1),)


# ---- f16 kernels on each form: identical bits ----------------------------------------------------

def scatter_in(x, sp):
    """x with the values sp spread evenly over it."""
    k = len(x) // len(sp)
    x[:k * len(sp):k] = sp
    return x


def specials(n):
    """n f16 values: normals of both signs, subnormals, zeros, inf and NaNs with payloads."""
    return scatter_in((rng.standard_normal(n) * 3).astype(np.float16), np.array(
        [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE3F],
        np.uint16).view(np.float16))


def f32_specials(n):
    """n f32 values: normals, ties and overflow points of f16, f32 subnormals, inf and NaNs with payloads."""
    return scatter_in((rng.standard_normal(n) * 3).astype(np.float32), np.array(
        [0x00000001, 0x80000000, 0x33000000, 0x33000001, 0x387FE000, 0x477FF000, 0x477FEFFF, 0x7F800000,
         0xFF800000, 0x7FC00000, 0x7F800001, 0xFFA02000], np.uint32).view(np.float32))


X = specials(2 * 1031)
Y = (rng.standard_normal(2 * 1031) * 2).astype(np.float16)
ROWS = (rng.standard_normal((6, 1029)) * 2).astype(np.float16)
W = (rng.standard_normal(1029) + 1).astype(np.float16)
X4 = (rng.standard_normal((2, 3, 5, 16)) * 2).astype(np.float16)
ANG = rng.uniform(0, 6.3, (5, 16))
COS, SIN = np.cos(ANG).astype(np.float16), np.sin(ANG).astype(np.float16)
F32 = f32_specials(2 * 1031)
with np.errstate(invalid="ignore"):          # the signalling NaN
    F64 = F32.astype(np.float64) * 1.0000001
KERNELS = {
    "astype_f16_f32": lambda: fv.astype(fv.asarray(X), np.float32),
    "astype_f32_f16": lambda: fv.astype(fv.asarray(F32), np.float16),
    "astype_f32_f16_view": lambda: fv.astype(fv.asarray(F32)[3:-2], np.float16),
    "astype_f64_f16": lambda: fv.astype(fv.asarray(F64), np.float16),
    "add": lambda: fv.asarray(X) + fv.asarray(Y),
    "add_offset": lambda: fv.asarray(X)[5:1800] + fv.asarray(Y)[1:1796],
    "add_strided": lambda: fv.asarray(X)[::3] + fv.asarray(Y)[::3],
    "exp": lambda: fv.exp(fv.asarray(X)),
    "silu": lambda: fv.silu(fv.asarray(Y)),
    "sum_rows": lambda: fv.sum(fv.asarray(ROWS), axis=-1),
    "sum_axis0": lambda: fv.sum(fv.asarray(ROWS), axis=0),
    "max_rows": lambda: fv.max(fv.asarray(ROWS), axis=-1),
    "cumsum": lambda: fv.cumsum(fv.asarray(ROWS), axis=1),
    "softmax": lambda: fv.softmax(fv.asarray(ROWS)),
    "rms_norm": lambda: fv.rms_norm(fv.asarray(ROWS), 1e-6, fv.asarray(W)),
    "layer_norm": lambda: fv.layer_norm(fv.asarray(ROWS), 1e-5, fv.asarray(W), fv.asarray(W)),
    "rope": lambda: fv.rope(fv.asarray(X4), fv.asarray(COS), fv.asarray(SIN)),
    "pad_backward": lambda: fv.pad_backward(fv.asarray(ROWS), ((1, 1), (3, 4)), mode="reflect"),
    "scatter_add": lambda: fv.scatter_add(fv.asarray(ROWS[:2]), 1, (np.arange(20).reshape(2, 10) * 7) % 1029,
                                          fv.asarray(ROWS[2:4, :10])),
}

def words_of(h):
    u = h.view(np.uint16).astype(np.uint32)
    return u[0::2] | (u[1::2] << 16)


EXACT = {   # numpy's bits (NaN payloads by numpy's rule) where the kernel rounds once from exact values
    "astype_f16_f32": lambda: widen_ref(words_of(X)),
    "astype_f32_f16": lambda: narrow_ref(F32.view(np.uint32)).astype(np.uint16),
    "astype_f32_f16_view": lambda: narrow_ref(F32[3:-2].view(np.uint32)).astype(np.uint16),
    "add": lambda: (X.astype(np.float64) + Y).astype(np.float16).view(np.uint16),
}


def run_forced(fn, mask):
    """fn() with every f16 pipeline specialized with HALF_NATIVE = mask (fresh pipeline and plan caches)."""
    ctx = runtime.get()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ctx.device, "_half_native", mask)
        mp.setattr(ctx.pipelines, "pipelines", {})
        mp.setattr(ctx, "plans", {})
        out = fn().numpy()
    return out


def nan_mask(a):
    return np.isnan(a.astype(np.float32))


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_same_bits_on_every_choice(name):
    outs = {m: run_forced(KERNELS[name], m) for m in MASKS if not m & ~exact_native()}
    a = outs[0]
    cast = name.startswith("astype")
    for m, b in outs.items():
        assert a.dtype == b.dtype and a.shape == b.shape
        if cast:                           # casts promise numpy's NaN payloads on every device
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (name, m)
        else:
            nan = nan_mask(a)
            assert np.array_equal(nan, nan_mask(b)), (name, m)
            assert np.array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8)), (name, m)
    if name in EXACT:
        with np.errstate(over="ignore", invalid="ignore"):
            want = EXACT[name]()
        got = a.view(want.dtype)
        nan = np.zeros(a.shape, bool)
        if name == "add":                  # an arithmetic NaN's payload is the device's: NaN-ness only
            nan = nan_mask(a)
            assert np.array_equal(nan, nan_mask(want.view(a.dtype)))
        assert np.array_equal(got[~nan], want[~nan]), name


def test_info_reports_the_choice(ctx, capsys):
    from fuelvk.__main__ import main
    info = fv.device_info()
    mask = ctx.device.half_native
    assert info["half_conversions"]["widen"] == ("native" if mask & halfconv.WIDEN else "integer")
    assert info["half_conversions"]["narrow"] == ("native" if mask & halfconv.NARROW else "integer")
    main(["info"])
    assert f"f16      : widen {info['half_conversions']['widen']}, narrow" in capsys.readouterr().out
