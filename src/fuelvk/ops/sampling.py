"""Sampling from probabilities (FlashInfer's top_k / top_p / top_k_top_p_sampling_from_probs), seeded.

The semantics are the FlashInfer-Bench Definitions' reference, per row of probs [B, V] (float32):
  top-k (0 < k < V): the k largest kept (ties at the k-th value in index order), the row renormalized;
  top-p (0 < p < 1): the tokens a descending sort keeps while the exclusive cumulative sum is <= p
  (at least one); p <= 0 (top_p rows only): greedy, the first largest token (torch.argmax);
then one draw from the kept weights.  k / p outside those ranges leave the row unfiltered.

No sort (a bitonic sort of 128,256 tokens is 153 passes; it cost seconds on lavapipe) and no host
round trip: one workgroup per row (shaders/sampling.comp) finds each filter's cut as a value threshold
by bisection over float32 bit patterns (for values >= 0 the bit order is the value order; one counting
pass over the row a step, at most 31 steps a filter, the row stopping as soon as its kept set is
known), keeps ties at the cut in index order, and draws by inverse CDF in index order over the kept
weights (the first position whose cumulative weight passes u * total), u from numpy's PCG64 (seeded
by `seed`; None: fresh entropy per call).  num_samples = n draws n tokens a row from one cut search
(torch.multinomial's num_samples, with replacement): each draw its own u, a draw a binary search over
the row's lane and sub-block sums and a walk of one sub-block (FlashInfer-Bench's frequency check
takes 500,000 draws a row; repeating the rows instead would redo the search for every draw).  The passes run as a few launches within Device.loop_budget
(the row state is kept on the device between them); the result is read back only by the caller.
The top-p cut compares masses summed in another order than the reference's sorted scan: a token
whose exclusive mass is within float32 rounding of p may fall on the other side.
"""
import threading

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray
from ..errors import DTypeError, FuelVKMemoryError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.sampling import (CUT_PASSES, DRAW_LOOP, FLAGS, MAX_WG, NT, PASS_LOOP, PHASES, SERIAL_VOCAB,
                                STATE_WORDS)
from ..runtime.memory import MIN_BYTES
from ._core import binding_limit, contiguous, device_args, new_like, result, windowed

__all__ = ["top_k_sampling_from_probs", "top_p_sampling_from_probs", "top_k_top_p_sampling_from_probs"]

_LOCK = threading.Lock()
_ENTROPY = np.random.default_rng()


def _per_row(op, name, value, rows, kind):
    """A scalar or a [rows] array (host or device) as a host numpy vector of `kind` (int64 / float64)."""
    v = value.numpy() if isinstance(value, Array) else np.asarray(value)
    if v.dtype.kind not in ("iu" if kind is np.int64 else "iuf"):
        raise DTypeError(f"{op}: {name} must be {'an integer' if kind is np.int64 else 'a real'} scalar or "
                         f"array, got dtype {v.dtype}")
    if v.ndim == 0:
        v = np.full(rows, v)
    if v.shape != (rows,):
        raise ShapeError(f"{op}: {name} has shape {v.shape}; accepted: a scalar or ({rows},) (one per row of probs)")
    return v.astype(kind)


def _uniforms(rows, seed):
    if seed is None:
        with _LOCK:   # numpy Generators are not thread-safe
            return _ENTROPY.random(rows)
    return np.random.default_rng(seed).random(rows)


def _row_args(k, k_rows, pp, p_rows, greedy):
    """[B, 4] uint32 words (k, p, unused, flags) the shader reads per row."""
    a = np.zeros((len(k), 4), np.uint32)
    a[:, 0] = np.where(k_rows, k, 0)
    a[:, 1] = pp.astype(np.float32).view(np.uint32)
    a[:, 3] = k_rows * FLAGS["k"] | p_rows * FLAGS["p"] | greedy * FLAGS["greedy"]
    return a


