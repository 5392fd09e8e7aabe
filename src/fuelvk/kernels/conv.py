"""conv2d im2col: NCHW (strided) -> patches matrix; the GEMM is the matmul family's.

im2col only moves elements, so it is keyed by width: b4 is the inventory's conv2d_im2col (f32),
b2 its conv2d_im2col_bf16 (and serves f16), b8 (f64) is a fuelvk addition.
"""
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, texel_twins

IM2COL_WG = 128
IM2COL_WORDS = 8   # 16-byte output words per invocation
# x read through a one-element-per-texel view (binding 3, x_t) where the device reads texels faster
# (Device.texel_loads), else the storage-only twin im2col_ssbo.
IM2COL_TEXEL_FORMATS = {"b2": {3: "R16_UINT"}, "b4": {3: "R32_UINT"}, "b8": {3: "R32G32_UINT"}}

texel_twins("im2col", "im2col.comp",
            {"b4": "conv2d_im2col", "b2": ("conv2d_im2col_bf16", "conv2d_im2col_f16"), "b8": "conv2d_im2col_f64"},
            "Conv", defines={"WG": IM2COL_WG, "WORDS": IM2COL_WORDS}, tag_defines=WIDTH_DEFINES,
            tag_features=WIDTH_FEATURES, tag_texel_formats=IM2COL_TEXEL_FORMATS)
