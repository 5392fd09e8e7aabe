"""Reductions: reduce / reduce_last_dim / reduce_any_dim (sum, max, min, mean, prod) and the
arg-reductions.

shaders/reduce.comp serves the value families (`reduce` is the one-row case of the last-dim
kernel, workgroup-per-chunk with a second pass over per-chunk partials for long rows;
reduce_any_dim is the strided one: one invocation per output element and chunk of the reduced dim,
for rows of any length and leading / middle axes; the row kernels take what its loop budget cannot);
shaders/arg_reduce.comp serves arg_reduce_last_dim (workgroup per row, tree on (value, index)
pairs) and arg_reduce_any_dim (strided, one invocation per output element).
Op and mode ids are the tables below; the shaders see them as defines (OP_SUM, MODE_PARTIAL, ...).
"""
import math

from .registry import family, float_variants, id_defines

GROUP = "Reductions / arg-reductions / norms"
REDUCE_OPS = {"sum": 0, "max": 1, "min": 2, "mean": 3, "prod": 4}
ARG_OPS = {"argmax": 0, "argmin": 1}
# The row kernels' passes: in -> out, in -> per-chunk partials, partials -> out.
MODES = {"direct": 0, "partial": 1, "final": 2}
MODE_DIRECT, MODE_PARTIAL, MODE_FINAL = MODES["direct"], MODES["partial"], MODES["final"]
# Serial elements per invocation in one chunk (the rest of a row goes to the tree and the 2nd pass).
CHUNK_PER_INVOCATION = 64


# The strided kernels (reduce_any_dim, arg_reduce_any_dim): one invocation per output element and
# chunk of the reduced dim. The dim is split into chunks of at least ANY_DIM_MIN_CHUNK elements until
# about ANY_DIM_INVOCATIONS invocations run (enough to fill a device), and always into chunks within
# Device.loop_budget.
# Chunks also hold at least sqrt(d) elements, so that the final pass over a long dim (one invocation
# per output) reads at most sqrt(d) partials. Measured on lavapipe (f32 sum, ms; chunks of >= 64
# without the sqrt bound -> now): [1024, 1024] axis -1 1.19 -> 0.45, all 1.23 -> 0.43, [4, 128256]
# axis -1 0.58 -> 0.43, [64, 32768] axis -1 1.85 -> 1.39 (short chunks: more partials and loop setup).
ANY_DIM_MIN_CHUNK = 512
ANY_DIM_INVOCATIONS = 16384
ANY_DIM_CHUNK_STEP = 8       # elements per texel of the narrowest dtype (f16 / bf16)
# Contiguous rows up to this long run one row per invocation (the strided kernels: no barriers, the
# row read as 16-byte texels where aligned, chunks of it over more invocations when rows are few);
# longer rows get a workgroup per chunk of CHUNK_PER_INVOCATION * 128 elements (the row kernels:
# coalesced across invocations, a tree per chunk). Below one such chunk the row kernels spend their
# time in the tree's barriers: measured on lavapipe, one row per invocation is 13x faster for sum
# over [1024, 2048] (2 ms vs 27 ms) and 30x for argmax over [256, 8192] (2 ms vs 68 ms).
# The value reductions (sum, mean, max, min, prod) send rows of any length to the strided kernel
# (ops/reduction.py's VALUE_ROW_MAX): chunks of a long row over invocations beat the row kernel's
# trees there too (lavapipe, f32 sum: [64, 32768] 11-25 ms -> 1.4 ms, the whole of [1024, 1024] 2.1
# -> 0.43 ms); arg-reductions keep this bound.
SHORT_ROW_MAX = 8192


def any_dim_chunks(ctx, n_out, d):
    """(chunk, n_chunks) splitting a reduced dim of d elements over the strided kernels' invocations,
    or None when Device.loop_budget cannot hold chunks of at most `budget` elements with a final pass
    over at most `budget` partials. The chunk depends on (n_out, d) only, not on the load path or the
    layout, so each output's summation order is the same on every route (a multiple of
    ANY_DIM_CHUNK_STEP, so that rows read as texels split at whole texels)."""
    step = ANY_DIM_CHUNK_STEP
    want = max(1, min(-(-ANY_DIM_INVOCATIONS // max(n_out, 1)), d // ANY_DIM_MIN_CHUNK, math.isqrt(d)))
    chunk = -(-d // want // step) * step
    budget = ctx.device.loop_budget
    if budget is not None:
        chunk = min(chunk, budget // step * step or budget)
        if -(-d // chunk) > budget:
            return None
    return chunk, -(-d // chunk)


# Row kernels sized to the row (row_wg(fit=True)): about this many elements per invocation.
ROW_ELEMS_PER_LANE = 32


def row_wg(ctx, n_cols=0, passes=1, fit=False):
    """Workgroup size of the row kernels (reduce, arg_reduce, softmax, norms): a power of two.

    Long rows get bigger workgroups so each invocation's serial work stays under Device.loop_budget.
    fit=True (softmax, norms: one workgroup per row) sizes the workgroup to the row instead of 128:
    about ROW_ELEMS_PER_LANE elements per invocation, at least one subgroup. Idle invocations still
    pay for every barrier of the tree reduction: a 32-column softmax took 10.9 ms at 128 invocations,
    1.0 ms at 8 (lavapipe, 512 rows). Returns None when even the largest workgroup cannot do the row
    within the budget.
    """
    mx = 1 << (ctx.device.limits.maxComputeWorkGroupInvocations.bit_length() - 1)
    wg = min(128, mx)
    if fit and n_cols:
        sg = getattr(ctx.device, "subgroup_size", 0) or 1
        floor = min(1 << (sg.bit_length() - 1), wg)   # a power of two
        want = -(-n_cols // ROW_ELEMS_PER_LANE)
        wg = min(wg, max(floor, 1 << (want - 1).bit_length()))
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
family("reduce_any_dim", "reduce.comp", float_variants("reduce_any_dim", bare=None), GROUP,
       defines=dict(_REDUCE_DEFINES, ANY_DIM=1))
family("arg_reduce_last_dim", "arg_reduce.comp", float_variants("arg_reduce_last_dim", bare=None),
       GROUP, defines=_ARG_DEFINES)
family("arg_reduce_any_dim", "arg_reduce.comp", float_variants("arg_reduce_any_dim", bare=None),
       GROUP, defines=dict(_ARG_DEFINES, ANY_DIM=1))

CUMSUM_MAX_RANK = 5   # outer dims after collapsing (the shader's Params arrays hold this many)
# cumsum's operands with a texel view (unit-stride axes: ROWS), as bits of its TEX spec constant.
CUMSUM_TEXELS = {"x": 1, "o": 2}
family("cumsum", "cumsum.comp", {t: f"cumsum_{t}" for t in ("f32", "f16", "bf16", "f64")}, GROUP,
       defines={"MAX_RANK": CUMSUM_MAX_RANK, **id_defines(TEX=CUMSUM_TEXELS)})
