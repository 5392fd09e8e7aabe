"""strided_copy: the Contiguize every other family relies on (any width, signed strides, offsets)."""
from .elementwise import EW_PARAMS
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, family

# One generic kernel serves the inventory's strided_copy (4-byte, unsigned strides) and
# strided_copy_signed_b2/b4/b8 (negative strides); b1 is a fuelvk addition.
family("strided_copy", "strided_copy.comp", EW_PARAMS,
       {"b1": "strided_copy_b1", "b2": "strided_copy_signed_b2", "b4": ("strided_copy", "strided_copy_signed_b4"),
        "b8": "strided_copy_signed_b8"},
       "Layout / data-movement (byte-width-keyed, dtype-agnostic)",
       tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES)
