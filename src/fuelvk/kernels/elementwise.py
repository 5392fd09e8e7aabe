"""Elementwise families unary, binary, affine, clamp, powi: all one generic kernel, elementwise.comp."""
from .registry import P, family, float_variants

GROUP = "Element-wise unary / binary / affine"
MAX_RANK = 6
EW_PARAMS = P("n:u32", "rank:u32", "flags:u32", "off_o:u32", "off_a:u32", "off_b:u32", "s0:u32[2]", "s1:u32[2]",
              f"shape:i32[{MAX_RANK}]", f"sa:i32[{MAX_RANK}]", f"sb:i32[{MAX_RANK}]")
WG, EPT = 256, 4  # shaders/elementwise.comp: elements per workgroup = WG * EPT (x4 on the LINEAR path)
LINEAR_SPEC = 1   # specialization constant id of the LINEAR (all inputs contiguous/constant) path

# op ids of shaders/elementwise.comp (specialization constant 0 of the unary/binary families)
UNARY_OPS = ("negative", "square", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "silu", "gelu",
             "relu", "heaviside", "abs", "sign", "reciprocal")
BINARY_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
AFFINE_OP, CLAMP_OP, POWI_OP = 16, 17, 18

SRC = "elementwise.comp"
family("unary", SRC, EW_PARAMS, float_variants("unary"), GROUP, defines={"NIN": 1})
family("binary", SRC, EW_PARAMS, float_variants("binary"), GROUP, defines={"NIN": 2})
family("affine", SRC, EW_PARAMS, float_variants("affine"), GROUP, defines={"NIN": 1, "FIXED_OP": AFFINE_OP})
family("clamp", SRC, EW_PARAMS, {"f32": "clamp"}, GROUP, defines={"NIN": 1, "FIXED_OP": CLAMP_OP})
family("powi", SRC, EW_PARAMS, {"f32": "powi"}, GROUP, defines={"NIN": 1, "FIXED_OP": POWI_OP})
