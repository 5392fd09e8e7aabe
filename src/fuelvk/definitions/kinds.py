"""fuelvk solutions for FlashInfer-Bench kinds, composed from fuelvk ops on the device.

Attention over a paged KV cache (gqa_paged), latent attention (mla_paged, dsa_paged: dims past the
flash kernels' D <= 256, so matmul + softmax), ragged latent prefill (mla_ragged: v zero-padded to
the qk dim so the flash kernel takes it), sampling from probabilities (fuelvk's sampling ops: sort,
filter and draw on the device), and mixture of experts (fp8 block-scale experts with renormalize or
DeepSeek-V3 grouped routing; float32 experts with renormalize, Llama 4 or pre-computed routing).
Each build takes a Definition and its inputs (torch CPU, as run.py generates them) and returns a
zero-argument callable that runs the op on the device-resident inputs and returns the outputs on the
host: the timed unit.
Semantics are each Definition's `reference` (lse 2-based where it says so; a sequence with no query
or no key gives zeros and lse -inf).
"""
import hashlib
import math
import re

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

def _attn_options(defn, inputs):
    """(sm_scale, output dtype, lse 2-based?) of an attention Definition."""
    return float(inputs["sm_scale"]), np_dtype(defn["outputs"]["output"]["dtype"]), lse_is_log2(defn)


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
        o, l_ = _fv().scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=scale, return_lse=True,
                                                   causal_alignment="bottom_right")
        out[q0:q1] = o.numpy()[0].transpose(1, 0, 2)[..., :dv]
        lse[q0:q1] = l_.numpy()[0].T / (LN2 if log2 else 1.0)
    return out, lse


def solve_gqa_ragged(defn, inputs):
    """Per sequence b: SDPA on q[qo_indptr[b]:qo_indptr[b+1]] and its kv slice, causal masks
    bottom-right aligned (fuelvk's and the reference's convention)."""
    q, k, v = _dev(inputs, "q", "k", "v")
    qo, kv = _ints(inputs["qo_indptr"]), _ints(inputs["kv_indptr"])
    scale, odt, log2 = _attn_options(defn, inputs)
    segs = [(qo[b], qo[b + 1], lambda a=kv[b], e=kv[b + 1]: (k[a:e], v[a:e])) for b in range(len(qo) - 1)]
    return lambda: sdpa_segments(q, segs, scale, True, odt, log2)


def solve_mla_ragged(defn, inputs):
    """As gqa_ragged with v [T, H, vo_dim] zero-padded to qk_dim (the flash kernel takes one head dim;
    zero columns add nothing to the first vo_dim outputs), the padding dropped from the output."""
    fv = _fv()
    q, k, v = _dev(inputs, "q", "k", "v")
    qo, kv = _ints(inputs["qo_indptr"]), _ints(inputs["kv_indptr"])
    scale, odt, log2 = _attn_options(defn, inputs)
    dqk, dv = q.shape[-1], v.shape[-1]

    def call():
        vp = fv.pad(v, ((0, 0), (0, 0), (0, dqk - dv))) if dqk > dv else v
        segs = [(qo[b], qo[b + 1], lambda a=kv[b], e=kv[b + 1]: (k[a:e], vp[a:e]))
                for b in range(len(qo) - 1)]
        return sdpa_segments(q, segs, scale, True, odt, log2, dv)
    return call


def solve_gqa_paged(defn, inputs):
    """Decode (one query per request) or prefill (qo_indptr) over a paged cache: fuelvk.paged_attention
    (pages gathered per request, the last cut to kv_last_page_len where the Definition has it, every
    page full where it has none, SDPA causal bottom-right)."""
    fv = _fv()
    q, kc, vc = _dev(inputs, "q", "k_cache", "v_cache")
    tables = [to_numpy(inputs[n]) if n in inputs else None
              for n in ("kv_indptr", "kv_indices", "kv_last_page_len", "qo_indptr")]
    if tables[2] is not None:   # some Definitions size it len_indptr: the reference reads the first B
        tables[2] = tables[2][:len(tables[0]) - 1]
    scale, odt, log2 = _attn_options(defn, inputs)

    def call():
        o, lse = fv.paged_attention(q, kc, vc, *tables, scale=scale, return_lse=True)
        return o.astype(odt).numpy(), lse.numpy() / (LN2 if log2 else 1.0)
    return call


