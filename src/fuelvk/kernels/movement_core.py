"""strided_copy: the Contiguize every other family relies on (any width, signed strides, offsets)."""
from .elementwise import FLAG_DEFINES, WIDE
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, family, wide_or_plain

# One generic kernel serves the inventory's strided_copy (4-byte, unsigned strides) and
# strided_copy_signed_b2/b4/b8 (negative strides); b1 is a fuelvk addition.
family("strided_copy", "strided_copy.comp", {"b1": "strided_copy_b1", "b2": "strided_copy_signed_b2", "b4": ("strided_copy", "strided_copy_signed_b4"),
        "b8": "strided_copy_signed_b8"},
       "Layout / data-movement (byte-width-keyed, dtype-agnostic)", defines=FLAG_DEFINES,
       tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES)
# Its 64-bit-word twin for b2 / b4 (the contiguous path's 4-element accesses in 1 / 2 components
# instead of 2 / 4; b1 fits one u32 and b8 is 64-bit already): where the device has shaderInt64.
WIDE_TAGS = ("b2", "b4")
family("strided_copy_w64", "strided_copy.comp", {t: f"strided_copy_w64_{t}" for t in WIDE_TAGS},
       "Layout / data-movement (byte-width-keyed, dtype-agnostic)",
       defines={"W64": 1, **FLAG_DEFINES}, tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES, features=(WIDE,))


def copy_variant(tag, features):
    """strided_copy for byte-width tag: the 64-bit-word twin where the device has shaderInt64."""
    return wide_or_plain("strided_copy", "strided_copy_w64", tag, features)
