"""Sorting: one bitonic kernel (shaders/sort.comp), keyed by the element's bits and kind.

Tags: f32, f16, bf16, f8e4m3 (floats: KIND_FLOAT; a magnitude above INFBITS, +inf's bits or
float8_e4m3fn's largest finite, is NaN), i8/i16/i32 (KIND_SIGNED), u8/u16/u32 and bool
(KIND_UNSIGNED); f64, i64, u64 are keyed on two 32-bit words (BITS 64: INFBITS is +inf's high
word), so no int64/float64 shader feature is needed. Input words are read as 32-bit words, so no
8/16-bit storage feature is needed.
Kind and mode ids are the tables below; the shader sees them as defines (KIND_FLOAT, MODE_STEP, ...).
"""
from .registry import family, id_defines

GROUP = "Sorting"
KINDS = {"unsigned": 0, "signed": 1, "float": 2}
# The passes of one sort: build (key, index) pairs, one compare-exchange step, write the indices.
MODES = {"keys": 0, "step": 1, "write": 2}
MODE_KEYS, MODE_STEP, MODE_WRITE = MODES["keys"], MODES["step"], MODES["write"]
SORT_TAGS = {  # tag -> (bits, kind, floats: the largest non-NaN magnitude's bits (the high word for f64))
    "f32": (32, "float", 0x7F800000), "f16": (16, "float", 0x7C00), "bf16": (16, "float", 0x7F80),
    "f8e4m3": (8, "float", 0x7E),      # float8_e4m3fn: no inf, magnitude 0x7F is NaN, 0x7E the largest
    "i8": (8, "signed", 0), "i16": (16, "signed", 0), "i32": (32, "signed", 0),
    "u8": (8, "unsigned", 0), "u16": (16, "unsigned", 0), "u32": (32, "unsigned", 0),
    "bool": (8, "unsigned", 0),
    "f64": (64, "float", 0x7FF00000), "i64": (64, "signed", 0), "u64": (64, "unsigned", 0)}
SORT_WG = 256
family("sort", "sort.comp", {}, GROUP, extra=tuple(SORT_TAGS),
       defines=dict(id_defines(KIND=KINDS, MODE=MODES), WG=SORT_WG),
       tag_defines={t: {"BITS": b, "KIND": KINDS[k], "INFBITS": inf} for t, (b, k, inf) in SORT_TAGS.items()},
       tag_features={t: () for t in SORT_TAGS})
