"""fuelvk solutions for FlashInfer-Bench kinds, composed from fuelvk ops on the device.

Attention over a paged KV cache (gqa_paged), latent attention (mla_paged, dsa_paged: dims past the
flash kernels' D <= 256, so matmul + softmax), ragged latent prefill (mla_ragged: v zero-padded to
the qk dim so the flash kernel takes it), and sampling from probabilities (top-k / top-p thresholds
found by an exact search over float32 bit patterns, then an inverse-CDF draw).  Each build takes a
Definition and its inputs (torch CPU, as run.py generates them) and returns a zero-argument callable
that runs the op on the device-resident inputs and returns the outputs on the host: the timed unit.
Semantics are each Definition's `reference` (lse 2-based where it says so; a sequence with no query
or no key gives zeros and lse -inf).
"""
import hashlib
import math

import numpy as np

from .convert import np_dtype, to_numpy

LN2 = math.log(2.0)


def _fv():
    import fuelvk
    return fuelvk


def _dev(inputs, *names):
    return tuple(_fv().asarray(to_numpy(inputs[n])) for n in names)


def _ints(t):
    return [int(x) for x in t.reshape(-1).tolist()]


def lse_is_log2(defn):
    """Whether the Definition's lse output is 2-based (its description or its reference say so)."""
    text = (defn["outputs"]["lse"].get("description") or "") + defn["reference"]
    return "2-based" in text or "base-2" in text or "math.log(2" in text


# -- attention -----------------------------------------------------------------------------------------

def sdpa_segments(q, segments, scale, causal, odt, log2, dv=None):
    """fuelvk.scaled_dot_product_attention per segment: segments are (q0, q1, kv) with kv() giving the
    segment's (k, v) [T, Hkv, D] device arrays (or None); q [total_q, Hq, D] on the device.  Host
    (out [total_q, Hq, dv] odt, lse [total_q, Hq] float32); dv < D drops v's zero padding."""
    total_q, hq, d = q.shape
    dv = d if dv is None else dv
    out = np.zeros((total_q, hq, dv), odt)
    lse = np.full((total_q, hq), -np.inf, np.float32)
    for q0, q1, kv in segments:
        kb = None if q1 <= q0 else kv()
        if kb is None or kb[0].shape[0] == 0:
            continue
        qb, kb, vb = (t[None].transpose(0, 2, 1, 3) for t in (q[q0:q1], *kb))
        o, l_ = _fv().scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=scale, return_lse=True)
        out[q0:q1] = o.numpy()[0].transpose(1, 0, 2)[..., :dv]
        lse[q0:q1] = l_.numpy()[0].T / (LN2 if log2 else 1.0)
    return out, lse


def solve_gqa_ragged(defn, inputs):
    """Per sequence b: SDPA on q[qo_indptr[b]:qo_indptr[b+1]] and its kv slice, causal masks
    bottom-right aligned (fuelvk's and the reference's convention)."""
    q, k, v = _dev(inputs, "q", "k", "v")
    qo, kv = _ints(inputs["qo_indptr"]), _ints(inputs["kv_indptr"])
    scale, odt, log2 = float(inputs["sm_scale"]), np_dtype(defn["outputs"]["output"]["dtype"]), lse_is_log2(defn)
    segs = [(qo[b], qo[b + 1], lambda a=kv[b], e=kv[b + 1]: (k[a:e], v[a:e])) for b in range(len(qo) - 1)]
    return lambda: sdpa_segments(q, segs, scale, True, odt, log2)


def solve_mla_ragged(defn, inputs):
    """As gqa_ragged with v [T, H, vo_dim] zero-padded to qk_dim (the flash kernel takes one head dim;
    zero columns add nothing to the first vo_dim outputs), the padding dropped from the output."""
    fv = _fv()
    q, k, v = _dev(inputs, "q", "k", "v")
    qo, kv = _ints(inputs["qo_indptr"]), _ints(inputs["kv_indptr"])
    scale, odt, log2 = float(inputs["sm_scale"]), np_dtype(defn["outputs"]["output"]["dtype"]), lse_is_log2(defn)
    dqk, dv = q.shape[-1], v.shape[-1]

    def call():
        vp = fv.pad(v, ((0, 0), (0, 0), (0, dqk - dv))) if dqk > dv else v
        segs = [(qo[b], qo[b + 1], lambda a=kv[b], e=kv[b + 1]: (k[a:e], vp[a:e])) for b in range(len(qo) - 1)]
        return sdpa_segments(q, segs, scale, True, odt, log2, dv)
    return call


