"""Data-movement families: flip, roll, triu/tril (remap.comp), write_slice and concat (write.comp),
masked_fill and masked_copy (masked_fill.comp) and the in-place add_assign_scaled (add_assign_scaled.comp).

All are byte-width keyed (b1/b2/b4/b8: raw words, bit-exact for every dtype of that width) except
concat_along_dim (dtype-keyed names in the inventory; the kernel still moves raw words) and
add_assign_scaled (f32 math). b1 variants of flip/roll/triu/tril are fuelvk additions.
"""
from .elementwise import EPT as EW_EPT, FLAG_DEFINES, WG as EW_WG
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, family, id_defines, texel_twins, width_variants

GROUP = "Layout / data-movement (byte-width-keyed, dtype-agnostic)"
MAX_RANK = 6      # remap.comp / write.comp: the Params' shape and stride arrays
WG, EPT = 256, 4  # write.comp / pad_backward.comp: elements per workgroup = WG * EPT
WORDS = 4         # remap.comp: 16-byte output words per invocation (one row-index split per invocation)
# write.comp and add_assign_scaled.comp (a src view written into a dst view of the same shape): the
# bits of their Params' flags (FLAG_* in the shaders).
WRITE_FLAGS = {"src_contiguous": 1, "src_constant": 2, "dst_contiguous": 4}
REMAP_MODES = {"gather": 0, "roll": 1, "triu": 2, "tril": 3, "pad_const": 4, "pad_reflect": 5, "pad_replicate": 6}
_SIZES = {"WG": WG, "EPT": EPT}
_WRITE_DEFINES = {**_SIZES, **id_defines(FLAG=WRITE_FLAGS)}
_W = dict(tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES)


# remap.comp reads its source through a uniform texel buffer of one element per texel (binding 3, a_t; binding 2 is the output again as 16-byte words)
# where the device reads texels faster (Device.texel_loads), else its storage-only twin (<name>_ssbo).
REMAP_TEXEL_FORMATS = {"b1": {3: "R8_UINT"}, "b2": {3: "R16_UINT"}, "b4": {3: "R32_UINT"}, "b8": {3: "R32G32_UINT"}}


def remap_family(name, mode, variants, group=GROUP, extra=()):
    texel_twins(name, "remap.comp", variants, group,
                defines={"WG": WG, "WORDS": WORDS, **id_defines(MODE=REMAP_MODES), "MODE": REMAP_MODES[mode]},
                extra=extra, tag_texel_formats=REMAP_TEXEL_FORMATS, **_W)


# transpose.comp: copies whose source is contiguous along the output's second-to-last dim (x.T to
# contiguous), a block of 16-byte-word rows per invocation; source view as remap's.
TRANSPOSE_WG = 128
texel_twins("transpose", "transpose.comp", width_variants("transpose"), GROUP,
            defines={"WG": TRANSPOSE_WG}, tag_texel_formats=REMAP_TEXEL_FORMATS, **_W)

remap_family("flip", "gather", width_variants("flip", ("b2", "b4", "b8")), extra=("b1",))
remap_family("roll", "roll", width_variants("roll", ("b2", "b4", "b8")), extra=("b1",))
remap_family("triu", "triu", width_variants("triu", ("b2", "b4", "b8")), extra=("b1",))
remap_family("tril", "tril", width_variants("tril", ("b2", "b4", "b8")), extra=("b1",))

family("write_slice", "write.comp", width_variants("write_slice"), GROUP, defines=_WRITE_DEFINES, **_W)
# write.comp with ROWS: writes whose dst rows are contiguous (concatenate's column windows, row slices),
# whole 16-byte words per store; source as remap's (texel view or the _ssbo twin).
texel_twins("write_rows", "write.comp", width_variants("write_rows"), GROUP,
            defines={"WG": WG, "WORDS": WORDS, "ROWS": 1}, tag_texel_formats=REMAP_TEXEL_FORMATS, **_W)
_CONCAT_WIDTH = {"f32": "b4", "f16": "b2", "bf16": "b2", "f64": "b8"}
family("concat_along_dim", "write.comp", {"f32": "concat_along_dim", "f16": "concat_along_dim_f16", "bf16": "concat_along_dim_bf16",
        "f64": "concat_along_dim_f64"}, GROUP, defines=_WRITE_DEFINES,
       tag_defines={t: WIDTH_DEFINES[w] for t, w in _CONCAT_WIDTH.items()},
       tag_features={t: WIDTH_FEATURES[w] for t, w in _CONCAT_WIDTH.items()})

family("add_assign_scaled", "add_assign_scaled.comp", {"f32": "add_assign_scaled"},
       "Element-wise unary / binary / affine", defines=_WRITE_DEFINES)

# masked_fill and masked_copy (fuelvk.where) run through ops._core.launch_strided (the EW Params), so
# they take that grid's sizes and flag bits.
for _name, _defs in (("masked_fill", {}), ("masked_copy", {"MASKED_COPY": 1})):
    family(_name, "masked_fill.comp", width_variants(_name), "Padding / masking",
           defines={"WG": EW_WG, "EPT": EW_EPT, **FLAG_DEFINES, **_defs}, tag_defines=WIDTH_DEFINES,
           tag_features={t: tuple(sorted(set(f) | {"storage8", "int8"})) for t, f in WIDTH_FEATURES.items()})
del _name, _defs

# copy_texels.comp: copies whose views are runs of whole 16-byte texels (any element width: raw bits),
# read through texel views where the device reads those faster (ops/movement.py texel_runs).
family("copy_texels", "copy_texels.comp", {"x16": "copy_texels"}, GROUP, defines=_SIZES, tag_defines={}, tag_features={})
# concat_texels.comp: concatenate's 2 to CONCAT_PIECES pieces in one launch where all are rows of whole
# texels (ops/movement.py _concat_texels; more pieces take a launch per CONCAT_PIECES).
CONCAT_PIECES = 4
family("concat_texels", "concat_texels.comp", {"x16": "concat_texels"}, GROUP, defines=_SIZES, tag_defines={},
       tag_features={})