def latent_attention(qn, qp, kc, kp, scale, mask=None):
    """MLA with the absorbed projection: logits = qn kc^T + qp kp^T (float32), softmax, out = p kc.
    qn [R, Dc], qp [R, Dp], kc [T, Dc], kp [T, Dp], mask None or device bool [R, T] (True: attend)
    -> (out [R, Dc] float32, lse [R] natural)."""
    fv = _fv()
    s = (fv.matmul(qn, kc.T, "float32") + fv.matmul(qp, kp.T, "float32")) * scale
    if mask is not None:
        s = fv.where(mask, s, -np.inf)
    m = fv.max(s, axis=-1, keepdims=True)
    lse = m + fv.log(fv.sum(fv.exp(s - m), axis=-1, keepdims=True))
    return fv.matmul(fv.softmax(s, axis=-1), kc), lse.reshape(-1)


# Requests of a latent call are packed into one masked block while its dense score matrix stays under
# this many elements (each request still alone when larger): a request's ~15 dispatches and two downloads
# cost more on a small row than the masked-out scores (lavapipe, mla_paged_prefill h8 ps1, 3 requests,
# best-of-7 process CPU per call: 4.7 ms one request at a time, 3.1 ms packed).
LATENT_PACK_SCORES = 1 << 20


def _latent_packs(segments, heads):
    """Consecutive live segments (query rows and keys) grouped while rows * heads * tokens of the
    group stays <= LATENT_PACK_SCORES (a group holds at least one segment)."""
    packs, cur, rows, toks = [], [], 0, 0
    for q0, q1, ids in segments:
        if ids is None or len(ids) == 0 or q1 <= q0:
            continue
        r, t = rows + q1 - q0, toks + len(ids)
        if cur and r * heads * t > LATENT_PACK_SCORES:
            packs.append(cur)
            cur, r, t = [], q1 - q0, len(ids)
        cur.append((q0, q1, ids))
        rows, toks = r, t
    return packs + ([cur] if cur else [])


def _latent_segments(defn, inputs, segments):
    """segments: (q0, q1, host token rows or None) per request: query rows q0:q1 attend to those cache
    rows, causal bottom-right aligned (query i of n sees keys j <= T - n + i, the references' prefix
    rule; one query sees all).  Requests are packed (_latent_packs) into one latent_attention call over
    their rows and keys, a block mask keeping each row to its own request's keys.  Host (out, lse);
    rows of no segment or no visible key: zeros, lse -inf."""
    qn, qp, ckv, kpe = _dev(inputs, "q_nope", "q_pe", "ckv_cache", "kpe_cache")
    ckv, kpe = ckv.reshape(-1, ckv.shape[-1]), kpe.reshape(-1, kpe.shape[-1])   # token rows
    scale, odt, log2 = _attn_options(defn, inputs)
    fv = _fv()
    n_all, h, dc = qn.shape
    prepared = []   # (host query rows, device query rows, device token rows, device mask or None, host seen)
    for pack in _latent_packs(segments, h):
        qrows = np.concatenate([np.arange(q0, q1) for q0, q1, _ in pack])
        toks = np.concatenate([np.asarray(ids, np.int32) for _, _, ids in pack])
        seen = np.zeros((len(qrows), len(toks)), bool)
        r = t = 0
        for q0, q1, ids in pack:
            n, m = q1 - q0, len(ids)
            seen[r:r + n, t:t + m] = np.arange(m)[None, :] <= np.arange(n)[:, None] + (m - n)
            r, t = r + n, t + m
        mask = None if seen.all() else fv.asarray(np.ascontiguousarray(
            np.broadcast_to(seen[:, None], (len(qrows), h, len(toks))).reshape(-1, len(toks))))
        prepared.append((qrows, fv.asarray(qrows.astype(np.int32)), fv.asarray(toks), mask, seen.any(-1)))

    def call():
        out = np.zeros((n_all, h, dc), odt)
        lse = np.full((n_all, h), -np.inf, np.float32)
        for qrows, qdev, toks, mask, live in prepared:
            kc, kp = fv.take(ckv, toks, axis=0), fv.take(kpe, toks, axis=0)
            rows = len(qrows) * h
            o, l_ = latent_attention(fv.take(qn, qdev, axis=0).reshape(rows, dc),
                                     fv.take(qp, qdev, axis=0).reshape(rows, qp.shape[-1]), kc, kp, scale, mask)
            o, l_ = o.astype(odt).numpy().reshape(-1, h, dc), l_.numpy().reshape(-1, h)
            out[qrows[live]] = o[live]
            lse[qrows[live]] = l_[live] / (LN2 if log2 else 1.0)
        return out, lse
    return call


