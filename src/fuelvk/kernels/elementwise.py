"""Elementwise families unary, binary, affine, clamp, powi: all one generic kernel, elementwise.comp.

Op ids and flag bits are the tables below, numbered by `ids` (no two ops of one switch can share an
id); shaders see them as defines (OP_EXP, OP_ADD, FLAG_B_SCALAR, ...) and name only those. Adding a
unary op: its name in UNARY_OPS / ROUNDING_OPS / MATH_OPS and its `case OP_<NAME>:` in elementwise.comp.
"""
from .registry import DTYPE_FEATURES, family, float_variants, id_defines, ids, texel_twins, wide_or_plain

GROUP = "Element-wise unary / binary / affine"
MAX_RANK = 6      # the EW Params' shape / stride arrays (shaders/elementwise.comp and its kin)
WG, EPT = 256, 4  # shaders/elementwise.comp: elements per workgroup = WG * EPT (x4 on the LINEAR path)
LINEAR = "LINEAR"  # the specialization constant of the LINEAR (all inputs contiguous/constant) path
TEX = "TEX"        # LINEAR's loads through the inputs' rgba32ui texel views (Device.texel_loads)
TEXW = "TEXW"      # LINEAR's stores through the output's rgba32ui texel view (f32 / f64)
BCAST = "BCAST"    # LINEAR with a ROW, COL or MID broadcast input (FLAGS a_row ...) or a strided unit one
MID = "MID"        # some input is a MID broadcast (FLAGS a_mid / b_mid: cos [B, 1, S, D] against q [B, H, S, D])
                   # 2: some MID input is two-level (its ROW or COL bit set too: x [1, H, 1, D], [B, 1, S, 1])
STRIDED = "STRIDED"  # the indexed path: 0 no strided input, 1 strided, 2 strided with fast division (ops/_core)
# Those views, bound after the storage buffers: one per input, then the output's (kernels without
# TEXW, e.g. casts, have only the inputs' views).
TEXEL_BINDINGS = ("a_t", "b_t", "o_t")


# The public float unary ops, by how ops/elementwise.py wraps them.
UNARY_OPS = ("negative", "square", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "silu", "gelu",
             "relu", "heaviside", "abs", "sign", "reciprocal")
ROUNDING_OPS = ("floor", "ceil", "trunc", "round")     # integers are already integral: a copy
MATH_OPS = ("log1p", "expm1", "exp2", "log2", "log10", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos",
            "atan")
FIXED_OPS = ("affine", "clamp", "powi")               # families of their own (FIXED_OP), same switch
# Unary ops of the PyTorch device's aten ops with no array API name (not public fuelvk functions):
# rsqrt is torch's 1 / sqrt(x) in one launch (it was sqrt then reciprocal, two launches and, in half
# types, a rounding between them that torch CPU does not make).
TORCH_UNARY_OPS = ("rsqrt",)
# elementwise.comp's apply_unary switch (OP_<NAME>); the unary family's OP specialization constant.
UNARY = ids(*UNARY_OPS, *ROUNDING_OPS, *MATH_OPS, *FIXED_OPS, *TORCH_UNARY_OPS)
BINARY_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "copysign", "hypot", "logaddexp",
              "atan2", "nextafter")
# The array API's floor_divide / remainder / pow of floats (fuelvk.api composes their public functions,
# integers go to intops.comp), and torch's float rounding of the first two (the PyTorch device's aten
# ops): in the same switch, not public ops of their own.
API_BINARY_OPS = ("floor_divide", "remainder", "pow", "torch_floor_divide", "torch_remainder")
BINARY = ids(*BINARY_OPS, *API_BINARY_OPS)            # apply_binary's switch
assert not set(UNARY) & set(BINARY), "the fused kernel sees both tables' OP_<NAME> defines"
# The fused kernel's PRE / POST id meaning "no unary op" (outside UNARY's ids).
FUSED_NONE = 255
# Unary ops the fused kernel may apply (those that read no scalar argument from the Params).
FUSABLE_UNARY = tuple(n for n in UNARY if n not in ("heaviside",) + FIXED_OPS)
# The EW Params' flags word: per input, contiguous (linear index) or constant (every stride 0) --
# input b's bits are a's shifted by FLAG_B_SHIFT -- and a scalar operand in s0 (a) or s1 (b). Kernels
# whose Params have `inner` (elementwise.comp) also take ROW (index i % inner: w [H] against x [T, H])
# and COL (index i / inner: v [T, 1] against x [T, H]) broadcast inputs (ops/_core.py's _broadcast_kind),
# and MID ones (runs repeated over a middle dim: cos [B, 1, S, D] against q [B, H, S, D]; ops/_core.py's
# _mid_kind), whose run lengths and dividers ride in the input's own stride words; a MID input with its
# ROW or COL bit too is two-level: its MID index taken of i % inner or i / inner (ops/_core.py's _mid2_kind).
FLAGS = {"a_contiguous": 1, "a_constant": 2, "b_contiguous": 4, "b_constant": 8, "b_scalar": 16, "a_scalar": 32,
         "a_row": 64, "a_col": 128, "b_row": 256, "b_col": 512, "a_mid": 1024, "b_mid": 4096}