def _initial_state(b, v, k_rows):
    """[B, STATE_WORDS] uint32: top-k rows start their bisection over [0, +inf's bits + 1) (count(x >= 0)
    taken as v), the others at the top-p start (no renormalization)."""
    st = np.zeros((b, STATE_WORDS), np.uint32)
    st[:, 0] = np.where(k_rows, PHASES["k_bisect"], PHASES["p_start"])
    st[:, 2] = 0x7F800001          # hi: count(x >= hi) < k
    st[:, 3] = v                   # c_lo
    st[:, 8] = np.float32(1).view(np.uint32)
    return st


def _lanes(v):
    """(invocations a workgroup, invocations a row): rows up to SERIAL_VOCAB tokens one invocation each
    (no barrier, MAX_WG rows a workgroup); longer rows a workgroup each, about 16 tokens an invocation
    (a power of two in [8, MAX_WG])."""
    if v <= SERIAL_VOCAB:
        return MAX_WG, 1
    wg = min(MAX_WG, max(8, 1 << (-(-v // 16) - 1).bit_length()))
    return wg, wg


def _pass_plan(op, v, lanes, draws):
    """[(passes, draws a DRAW pass)] a launch each, within Device.loop_budget: launches of as many
    passes as fit until every row's cut is found (CUT_PASSES; a row that gets to its draws early
    takes as many a pass as a search pass costs), then launches of one DRAW pass each taking as many
    draws as the budget allows; with no cap, one launch."""
    budget = runtime.get().device.loop_budget
    chunk = -(-v // lanes)
    cost = PASS_LOOP[0] * chunk + PASS_LOOP[1]
    if budget is None:
        return [(CUT_PASSES + 1, draws)]
    if cost > budget:
        raise UnsupportedError(f"{op}: one pass over a row of {v} tokens needs {cost} loop iterations per "
                               f"invocation, over this device's loop budget of {budget} (accepted: vocab <= "
                               f"{(budget - PASS_LOOP[1]) // PASS_LOOP[0] * lanes})")
    per_draw = DRAW_LOOP[0] * -(-chunk // NT) + DRAW_LOOP[1]
    passes = min(CUT_PASSES + 1, budget // cost)
    small = max(1, (cost - 2 * chunk - NT) // per_draw) * lanes
    big = max(1, (budget - 2 * chunk - NT - PASS_LOOP[1]) // per_draw) * lanes
    return [(passes, small)] * -(-CUT_PASSES // passes) + [(1, big)] * -(-draws // big)


def _sample(op, probs, top_k, top_p, seed, num_samples):
    (p,), numpy_out = device_args(op, probs)
    if p.dtype != _dt.float32:
        raise DTypeError(f"{op}: probs must be float32 (FlashInfer's sampling kernels take float32), got {p.dtype}")
    if p.ndim != 2 or p.shape[1] == 0:
        raise ShapeError(f"{op}: probs must be [batch, vocab] with vocab >= 1, got shape {p.shape}")
    b, v = p.shape
    if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer))):
        raise DTypeError(f"{op}: num_samples must be an int or None, got {type(num_samples).__name__}")
    if num_samples is not None and num_samples < 1:
        raise ShapeError(f"{op}: num_samples must be >= 1 (or None: one token a row), got {num_samples}")
    draws = 1 if num_samples is None else int(num_samples)
    k = _per_row(op, "top_k", top_k, b, np.int64) if top_k is not None else np.zeros(b, np.int64)
    pp = _per_row(op, "top_p", top_p, b, np.float64) if top_p is not None else np.ones(b)
    out = new_like((b,) if num_samples is None else (b, draws), _dt.int64)
    if b == 0:
        return result(out, numpy_out)
    k_rows = (k > 0) & (k < v)
    greedy = pp <= 0
    p_rows = (pp > 0) & (pp < 1)
    args = asarray(_row_args(k, k_rows, pp, p_rows, greedy))
    state = asarray(_initial_state(b, v, k_rows))
    uni = asarray(_uniforms(b * draws, seed).astype(np.float32).reshape(b, draws))
    wg, lanes = _lanes(v)
    plan = _pass_plan(op, v, lanes, draws)
    p = contiguous(p)
    o2 = out.reshape(b, draws)
    ctx = runtime.get()
    lim = binding_limit()
    slack = 2 * MIN_BYTES                                 # a window's ends are aligned out
    if draws * 8 > lim - slack:
        raise FuelVKMemoryError(f"{op}: num_samples={draws} int64 draws of one row are over one binding "
                                f"(maxStorageBufferRange = {lim} bytes); accepted: <= {(lim - slack) // 8}")
    most = min(ctx.device.limits.maxComputeWorkGroupCount[0] * wg // lanes,   # rows one launch may take
               b if p.nbytes <= lim else max(1, (lim - slack) // (v * 4)),
               b if o2.nbytes <= lim else (lim - slack) // (draws * 8))
    for r0 in range(0, b, most):                           # rows in windows of one binding
        rows = slice(r0, r0 + most)
        window, a_w, s_w, o_w, u_w = (windowed(x[rows]) for x in (p, args, state, o2, uni))
        if window is None:
            raise FuelVKMemoryError(f"{op}: one row of {v} float32 tokens is over one binding "
                                    f"(maxStorageBufferRange = {lim} bytes)")
        n = window.shape[0]
        for passes, batch in plan:                         # finished rows return at once
            ctx.launch(kernel("sampling", "f32"), (-(-n * lanes // wg), 1, 1), probs=window, row_args=a_w,
                       state=s_w, out=o_w, uniforms=u_w, vocab=v, off=window.offset, passes=passes, n_rows=n,
                       off_args=a_w.offset // 4, off_state=s_w.offset, off_out=2 * o_w.offset,
                       off_uni=u_w.offset, draws=draws, draw_batch=batch, WG=wg, LANES=lanes)
    return result(out, numpy_out)


def top_k_sampling_from_probs(probs, top_k, seed=None, num_samples=None):
    """One token per row of probs [B, V] (float32) from its top_k largest (0 < k < V; else all),
    renormalized.  top_k: int or [B]; seed: int for reproducible draws.  Returns int64 [B], or
    [B, num_samples] draws a row (independent, one cut search) when num_samples is given."""
    return _sample("top_k_sampling_from_probs", probs, top_k, None, seed, num_samples)


def top_p_sampling_from_probs(probs, top_p, seed=None, num_samples=None):
    """One token per row of probs [B, V] (float32) from its nucleus: the sorted prefix whose exclusive
    cumulative sum is <= top_p (0 < p < 1; p >= 1: all; p <= 0: the argmax).  Returns int64 [B]."""
    return _sample("top_p_sampling_from_probs", probs, None, top_p, seed, num_samples)


def top_k_top_p_sampling_from_probs(probs, top_k, top_p, seed=None, num_samples=None):
    """top-k, then top-p on the renormalized top-k row (FlashInfer's order), then one draw per row.
    Returns int64 [B]."""
    return _sample("top_k_top_p_sampling_from_probs", probs, top_k, top_p, seed, num_samples)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare  # noqa: E402

_SKIP = {"skip": "random top_p rows are half <= 0 (greedy), which FlashInfer-Bench's frequency check rejects "
                 "even for the reference; the dataset's sampling Definitions are served (run.py SOLUTIONS)"}


def _samples(probs, top_k=None, top_p=None, seed=None, num_samples=None):
    return Meta((probs.shape[0],) if num_samples is None else (probs.shape[0], num_samples), np.dtype(np.int64))


declare(
    OpDef("top_k_sampling_from_probs", top_k_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_k, int? seed=None, int? num_samples=None) -> Tensor"),
    OpDef("top_p_sampling_from_probs", top_p_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_p, int? seed=None, int? num_samples=None) -> Tensor"),
    OpDef("top_k_top_p_sampling_from_probs", top_k_top_p_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_k, Tensor top_p, int? seed=None, int? num_samples=None) -> Tensor"),
)
