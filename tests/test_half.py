"""f16 <-> f32 conversions (shaders/common/half.glsl, issue 18): the integer form and the device's own,
chosen per device by runtime/halfconv.py's probe (Device.half_native). Each form against numpy bit
for bit through half_probe.comp (its scalar and pair functions): every f16 pattern widened, f32
patterns at and around every f16 rounding boundary of both signs narrowed (ties to even, subnormals,
overflow, inf, NaN payloads by numpy's rule); f16 kernels forced onto each form give identical bits
(and numpy's, where exact)."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels import kernel
from fuelvk.runtime import halfconv

rng = np.random.default_rng(1618)
MODES = ("int", "native")


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


def probe_kernel(words, floats, native):
    """(wide, narrow) of half_probe.comp's check mode with HALF_NATIVE = native."""
    ctx = runtime.get()
    n = len(words)
    assert len(floats) == 2 * n
    wide, narrow = fv.zeros(2 * n, np.uint32), fv.zeros(n, np.uint32)
    ctx.launch(kernel("half_probe", "u32"), ctx.groups(-(-n // halfconv.WG)), words=fv.asarray(words),
               floats=fv.asarray(floats), wide=wide, narrow=narrow, n=n, reps=0, scale=1.0, shift=0.0,
               HALF_NATIVE=int(native))
    return wide.numpy(), narrow.numpy()


def native_exact():
    """Whether this device's own conversion is exact (the probe's check; FUELVK_HALF_NATIVE skips the
    probe, so it is run here when the setting made the choice)."""
    dev = runtime.get().device
    dev.half_native
    rec = dev.half_probe if dev.half_probe is not None else halfconv.probe(runtime.get())
    return rec["exact"]


def skip_inexact(mode):
    if mode == "native" and not native_exact():
        pytest.skip("this device's own f16 conversion is not exact (halfconv probe): kernels never use it here")


@pytest.mark.parametrize("mode", MODES)
def test_every_f16_widened_exactly(mode):
    skip_inexact(mode)
    words = np.arange(1 << 16, dtype=np.uint32)
    words = words[0::2] | (words[1::2] << 16)
    wide, _ = probe_kernel(words, np.zeros(2 * len(words), np.uint32), mode == "native")
    want = widen_ref(words)
    bad = np.flatnonzero(wide != want)
    assert bad.size == 0, [(hex(int(want[i])), hex(int(wide[i]))) for i in bad[:8]]


@pytest.mark.parametrize("mode", MODES)
def test_narrowing_at_every_rounding_boundary(mode):
    skip_inexact(mode)
    floats = boundary_sweep()
    words = np.zeros(len(floats) // 2, np.uint32)
    _, narrow = probe_kernel(words, floats, mode == "native")
    got = np.stack([narrow & 0xFFFF, narrow >> 16], axis=1).reshape(-1)
    want = narrow_ref(floats)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(int(floats[i])), hex(int(want[i])), hex(int(got[i]))) for i in bad[:8]]


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
    assert set(rec) == {"exact", "native_ms", "int_ms"}
    words, floats = halfconv.check_inputs()
    wide, narrow = probe_kernel(words, floats, True)
    truth = np.array_equal(wide, widen_ref(words)) and np.array_equal(
        np.stack([narrow & 0xFFFF, narrow >> 16], axis=1).reshape(-1), narrow_ref(floats))
    assert rec["exact"] == truth
    if rec["exact"]:
        assert rec["native_ms"] > 0 and rec["int_ms"] > 0
    assert halfconv.decide(rec) == (rec["exact"] and not rec["int_ms"] <= halfconv.INT_WINS * rec["native_ms"])
    assert halfconv.decide({"exact": False, "native_ms": 1.0, "int_ms": 5.0}) is False
    assert halfconv.decide({"exact": True, "native_ms": 1.0, "int_ms": 0.95}) is True
    assert halfconv.decide({"exact": True, "native_ms": 1.0, "int_ms": 0.8}) is False


def test_setting_overrides_the_probe(ctx, monkeypatch):
    for value, native in (("1", True), ("0", False)):
        monkeypatch.setenv(halfconv.ENV, value)
        assert halfconv.resolve(ctx) == (native, None)


def test_pipelines_take_the_device_choice(ctx, monkeypatch):
    """HALF_NATIVE comes from Device.half_native unless the launch sets it; kernels without f16 have none."""
    pc = ctx.pipelines
    f16, f32 = kernel("unary", "f16"), kernel("unary", "f32")
    cid = pc.meta(f16.id)["spec_names"][halfconv.SPEC]
    for native in (False, True):
        monkeypatch.setattr(ctx.device, "_half_native", native)
        assert dict(pc.specialization(f16, ((1, 1),))) == {1: 1, cid: int(native)}
        assert dict(pc.specialization(f16, ((cid, 1 - native),))) == {cid: 1 - native}
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


def run_forced(fn, native):
    """fn() with every f16 pipeline specialized for the given form (fresh pipeline and plan caches)."""
    ctx = runtime.get()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ctx.device, "_half_native", native)
        mp.setattr(ctx.pipelines, "pipelines", {})
        mp.setattr(ctx, "plans", {})
        out = fn()
        out = out.numpy()
    return out


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_same_bits_on_both_forms(name):
    skip_inexact("native")
    a, b = (run_forced(KERNELS[name], native) for native in (False, True))
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
    if name in EXACT:
        with np.errstate(over="ignore", invalid="ignore"):
            want = EXACT[name]()
        got = a.view(want.dtype)
        nan = np.zeros(a.shape, bool)
        if name == "add":                  # an arithmetic NaN's payload is the device's: NaN-ness only
            nan = np.isnan(a)
            assert np.array_equal(nan, np.isnan(want.view(a.dtype)))
        assert np.array_equal(got[~nan], want[~nan]), name
