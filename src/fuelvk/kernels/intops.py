"""Integer elementwise families (shaders/intops.comp): int_binary and int_unary, keyed by the
integer dtype (i8..i64, u8..u64). numpy's integer semantics, exact (see the shader's header)."""
from .elementwise import EPT, FLAG_DEFINES, WG
from .registry import family, id_defines, ids

GROUP = "Element-wise unary / binary / affine"
INT_BINARY_OPS = ("add", "subtract", "multiply", "floor_divide", "remainder", "maximum", "minimum", "bitwise_and",
                  "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "pow")
INT_UNARY_OPS = ("negative", "abs", "square", "sign", "bitwise_invert")
# The OP specialization constant's ids (OP_ADD, ... in the shader), one table per switch.
INT_BINARY, INT_UNARY = ids(*INT_BINARY_OPS), ids(*INT_UNARY_OPS)
INT_TAGS = {"i8": (8, 1), "i16": (16, 1), "i32": (32, 1), "i64": (64, 1),
            "u8": (8, 0), "u16": (16, 0), "u32": (32, 0), "u64": (64, 0)}
_FEATURES = {8: ("storage8", "int8"), 16: ("storage8", "int8", "storage16", "int16"), 32: ("storage8", "int8"),
             64: ("storage8", "int8", "int64")}
for _name, _nin, _ops in (("int_binary", 2, INT_BINARY), ("int_unary", 1, INT_UNARY)):
    family(_name, "intops.comp", {}, GROUP, extra=tuple(INT_TAGS),
           defines={"WG": WG, "EPT": EPT, "NIN": _nin, **id_defines(OP=_ops), **FLAG_DEFINES},
           tag_defines={t: {"BITS": b, "KIND": k} for t, (b, k) in INT_TAGS.items()},
           tag_features={t: _FEATURES[b] for t, (b, _) in INT_TAGS.items()})
del _name, _nin, _ops