def _page_tokens(pages, ps):
    """int32 cache token rows of pages (each page_size rows long)."""
    return (pages.astype(np.int64)[:, None] * ps + np.arange(ps)).reshape(-1).astype(np.int32)


def _request_tokens(inputs, ps):
    """Per request: host int32 cache token rows of its pages in order, the last page cut to
    kv_last_page_len[b] where the Definition has one (every page full where it has none: page_size
    1 makes pages tokens, as those references read them); None for a request with no page."""
    ptr, idx = _ints(inputs["kv_indptr"]), to_numpy(inputs["kv_indices"])
    last = _ints(inputs["kv_last_page_len"]) if "kv_last_page_len" in inputs else None
    out = []
    for b in range(len(ptr) - 1):
        if ptr[b + 1] <= ptr[b]:
            out.append(None)
            continue
        toks = _page_tokens(np.asarray(idx[ptr[b]:ptr[b + 1]]), ps)
        if last is not None:
            if not 0 <= last[b] <= ps:
                from ..errors import ShapeError
                raise ShapeError(f"kv_last_page_len[{b}] = {last[b]} must lie in [0, page_size {ps}]")
            toks = toks[:len(toks) - ps + last[b]]
        out.append(toks)
    return out


def solve_mla_paged(defn, inputs):
    """MLA decode (one query per request) or causal prefill (qo_indptr) over a paged compressed-KV
    cache: per request its pages' ckv / kpe rows, the last page cut to kv_last_page_len where the
    Definition has it."""
    toks = _request_tokens(inputs, inputs["ckv_cache"].shape[1])
    qo = _ints(inputs["qo_indptr"]) if "qo_indptr" in inputs else list(range(len(toks) + 1))
    return _latent_segments(defn, inputs, [(qo[b], qo[b + 1], toks[b]) for b in range(len(toks))])


def solve_dsa_paged(defn, inputs):
    """DeepSeek sparse attention: per token, MLA over its top-k cache rows (sparse_indices, -1 =
    padding, dropped wherever it stands, as the reference's mask does). The indices are token rows
    of the cache flattened to [num_pages * page_size] (page * page_size + offset) at every page size,
    as the reference reads them: never pages."""
    sel = to_numpy(inputs["sparse_indices"])
    return _latent_segments(defn, inputs, [(t, t + 1, np.asarray(r[r != -1], np.int32)) for t, r in enumerate(sel)])


