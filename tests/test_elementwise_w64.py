"""The contiguous (LINEAR) elementwise path through 64-bit words (the *_w64 twins) and its fallbacks.

Every case runs twice: as the device is (shaderInt64 on lavapipe: the w64 twin) and with shaderInt64
hidden (the plain family, T4 accesses). Sizes that are not multiples of 4 exercise the scalar tail,
offsets that are not multiples of 4 the strided fallback. Exact ops are compared bit for bit with
numpy / ml_dtypes computing in the same dtype (which rounds like the kernel: f32 math, one rounding).
"""
import numpy as np
import pytest
import torch
from oracles import FLOATS, TRANS_TOL, assert_bits, assert_close

import fuelvk as fv
from fuelvk import runtime
from fuelvk.runtime import loadpath
from fuelvk.ops import _core
from fuelvk.kernels import FAMILIES, kernel
from fuelvk.kernels.elementwise import LINEAR, WIDE_TAGS, variant

RNG = np.random.default_rng(64)
TAG = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64"}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 6e-8, 3e38]


def _tag(dt):
    return TAG.get(np.dtype(dt), "bf16")


@pytest.fixture(params=["w64", "fallback"])
def path(request, monkeypatch):
    """Which path the device offers; yields (path, pipelines requested: [(variant id, linear?)])."""
    ctx = runtime.get()
    if request.param == "fallback":
        monkeypatch.setattr(ctx.device, "features", set(ctx.device.features) - {"int64"})
    elif "int64" not in ctx.device.features:
        pytest.skip("device lacks shaderInt64: only the fallback path exists here")
    seen, get = [], ctx.pipelines.get
    monkeypatch.setattr(ctx, "plans", {})   # plan cache: force pipeline selection in this test
    monkeypatch.setattr(_core, "SMALL", {})  # LINEAR at every size (small launches would take the index path)
    monkeypatch.setattr(ctx.pipelines, "get", lambda v, spec=(), *a, **k: (
        seen.append((v.id, _linear(ctx, v, spec))), get(v, spec, *a, **k))[1])
    return request.param, seen


def _linear(ctx, v, spec):
    """Whether a pipeline request specializes the variant's LINEAR constant to 1."""
    i = ctx.pipelines.signature(v).spec_ids.get(LINEAR)
    return (i, 1) in tuple(spec)


def _check_path(path, seen, family, dt, linear):
    """The launch took the twin iff the path offers it for dt, and LINEAR iff the views allowed it."""
    name, seen = path[0], path[1]
    wide = name == "w64" and _tag(dt) in WIDE_TAGS   # (lavapipe has every feature the twins need)
    seen = [(v.replace("_ssbo.", "."), lin) for v, lin in seen]    # small launches: the view-less twin
    assert seen == [(f"{family}{'_w64' if wide else ''}.{_tag(dt)}", linear)], seen


def _data(n, dt, specials=True):
    x = RNG.uniform(-4.0, 4.0, size=n).astype(np.float32)
    if specials:
        k = min(n, len(SPECIAL))
        x[RNG.choice(n, k, replace=False)] = SPECIAL[:k]
    with np.errstate(over="ignore"):
        return x.astype(dt)


# (n, offset of a, offset of b): aligned with a tail, unaligned a, unaligned b, tiny, one bigger case
GEOMS = [(4, 0, 0), (1029, 4, 8), (1031, 1, 0), (515, 0, 2), (3, 0, 0), (1, 5, 3), (70001, 4, 0)]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("n,oa,ob", GEOMS)
def test_binary_paths(path, dt, n, oa, ob):
    ha, hb = _data(n + 8, dt), _data(n + 8, dt)
    a, b = fv.asarray(ha)[oa:oa + n], fv.asarray(hb)[ob:ob + n]
    # maximum: equal values (0 vs -0) may return either zero, so it is compared by value
    for op, ref, cmp in (("add", np.add, assert_bits), ("multiply", np.multiply, assert_bits),
                         ("maximum", np.maximum, np.testing.assert_array_equal)):
        path[1].clear()
        got = getattr(fv, op)(a, b)
        with np.errstate(all="ignore"):
            cmp(got, ref(ha[oa:oa + n], hb[ob:ob + n]))
        _check_path(path, path[1], "binary", dt, oa % 4 == 0 and ob % 4 == 0 and n >= 1)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("n,off", [(1030, 0), (1030, 2), (7, 4), (2, 0)])