def solve_gqa_paged(defn, inputs):
    """Decode (one query per request) or prefill (qo_indptr) over a paged cache: a request's pages
    kv_indices[kv_indptr[b]:kv_indptr[b+1]] are gathered (fuelvk.take) into contiguous K/V, the last
    page cut to kv_last_page_len[b] when the Definition has it, then SDPA (causal, bottom-right)."""
    fv = _fv()
    q, kc, vc = _dev(inputs, "q", "k_cache", "v_cache")
    ps, hkv, d = kc.shape[1:]
    ptr = _ints(inputs["kv_indptr"])
    idx = fv.asarray(to_numpy(inputs["kv_indices"]))
    nb = len(ptr) - 1
    qo = _ints(inputs["qo_indptr"]) if "qo_indptr" in inputs else list(range(nb + 1))
    last = _ints(inputs["kv_last_page_len"]) if "kv_last_page_len" in inputs else [ps] * nb
    scale, odt, log2 = float(inputs["sm_scale"]), np_dtype(defn["outputs"]["output"]["dtype"]), lse_is_log2(defn)

    def kv(b):
        n = ptr[b + 1] - ptr[b]
        tokens = (n - 1) * ps + last[b]
        if n <= 0 or tokens <= 0:
            return None
        ids = idx[ptr[b]:ptr[b + 1]]
        return tuple(fv.take(c, ids, axis=0).reshape(n * ps, hkv, d)[:tokens] for c in (kc, vc))
    segs = [(qo[b], qo[b + 1], lambda b=b: kv(b)) for b in range(nb)]
    return lambda: sdpa_segments(q, segs, scale, True, odt, log2)


def latent_attention(qn, qp, kc, kp, scale):
    """MLA with the absorbed projection: logits = qn kc^T + qp kp^T (float32), softmax, out = p kc.
    qn [H, Dc], qp [H, Dp], kc [T, Dc], kp [T, Dp] -> (out [H, Dc] float32, lse [H] natural)."""
    fv = _fv()
    s = (fv.matmul(qn, kc.T, "float32") + fv.matmul(qp, kp.T, "float32")) * scale
    m = fv.max(s, axis=-1, keepdims=True)
    lse = m + fv.log(fv.sum(fv.exp(s - m), axis=-1, keepdims=True))
    return fv.matmul(fv.softmax(s, axis=-1), kc), lse.reshape(-1)


def _latent_rows(defn, inputs, rows):
    """rows: per output row, the device ids of its cache tokens (None: no key).  Host (out, lse)."""
    qn, qp, ckv, kpe = _dev(inputs, "q_nope", "q_pe", "ckv_cache", "kpe_cache")
    ckv, kpe = ckv.reshape(-1, ckv.shape[-1]), kpe.reshape(-1, kpe.shape[-1])   # token rows
    scale, odt, log2 = float(inputs["sm_scale"]), np_dtype(defn["outputs"]["output"]["dtype"]), lse_is_log2(defn)
    fv = _fv()

    def call():
        n, h, dc = qn.shape
        out = np.zeros((n, h, dc), odt)
        lse = np.full((n, h), -np.inf, np.float32)
        for t, ids in enumerate(rows):
            if ids is None:
                continue
            o, l_ = latent_attention(qn[t], qp[t], fv.take(ckv, ids, axis=0), fv.take(kpe, ids, axis=0), scale)
            out[t] = o.astype(odt).numpy()
            lse[t] = l_.numpy() / (LN2 if log2 else 1.0)
        return out, lse
    return call


def _token_ids(fv, ptr, idx, ps, b):
    """Cache token rows of request b's pages (every page full: the Definitions without a last-page
    length; page_size 1 makes pages tokens, as their references read them)."""
    if ptr[b + 1] <= ptr[b]:
        return None
    pages = idx[ptr[b]:ptr[b + 1]]
    return fv.asarray((np.asarray(pages, np.int64)[:, None] * ps + np.arange(ps)).reshape(-1).astype(np.int32)) \
        if ps > 1 else fv.asarray(np.asarray(pages, np.int32))


def solve_mla_paged(defn, inputs):
    """MLA decode over a paged compressed-KV cache: per request its pages' ckv / kpe rows."""
    fv = _fv()
    ptr, idx = _ints(inputs["kv_indptr"]), _ints(inputs["kv_indices"])
    ps = inputs["ckv_cache"].shape[1]
    return _latent_rows(defn, inputs, [_token_ids(fv, ptr, idx, ps, b) for b in range(len(ptr) - 1)])


def solve_dsa_paged(defn, inputs):
    """DeepSeek sparse attention: per token, MLA over its top-k cache rows (sparse_indices, -1 =
    padding, dropped wherever it stands, as the reference's mask does)."""
    fv = _fv()
    sel = to_numpy(inputs["sparse_indices"])
    ps = inputs["ckv_cache"].shape[1]
    rows = []
    for r in sel:
        ids = r[r != -1]
        ids = (ids.astype(np.int64)[:, None] * ps + np.arange(ps)).reshape(-1) if ps > 1 else ids
        rows.append(fv.asarray(ids.astype(np.int32)) if ids.size else None)
    return _latent_rows(defn, inputs, rows)


