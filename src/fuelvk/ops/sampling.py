"""Sampling from probabilities (FlashInfer's top_k / top_p / top_k_top_p_sampling_from_probs), seeded.

The semantics are the FlashInfer-Bench Definitions' reference, per row of probs [B, V] (float32):
  top-k (0 < k < V): the k largest kept (ties at the k-th value in index order), the row renormalized;
  top-p (0 < p < 1): the tokens a descending sort keeps while the exclusive cumulative sum is <= p
  (at least one); p <= 0 (top_p rows only): greedy, the first largest token (torch.argmax);
then one draw from the kept weights.  k / p outside those ranges leave the row unfiltered.

No sort (a bitonic sort of 128,256 tokens is 153 passes; it cost seconds on lavapipe): the cut of
each filter is a value threshold found by bisection over float32 bit patterns (for values >= 0 the
bit order is the value order), each step one pass on the device counting (top-k: tokens >= t) or
summing (top-p: the mass and count of tokens > t) per row, the B results read back to pick the next
bits; a row stops as soon as its kept set is known (at most 31 steps).  Ties at the cut are kept in
index order through one row scan.  The draw is an inverse CDF in index order over the kept weights
(one row scan: the first position whose cumulative weight passes u * total), the B uniforms from
numpy's PCG64 (seeded by `seed`; None: fresh entropy per call).  The top-p cut compares masses
summed in another order than the reference's sorted scan: a token whose exclusive mass is within
float32 rounding of p may fall on the other side.
"""
import threading

import numpy as np

from .. import dtypes as _dt
from ..array import Array, asarray
from ..errors import DTypeError, ShapeError
from . import elementwise as ew
from ._core import device_args
from .movement import concatenate
from .reduction import argmax, cumsum, max as row_max, sum as row_sum

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


_LAST_BELOW = np.float32(1 - 2.0 ** -23)   # keeps a draw's target below the row's total


def _col(v):
    """A host [B] vector as a float32 [B, 1] device column."""
    return asarray(np.asarray(v, np.float32)[:, None])


def _float_of(bits):
    return np.asarray(bits, np.int64).astype(np.int32).view(np.float32)


def _bits_of(x):
    return np.asarray(x, np.float32).view(np.int32).astype(np.int64)


def _above(x, bits, mass=False, fused=True):
    """Per row of x [B, V]: the count of x > t (with mass: and their sum), t the float32 of bits [B],
    read back as float64 [B] (one wait).  fused: the indicator is ceil(x - t) and the mass
    sum(relu(x - t)) + t * count, one pass each: exact where x - t lies in (-1, 1], i.e. for rows of
    x in [0, 1] and 0 <= t < 1 (the callers check it); else heaviside chains (three passes)."""
    t = _float_of(np.maximum(bits, 0))
    tc = _col(t)
    if fused:
        parts = [ew.fused("sampling", x, tc, "subtract", post="ceil")]
        parts += [ew.fused("sampling", x, tc, "subtract", post="relu")] if mass else []
    else:
        h = ew.heaviside(ew.subtract(x, tc), 0.0)
        parts = [h] + ([ew.multiply(h, x)] if mass else [])
    sums = [row_sum(q, axis=-1, keepdims=True) for q in parts]
    got = (concatenate(sums, axis=1) if mass else sums[0]).numpy().astype(np.float64)
    if not mass:
        return got[:, 0]
    return got[:, 0], got[:, 1] + (t.astype(np.float64) * got[:, 0] if fused else 0.0)


def _cut(x, t, take):
    """Mask of x > t plus, in index order, the first take[r] tokens of row r equal to t (t [B] host
    float32, take [B] host counts; rows needing no tie cut pass take >= V)."""
    tc = _col(t)
    gt = ew.heaviside(ew.subtract(x, tc), 0.0)
    if np.all(take >= x.shape[1]):
        return ew.heaviside(ew.subtract(x, tc), 1.0)
    eq = ew.subtract(ew.heaviside(ew.subtract(x, tc), 1.0), gt)
    rank = cumsum(eq, axis=-1)                                  # 1-based rank among the ties (exact < 2^24)
    return ew.add(gt, ew.multiply(eq, ew.heaviside(ew.subtract(_col(take), rank), 1.0)))


