"""Sorting: one bitonic kernel (shaders/sort.comp), keyed by the element's bits and kind.

Tags: f32, f16, bf16 (floats: KIND 2 with the exponent's all-ones pattern INFBITS), i8/i16/i32
(KIND 1), u8/u16/u32 and bool (KIND 0). 64-bit keys (float64, int64, uint64) are not sorted yet.
Input words are read as 32-bit words, so no 8/16-bit storage feature is needed.
"""
from .registry import P, family

GROUP = "Sorting"
SORT_PARAMS = P("n:u32", "p2:u32", "rows:u32", "j:u32", "k:u32", "off_in:u32", "desc:u32", "pad:u32")
SORT_TAGS = {  # tag -> (bits, kind, bits of +inf's magnitude for floats)
    "f32": (32, 2, 0x7F800000), "f16": (16, 2, 0x7C00), "bf16": (16, 2, 0x7F80),
    "i8": (8, 1, 0), "i16": (16, 1, 0), "i32": (32, 1, 0), "u8": (8, 0, 0), "u16": (16, 0, 0), "u32": (32, 0, 0),
    "bool": (8, 0, 0)}
MODE_KEYS, MODE_STEP, MODE_WRITE = 0, 1, 2
WG = 256
family("sort", "sort.comp", {}, GROUP, extra=tuple(SORT_TAGS),
       tag_defines={t: {"BITS": b, "KIND": k, "INFBITS": inf} for t, (b, k, inf) in SORT_TAGS.items()},
       tag_features={t: () for t in SORT_TAGS})
