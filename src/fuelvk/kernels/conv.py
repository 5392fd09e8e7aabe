"""conv2d im2col: NCHW (strided) -> patches matrix; the GEMM is the matmul family's.

im2col only moves elements, so it is keyed by width: b4 is the inventory's conv2d_im2col (f32),
b2 its conv2d_im2col_bf16 (and serves f16), b8 (f64) is a fuelvk addition.
"""
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, family

IM2COL_WG = 256

family("im2col", "im2col.comp",
       {"b4": "conv2d_im2col", "b2": ("conv2d_im2col_bf16", "conv2d_im2col_f16"), "b8": "conv2d_im2col_f64"},
       "Conv", defines={"WG": IM2COL_WG}, tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES)
