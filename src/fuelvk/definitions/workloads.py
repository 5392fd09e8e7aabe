"""Workload rows for the dataset's kinds that ship none: small batches at each Definition's own
constants (heads, head dims, page size, vocabulary, experts), index inputs that satisfy its
constraints written as safetensors blobs under the dataset root (FlashInfer-Bench's layout:
ROOT/workloads/<name>.jsonl, ROOT/blob/<name>/<uuid>.safetensors), scalars inline, all other inputs
random (FlashInfer-Bench generates them).  Layouts cover what the kinds must handle: random page
tables, an empty request, partial last pages, -1 padding in sparse indices, a shared state slot.

    python -m fuelvk definitions workloads DEFS ROOT     # rows for every Definition a kind here fits
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch


def _i32(x):
    return torch.tensor(x, dtype=torch.int32)


def _consts(defn):
    return {a: d["value"] for a, d in defn["axes"].items() if d["type"] == "const"}


def _pages(gen, counts, num_pages):
    """(kv_indptr, kv_indices): request b owns counts[b] distinct random pages of num_pages."""
    ptr = [0]
    for c in counts:
        ptr.append(ptr[-1] + c)
    return _i32(ptr), torch.randperm(num_pages, generator=gen)[:ptr[-1]].to(torch.int32)


def _last_page(defn, last):
    """{kv_last_page_len} where the Definition has it (sized batch_size, or len_indptr: an unread last
    entry 0), else {} (its reference reads every page full)."""
    spec = defn["inputs"].get("kv_last_page_len")
    if spec is None:
        return {}
    return {"kv_last_page_len": _i32(list(last) + [0] * (spec["shape"] == ["len_indptr"]))}


def _scale(c):
    return 1 / math.sqrt(c["head_dim"] if "head_dim" in c else c["head_dim_ckv"] + c["head_dim_kpe"])


def paged_decode(defn, gen):
    """Five requests (gqa_paged / mla_paged decode): 3, 0, 5, 1 and 2 random pages of 16; with a
    kv_last_page_len, partial last pages (5 and 1 tokens where page_size allows) and a last page of 0
    tokens (the references drop it: `[:0]`)."""
    c = _consts(defn)
    ps = c["page_size"]
    ptr, idx = _pages(gen, [3, 0, 5, 1, 2], 16)
    return ({"batch_size": 5, "num_pages": 16, "len_indptr": 6, "num_kv_indices": len(idx)},
            {"kv_indptr": ptr, "kv_indices": idx, **_last_page(defn, [min(5, ps), 1, ps, 1, 0])},
            {"sm_scale": _scale(c)})


def paged_prefill(defn, gen):
    """Four requests (gqa_paged / mla_paged causal prefill): two pages with a partial last one (where
    the Definition has kv_last_page_len), one with no query, one page, three pages the last of 0
    tokens (dropped, as the references read it); fewer queries than keys."""
    c = _consts(defn)
    ps = c["page_size"]
    counts = [2, 1, 1, 3]
    last = [min(5, ps), ps, min(4, ps), 0] if "kv_last_page_len" in defn["inputs"] else [ps] * 4
    ptr, idx = _pages(gen, counts, 8)
    tokens = [(n - 1) * ps + e for n, e in zip(counts, last)]
    q = [min(3, tokens[0]), 0, min(4, tokens[2]), min(2, tokens[3])]
    qo = [sum(q[:i]) for i in range(len(q) + 1)]
    axes = {"num_pages": 8, "len_indptr": 5, "num_kv_indices": len(idx), "total_q": qo[-1]}
    if "batch_size" in defn["axes"]:
        axes["batch_size"] = 4
    return (axes, {"qo_indptr": _i32(qo), "kv_indptr": ptr, "kv_indices": idx, **_last_page(defn, last)},
            {"sm_scale": _scale(c)})


def dsa_indexer(defn, gen):
    """Three requests over a cache in deep_gemm's fp8 layout (per page: page_size * D fp8 bytes, then
    page_size float32 scales in [0.5, 1)): 70 tokens (a partial second page), none, 5; pages random."""
    c = _consts(defn)
    ps, d = c["page_size"], c["index_head_dim"]
    pages = 6
    fp8 = torch.randn(pages, ps * d, generator=gen).clamp(-2, 2).to(torch.float8_e4m3fn).view(torch.uint8)
    scale = (torch.rand(pages, ps, generator=gen) * 0.5 + 0.5).view(torch.uint8)
    cache = torch.cat([fp8, scale], dim=1).view(torch.int8).reshape(pages, ps, 1, d + 4)
    table = torch.randperm(pages, generator=gen)[:6].reshape(3, 2).to(torch.int32)
    return ({"batch_size": 3, "max_num_pages": 2, "num_pages": pages},
            {"k_index_cache_fp8": cache, "seq_lens": _i32([min(70, 2 * ps), 0, 5]), "block_table": table}, {})


def dsa_sparse(defn, gen):
    """Two tokens over topk cache rows (token ids page * page_size + offset over the whole cache):
    -1 padding at the tail of one and scattered in the other."""
    c = _consts(defn)
    pages = max(1, -(-2 * c["topk"] // c["page_size"]))
    si = torch.randint(0, pages * c["page_size"], (2, c["topk"]), dtype=torch.int32, generator=gen)
    si[0, c["topk"] * 3 // 4:] = -1
    si[1, ::7] = -1
    return ({"num_tokens": 2, "num_pages": pages}, {"sparse_indices": si},
            {"sm_scale": 1 / math.sqrt(c["head_dim_ckv"] + c["head_dim_kpe"])})


def mla_ragged(defn, gen):
    c = _consts(defn)
    return ({"total_q": 7, "total_kv": 12, "len_indptr": 4},
            {"qo_indptr": _i32([0, 3, 3, 7]), "kv_indptr": _i32([0, 5, 6, 12])},
            {"sm_scale": 1 / math.sqrt(c["qk_dim"])})


def gdn_decode(defn, gen):
    a_log = torch.randn(_consts(defn)["num_v_heads"], generator=gen) * 0.5
    return {"batch_size": 3}, {"A_log": a_log}, {"scale": 0.0}


def gdn_mtp(defn, gen):
    """Three sequences of two tokens verified against slots of a pool of five (one left unused)."""
    a_log = torch.randn(_consts(defn)["num_v_heads"], generator=gen) * 0.5
    return ({"batch_size": 3, "seq_len": 2, "pool_size": 5},
            {"initial_state_indices": _i32([4, 0, 2]), "A_log": a_log}, {"scale": 0.0})


def gdn_prefill(defn, gen):
    a_log = torch.randn(_consts(defn)["num_v_heads"], generator=gen) * 0.5
    return ({"total_seq_len": 5, "num_seqs": 3, "len_cu_seqlens": 4},
            {"cu_seqlens": torch.tensor([0, 3, 3, 5]), "A_log": a_log}, {"scale": 0.0})


def mamba_ssu(defn, gen):
    """A shared slot (the later request reads the earlier one's write), a request without one."""
    c = _consts(defn)
    a = -torch.exp(torch.randn(c["nheads"], c["head_dim"], c["dstate"], generator=gen))
    return ({"batch_size": 4, "state_cache_size": 6}, {"state_batch_indices": _i32([3, -1, 0, 3]), "A": a}, {})


def sampling(defn, gen):
    """Rows FlashInfer-Bench's frequency check can pass for a right sampler.  Its valid mask widens the
    top-p nucleus by eps = 0.05 of mass and is taken on the ORIGINAL probs (not the top-k renormalized
    row), and 500,000 draws a row over a near-flat softmax(randn) of 128k-262k tokens leave a sampling
    noise of their own in the total variation: a small p (the widened nucleus is many times the
    reference's), p >= 0.8 or no filter at all (too many tokens for the draws at 262k: TVD 0.18-0.21)
    and top-p after a top-k cut (the mask ignores the renormalization) fail even for the reference.
    So top_p rows take p in 0.3-0.6 (the reference's own TVD 0.13-0.17 at 128k-262k tokens), top_k
    rows small k, top_k_top_p rows small k with p = 1 plus one top-p-only row (k = 0)."""
    tensors = {}
    both = "top_k" in defn["inputs"] and "top_p" in defn["inputs"]
    if "top_k" in defn["inputs"]:
        tensors["top_k"] = _i32([5, 1, 0, 8] if both else [5, 1, 3, 8])
    if "top_p" in defn["inputs"]:
        tensors["top_p"] = torch.tensor([1.0, 1.0, 0.4, 1.0] if both else [0.3, 0.4, 0.5, 0.6])
    return {"batch_size": 4}, tensors, {}


def rope_cos_sin(defn, gen):
    return ({"num_tokens": 5, "num_qo_heads": 32, "num_kv_heads": 8, "max_seq_len": 64},
            {"positions": torch.tensor([0, 7, 63, 7, 1])}, {})


def moe(defn, gen):
    """Four tokens, inputs random; a DeepSeek-routing Definition gets its scalars as the dataset's
    rows have them (routed_scaling_factor 2.5, local_expert_offset a whole window of local experts
    inside the global ones: 0, 32, ... 224 for 32 of 256) and a small routing_bias blob (the
    dataset's rows load a captured one): a randn bias would swamp the sigmoid scores in (0, 1) and
    send every token to the same few experts, most rows none in the local window."""
    if "local_expert_offset" not in defn["inputs"]:
        return {"seq_len": 4}, {}, {}
    c = _consts(defn)
    window = int(torch.randint(c["num_experts"] // c["num_local_experts"], (), generator=gen))
    bias = (torch.randn(c["num_experts"], generator=gen) * 0.05).to(torch.bfloat16)
    return ({"seq_len": 4}, {"routing_bias": bias},
            {"local_expert_offset": window * c["num_local_experts"], "routed_scaling_factor": 2.5})


def moe_routed(defn, gen):
    """Pre-computed routing (FlashInfer's routed MoE): per token top_k distinct experts, weights a
    softmax of randn, packed as (expert << 16) | the weight's bfloat16 bits."""
    c = _consts(defn)
    t = 4
    ids = torch.stack([torch.randperm(c["num_experts"], generator=gen)[:c["top_k"]] for _ in range(t)])
    w = torch.softmax(torch.randn(t, c["top_k"], generator=gen), dim=-1).to(torch.bfloat16)
    packed = (ids.to(torch.int32) << 16) | (w.view(torch.int16).to(torch.int32) & 0xFFFF)
    return {"seq_len": t}, {"topk_ids": packed}, {}


KINDS = ((r"(gqa|mla)_paged_decode_.*", paged_decode), (r"(gqa|mla)_paged_prefill_causal_.*", paged_prefill),
         (r"dsa_sparse_attention_.*", dsa_sparse), (r"dsa_topk_indexer_.*", dsa_indexer),
         (r"mla_ragged_prefill_causal_.*", mla_ragged), (r"gdn_decode_.*", gdn_decode), (r"gdn_mtp_.*", gdn_mtp),
         (r"gdn_prefill_.*", gdn_prefill), (r"mamba_ssu_decode_.*", mamba_ssu),
         (r"(top_k|top_p|top_k_top_p)_sampling_from_probs_.*", sampling),
         (r"rope_with_cos_sin_cache_.*", rope_cos_sin), (r"moe_.*", moe),
         (r"trtllm_fp4_block_scale_moe_.*", moe), (r"trtllm_fp8_per_tensor_scale_moe_.*", moe),
         (r"trtllm_fp4_block_scale_routed_moe_.*", moe_routed))


def row_for(defn, root, seed=0):
    """One workload row for defn (its blob written under root), or None when no kind here fits."""
    build = next((b for pat, b in KINDS if re.fullmatch(pat, defn["name"])), None)
    if build is None:
        return None
    gen = torch.Generator().manual_seed(seed)
    axes, tensors, scalars = build(defn, gen)
    uuid = f"fuelvk-{defn['name']}-{seed}"
    inputs = {k: {"type": "scalar", "value": v} for k, v in scalars.items()}
    if tensors:
        import safetensors.torch as st
        rel = Path("blob") / defn["name"] / f"{uuid}.safetensors"
        (Path(root) / rel).parent.mkdir(parents=True, exist_ok=True)
        st.save_file({k: v.contiguous() for k, v in tensors.items()}, str(Path(root) / rel))
        inputs.update({k: {"type": "safetensors", "path": str(rel), "tensor_key": k} for k in tensors})
    return {"definition": defn["name"], "solution": None, "evaluation": None,
            "workload": {"uuid": uuid, "axes": axes, "inputs": inputs}}


def write_workloads(definitions, root):
    """ROOT/workloads/<name>.jsonl (+ blobs) for every Definition a kind here fits; returns the names."""
    from .run import load_definitions
    root = Path(root)
    (root / "workloads").mkdir(parents=True, exist_ok=True)
    done = []
    for name, defn in load_definitions(definitions).items():
        row = row_for(defn, root)
        if row is not None:
            (root / "workloads" / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
            done.append(name)
    return done
