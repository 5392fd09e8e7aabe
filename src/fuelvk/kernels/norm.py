"""Softmax (+ backward), RMSNorm and LayerNorm (+ backwards): one workgroup per row.

shaders/softmax.comp (forward, BACKWARD) and shaders/norm.comp (RMS / LN x forward / BACKWARD)
share shaders/rows.glsl: compensated per-invocation sums and a tree across the workgroup.
"""
from .reduction import GROUP
from .registry import family, float_variants

family("softmax", "softmax.comp", float_variants("softmax"), GROUP)
family("softmax_last_dim_backward", "softmax.comp", float_variants("softmax_last_dim_backward"),
       GROUP, defines={"BACKWARD": 1})

family("rms_norm_last_dim", "norm.comp", float_variants("rms_norm_last_dim"), GROUP)
# The inventory has the f32 backward only; the other dtypes are the same generic kernel.
family("rms_norm_last_dim_backward", "norm.comp", {"f32": "rms_norm_last_dim_backward"}, GROUP,
       defines={"BACKWARD": 1}, extra=("f16", "bf16", "f64"))
family("layer_norm_last_dim", "norm.comp", float_variants("layer_norm_last_dim"), GROUP,
       defines={"LN": 1})
family("layer_norm_last_dim_backward", "norm.comp", float_variants("layer_norm_last_dim_backward"),
       GROUP, defines={"LN": 1, "BACKWARD": 1})
# FlashInfer's fused_add_rmsnorm: residual += x in place, then RMSNorm of the sum (one launch).
family("fused_add_rms_norm", "norm.comp", {}, GROUP, defines={"ADD_RESIDUAL": 1},
       extra=("f32", "f16", "bf16", "f64"))
