"""Softmax (+ backward), RMSNorm and LayerNorm (+ backwards): a workgroup per row, or one invocation
per row for many short rows (LANE_ROWS).

shaders/softmax.comp (forward, BACKWARD) and shaders/norm.comp (RMS / LN x forward / BACKWARD)
share shaders/rows.glsl (compensated per-invocation sums and a tree across the workgroup) and
shaders/common/rowchunks.glsl (rows read and written in 16-byte texel chunks: each operand through
its texel view where TEX has its bit from ROW_TEXELS, else through its storage buffer).
"""
from .reduction import GROUP, SHORT_ROW_MAX
from .registry import family, float_variants, id_defines

# The operands of the row kernels with a texel view, as bits of their TEX spec constant (TEX_X, ...
# in the shaders): x (softmax's y), the upstream grad, the weight, the third row operand (bias or
# residual), the output.
ROW_TEXELS = {"x": 1, "g": 2, "w": 4, "r": 8, "o": 16}
_TEX = id_defines(TEX=ROW_TEXELS)
# Rows up to LANE_ROWS_MAX_COLS elements (the reductions' SHORT_ROW_MAX) run one row per invocation
# when there are at least LANE_ROWS_MIN_ROWS of them: a workgroup per row spends its time in the
# trees' barriers. Measured on lavapipe (rms_norm / softmax f32): [4096, 64] 220 / 240 ms with a
# workgroup per row, 1.2 / 1.8 ms with a row per invocation; [512, 512] 21 / 27 vs 1.1 / 1.6;
# [32, 4096] 3.7 / 1.8 vs 0.5 / 0.8; [8, 4096] 0.40 / 0.44 vs 0.16 / 0.22; one row of 4096: 0.08 /
# 0.09 vs 0.13 / 0.19.
LANE_ROWS_MAX_COLS = SHORT_ROW_MAX
LANE_ROWS_MIN_ROWS = 8

family("softmax", "softmax.comp", float_variants("softmax"), GROUP, defines=_TEX)
family("softmax_last_dim_backward", "softmax.comp", float_variants("softmax_last_dim_backward"),
       GROUP, defines=dict(_TEX, BACKWARD=1))

family("rms_norm_last_dim", "norm.comp", float_variants("rms_norm_last_dim"), GROUP, defines=_TEX)
# The inventory has the f32 backward only; the other dtypes are the same generic kernel.
family("rms_norm_last_dim_backward", "norm.comp", {"f32": "rms_norm_last_dim_backward"}, GROUP,
       defines=dict(_TEX, BACKWARD=1), extra=("f16", "bf16", "f64"))
family("layer_norm_last_dim", "norm.comp", float_variants("layer_norm_last_dim"), GROUP,
       defines=dict(_TEX, LN=1))
family("layer_norm_last_dim_backward", "norm.comp", float_variants("layer_norm_last_dim_backward"),
       GROUP, defines=dict(_TEX, LN=1, BACKWARD=1))
# FlashInfer's fused_add_rmsnorm: residual += x in place, then RMSNorm of the sum (one launch).
family("fused_add_rms_norm", "norm.comp", {}, GROUP, defines=dict(_TEX, ADD_RESIDUAL=1),
       extra=("f32", "f16", "bf16", "f64"))
