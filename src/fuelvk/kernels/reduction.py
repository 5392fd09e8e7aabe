"""Reductions: reduce / reduce_last_dim (sum, max, min, mean, prod) and the arg-reductions.

shaders/reduce.comp serves both value families (`reduce` is the one-row case of the last-dim
kernel, workgroup-per-chunk with a second pass over per-chunk partials for long rows);
shaders/arg_reduce.comp serves arg_reduce_last_dim (workgroup per row, tree on (value, index)
pairs) and arg_reduce_any_dim (strided, one invocation per output element).
"""
from .registry import P, family, float_variants

GROUP = "Reductions / arg-reductions / norms"
REDUCE_PARAMS = P("n_rows:u32", "n_cols:u32", "chunk:u32", "n_chunks:u32", "off_in:u32", "off_out:u32",
                  "denom:u32", "pad:u32")
ARG_PARAMS = P("n_out:u32", "n_inner:u32", "d:u32", "off_in:u32", "off_out:u32", "s_outer:i32", "s_d:i32",
               "s_inner:i32", "chunk:u32", "n_chunks:u32")
REDUCE_OPS = {"sum": 0, "max": 1, "min": 2, "mean": 3, "prod": 4}
ARG_OPS = {"argmax": 0, "argmin": 1}
MODE_DIRECT, MODE_PARTIAL, MODE_FINAL = 0, 1, 2
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


family("reduce", "reduce.comp", float_variants("reduce"), GROUP)
family("reduce_last_dim", "reduce.comp", float_variants("reduce_last_dim"), GROUP)
family("arg_reduce_last_dim", "arg_reduce.comp", float_variants("arg_reduce_last_dim", bare=None),
       GROUP)
family("arg_reduce_any_dim", "arg_reduce.comp", float_variants("arg_reduce_any_dim", bare=None),
       GROUP, defines={"ANY_DIM": 1})

CUMSUM_MAX_RANK = 5
CUMSUM_PARAMS = P("n_slices:u32", "d:u32", "rank:u32", "off_in:u32", "off_out:u32", "s_ax:i32", "so_ax:u32",
                  f"shape:i32[{CUMSUM_MAX_RANK}]", f"s_in:i32[{CUMSUM_MAX_RANK}]", f"s_out:i32[{CUMSUM_MAX_RANK}]")
family("cumsum", "cumsum.comp", {t: f"cumsum_{t}" for t in ("f32", "f16", "bf16", "f64")}, GROUP)