def test_unary_paths(path, dt, n, off):
    h = _data(n + 4, dt)
    x = fv.asarray(h)[off:off + n]
    assert_bits(fv.negative(x), -h[off:off + n])
    _check_path(path, path[1], "unary", dt, off % 4 == 0)
    path[1].clear()
    ref = torch.nn.functional.silu(torch.from_numpy(h[off:off + n].astype(np.float64))).numpy().astype(dt)
    assert_close(fv.silu(x), ref, dt, table=TRANS_TOL, scale=2.0)
    _check_path(path, path[1], "unary", dt, off % 4 == 0)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_scalar_and_broadcast_operands(path, dt):
    """A Python scalar and a broadcast (all-stride-0) operand keep the LINEAR path."""
    n = 1027
    h, hb = _data(n, dt), _data(1, dt)
    x = fv.asarray(h)
    with np.errstate(all="ignore"):
        assert_bits(fv.multiply(x, 3.0), h * np.asarray(3.0, dt))
        _check_path(path, path[1], "binary", dt, True)
        path[1].clear()
        assert_bits(fv.subtract(2.0, x), np.asarray(2.0, dt) - h)
        path[1].clear()
        assert_bits(fv.add(x, fv.asarray(hb)), h + hb)
        _check_path(path, path[1], "binary", dt, True)
        path[1].clear()
        # half types compute in f32 (two f32 roundings), then round once to dt
        want = h * 1.5 - 0.25 if dt == np.float64 else \
            (h.astype(np.float32) * np.float32(1.5) + np.float32(-0.25)).astype(dt)
        assert_bits(fv.affine(x, 1.5, -0.25), want)
        _check_path(path, path[1], "affine", dt, True)


@pytest.mark.parametrize("n", [1026, 14], ids=["texel-sized", "small"])   # small: the view-less twins
def test_f32_only_families(path, n, monkeypatch):
    if n < 100:     # below TEXEL_MIN_BYTES (LINEAR still, as the fixture forces): the view-less twins
        monkeypatch.setattr(_core, "SMALL", {"min_bytes": loadpath.TEXEL_MIN_BYTES})
    h = _data(n, np.float32)
    x = fv.asarray(h)[4:]
    assert_bits(fv.clip(x, -1.0, 2.0), np.clip(h[4:], np.float32(-1.0), np.float32(2.0)))
    _check_path(path, path[1], "clamp", np.float32, True)
    assert n > 100 or all("_ssbo." in v for v, _ in path[1]), path[1]
    path[1].clear()
    hp = h[4:].copy()
    with np.errstate(all="ignore"):
        assert_bits(fv.power(x, 3), hp * hp * hp)
    _check_path(path, path[1], "powi", np.float32, True)
    assert n > 100 or all("_ssbo." in v for v, _ in path[1]), path[1]


def test_twin_needs_all_its_features(monkeypatch):
    """The f16 twin converts through Float16 (packFloat2x16): without shaderFloat16 the plain kernel runs."""
    ctx = runtime.get()
    assert set(kernel("unary_w64", "f16").features) == {"int64", "storage16", "float16"}
    assert set(kernel("unary_w64", "bf16").features) == {"int64", "storage16"}
    assert "w64" not in " ".join(FAMILIES["unary_w64"].variants)   # no f64 twin: tags f32/f16/bf16
    assert set(FAMILIES["unary_w64"].variants) == set(WIDE_TAGS)
    monkeypatch.setattr(ctx.device, "features", set(ctx.device.features) - {"float16"})
    assert variant("unary", "f16", ctx.device.features).id == "unary.f16"
    assert variant("unary", "bf16", ctx.device.features).id == ("unary_w64.bf16" if "int64" in ctx.device.features
                                                                  else "unary.bf16")
    h = _data(1028, np.float16)
    assert_bits(fv.negative(h), -h)


# SPIR-V capabilities that need a device feature (runtime/device.py FEATURE_FIELDS names)
CAP_FEATURE = {9: "float16", 10: "float64", 11: "int64", 22: "int16", 39: "int8"}


def _capabilities(path):
    words = np.frombuffer(path.read_bytes(), dtype="<u4")
    caps, i = set(), 5
    while i < len(words):
        n, op = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if op == 17:                                          # OpCapability
            caps.add(int(words[i + 1]))
        i += n
    return caps


@pytest.mark.parametrize("fam", [f"{f}_w64{t}" for f in ("unary", "binary", "affine", "clamp", "powi", "fused_ew")
                                 for t in ("", "_ssbo")] + ["strided_copy", "strided_copy_w64"])
def test_twins_declare_the_features_their_spirv_needs(fam):
    """A capability the SPIR-V declares without the matching feature would fail pipeline creation on
    devices lacking it (the plain kernels must stay free of Int64)."""
    from fuelvk.runtime.pipelines import spv_dir
    for v in FAMILIES[fam].variants.values():
        need = {CAP_FEATURE[c] for c in _capabilities(spv_dir() / v.spv) if c in CAP_FEATURE}
        assert need <= set(v.features), (v.id, need, v.features)
    for f in ("unary", "binary", "affine", "fused_ew", "unary_ssbo", "binary_ssbo", "affine_ssbo", "fused_ew_ssbo"):
        for t in WIDE_TAGS:
            assert 11 not in _capabilities(spv_dir() / kernel(f, t).spv), f"{f}.{t} declares Int64"
