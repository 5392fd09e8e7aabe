"""Complex elementwise families (shaders/complex.comp), keyed by c64 / c128: complex_unary and
complex_binary. Both compute in double (math64.glsl), so both need shaderFloat64."""
from .registry import family, id_defines, ids

GROUP = "Element-wise unary / binary / affine"
WG = 64
# Op ids shared with the shader as OP_* defines (abs is the one unary op with a real output).
UNARY_OPS = ids("negative", "square", "reciprocal", "sign", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt",
                "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "abs")
BINARY_OPS = ids("add", "subtract", "multiply", "divide", "pow")
TAGS = {"c64": {"C64": 1}, "c128": {"C128": 1}}
for _name, _nin, _ops in (("complex_unary", 1, UNARY_OPS), ("complex_binary", 2, BINARY_OPS)):
    family(_name, "complex.comp", {}, GROUP, extra=tuple(TAGS),
           defines={"WG": WG, "NIN": _nin, **id_defines(OP=_ops)},
           tag_defines=TAGS, tag_features={t: ("float64", "int64") for t in TAGS})
del _name, _nin, _ops
