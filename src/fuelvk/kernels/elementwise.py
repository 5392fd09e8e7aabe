"""Elementwise families unary, binary, affine, clamp, powi: all one generic kernel, elementwise.comp."""
from .registry import DTYPE_FEATURES, P, family, float_variants, wide_or_plain

GROUP = "Element-wise unary / binary / affine"
MAX_RANK = 6
EW_PARAMS = P("n:u32", "rank:u32", "flags:u32", "off_o:u32", "off_a:u32", "off_b:u32", "s0:u32[2]", "s1:u32[2]",
              f"shape:i32[{MAX_RANK}]", f"sa:i32[{MAX_RANK}]", f"sb:i32[{MAX_RANK}]")
WG, EPT = 256, 4  # shaders/elementwise.comp: elements per workgroup = WG * EPT (x4 on the LINEAR path)
LINEAR_SPEC = 1   # specialization constant id of the LINEAR (all inputs contiguous/constant) path

# op ids of shaders/elementwise.comp (specialization constant 0 of the unary/binary families)
UNARY_OPS = ("negative", "square", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "silu", "gelu",
             "relu", "heaviside", "abs", "sign", "reciprocal")
BINARY_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "copysign", "hypot", "logaddexp",
              "atan2", "nextafter")
AFFINE_OP, CLAMP_OP, POWI_OP = 16, 17, 18
# Unary ops added after the fixed-op families' ids (16-18): name -> op id.
ROUNDING_OPS = {"floor": 19, "ceil": 20, "trunc": 21, "round": 22}
MATH_OPS = {"log1p": 23, "expm1": 24, "log2": 25, "log10": 26, "tan": 27, "sinh": 28, "cosh": 29, "asinh": 30,
            "acosh": 31, "atanh": 32, "asin": 33, "acos": 34, "atan": 35}
# nextafter's neighbours are only exact where the kernel computes in the element's own type.
NO_F64 = ()
F32_F64_ONLY = ("nextafter",)

SRC = "elementwise.comp"
# Each family has a `<name>_w64` twin, the same shader with W64 defined: its LINEAR path loads and
# stores through 64-bit words (lavapipe costs per component: f32 ~1.5x, f16/bf16 ~2x faster on the
# contiguous path). It needs shaderInt64, so ops pick it where the device has that (WIDE) and the
# plain family otherwise. f64 has no twin: its elements already are 64-bit words. The f16 twin
# converts with unpackFloat2x16 / packFloat2x16, which declare the Float16 capability.
WIDE = "int64"
WIDE_TAGS = ("f32", "f16", "bf16")
WIDE_TAG_FEATURES = {**DTYPE_FEATURES, "f16": DTYPE_FEATURES["f16"] + ("float16",)}
FAMILIES_EW = {  # name -> (defines, tags)
    "unary": ({"NIN": 1}, ("f32", "f16", "bf16", "f64")),
    "binary": ({"NIN": 2}, ("f32", "f16", "bf16", "f64")),
    "affine": ({"NIN": 1, "FIXED_OP": AFFINE_OP}, ("f32", "f16", "bf16", "f64")),
    "clamp": ({"NIN": 1, "FIXED_OP": CLAMP_OP}, ("f32",)),
    "powi": ({"NIN": 1, "FIXED_OP": POWI_OP}, ("f32",)),
}
for _name, (_defs, _tags) in FAMILIES_EW.items():
    family(_name, SRC, float_variants(_name, _tags), GROUP, defines=_defs)
    family(f"{_name}_w64", SRC, float_variants(f"{_name}_w64", [t for t in _tags if t in WIDE_TAGS]),
           GROUP, defines={**_defs, "W64": 1}, features=(WIDE,), tag_features=WIDE_TAG_FEATURES)
del _name, _defs, _tags

# compare.comp: the comparisons, keyed by the dtype compared (every dtype fuelvk stores), bool out.
# Op ids are indices into COMPARE_OPS (specialization constant 0), as for UNARY_OPS / BINARY_OPS.
COMPARE_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
_NAN = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80, "f64": 0, "f8e4m3fn": 0x7E}  # largest non-NaN |x|
COMPARE_TAGS = {  # tag -> (bits, kind: 0 unsigned, 1 signed, 2 float)
    "f32": (32, 2), "f16": (16, 2), "bf16": (16, 2), "f64": (64, 2), "f8e4m3fn": (8, 2),
    "i8": (8, 1), "i16": (16, 1), "i32": (32, 1), "i64": (64, 1), "u8": (8, 0), "u16": (16, 0), "u32": (32, 0),
    "u64": (64, 0), "bool": (8, 0)}
_BITS_FEATURES = {8: ("storage8", "int8"), 16: ("storage8", "int8", "storage16", "int16"),
                  32: ("storage8", "int8"), 64: ("storage8", "int8", "int64")}
family("compare", "compare.comp", {}, GROUP, extra=tuple(COMPARE_TAGS),
       defines={"WG": WG, "EPT": EPT},
       tag_defines={t: {"BITS": b, "KIND": k, **({"NANLIM": _NAN[t]} if k == 2 else {})}
                    for t, (b, k) in COMPARE_TAGS.items()},
       tag_features={t: _BITS_FEATURES[b] for t, (b, _) in COMPARE_TAGS.items()})


def variant(family_name, tag, features):
    """The family's variant for tag: its 64-bit-word twin where the device has what the twin needs."""
    return wide_or_plain(family_name, f"{family_name}_w64", tag, features)
