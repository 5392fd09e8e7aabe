"""conv2d im2col: NCHW (strided) -> patches matrix; the GEMM is the matmul family's.

im2col only moves elements, so it is keyed by width: b4 is the inventory's conv2d_im2col (f32),
b2 its conv2d_im2col_bf16 (and serves f16), b8 (f64) is a fuelvk addition.
"""
from .registry import P, WIDTH_DEFINES, WIDTH_FEATURES, family

IM2COL_WG = 256
IM2COL_PARAMS = P("batch:u32", "c_in:u32", "h:u32", "w:u32", "h_out:u32", "w_out:u32", "k_h:u32", "k_w:u32",
                  "stride_h:u32", "stride_w:u32", "pad_t:u32", "pad_l:u32", "dil_h:u32", "dil_w:u32",
                  "groups:u32", "cin_per_g:u32", "total:u32", "off_x:u32", "xs:i32[4]")

family("im2col", "im2col.comp",
       {"b4": "conv2d_im2col", "b2": ("conv2d_im2col_bf16", "conv2d_im2col_f16"), "b8": "conv2d_im2col_f64"},
       "Conv", tag_defines=WIDTH_DEFINES, tag_features=WIDTH_FEATURES)