def _top_k_cut(p, k, rows):
    """Threshold and tie count of the top-k rows: (t [B], take [B]) for _cut (others: keep all)."""
    b, v = p.shape
    t = np.zeros(b, np.float32)                                 # rows not cut: every x >= 0 kept
    take = np.full(b, v, np.int64)
    if not rows.any():
        return t, take
    mx = row_max(p, axis=-1).numpy()
    lo = np.zeros(b, np.int64)                                  # invariant: count(x >= lo) >= k ...
    hi = _bits_of(mx) + 1                                       # ... and count(x >= hi) < k
    c_lo, c_hi = np.full(b, float(v)), np.zeros(b)
    fused = bool(np.all(mx[rows] < 1))                          # probes t <= max < 1 (_above)
    live = rows.copy()
    while live.any():
        mid = (lo + hi) // 2                                    # > lo >= 0
        c = _above(p, mid - 1, fused=fused)                     # x >= mid: x > the float below it
        up = live & (c >= k)
        lo, c_lo = np.where(up, mid, lo), np.where(up, c, c_lo)
        hi, c_hi = np.where(live & ~up, mid, hi), np.where(live & ~up, c, c_hi)
        live &= ~((c_lo == k) | (hi - lo <= 1))             # the set x >= lo is the top k, or lo is the k-th value
    t = np.where(rows, _float_of(lo), t)
    take = np.where(rows & (c_lo > k), k - c_hi, take).astype(np.int64)   # ties at the k-th value: k - count(x > t)
    return t, take


def _top_p_cut(r, top_p, rows):
    """Threshold and tie count of the top-p rows over r [B, V] (kept: the sorted prefix whose
    exclusive mass is <= p).  The cut is w, the least value whose mass above it is <= p; of its ties
    floor((p - mass above w) / w) + 1 are kept."""
    b, v = r.shape
    t = np.full(b, -np.inf, np.float32)                         # rows not cut: everything kept
    take = np.full(b, v, np.int64)
    if not rows.any():
        return t, take
    mx = row_max(r, axis=-1).numpy()
    fused = bool(np.all(mx[rows] <= 1))                         # probes 0 <= t < max <= 1 (_above)
    c0, m0 = _above(r, np.zeros(b, np.int64), True, fused)
    lo = np.full(b, -1, np.int64)                               # invariant: mass(x > lo) > p (lo = -1: all)
    hi = _bits_of(mx)                                           # mass(x > hi) = 0 <= p
    c_lo, c_hi, m_hi = c0, np.zeros(b), np.zeros(b)
    live = rows & (m0 > top_p)                                  # rows whose positive mass is <= p keep all
    while live.any():
        mid = (lo + hi) // 2
        c, m = _above(r, mid, True, fused)
        down = live & (m <= top_p)
        hi, c_hi, m_hi = np.where(down, mid, hi), np.where(down, c, c_hi), np.where(down, m, m_hi)
        lo, c_lo = np.where(live & ~down, mid, lo), np.where(live & ~down, c, c_lo)
        live &= ~((c_lo - c_hi <= 1) | (hi - lo <= 1))     # one token in (lo, hi], or hi is the cut value
    one = rows & (m0 > top_p) & (c_lo - c_hi <= 1)          # keep x > lo (x >= the next float): the one token in (lo, hi] too
    t = np.where(one, _float_of(lo + 1), t)
    ties = rows & (m0 > top_p) & ~one                       # hi - lo == 1: w = hi, its c_lo - c_hi ties
    if ties.any():
        w = _float_of(hi).astype(np.float64)
        keep = np.floor((top_p - m_hi) / np.where(ties, w, 1.0)) + 1
        t = np.where(ties, _float_of(hi), t)
        take = np.where(ties, np.clip(keep, 1, c_lo - c_hi), take).astype(np.int64)
        # x > w plus the first `keep` ties: _cut's x > t with t = w, ties at t counted by take
    return t, take


