"""Reductions: reduce / reduce_last_dim (sum, max, min, mean, prod) and the arg-reductions.

shaders/reduce.comp serves both value families (`reduce` is the one-row case of the last-dim
kernel, workgroup-per-chunk with a second pass over per-chunk partials for long rows);
shaders/arg_reduce.comp serves arg_reduce_last_dim (workgroup per row, tree on (value, index)
pairs) and arg_reduce_any_dim (strided, one invocation per output element).
Op and mode ids are the tables below; the shaders see them as defines (OP_SUM, MODE_PARTIAL, ...).
"""
from .registry import family, float_variants, id_defines  # noqa: F401 (helpers import it from here too)

GROUP = "Reductions / arg-reductions / norms"
REDUCE_OPS = {"sum": 0, "max": 1, "min": 2, "mean": 3, "prod": 4}
ARG_OPS = {"argmax": 0, "argmin": 1}
# The row kernels' passes: in -> out, in -> per-chunk partials, partials -> out.
MODES = {"direct": 0, "partial": 1, "final": 2}
MODE_DIRECT, MODE_PARTIAL, MODE_FINAL = MODES["direct"], MODES["partial"], MODES["final"]
# Serial elements per invocation in one chunk (the rest of a row goes to the tree and the 2nd pass).
CHUNK_PER_INVOCATION = 64


def row_wg(ctx, n_cols=0, passes=1):
    """Workgroup size of the row kernels (reduce, arg_reduce, softmax, norms): a power of two.

    Long rows get bigger workgroups so each invocation's serial work stays under Device.loop_budget.
    Returns None when even the largest workgroup cannot do the row within the budget.
    """
    mx = 1 << (ctx.device.limits.maxComputeWorkGroupInvocations.bit_length() - 1)
    wg = min(128, mx)
    budget = ctx.device.loop_budget
    if budget is None:
        return wg
    while passes * -(-n_cols // wg) > budget and wg < mx:
        wg *= 2
    return wg if passes * -(-n_cols // wg) <= budget else None


_REDUCE_DEFINES = id_defines(OP=REDUCE_OPS, MODE=MODES)
_ARG_DEFINES = id_defines(OP=ARG_OPS, MODE=MODES)
family("reduce", "reduce.comp", float_variants("reduce"), GROUP, defines=_REDUCE_DEFINES)
family("reduce_last_dim", "reduce.comp", float_variants("reduce_last_dim"), GROUP, defines=_REDUCE_DEFINES)
family("arg_reduce_last_dim", "arg_reduce.comp", float_variants("arg_reduce_last_dim", bare=None),
       GROUP, defines=_ARG_DEFINES)
family("arg_reduce_any_dim", "arg_reduce.comp", float_variants("arg_reduce_any_dim", bare=None),
       GROUP, defines=dict(_ARG_DEFINES, ANY_DIM=1))

CUMSUM_MAX_RANK = 5   # outer dims after collapsing (the shader's Params arrays hold this many)
family("cumsum", "cumsum.comp", {t: f"cumsum_{t}" for t in ("f32", "f16", "bf16", "f64")}, GROUP,
       defines={"MAX_RANK": CUMSUM_MAX_RANK})
