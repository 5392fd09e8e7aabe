"""Casts between f8e4m3fn / f16 / bf16 / f32 / f64, bit for bit.

Oracles: numpy + ml_dtypes for every pair (every f16/bf16 bit pattern, every f8 code, random and
special f32/f64 bits, ties at each target's rounding point), with one documented difference:
casts to float8_e4m3fn saturate to +-448 (torch's `.to(torch.float8_e4m3fn)`, checked directly
against torch) where ml_dtypes gives NaN. NaN payloads are compared bit for bit too.
"""
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk.kernels.casts import PAIRS
from oracles import assert_bits

F = {"f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
     "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
U = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def oracle(x, dst):
    """numpy/ml_dtypes cast; to f8e4m3fn saturating (finite or inf overflow -> +-448, torch's rule)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = x.astype(F[dst])
        if dst != "f8e4m3":
            return want
        wide = x.astype(np.float64)
        over = ~np.isnan(wide) & np.isnan(want.astype(np.float32))
    w = want.view(np.uint8).copy()
    w[over] = np.where(np.signbit(wide[over]), 0xFE, 0x7E)
    return w.view(F[dst])


def sources(src, rng):
    """Every bit pattern of the 8/16-bit formats; random + special + tie patterns of f32/f64."""
    if src in ("f16", "bf16"):
        return np.arange(1 << 16, dtype=np.uint16).view(F[src])
    if src == "f8e4m3":
        return np.arange(256, dtype=np.uint8).view(F[src])
    nb, u = (32, np.uint32) if src == "f32" else (64, np.uint64)
    rnd = rng.integers(0, 2 ** 63, 4000, dtype=np.uint64)
    if src == "f32":
        rnd = (rnd >> np.uint64(31)).astype(np.uint32)
    parts = [rnd.astype(u)]
    # ties and their neighbours at every narrower target's rounding point (f16, bf16, f8; and f32 for f64)
    for sh in ((13, 16, 20) if src == "f32" else (29, 42, 45, 49)):
        b = parts[0][:1500] & ~u((1 << sh) - 1) | u(1 << (sh - 1))
        parts += [b, b - u(1), b + u(1), b ^ u(1 << sh)]
    # values around the targets' subnormal / overflow ranges, both signs
    mags = np.concatenate([rng.uniform(-500, 500, 2000), 2.0 ** rng.uniform(-160, 20, 2000), [448, 464, 465, 479.9,
                           480, 65504, 65519.99, 65520, 3.4e38, 2 ** -24, 2 ** -25, 2 ** -149, 2 ** -133, 2 ** -9,
                           2 ** -10, 0.0]])
    parts.append(mags.astype(F[src]).view(u))
    parts.append((-mags).astype(F[src]).view(u))
    top = u(1 << (nb - 1))
    ebits = 8 if src == "f32" else 11
    inf = u(((1 << ebits) - 1) << (nb - 1 - ebits))
    parts.append(np.array([0, top, inf, inf | top, inf | u(1), inf | u(1 << (nb - 2 - ebits)), inf | top | u(5),
                           u(1), u(1) | top, inf - u(1), (inf - u(1)) | top], dtype=u))
    if src == "f64":
        parts.append(np.array([0x7FF0000100000000, 0x7FF0000000000001, 0x36A0000000000000, 0x47EFFFFFE0000000,
                               0x47EFFFFFF0000000, 0x47EFFFFFEFFFFFFF], dtype=np.uint64))
    return np.concatenate(parts).view(F[src])


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}_to_{p[1]}")
def test_cast_bit_exact(pair):
    src, dst = pair
    x = sources(src, np.random.default_rng(hash(pair) % 2**32))
    assert_bits(fv.astype(x, F[dst]), oracle(x, dst))


@pytest.mark.parametrize("src", ["f16", "bf16", "f32", "f64"])
def test_cast_to_f8_matches_torch(src):
    """torch is the oracle of f8e4m3fn saturation (ml_dtypes overflows to NaN)."""
    x = sources(src, np.random.default_rng(11))
    if src == "f64":   # torch rounds f64 -> f8 through f32 (double rounding); compare off the f32 ties only
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = x.astype(np.float32).astype(np.float64)
    t = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if src == "bf16" else torch.from_numpy(x)
    want = t.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    got = fv.astype(x, F["f8e4m3"]).view(np.uint8)
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:5]
    big = np.array([1000.0, -1e30, np.inf, -np.inf, 464.0, 465.0], np.float32)
    assert_bits(fv.astype(big, F["f8e4m3"]), np.array([448, -448, 448, -448, 448, 448], np.float32).astype(F["f8e4m3"]))


def test_cast_f32_to_f8_sweep(path):
    """Every f32 top half (sign, exponent, 7 mantissa bits: each f8 rounding point, normal and
    subnormal, and every tie at it) with low halves 0 / tie / max / random, against ml_dtypes
    (saturating) and torch."""
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    low = np.random.default_rng(5).integers(0, 1 << 16, 1 << 16, dtype=np.uint32)
    x = np.concatenate([top, top | 0x8000, top | 0xFFFF, top | low]).view(np.float32)
    got = fv.astype(x, F["f8e4m3"])
    assert_bits(got, oracle(x, "f8e4m3"))
    assert np.array_equal(got.view(np.uint8), torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy())


def test_cast_f32_to_f16_sweep(path):
    """Every f32 top half with low halves 0 / max / random and ties (and their neighbours) at bits
    13-15: each f16 rounding point, normal and subnormal (whose rounding bit moves with the exponent),
    against numpy; f64 -> f16 (round to odd, then this) on the same values (NaN payloads: numpy's per pair)."""
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    low = np.random.default_rng(6).integers(0, 1 << 16, 1 << 16, dtype=np.uint32)
    ties = [top | t for b in (13, 14, 15) for t in (1 << b, (1 << b) - 1, (1 << b) + 1, (3 << b) & 0xFFFF)]
    x = np.concatenate([top, top | 0x8000, top | 0xFFFF, top | low] + ties).view(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x64 = x.astype(np.float64)
        want, want64 = x.astype(np.float16), x64.astype(np.float16)
    assert_bits(fv.astype(x, np.float16), want)
    assert_bits(fv.astype(x64, np.float16), want64)


def test_cast_round_to_nearest_even_examples():
    # 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16: even -> 1.0; 1 + 3 * 2^-11 -> 1 + 2^-9
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -25, 3 * 2 ** -25, 65520.0], np.float32)
    assert_bits(fv.astype(x, np.float16), np.array([1.0, 1 + 2 ** -9, 0.0, 2 ** -23, np.inf], np.float16))
    y = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
    assert_bits(fv.astype(y, ml_dtypes.bfloat16), np.array([1.0, 1 + 2 ** -6], ml_dtypes.bfloat16))


@pytest.mark.parametrize("pair", [("f32", "f16"), ("f32", "bf16"), ("f16", "f32"), ("f64", "f32"), ("f8e4m3", "bf16"),
                                  ("f32", "f8e4m3"), ("bf16", "f64")], ids=lambda p: f"{p[0]}_to_{p[1]}")
def test_cast_views_and_sizes(pair):
    src, dst = pair
    rng = np.random.default_rng(12)
    a = np.resize(sources(src, rng), 37 * 41).reshape(37, 41)
    d = fv.asarray(a)
    for nv, dv in ((a.T, d.T), (a[::-1, ::-3], d[::-1, ::-3]), (a[5, 3:], d[5, 3:]), (a[1:, 1:], d[1:, 1:]),
                   (np.broadcast_to(a[2], (3, 41)), d[2].broadcast_to((3, 41))), (a[:, None, 7], d[:, None, 7]),
                   (np.broadcast_to(a[2, 3], (5, 41)), d[2, 3].broadcast_to((5, 41)))):   # one element everywhere
        got = fv.astype(dv, F[dst])
        assert isinstance(got, fv.Array) and got.is_contiguous
        assert_bits(got, oracle(np.ascontiguousarray(nv), dst))
    flat = a.reshape(-1)
    for n in (0, 1, 3, 4, 5, 255, 1023, 1024, 1025, 4097):
        for off in (0, 1, 4):      # offsets % 4 != 0 take the scalar path, others the vec4 path
            x = flat[off:off + n]
            assert_bits(fv.astype(d.reshape(-1)[off:off + n], F[dst]), oracle(x, dst))


def test_astype_same_dtype_copies_and_method():
    a = np.arange(10, dtype=np.float32)
    d = fv.asarray(a)
    c = d.astype(np.float32)
    assert c is not d and c.buffer is not d.buffer
    assert_bits(c, a)
    assert_bits(d.astype("bf16"), a.astype(ml_dtypes.bfloat16))
    assert_bits(fv.astype(np.arange(4, dtype=np.int32), np.int32), np.arange(4, dtype=np.int32))
    # promotion in binary ops goes through astype: f16 + f32 -> f32
    s = fv.asarray(a.astype(np.float16)) + d
    assert s.dtype == np.float32
    assert_bits(s, a.astype(np.float16).astype(np.float32) + a)


def test_cast_errors():
    with pytest.raises(fv.DTypeError, match="complex64"):
        fv.astype(fv.asarray(np.zeros(3, np.complex64)), np.float32)   # complex -> real: not a cast of the standard
    with pytest.raises(fv.DTypeError, match="astype.*unsupported dtype"):
        fv.astype(np.zeros(3, np.float32), np.longdouble)


def test_cast_large():
    """One >= 16M-element case per direction that the benchmark times (f32 -> f16 / bf16)."""
    n = 16 * 1024 * 1024 + 3
    x = np.random.default_rng(13).standard_normal(n).astype(np.float32)
    d = fv.asarray(x)
    assert np.array_equal(fv.astype(d, np.float16).numpy().view(np.uint16), x.astype(np.float16).view(np.uint16))
    assert np.array_equal(fv.astype(d, ml_dtypes.bfloat16).numpy().view(np.uint16),
                          x.astype(ml_dtypes.bfloat16).view(np.uint16))


# -- casts with an integer or bool side (icast.comp) ---------------------------------------------------
from fuelvk.kernels.casts import INT_FORMATS, INT_PAIRS

I = {"bool": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
     "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32),
     "u64": np.dtype(np.uint64), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def int_sources(src, dst, n, rng):
    """n values of src: every bit pattern mix for integers, in-range values (with fractions) of dst for
    a float source (numpy leaves out-of-range float -> int undefined: test_float_to_int_specials)."""
    dt = I[src]
    if src == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
    if I[dst].kind == "b":
        return np.where(rng.random(n) < 0.2, 0.0, rng.standard_normal(n)).astype(dt)
    info = np.iinfo(I[dst])
    lo, hi = float(info.min), float(info.max)
    x = np.concatenate([rng.uniform(lo, hi, n // 2) * 0.999, rng.standard_normal(n - n // 2) * 50])
    x = np.clip(x, lo, hi).astype(dt)
    return x[(x.astype(np.float64) >= lo) & (x.astype(np.float64) < hi + 1 if hi < 2 ** 53 else x < hi * 0.999)]


@pytest.mark.parametrize("pair", INT_PAIRS, ids=lambda p: f"{p[0]}_to_{p[1]}")
def test_int_cast_matches_numpy(pair):
    """Every icast pair against numpy, on a LINEAR launch (offset 4, a tail) and a strided view."""
    src, dst = pair
    rng = np.random.default_rng(sum(map(ord, src + dst)))
    x = int_sources(src, dst, 2100, rng)
    d = fv.asarray(x)
    for nv, dv in ((x[4:-3], d[4:-3]), (x[::-3], d[::-3])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.ascontiguousarray(nv).astype(I[dst])
        assert_bits(fv.astype(dv, I[dst]), want)


@pytest.mark.parametrize("src", ["f32", "f64"])
@pytest.mark.parametrize("dst", ["i8", "u16", "i32", "u32", "i64", "u64"])
def test_float_to_int_specials(src, dst):
    """icast's rule where numpy's is undefined: NaN -> 0, out of range and inf saturate, trunc toward 0."""
    info = np.iinfo(I[dst])
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0 ** 64, -2.0 ** 63, -0.9, 0.9, -2.5, 7.99],
                 I[src])
    want = [0, 0, info.max, info.min, info.max, info.min, info.max, info.min if info.min == -2 ** 63 else info.min,
            0, 0, -2 if info.min < 0 else 0, 7]
    got = fv.astype(np.tile(x, 30), I[dst])
    assert np.array_equal(got, np.tile(np.array(want, I[dst]), 30)), got[:12]


@pytest.mark.parametrize("fam", ["cast", "cast_ssbo", "cast_w64", "cast_w64_ssbo", "icast", "icast_ssbo"])
def test_cast_kernels_declare_the_features_their_spirv_needs(fam):
    """A capability without its feature would fail pipeline creation where the device lacks it: the
    plain float casts without an f64 side must stay free of Int64 (cast_w64 is their 64-bit twin)."""
    from fuelvk.kernels import FAMILIES
    from fuelvk.runtime.pipelines import spv_dir
    from test_elementwise_w64 import CAP_FEATURE, _capabilities
    for v in FAMILIES[fam].variants.values():
        caps = _capabilities(spv_dir() / v.spv)
        assert {CAP_FEATURE[c] for c in caps if c in CAP_FEATURE} <= set(v.features), (v.id, v.features)
        if fam in ("cast", "cast_ssbo") and "f64" not in v.tag:
            assert 11 not in caps, f"{v.id} declares Int64"


def test_plain_cast_without_int64(monkeypatch):
    """Without shaderInt64 the float casts run the plain family (32-bit words), with the same bits."""
    from fuelvk import runtime
    from fuelvk.ops.casts import cast_variant
    ctx = runtime.get()
    assert cast_variant(np.dtype(np.float32), F["bf16"]).family == ("cast_w64" if "int64" in ctx.device.features
                                                                     else "cast")
    monkeypatch.setattr(ctx.device, "features", set(ctx.device.features) - {"int64"})
    monkeypatch.setattr(ctx, "plans", {})
    for src, dst in (("f32", "bf16"), ("f16", "f32"), ("f8e4m3", "f16")):
        assert cast_variant(F[src], F[dst]).id == f"cast.{src}_to_{dst}"
        x = sources(src, np.random.default_rng(3))[:2051]
        assert_bits(fv.astype(fv.asarray(x)[4:], F[dst]), oracle(x[4:], dst))


@pytest.mark.parametrize("pair", [("bf16", "f8e4m3"), ("f16", "f8e4m3"), ("f32", "f8e4m3"), ("i16", "i8"), ("u8", "bool"),
                                  ("i8", "u8"), ("i32", "u8")],
                         ids=lambda p: f"{p[0]}_to_{p[1]}")
def test_cast_to_8bit_output_offsets(pair, path):
    """8-bit destinations from 8- / 16- / 32-bit sources store a unit as 64-bit words when the output's offset
    is a multiple of 8 elements, else as 32-bit groups: both, into a larger array whose other bytes
    stay untouched (the launch writes a view at offset 4 / 8 / 12 of it)."""
    from fuelvk import dtypes as _dt
    from fuelvk.kernels import kernel
    from fuelvk.ops._core import launch_strided
    from fuelvk.ops.casts import _IFMT, cast_variant
    src, dst = pair
    ints = {"i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}
    if src in F:
        x = sources(src, np.random.default_rng(2))[:1000]
        want = oracle(x, dst)
        variant = cast_variant(F[src], F[dst])
    else:
        x = np.random.default_rng(2).integers(-300, 300, 1000).astype(ints[src])
        want = x.astype(ints[dst])
        variant = kernel("icast", f"{_IFMT[_dt.dtype(ints[src])]}_to_{_IFMT[_dt.dtype(ints[dst])]}")
    d = fv.asarray(x)
    for off in (4, 8, 12):
        fill = np.full(off + x.size + 5, 1 if dst == "bool" else 0x5A, np.uint8)
        out = fv.asarray(fill.view(want.dtype))
        launch_strided(variant, out[off:off + x.size], [d])
        got = np.asarray(out)
        assert_bits(got[off:off + x.size], want)
        assert np.array_equal(got.view(np.uint8)[:off], fill[:off])
        assert np.array_equal(got.view(np.uint8)[off + x.size:], fill[off + x.size:])