FLAG_B_SHIFT = 2
FLAG_DEFINES = dict(id_defines(FLAG=FLAGS), FLAG_B_SHIFT=FLAG_B_SHIFT)
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
_UNARY_DEFINES = dict(id_defines(OP=UNARY), **FLAG_DEFINES)
_BINARY_DEFINES = dict(id_defines(OP=BINARY), **FLAG_DEFINES)
FAMILIES_EW = {  # name -> (defines, tags)
    "unary": ({"NIN": 1}, ("f32", "f16", "bf16", "f64")),
    "binary": ({"NIN": 2}, ("f32", "f16", "bf16", "f64")),
    "affine": ({"NIN": 1, "FIXED_OP": UNARY["affine"]}, ("f32", "f16", "bf16", "f64")),
    "clamp": ({"NIN": 1, "FIXED_OP": UNARY["clamp"]}, ("f32",)),
    "powi": ({"NIN": 1, "FIXED_OP": UNARY["powi"]}, ("f32",)),
    # out = POST(OP(PRE(a), b)): a binary op with unary ops before and after (spec constants PRE / POST,
    # UNARY ids or FUSED_NONE), e.g. silu(a) * b in one pass (ops/elementwise.fused)
    "fused_ew": ({"NIN": 2, "FUSED": 1, "FUSED_NONE": FUSED_NONE, **id_defines(OP=UNARY)}, ("f32", "f16", "bf16", "f64")),
}
# The binary family's f64 variant steps through 53-bit integer mantissas (the exact fmod): shaderInt64.
_BINARY_TAG_FEATURES = {**DTYPE_FEATURES, "f64": DTYPE_FEATURES["f64"] + ("int64",)}
for _name, (_defs, _tags) in FAMILIES_EW.items():
    _defs = {**(_BINARY_DEFINES if _defs["NIN"] == 2 else _UNARY_DEFINES), **_defs}
    texel_twins(_name, SRC, float_variants(_name, _tags), GROUP, defines=_defs,
                tag_features=_BINARY_TAG_FEATURES if _defs["NIN"] == 2 else DTYPE_FEATURES)
    texel_twins(f"{_name}_w64", SRC, float_variants(f"{_name}_w64", [t for t in _tags if t in WIDE_TAGS]),
                GROUP, defines={**_defs, "W64": 1}, features=(WIDE,), tag_features=WIDE_TAG_FEATURES)
del _name, _defs, _tags

# compare.comp: the comparisons, keyed by the dtype compared (every dtype fuelvk stores), bool out.
# Its OP specialization constant takes COMPARE's ids (OP_EQUAL, ... in the shader).
COMPARE_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
COMPARE = ids(*COMPARE_OPS)
_NAN = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80, "f64": 0, "f8e4m3fn": 0x7E}  # largest non-NaN |x|
COMPARE_TAGS = {  # tag -> (bits, kind: 0 unsigned, 1 signed, 2 float)
    "f32": (32, 2), "f16": (16, 2), "bf16": (16, 2), "f64": (64, 2), "f8e4m3fn": (8, 2),
    "i8": (8, 1), "i16": (16, 1), "i32": (32, 1), "i64": (64, 1), "u8": (8, 0), "u16": (16, 0), "u32": (32, 0),
    "u64": (64, 0), "bool": (8, 0)}
_BITS_FEATURES = {8: ("storage8", "int8"), 16: ("storage8", "int8", "storage16", "int16"),
                  32: ("storage8", "int8"), 64: ("storage8", "int8", "int64")}
family("compare", "compare.comp", {}, GROUP, extra=tuple(COMPARE_TAGS),
       defines={"WG": WG, "EPT": EPT, **id_defines(OP=COMPARE), **FLAG_DEFINES},
       tag_defines={t: {"BITS": b, "KIND": k, **({"NANLIM": _NAN[t]} if k == 2 else {})}
                    for t, (b, k) in COMPARE_TAGS.items()},
       tag_features={t: _BITS_FEATURES[b] for t, (b, _) in COMPARE_TAGS.items()})


def variant(family_name, tag, features):
    """The family's variant for tag: its 64-bit-word twin where the device has what the twin needs."""
    return wide_or_plain(family_name, f"{family_name}_w64", tag, features)
