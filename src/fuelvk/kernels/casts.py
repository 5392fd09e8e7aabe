"""Float casts: one generic kernel (shaders/cast.comp) for every ordered pair of f8e4m3fn/f16/bf16/f32/f64.

The inventory lists 12 pairs (f32<->f16/bf16/f64, f8e4m3<->f32/f16/bf16); the other 8 (f16<->bf16,
f64<->f16/bf16/f8) are fuelvk additions, so every float astype is one dispatch with one rounding.
"""
from .elementwise import EPT, FLAG_DEFINES, WG
from .registry import texel_twins

GROUP = "Casts"
FORMATS = {"f8e4m3": 0, "f16": 1, "bf16": 2, "f32": 3, "f64": 4}
# Device features each side's storage type needs (cast.comp works on raw bits: u8/u16/u32/u64).
_FEATURES = {"f8e4m3": ("storage8", "int8"), "f16": ("storage16", "int16"), "bf16": ("storage16", "int16"),
             "f32": (), "f64": ("int64",)}


def nan_rule(src, dst):
    """NaN payload rule of shaders/cast.comp, matching numpy/ml_dtypes bit for bit.

    0: keep the payload's top bits (numpy's software f16 path; f16/bf16 -> f32 exact widening);
    1: keep them and set the quiet bit (what x86 cvtss2sd/cvtsd2ss do for f32<->f64, bf16->f64);
    2: canonical quiet NaN (ml_dtypes for every bf16 / f8 destination, and bf16 -> f16).
    The sign is always kept.
    """
    if dst in ("bf16", "f8e4m3") or (dst == "f16" and src in ("bf16", "f8e4m3")):
        return 2
    if (src, dst) in (("f64", "f32"), ("f32", "f64"), ("bf16", "f64")):
        return 1
    return 0


PAIRS = [(s, d) for s in FORMATS for d in FORMATS if s != d]
_TAGS = {f"{s}_to_{d}": (s, d) for s, d in PAIRS}
_CAST_DEFINES = {"WG": WG, "EPT": EPT, **FLAG_DEFINES}


def _cast_defines(s, d):
    """A pair with an f64 side needs shaderInt64 anyway: its plain variant moves 64-bit words (W64)."""
    return {"SRC": FORMATS[s], "DST": FORMATS[d], "NAN_RULE": nan_rule(s, d), **({"W64": 1} if "f64" in (s, d) else {})}


def _cast_features(s, d):
    return tuple(sorted(set(_FEATURES[s]) | set(_FEATURES[d])))


texel_twins("cast", "cast.comp", {t: f"cast_{t}" for t in _TAGS}, GROUP, defines=_CAST_DEFINES,
            tag_defines={t: _cast_defines(*p) for t, p in _TAGS.items()},
            tag_features={t: _cast_features(*p) for t, p in _TAGS.items()})
# cast_w64: the pairs without an f64 side, moving 16- / 32-bit groups through 64-bit words (lavapipe
# pays per loaded / stored component: f32 -> bf16 ~15% faster) where the device has shaderInt64.
_W64_TAGS = {t: p for t, p in _TAGS.items() if "f64" not in p}
texel_twins("cast_w64", "cast.comp", {t: f"cast_w64_{t}" for t in _W64_TAGS}, GROUP,
            defines={**_CAST_DEFINES, "W64": 1}, features=("int64",),
            tag_defines={t: _cast_defines(*p) for t, p in _W64_TAGS.items()},
            tag_features={t: _cast_features(*p) for t, p in _W64_TAGS.items()})


# icast.comp: every cast with an integer or bool side (tags "<src>_to_<dst>").
INT_FORMATS = {"bool": (8, 3), "i8": (8, 1), "i16": (16, 1), "i32": (32, 1), "i64": (64, 1), "u8": (8, 0),
               "u16": (16, 0), "u32": (32, 0), "u64": (64, 0), "f32": (32, 2), "f64": (64, 2)}
INT_PAIRS = [(s, d) for s in INT_FORMATS for d in INT_FORMATS
             if s != d and not (INT_FORMATS[s][1] == 2 and INT_FORMATS[d][1] == 2)]


def _icast_features(s, d):
    f = {"storage8", "int8", "storage16", "int16", "int64"}
    if "f64" in (s, d):
        f.add("float64")
    return tuple(sorted(f))


# Like cast: LINEAR in whole source texels (common/castio.glsl), with its storage-only icast_ssbo twin.
texel_twins("icast", "icast.comp", {}, GROUP, extra=tuple(f"{s}_to_{d}" for s, d in INT_PAIRS),
       defines={"WG": WG, "EPT": EPT, **FLAG_DEFINES},
       tag_defines={f"{s}_to_{d}": {"SBITS": INT_FORMATS[s][0], "SKIND": min(INT_FORMATS[s][1], 2) if s != "bool" else 0,
                                    "DBITS": INT_FORMATS[d][0], "DKIND": INT_FORMATS[d][1]}
                    for s, d in INT_PAIRS},
       tag_features={f"{s}_to_{d}": _icast_features(s, d) for s, d in INT_PAIRS})
