"""fuelvk solutions for FlashInfer-Bench kinds, composed from fuelvk ops on the device.

Attention over a paged KV cache (gqa_paged), latent attention (mla_paged, dsa_paged: dims past the
flash kernels' D <= 256, so matmul + softmax), ragged latent prefill (mla_ragged: v zero-padded to
the qk dim so the flash kernel takes it), and sampling from probabilities (fuelvk's sampling ops:
sort, filter and draw on the device).  Each build takes a Definition and its inputs (torch CPU, as
run.py generates them) and returns a zero-argument callable that runs the op on the device-resident inputs and returns the outputs on the host: the timed unit.
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
    (pages gathered per request, the last cut to kv_last_page_len where the Definition has it, SDPA
    causal bottom-right)."""
    fv = _fv()
    q, kc, vc = _dev(inputs, "q", "k_cache", "v_cache")
    tables = [to_numpy(inputs[n]) if n in inputs else None
              for n in ("kv_indptr", "kv_indices", "kv_last_page_len", "qo_indptr")]
    scale, odt, log2 = _attn_options(defn, inputs)

    def call():
        o, lse = fv.paged_attention(q, kc, vc, *tables, scale=scale, return_lse=True)
        return o.astype(odt).numpy(), lse.numpy() / (LN2 if log2 else 1.0)
    return call


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
    scale, odt, log2 = _attn_options(defn, inputs)
    fv = _fv()

    def call():
        n, h, dc = qn.shape
        out = np.zeros((n, h, dc), odt)
        lse = np.full((n, h), -np.inf, np.float32)
        for t, ids in enumerate(rows):
            if ids is None:
                continue
            kc, kp = fv.take(ckv, ids, axis=0), fv.take(kpe, ids, axis=0)
            o, l_ = latent_attention(qn[t], qp[t], kc, kp, scale)
            out[t] = o.astype(odt).numpy()
            lse[t] = l_.numpy() / (LN2 if log2 else 1.0)
        return out, lse
    return call


def _page_tokens(pages, ps):
    """int32 cache token rows of pages (each page_size rows long)."""
    return (pages.astype(np.int64)[:, None] * ps + np.arange(ps)).reshape(-1).astype(np.int32)


def _token_ids(fv, ptr, idx, ps, b):
    """Cache token rows of request b's pages (every page full: the Definitions without a last-page
    length; page_size 1 makes pages tokens, as their references read them)."""
    if ptr[b + 1] <= ptr[b]:
        return None
    pages = idx[ptr[b]:ptr[b + 1]]
    return fv.asarray(_page_tokens(np.asarray(pages), ps))


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
        rows.append(fv.asarray(_page_tokens(ids, ps)) if ids.size else None)
    return _latent_rows(defn, inputs, rows)


# -- sampling ------------------------------------------------------------------------------------------

def solve_sampling(defn, inputs):
    """top_k / top_p / top_k_top_p sampling from probabilities: fuelvk's public ops (sort, filter and
    inverse-CDF draw on the device, the reference's semantics), a fresh seed per call from a
    generator seeded by the Definition's name (reproducible runs, independent draws)."""
    fv = _fv()
    (probs,) = _dev(inputs, "probs")
    name = defn["name"].lower()
    method = next(m for m in ("top_k_top_p", "top_k", "top_p") if m in name)
    fn = getattr(fv, f"{method}_sampling_from_probs")
    args = [inputs[n].numpy() for n in ("top_k", "top_p") if n in method]
    rng = np.random.default_rng(int(hashlib.sha256(defn["name"].encode()).hexdigest()[:8], 16))
    return lambda: (fn(probs, *args, seed=int(rng.integers(2**63))).numpy(),)


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

def solve_moe_fp8_renorm(defn, inputs):
    """FP8 block-scale MoE with Renormalize routing (top-k logits, softmax over them) and SwiGLU:
    activations dequantized (fp8 * per-token block scale), the top-k found on the device (k rounds
    of argmax, each winner masked to -inf), then per expert that any token chose: up / gate matmul
    of its tokens, silu(gate) * up, the down matmul weighted by the routing probability, added into
    the tokens' rows (index_add).  Both matmuls are fp8_block_matmul (fuelvk/ops/moe.py): the
    expert's fp8 weight is dequantized block-scale by block-scale inside the kernel as it is read,
    never expanded; the weight stacks stay one fp8 device array each (over one binding at the
    dataset's sizes: the kernel binds only the expert's own bytes).
    Ties at the k-th logit go to the lowest expert index (argmax); torch.topk orders ties as its
    partial sort leaves them, so a token whose k-th and (k+1)-th bf16 logits are equal may route
    to another expert than the reference (seen at 128 experts, top 8: 1 token in 4)."""
    from ..ops.moe import fp8_block_matmul
    fv = _fv()
    logits, hs, hs_scale, w13, s13, w2, s2 = _dev(
        inputs, "routing_logits", "hidden_states", "hidden_states_scale", "gemm1_weights",
        "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale")
    t, e = logits.shape
    h = hs.shape[1]
    inter = w2.shape[2]
    block = h // hs_scale.shape[0]
    top_k = defn["axes"]["top_k"]["value"]
    experts = fv.asarray(np.arange(e, dtype=np.int64)[None])
    odt = np_dtype(defn["outputs"]["output"]["dtype"])

    def call():
        f32 = "float32"
        a = (hs.astype(f32).reshape(t, hs_scale.shape[0], -1) * hs_scale.T[:, :, None]).reshape(t, h)
        lg, picks, vals = logits.astype(f32), [], []
        for _ in range(top_k):
            i = fv.argmax(lg, axis=-1)[:, None]                                            # [T, 1]
            vals.append(fv.take_along_axis(lg, i, axis=-1))
            picks.append(i)
            lg = fv.masked_fill(lg, fv.equal(experts, i), -math.inf)
        probs = fv.softmax(fv.concatenate(vals, axis=1), axis=-1).reshape(-1)             # [T * K]
        chosen = np.concatenate([i.numpy() for i in picks], axis=1)                  # [T, K] on the host
        out = fv.zeros((t, h), f32)
        for ex in (int(x) for x in np.unique(chosen)):
            tok, slot = np.nonzero(chosen == ex)
            tok_d = fv.asarray(tok.astype(np.int32))
            g1 = fp8_block_matmul(fv.take(a, tok_d, axis=0), w13[ex], s13[ex], block)        # [n, 2I]
            c = fv.silu_mul(g1[:, inter:], g1[:, :inter])                                    # SwiGLU, one pass
            wt = fv.take(probs, fv.asarray((tok * top_k + slot).astype(np.int32)))[:, None]
            out = fv.index_add(out, 0, tok_d, fp8_block_matmul(c, w2[ex], s2[ex], block) * wt)
        return (out.astype(odt).numpy(),)
    return call