# -- sampling ------------------------------------------------------------------------------------------

_INF_BITS = 0x7F800000   # float32 +inf: every non-negative float32 orders as its bit pattern
_WAYS = 15               # thresholds tried per round: 8 rounds cover the 31 bits


def _bits_to_f32(bits):
    return np.asarray(bits, np.int64).astype(np.uint32).view(np.float32)


def smallest_threshold(p, weight, limit, ways=_WAYS):
    """Per row of p [B, V] (non-negative float32, on the device): the smallest float32 t >= 0 with
    sum(weight[p > t]) <= limit[row] (weight: p itself, or None for a count), found exactly by a
    (ways + 1)-ary search over bit patterns, each round one batched comparison and sum on the device.
    The sum is non-increasing in t, so the result is a value of the row (or 0) and {p >= t} is the
    set the rule keeps: top-k (count <= k - 1: t = the k-th largest value, ties kept) and top-p
    (mass above <= p * total: the sorted prefix whose exclusive cumulative sum is <= p)."""
    fv = _fv()
    b, v = p.shape
    ways = max(1, min(ways, (1 << 24) // max(b * v, 1)))
    lo, hi = np.zeros(b, np.int64), np.full(b, _INF_BITS, np.int64)
    w = fv.asarray(np.ones((1, 1, 1), np.float32)) if weight is None else weight[:, None, :]
    limit = np.asarray(limit, np.float64)
    while (lo < hi).any():
        cand = lo[:, None] + ((hi - lo)[:, None] * np.arange(1, ways + 1)) // (ways + 1)   # [B, ways]
        t = fv.asarray(_bits_to_f32(cand)[:, :, None])
        below = fv.less_equal(p[:, None, :], t)                                        # [B, ways, V]
        stat = fv.sum(fv.masked_fill(w.broadcast_to((b, ways, v)), below, 0.0), axis=-1).numpy()
        ok = stat <= limit[:, None]
        first_ok = np.where(ok.any(1), cand[np.arange(b), ok.argmax(1)], hi)
        last_bad = np.where((~ok).any(1), cand[np.arange(b), ways - 1 - (~ok)[:, ::-1].argmax(1)] + 1, lo)
        hi, lo = np.minimum(hi, first_ok), np.maximum(lo, np.where(lo < hi, last_bad, lo))
        lo = np.minimum(lo, hi)
    return _bits_to_f32(hi)


def solve_sampling(defn, inputs):
    """top_k / top_p / top_k_top_p sampling from probabilities, as the reference: top-k filter
    (0 < k < vocab), then top-p on the renormalized row (0 < p < 1; p <= 0: the argmax), then one
    draw per row by inverse CDF (cumsum, count of entries below u * total) with seeded uniforms."""
    fv = _fv()
    (probs,) = _dev(inputs, "probs")
    b, v = probs.shape
    name = defn["name"].lower()
    top_k = _ints(inputs["top_k"]) if "top_k" in inputs and "top_k" in name else [0] * b
    top_p = [float(x) for x in inputs["top_p"].reshape(-1).tolist()] \
        if "top_p" in inputs and "top_p" in name else [1.0] * b
    k_rows = np.array([0 < k < v for k in top_k])
    p_rows = np.array([0 < p < 1 for p in top_p])
    greedy = np.array([p <= 0 for p in top_p])
    seed = int(hashlib.sha256(defn["name"].encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    one = fv.asarray(np.ones((1, 1), np.float32))

    def call():
        p = probs
        if k_rows.any():
            limit = np.where(k_rows, np.asarray(top_k) - 1, v)
            t = smallest_threshold(p, None, limit)
            p = fv.masked_fill(p, fv.less(p, fv.asarray(t[:, None])), 0.0)
        if p_rows.any():
            total = fv.sum(p, axis=-1).numpy().astype(np.float64)
            t = smallest_threshold(p, p, np.where(p_rows, np.asarray(top_p) * total, np.inf))
            p = fv.masked_fill(p, fv.less(p, fv.asarray(t[:, None])), 0.0)
        cdf = fv.cumsum(p, axis=-1)
        u = fv.asarray((1.0 - rng.random((b, 1))).astype(np.float32))     # (0, 1]
        target = cdf[:, v - 1:] * u
        below = fv.greater_equal(cdf, target)
        s = fv.sum(fv.masked_fill(one.broadcast_to((b, v)), below, 0.0), axis=-1).numpy()
        s = np.minimum(s.astype(np.int64), v - 1)
        if greedy.any():
            s = np.where(greedy, fv.argmax(p, axis=-1).numpy(), s)
        return (s,)
    return call
