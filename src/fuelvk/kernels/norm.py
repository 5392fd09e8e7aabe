"""Softmax (+ backward), RMSNorm and LayerNorm (+ backwards): a workgroup per row, or one invocation
per row for many short rows (LANE_ROWS), or a row per subgroup (the `_sg` twins, SG: rows of at least
SG_MIN_COLS on devices with subgroup arithmetic), or (softmax and RMSNorm, forward and backward, few
long rows) each row across several invocations in two passes (SPLIT, row_split_parts). The forward
norms' LANE_ROWS launch on a CPU device takes LANE_R rows an invocation side by side (ops/norm.py's
LANE_R: each weight / bias chunk read once for them), and so does the backward with weight / bias-gradient
partials (the rows' partials summed in registers, one partials row an invocation).

shaders/softmax.comp (forward, BACKWARD) and shaders/norm.comp (RMS / LN x forward / BACKWARD)
share shaders/rows.glsl (compensated per-invocation sums and a tree across the workgroup) and
shaders/common/rowchunks.glsl (rows read and written in 16-byte texel chunks: each operand through
its texel view where TEX has its bit from ROW_TEXELS, else through its storage buffer).
"""
from .reduction import ANY_DIM_INVOCATIONS, GROUP, SHORT_ROW_MAX
from .registry import family, float_variants, id_defines, wide_or_plain

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

# Softmax (forward and backward) and RMSNorm (forward and backward) over long rows split each row across
# `parts` invocations (SPLIT: a partials pass and a combine + apply pass, no barriers) instead of one
# invocation or one workgroup per row: parts is the largest power of two with at least
# ROW_SPLIT_MIN_ELEMS elements per invocation, at most ROW_SPLIT_MAX_PARTS (each invocation of the
# second pass reads and combines its row's parts partials: storage-buffer loads) and no more than
# needed for ROW_SPLIT_INVOCATIONS invocations in all (the strided reductions' device-filling count).
# Measured on lavapipe (f32, ms, best of 4 interleaved rounds on a loaded host, rows whole texels;
# split -> one workgroup per row): softmax [1, 4096] 0.054 -> 0.046, [8, 4096] 0.127 -> 0.115,
# [32, 4096] 0.411 -> 0.404 (the second dispatch costs more than the split gains up to 4096 elements
# per row), [4, 16384] 0.22 -> 0.31; rms_norm [1, 2048] 0.041 -> 0.026,
# [4, 16384] 0.13 -> 0.20, [4, 65536] 0.54 -> 0.72 (backward 0.67 -> 1.07).
# [4096, 64] split in 4+ parts of 16 elements took 6-100 ms (the combine), so short rows never split.
ROW_SPLIT_MIN_ELEMS = 4096
ROW_SPLIT_MAX_PARTS = 8
ROW_SPLIT_INVOCATIONS = ANY_DIM_INVOCATIONS
ROW_SPLIT_WG = 8          # invocations per workgroup of the split passes (no barriers: small is free)


def row_split_parts(rows, cols, budget=None):
    """Invocations per row for the split passes (a power of two >= 2), or 0 (no split), from the
    row length and the device-filling invocation count (never the device's name); `budget`:
    Device.loop_budget (each pass walks cols / parts elements in 16-byte chunks per invocation)."""
    if rows <= 0:
        return 0
    cap = min(cols // ROW_SPLIT_MIN_ELEMS, ROW_SPLIT_MAX_PARTS, -(-ROW_SPLIT_INVOCATIONS // rows))
    if cap < 2:
        return 0
    parts = 1 << (cap.bit_length() - 1)
    if budget is not None and -(-cols // parts) > budget:
        return 0
    return parts

# Each row family has a subgroup twin `<name>_sg` (SG_ROWS: a unit of rows to a subgroup, its sums by
# subgroupAdd, no barriers; SG units a workgroup), run where the device has subgroup arithmetic
# (row_kernel): the rows' chunks go to neighbouring invocations (coalesced), not one row to each.
# Rows of at least SG_MIN_COLS elements take the twin. Measured on lavapipe (subgroups of 8, f32, device ms,
# best of 2 interleaved rounds on a loaded host; one row to an invocation or a workgroup -> a row to a
# subgroup): softmax [64, 1024] 0.22 -> 0.15, [128, 2048] 0.81 -> 0.45, [32, 4096] 0.40 -> 0.23; its
# backward [64, 1024] 0.24 -> 0.13, [128, 2048] 0.94 -> 0.34, [32, 4096] 0.47 -> 0.20; rms_norm backward
# [128, 2048] 1.76 -> 1.44, layer_norm backward 2.38 -> 2.00; rms_norm / layer_norm forward within noise
# from 1024 on. Shorter rows lose (softmax / layer_norm [512, 512] 0.44 -> 0.58 / 0.79 -> 0.94): a few
# chunks an invocation do not pay for the subgroup sums.
SG_TWIN = "_sg"
SG_MIN_COLS = 1024
_TAGS = ("f32", "f16", "bf16", "f64")


def _row_family(name, source, variants, defines, extra=()):
    family(name, source, variants, GROUP, defines=defines, extra=extra)
    family(name + SG_TWIN, source, {}, GROUP, defines=dict(defines, SG_ROWS=1), extra=_TAGS,
           features=("subgroup_arithmetic",))


def row_kernel(name, tag, features):
    """The subgroup twin's variant where the device has its features (subgroup arithmetic), else the
    plain family's."""
    return wide_or_plain(name, name + SG_TWIN, tag, features)


_row_family("softmax", "softmax.comp", float_variants("softmax"), _TEX)
_row_family("softmax_last_dim_backward", "softmax.comp", float_variants("softmax_last_dim_backward"),
            dict(_TEX, BACKWARD=1))
_row_family("rms_norm_last_dim", "norm.comp", float_variants("rms_norm_last_dim"), _TEX)
# The inventory has the f32 backward only; the other dtypes are the same generic kernel.
_row_family("rms_norm_last_dim_backward", "norm.comp", {"f32": "rms_norm_last_dim_backward"},
            dict(_TEX, BACKWARD=1), extra=("f16", "bf16", "f64"))
_row_family("layer_norm_last_dim", "norm.comp", float_variants("layer_norm_last_dim"), dict(_TEX, LN=1))
_row_family("layer_norm_last_dim_backward", "norm.comp", float_variants("layer_norm_last_dim_backward"),
            dict(_TEX, LN=1, BACKWARD=1))
# FlashInfer's fused_add_rmsnorm: residual += x in place, then RMSNorm of the sum (one launch).
_row_family("fused_add_rms_norm", "norm.comp", {}, dict(_TEX, ADD_RESIDUAL=1), extra=_TAGS)
