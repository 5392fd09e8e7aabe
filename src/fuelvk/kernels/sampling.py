"""Sampling from probabilities (shaders/sampling.comp): a workgroup per row (or, for rows up to
SERIAL_VOCAB tokens, an invocation per row) runs the top-k / top-p cut searches and the draw as a
state machine over passes of the row (ops/sampling.py).

PHASES and FLAGS are shared with the shader as defines (PH_*, FLAG_*)."""
from .registry import family, id_defines

GROUP = "Sampling"
MAX_WG = 64      # invocations a workgroup (a specialization constant): NT + 1 bucket sums in shared memory
SERIAL_VOCAB = 256   # rows up to this long: one invocation a row (LANES = 1), MAX_WG rows a workgroup
PHASES = {"k_bisect": 0, "k_ties": 1, "p_start": 2, "p_bisect": 3, "p_ties": 4, "draw": 5, "done": 6}
FLAGS = {"k": 1, "p": 2, "greedy": 4}       # a row's filters (bits of its row_arg's w)
STATE_WORDS = 13
NT = 16          # edges a search pass tests: log2(NT) bits of the cut a pass
# Passes one row may need before its draws: top-k search over 2^31 bit patterns (ceil(31 / 4) passes) +
# its ties, top-p's start, search (8) and ties; then ceil(draws / draw_batch) DRAW passes.
CUT_PASSES = 8 + 1 + 1 + 8 + 1
# Loop iterations of one pass per invocation: at most 4 walks of its chunk of the row (ceil(vocab / WG))
# plus the workgroup sums and scans (log2(WG) <= 6 steps of NT + 1 buckets, or 4 of one value), the
# bucket loops (3 (NT + 1)) and the pass loop itself.  A DRAW pass walks its chunk twice, then each of
# its draws costs DRAW_LOOP[0] per token of a sub-block (chunk / NT) + DRAW_LOOP[1] (the lane search,
# log2(WG) <= 6 steps, the sub-block search, NT, the draw loop).
PASS_LOOP = (4, (NT + 1) * 9 + 3 * NT + 8)
DRAW_LOOP = (1, 6 + NT + 4)

family("sampling", "sampling.comp", {"f32": "sampling"}, GROUP,
       defines=dict(id_defines(PH=PHASES, FLAG=FLAGS), NT=NT))