def _sample(op, probs, top_k, top_p, seed):
    (p,), numpy_out = device_args(op, probs)
    if p.dtype != _dt.float32:
        raise DTypeError(f"{op}: probs must be float32 (FlashInfer's sampling kernels take float32), got {p.dtype}")
    if p.ndim != 2 or p.shape[1] == 0:
        raise ShapeError(f"{op}: probs must be [batch, vocab] with vocab >= 1, got shape {p.shape}")
    b, v = p.shape
    if b == 0:
        out = np.zeros(0, np.int64)
        return out if numpy_out else asarray(out)
    k = _per_row(op, "top_k", top_k, b, np.int64) if top_k is not None else np.zeros(b, np.int64)
    pp = _per_row(op, "top_p", top_p, b, np.float64) if top_p is not None else np.ones(b)
    k_rows = (k > 0) & (k < v)
    greedy = pp <= 0
    u = _uniforms(b, seed).astype(np.float32)

    r = p
    if k_rows.any():   # top-k, renormalized (the reference leaves the other rows as given)
        t, take = _top_k_cut(p, k, k_rows)
        kept = ew.multiply(p, _cut(p, t, take))
        den = row_sum(kept, axis=-1, keepdims=True)
        r = ew.divide(kept, ew.add(ew.multiply(den, _col(k_rows)), _col(~k_rows)))
    p_rows = (pp > 0) & (pp < 1)
    w = r
    if p_rows.any():
        t, take = _top_p_cut(r, pp, p_rows)
        w = ew.multiply(r, _cut(r, t, take))
    cdf = cumsum(w, axis=-1)
    total = cdf[:, v - 1:]
    target = ew.minimum(ew.multiply(total, _col(u)), ew.multiply(total, _LAST_BELOW))
    # the draw: the first position whose cumulative weight passes the target (its weight is > 0)
    m = row_sum(ew.heaviside(ew.subtract(target, cdf), 1.0), axis=-1).numpy()
    out = np.minimum(m, v - 1).astype(np.int64)
    if greedy.any():
        out = np.where(greedy, argmax(r, axis=-1).numpy().astype(np.int64), out)
    return out if numpy_out else asarray(out)


def top_k_sampling_from_probs(probs, top_k, seed=None):
    """One token per row of probs [B, V] (float32) from its top_k largest (0 < k < V; else all),
    renormalized.  top_k: int or [B]; seed: int for reproducible draws.  Returns int64 [B]."""
    return _sample("top_k_sampling_from_probs", probs, top_k, None, seed)


def top_p_sampling_from_probs(probs, top_p, seed=None):
    """One token per row of probs [B, V] (float32) from its nucleus: the sorted prefix whose exclusive
    cumulative sum is <= top_p (0 < p < 1; p >= 1: all; p <= 0: the argmax).  Returns int64 [B]."""
    return _sample("top_p_sampling_from_probs", probs, None, top_p, seed)


def top_k_top_p_sampling_from_probs(probs, top_k, top_p, seed=None):
    """top-k, then top-p on the renormalized top-k row (FlashInfer's order), then one draw per row.
    Returns int64 [B]."""
    return _sample("top_k_top_p_sampling_from_probs", probs, top_k, top_p, seed)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare  # noqa: E402

_SKIP = {"skip": "random top_p rows are half <= 0 (greedy), which FlashInfer-Bench's frequency check rejects "
                 "even for the reference; the dataset's sampling Definitions are served (run.py SOLUTIONS)"}


def _samples(probs, top_k=None, top_p=None, seed=None):
    return Meta((probs.shape[0],), np.dtype(np.int64))


declare(
    OpDef("top_k_sampling_from_probs", top_k_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_k, int? seed=None) -> Tensor"),
    OpDef("top_p_sampling_from_probs", top_p_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_p, int? seed=None) -> Tensor"),
    OpDef("top_k_top_p_sampling_from_probs", top_k_top_p_sampling_from_probs, _samples, export=_SKIP,
          schema="(Tensor probs, Tensor top_k, Tensor top_p, int? seed=None) -> Tensor"),
)