def solve_dsa_topk_indexer(defn, inputs):
    """DeepSeek sparse-attention indexer: per request, scores of its first seq_len cache tokens
    (block_table pages in order) = sum over heads of weights * relu(q k^T) with k the fp8 key times
    its per-token float32 scale; the top min(topk, seq_len) tokens, largest first, as global cache
    token ids (page * page_size + offset), the rest -1.  The cache's deep_gemm byte layout (per page
    page_size * D fp8 bytes, then page_size float32 scales) is reinterpreted on the host as the
    reference's torch views do (numpy views, no arithmetic); dequantizing, scoring and top-k run on
    the device (top_k_rows: a tie at the k-th place takes torch's pick).  Scores that differ only by
    float32 summation order may rank differently from torch's CPU sum."""
    import ml_dtypes
    fv = _fv()
    cache = to_numpy(inputs["k_index_cache_fp8"]).view(np.uint8)
    pages, ps, heads, dsf = cache.shape
    d = dsf - 4
    if heads != 1 or d != inputs["q_index_fp8"].shape[-1]:
        from ..errors import ShapeError
        raise ShapeError(f"k_index_cache_fp8 {cache.shape}: one head of {d} fp8 bytes + a float32 scale per "
                         f"token wanted for index_head_dim {inputs['q_index_fp8'].shape[-1]}")
    flat = cache.reshape(pages, ps * dsf)
    keys = fv.asarray(np.ascontiguousarray(flat[:, :ps * d]).view(ml_dtypes.float8_e4m3fn).reshape(pages * ps, d))
    scales = fv.asarray(np.ascontiguousarray(flat[:, ps * d:]).view(np.float32).reshape(pages * ps, 1))
    q, w = _dev(inputs, "q_index_fp8", "weights")
    lens, table = to_numpy(inputs["seq_lens"]), to_numpy(inputs["block_table"])
    topk = defn["axes"]["topk"]["value"]
    rows = []
    for b, n in enumerate(int(x) for x in lens):
        if n > table.shape[1] * ps or n < 0:
            from ..errors import ShapeError
            raise ShapeError(f"seq_lens[{b}] = {n} outside [0, {table.shape[1] * ps}] (max_num_pages * page_size)")
        if n:
            rows.append((b, fv.asarray(_page_tokens(table[b, :-(-n // ps)], ps)[:n])))

    def call():
        out = np.full((len(lens), topk), -1, np.int32)
        for b, ids in rows:
            k = fv.take(keys, ids, axis=0).astype("float32") * fv.take(scales, ids, axis=0)      # [T, D]
            s = fv.maximum(fv.matmul(q[b].astype("float32"), k.T, "float32"), 0.0) * w[b][:, None]
            score = fv.sum(s, axis=0)                                                           # [T]
            pick = top_k_rows(score[None], min(topk, ids.shape[0]))[0]
            out[b, :pick.shape[0]] = fv.take(ids, pick).numpy()
        return (out,)
    return call


# -- sampling ------------------------------------------------------------------------------------------

def solve_sampling(defn, inputs):
    """top_k / top_p / top_k_top_p sampling from probabilities: fuelvk's public ops (the cut search and
    the inverse-CDF draw on the device, the reference's semantics), a fresh seed per call from a
    generator seeded by the Definition's name (reproducible runs, independent draws).  The callable's
    `draws(n)` gives n draws a row at once (num_samples), for the frequency check."""
    fv = _fv()
    (probs,) = _dev(inputs, "probs")
    name = defn["name"].lower()
    method = next(m for m in ("top_k_top_p", "top_k", "top_p") if m in name)
    fn = getattr(fv, f"{method}_sampling_from_probs")
    args = [inputs[n].numpy() for n in ("top_k", "top_p") if n in method]
    rng = np.random.default_rng(int(hashlib.sha256(defn["name"].encode()).hexdigest()[:8], 16))

    def call():
        return (fn(probs, *args, seed=int(rng.integers(2**63))).numpy(),)
    # n independent draws a row [B, n] from one cut search: run.check_sampling's many draws
    call.draws = lambda n: fn(probs, *args, seed=int(rng.integers(2**63)), num_samples=n).numpy()
    return call


# -- recurrent updates -----------------------------------------------------------------------------------

def solve_mamba_ssu(defn, inputs):
    """Mamba2 selective state update (decode): fuelvk.mamba_selective_state_update, one kernel (requests
    sharing a slot update it in order, -1 skips a request with zero output, as the reference)."""
    fv = _fv()
    args = _dev(inputs, "state", "x", "dt", "A", "B", "C", "D", "dt_bias")
    slots = to_numpy(inputs["state_batch_indices"])

    def call():
        y, s = fv.mamba_selective_state_update(*args, state_batch_indices=slots)
        return y.numpy(), s.numpy()
    return call


def _gdn_scale(inputs):
    scale = inputs["scale"]
    return None if scale is None else float(scale)   # None / 0.0: 1 / sqrt(K), in the op as the reference


def _gdn_args(inputs, state="state"):
    names = ("q", "k", "v", state, "A_log", "a", "dt_bias", "b")
    present = [n for n in names if inputs.get(n) is not None]
    got = dict(zip(present, _dev(inputs, *present)))
    return [got.get(n) for n in names]


def solve_gdn_decode(defn, inputs):
    """Gated delta-net decode (one token per sequence, state [B, HV, V, K]): fuelvk.gated_delta_rule_decode."""
    fv = _fv()
    args, scale = _gdn_args(inputs), _gdn_scale(inputs)

    def call():
        o, s = fv.gated_delta_rule_decode(*args, scale=scale)
        return o.numpy(), s.numpy()
    return call


def solve_gdn_mtp(defn, inputs):
    """Gated delta-net multi-token verification over a state pool (initial_state_indices): outputs from
    fuelvk.gated_delta_rule_decode with update_state=False; the final state is the pool unchanged, as
    the reference returns it (FlashInfer's disable_state_update)."""
    fv = _fv()
    args, scale = _gdn_args(inputs, "initial_state"), _gdn_scale(inputs)
    rows = to_numpy(inputs["initial_state_indices"])

    def call():
        o, _ = fv.gated_delta_rule_decode(*args, scale=scale, state_indices=rows, update_state=False)
        return o.numpy(), args[3].numpy()
    return call


def solve_gdn_prefill(defn, inputs):
    """Gated delta-net prefill over packed sequences (cu_seqlens): fuelvk.gated_delta_rule_prefill, every
    sequence's tokens stepped inside one kernel (windows within the loop budget)."""
    fv = _fv()
    args, scale = _gdn_args(inputs), _gdn_scale(inputs)
    cu = to_numpy(inputs["cu_seqlens"])

    def call():
        o, s = fv.gated_delta_rule_prefill(*args, scale=scale, cu_seqlens=cu)
        return o.numpy(), s.numpy()
    return call


# -- mixture of experts ------------------------------------------------------------------------------------

def _expert_stack(inputs, name):
    """A weight stack [E, N, K] on the device: one array where it fits one buffer of the device, else
    a tuple of per-expert arrays [N, K] (a float32 stack of 64 experts at h4096 i1536 is 3.2 GB, over
    lavapipe's 2 GiB maxBufferSize); moe_experts only indexes it by expert."""
    fv = _fv()
    host = to_numpy(inputs[name])
    if host.nbytes <= fv.runtime.get().pool.max_buffer:
        return fv.asarray(host)
    return tuple(fv.asarray(np.ascontiguousarray(w)) for w in host)


def _moe_inputs(inputs):
    """The fp8 block-scale kinds' device inputs; the weight stacks through _expert_stack."""
    logits, hs, hs_scale, s13, s2 = _dev(inputs, "routing_logits", "hidden_states", "hidden_states_scale",
                                         "gemm1_weights_scale", "gemm2_weights_scale")
    w13, w2 = _expert_stack(inputs, "gemm1_weights"), _expert_stack(inputs, "gemm2_weights")
    return logits, hs, hs_scale, w13, s13, w2, s2


def moe_activations(hs, hs_scale):
    """fp8 hidden states [T, H] times their per-token block scales [H / block, T]: float32 [T, H]."""
    t, h = hs.shape
    nb = hs_scale.shape[0]
    return (hs.astype("float32").reshape(t, nb, h // nb) * hs_scale.T[:, :, None]).reshape(t, h)


def moe_experts(a, chosen, weights, gemm1, gemm2, n_local, offset=0, weigh_input=False):
    """Routed experts with SwiGLU, summed per token: float32 [T, H] on the device.

    a: activations [T, H] float32; chosen: host [T, K] global expert ids; weights: device [T, K]
    float32 (the routing weight of each pick).  Local expert e (of n_local) is global expert
    offset + e; picks outside the local window add nothing (another rank's experts).  Per local
    expert that any token chose: gemm1(x, e) [n, 2I] of its tokens, silu(gate) * up (gate the second
    half), gemm2(c, e) [n, H] weighted by the routing weight (or, weigh_input, the tokens' rows
    weighted before gemm1: Llama 4's form), added into the tokens' rows (index_add)."""
    fv = _fv()
    t, h = a.shape
    k = chosen.shape[1]
    flat = weights.reshape(-1)
    out = fv.zeros((t, h), "float32")
    for ge in (int(x) for x in np.unique(chosen)):
        le = ge - offset
        if not 0 <= le < n_local:
            continue
        tok, slot = np.nonzero(chosen == ge)          # a token picks an expert at most once
        tok_d = fv.asarray(tok.astype(np.int32))
        wt = fv.take(flat, fv.asarray((tok * k + slot).astype(np.int32)))[:, None]
        x = fv.take(a, tok_d, axis=0)
        g1 = gemm1(x * wt if weigh_input else x, le)                                       # [n, 2I]
        inter = g1.shape[1] // 2
        o = gemm2(fv.silu_mul(g1[:, inter:], g1[:, :inter]), le)                           # SwiGLU, one pass
        out = fv.index_add(out, 0, tok_d, o if weigh_input else o * wt)
    return out


def fp8_gemms(w13, s13, w2, s2):
    """(gemm1, gemm2) of moe_experts over fp8 block-scale stacks: fp8_block_matmul (fuelvk/ops/moe.py)
    dequantizes the expert's fp8 weight block by block inside the kernel as it reads it, never
    expanded; a stack is one fp8 device array (over one binding at the dataset's sizes: the kernel
    binds only the expert's own bytes) or, over one buffer, a tuple of experts (_expert_stack)."""
    from ..ops.moe import fp8_block_matmul
    block = w13[0].shape[1] // s13.shape[2]
    return (lambda x, e: fp8_block_matmul(x, w13[e], s13[e], block),
            lambda x, e: fp8_block_matmul(x, w2[e], s2[e], block))


def top_k_rows(x, k):
    """Indices [..., k] of the k largest along x's last axis, the set the references' torch.topk picks
    on the CPU: a descending argsort on the device; a row whose k-th and (k+1)-th values tie (torch
    leaves that choice to its selection algorithm) takes torch's pick, recomputed on the host for
    that row only (topk_ties.py)."""
    from .topk_ties import torch_cpu_topk
    fv = _fv()
    order = fv.argsort(x, axis=-1, descending=True)
    ids = order[..., :k]
    if k >= x.shape[-1]:
        return ids
    edge = fv.take_along_axis(x, order[..., k - 1:k + 1], axis=-1)
    tie = fv.equal(edge[..., 0], edge[..., 1]).numpy()
    if not tie.any():
        return ids
    host, xh = ids.numpy(), x.numpy()
    for row in zip(*np.nonzero(tie)):
        host[row] = torch_cpu_topk(xh[row].tolist(), k)
    return fv.asarray(host)


def renorm_routing(logits, top_k):
    """Renormalize routing (TopK -> Softmax): (ids [T, K], softmax of the picked logits [T, K])."""
    fv = _fv()
    lg = logits.astype("float32")
    ids = top_k_rows(lg, top_k)
    return ids, fv.softmax(fv.take_along_axis(lg, ids, axis=-1), axis=-1)


def solve_moe_fp8_renorm(defn, inputs):
    """FP8 block-scale MoE with Renormalize routing (top-k logits, softmax over them) and SwiGLU:
    activations dequantized (fp8 * per-token block scale), the top-k found on the device, then
    moe_experts.  A tie at the k-th logit (bfloat16 logits: often) is broken as the reference's
    torch.topk breaks it (top_k_rows)."""
    logits, hs, hs_scale, w13, s13, w2, s2 = _moe_inputs(inputs)
    top_k = defn["axes"]["top_k"]["value"]
    odt = np_dtype(defn["outputs"]["output"]["dtype"])

    def call():
        ids, probs = renorm_routing(logits, top_k)
        out = moe_experts(moe_activations(hs, hs_scale), ids.numpy(), probs, *fp8_gemms(w13, s13, w2, s2),
                          len(w13))
        return (out.astype(odt).numpy(),)
    return call


DS_ROUTING_NAME = r"moe_fp8_block_scale_ds_routing_topk(\d+)_ng(\d+)_kg(\d+)_e\d+_h\d+_i\d+"


def ds_routing(logits, bias, top_k, n_group, topk_group, scale):
    """DeepSeek-V3 no-aux routing on the device: s = sigmoid(logits) [T, E], b = s + bias; a group
    (E / n_group experts) scores the sum of its two largest b; the topk_group best groups are kept
    and the top_k largest b among their experts are picked; a pick's weight is its s (no bias) over
    the sum of the picks' s (+ 1e-20), times scale.  Returns (ids [T, K] int64, weights [T, K] f32)."""
    fv = _fv()
    f32 = "float32"
    t, e = logits.shape
    s = 1.0 / (1.0 + fv.exp(-logits.astype(f32)))             # the reference's form of the sigmoid
    b = s + bias.astype(f32)[None]
    size = e // n_group
    best2 = fv.sort(b.reshape(t, n_group, size), axis=-1, descending=True)[..., :2]
    groups = top_k_rows(best2[..., 0] + best2[..., 1], topk_group)                      # [T, kg]
    kept = fv.any(fv.equal(groups[:, :, None], fv.asarray(np.arange(n_group)[None, None])), axis=1)
    kept = fv.broadcast_to(kept[:, :, None], (t, n_group, size)).reshape(t, e)
    ids = top_k_rows(fv.where(kept, b, float(np.finfo(np.float32).min)), top_k)
    picked = fv.take_along_axis(s, ids, axis=-1)
    return ids, picked / (fv.sum(picked, axis=-1, keepdims=True) + 1e-20) * scale


def solve_moe_fp8_ds_routing(defn, inputs):
    """FP8 block-scale MoE with DeepSeek-V3 routing (ds_routing; top_k, n_group and topk_group from
    the Definition's name: topk8_ng8_kg4) over a window of local experts starting at global
    local_expert_offset, then moe_experts."""
    logits, hs, hs_scale, w13, s13, w2, s2 = _moe_inputs(inputs)
    (bias,) = _dev(inputs, "routing_bias")
    top_k, n_group, topk_group = (int(g) for g in re.fullmatch(DS_ROUTING_NAME, defn["name"]).groups())
    offset, scale = int(inputs["local_expert_offset"]), float(inputs["routed_scaling_factor"])
    if logits.shape[1] % n_group or topk_group > n_group or top_k > topk_group * (logits.shape[1] // n_group):
        from ..errors import ShapeError
        raise ShapeError(f"{defn['name']}: {logits.shape[1]} experts in {n_group} groups, {topk_group} kept, "
                         f"cannot give top {top_k}: needs groups dividing the experts and top_k <= the "
                         f"kept groups' experts")
    odt = np_dtype(defn["outputs"]["output"]["dtype"])

    def call():
        ids, weights = ds_routing(logits, bias, top_k, n_group, topk_group, scale)
        out = moe_experts(moe_activations(hs, hs_scale), ids.numpy(), weights, *fp8_gemms(w13, s13, w2, s2),
                          len(w13), offset)
        return (out.astype(odt).numpy(),)
    return call


# FlashInfer's trtllm MoE Definitions: trtllm_fp4_block_scale_moe gives the expert weights in float32
# (its kernel quantizes them to MxFP4 itself; the Definition, and so its reference, never sees fp4):
# the experts are float32 matmuls of the expert's weight (a transposed view, nothing expanded).
# trtllm_fp8_per_tensor_scale_moe gives fp8 weights and activations with per-expert output scales
# (gemm1's up and gate halves scaled apart): fp8_block_matmul with the whole matrix one block of
# scale 1 (dequantized inside the kernel), its outputs scaled.

def float_gemms(w13, w2):
    """(gemm1, gemm2) of moe_experts over float weight stacks [E, N, K] (or per-expert tuples):
    x @ W[e].T in float32."""
    fv = _fv()
    return (lambda x, e: fv.matmul(x, w13[e].T, "float32"), lambda x, e: fv.matmul(x, w2[e].T, "float32"))


def per_tensor_fp8_gemms(w13, up_scale, gate_scale, w2, out_scale):
    """(gemm1, gemm2) of moe_experts over fp8 stacks with per-expert output scales [E]: gemm1's first
    half times up_scale[e], its second (gate) half times gate_scale[e]; gemm2 times out_scale[e]."""
    from ..ops.moe import fp8_block_matmul
    fv = _fv()
    n_local, (g1, h) = len(w13), w13[0].shape
    one = fv.asarray(np.ones((1, 1), np.float32))
    half = g1 // 2
    cols = fv.concatenate([fv.broadcast_to(up_scale[:, None], (n_local, half)),
                           fv.broadcast_to(gate_scale[:, None], (n_local, g1 - half))], axis=1)      # [E, 2I]
    return (lambda x, e: fp8_block_matmul(x, w13[e], one, (g1, h)) * cols[e][None],
            lambda x, e: fp8_block_matmul(x, w2[e], one, tuple(w2[e].shape)) * out_scale[e:e + 1][None])


def _trtllm_moe(defn, inputs, route, weigh_input=False):
    """route() -> (host ids [T, K], device weights [T, K]); the experts float32 or per-tensor fp8 as
    the Definition's gemm1_weights dtype says (stacks over one buffer per expert: _expert_stack); then
    moe_experts."""
    (hs,) = _dev(inputs, "hidden_states")
    w13, w2 = _expert_stack(inputs, "gemm1_weights"), _expert_stack(inputs, "gemm2_weights")
    fp8 = defn["inputs"]["gemm1_weights"]["dtype"] == "float8_e4m3fn"
    scales = _dev(inputs, "output1_scales_scalar", "output1_scales_gate_scalar", "output2_scales_scalar") if fp8 else ()
    odt = np_dtype(defn["outputs"]["output"]["dtype"])

    def call():
        ids, weights = route()
        gemms = per_tensor_fp8_gemms(w13, scales[0], scales[1], w2, scales[2]) if fp8 else float_gemms(w13, w2)
        out = moe_experts(hs.astype("float32"), ids, weights, *gemms, len(w13), weigh_input=weigh_input)
        return (out.astype(odt).numpy(),)
    return call


def solve_moe_trtllm_renorm(defn, inputs):
    """Renormalize routing (TopK -> Softmax of the picked logits)."""
    (logits,) = _dev(inputs, "routing_logits")
    top_k = defn["axes"]["top_k"]["value"]

    def route():
        ids, probs = renorm_routing(logits, top_k)
        return ids.numpy(), probs
    return _trtllm_moe(defn, inputs, route)


def solve_moe_trtllm_llama4(defn, inputs):
    """Llama 4 routing (FlashInfer's routing_method_type 3: routing_bias unused, as the reference):
    the top-k of sigmoid(logits), each pick's token row scaled by its sigmoid before gemm1."""
    fv = _fv()
    (logits,) = _dev(inputs, "routing_logits")
    top_k = defn["axes"]["top_k"]["value"]

    def route():
        s = fv.sigmoid(logits.astype("float32"))
        ids = top_k_rows(s, top_k)
        return ids.numpy(), fv.take_along_axis(s, ids, axis=-1)
    return _trtllm_moe(defn, inputs, route, weigh_input=True)


def solve_moe_trtllm_routed(defn, inputs):
    """Pre-computed routing: topk_ids packs each pick as (expert << 16) | bfloat16 bits of its weight
    (FlashInfer's routed MoE); unpacked on the host, where the expert loop needs the ids anyway."""
    import ml_dtypes
    packed = to_numpy(inputs["topk_ids"]).astype(np.int32)
    ids = (packed >> 16).astype(np.int16).astype(np.int64)
    weights = (packed & 0xFFFF).astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    return _trtllm_moe(defn, inputs, lambda: (ids, _fv().asarray(weights)))
