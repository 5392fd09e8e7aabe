"""The whole FlashInfer-Bench dataset (tests/data/flashinfer/definitions: its 156 Definitions, README
there): every Definition is matched to the fuelvk solution of its exact signature, and each signature
variant the shared reference folder lacks runs one small row against the Definition's own reference
(PASSED) with a wrong answer caught (INCORRECT_NUMERICAL): kv_last_page_len sized batch_size or
len_indptr or absent, paged MLA prefill, the DSA top-k indexer; page sizes 1 and 64, ragged lengths,
partial last pages, empty requests.  Rows come from fuelvk's workload builders (workloads.py)."""
from collections import Counter

import numpy as np
import pytest
import torch
from test_definitions import DATA, _log_lse, _passes_and_a_wrong_one_fails, _with_consts

from fuelvk.definitions import evaluate, fuelvk_solution, match_solution
from fuelvk.definitions.run import (
    SOLUTIONS,
    _dsa_scores,
    check_dsa_indexer,
    gen_inputs,
    load_definitions,
    normalize,
    pack_fp8_k_cache,
    reference_fn,
)
from fuelvk.definitions.workloads import row_for

DATASET = load_definitions(DATA)


def test_every_dataset_definition_is_matched_to_its_signature():
    """156 Definitions in 12 op_types, each served by exactly one solution whose name pattern and full
    signature are its own (match_solution raises when several match)."""
    assert len(DATASET) == 156
    assert len({d["op_type"] for d in DATASET.values()}) == 12
    served = {}
    for name, d in DATASET.items():
        sol, why = match_solution(d)
        assert sol is not None, why
        assert sol.refuses(d) is None
        served[name] = sol.name
    by_solution = Counter(served.values())
    assert by_solution["fuelvk_gqa_paged_decode_last_page"] == 8
    assert by_solution["fuelvk_gqa_paged_prefill_causal_full_pages"] == 10
    assert by_solution["fuelvk_gqa_paged_prefill_causal_last_page_indptr"] == 6
    assert served["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"] == "fuelvk_dsa_topk_indexer_fp8"
    # the variants are told apart by signature: dropping kv_last_page_len changes the solution
    d = DATASET["gqa_paged_decode_h6_kv1_d128_ps64"]
    plain = {**d, "inputs": {k: v for k, v in d["inputs"].items() if k != "kv_last_page_len"}}
    assert match_solution(plain)[0].name == "fuelvk_gqa_paged_decode"
    unused = {s.name for s in SOLUTIONS} - set(by_solution)
    assert not {n for n in unused if "paged" in n or "dsa" in n}, unused


def _run_row(defn, tmp_path, wrong):
    """The workload builder's row for defn: PASSED, and `wrong` (a change of the outputs) INCORRECT_*."""
    row = row_for(defn, tmp_path)
    ev = _passes_and_a_wrong_one_fails(defn, row, tmp_path, wrong)
    print(defn["name"], "fuelvk", ev["performance"]["latency_ms"], "ms, reference",
          ev["performance"]["reference_latency_ms"], "ms")
    return row


def _ignoring_last_page(defn, row, tmp_path):
    """The solution fed full last pages instead of kv_last_page_len: the reference's trim matters."""
    def full(defn_, inputs):
        lp = inputs["kv_last_page_len"]
        return fuelvk_solution(defn_, {**inputs, "kv_last_page_len": torch.full_like(lp, defn_["axes"]["page_size"]["value"])})
    return evaluate(defn, row, root=tmp_path, repeats=1, solution=full)["evaluation"]["status"]


@pytest.mark.parametrize("page_size", [64, 1])
def test_gqa_paged_decode_last_page(tmp_path, page_size):
    """kv_last_page_len [batch_size]: 4 requests of 3, 0, 5, 1 pages, last pages of 5 and 1 tokens."""
    d = DATASET["gqa_paged_decode_h6_kv1_d128_ps64"]
    d = d if page_size == 64 else _with_consts(d, page_size=1)
    row = _run_row(d, tmp_path, _log_lse)
    if page_size == 64:
        assert _ignoring_last_page(d, row, tmp_path) == "INCORRECT_NUMERICAL"


def test_gqa_paged_prefill_last_page_indptr(tmp_path):
    """kv_last_page_len [len_indptr] (no batch_size axis; the last entry unread), page size 64."""
    d = DATASET["gqa_paged_prefill_causal_h16_kv1_d128_ps64"]
    row = _run_row(d, tmp_path, lambda o: (o[0] * 1.05, o[1]))
    assert _ignoring_last_page(d, row, tmp_path) == "INCORRECT_NUMERICAL"


def test_gqa_paged_prefill_full_pages(tmp_path):
    """No kv_last_page_len (page size 1: a page is a token), fewer queries than keys, an empty request."""
    d = DATASET["gqa_paged_prefill_causal_h5_kv1_d128_ps1"]
    row = _run_row(d, tmp_path, lambda o: (o[0], o[1] * 1.05))
    # the page order is the token order: the same pages reversed are another sequence
    wrong = evaluate(d, row, root=tmp_path, repeats=1, solution=lambda defn, inp: fuelvk_solution(
        defn, {**inp, "kv_indices": inp["kv_indices"].flip(0)}))["evaluation"]
    assert wrong["status"] == "INCORRECT_NUMERICAL"


def test_mla_paged_decode_last_page(tmp_path):
    d = DATASET["mla_paged_decode_h16_ckv512_kpe64_ps64"]
    row = _run_row(d, tmp_path, _log_lse)
    assert _ignoring_last_page(d, row, tmp_path) == "INCORRECT_NUMERICAL"


def test_mla_paged_prefill_causal(tmp_path):
    """Paged MLA prefill, bottom-right causal (query i of n sees keys up to T - n + i): page size 64
    with kv_last_page_len, and page size 1 without (pages are tokens)."""
    d = DATASET["mla_paged_prefill_causal_h16_ckv512_kpe64_ps64"]
    row = _run_row(d, tmp_path, lambda o: (o[0][::-1], o[1]))
    assert _ignoring_last_page(d, row, tmp_path) == "INCORRECT_NUMERICAL"
    _run_row(DATASET["mla_paged_prefill_causal_h8_ckv512_kpe64_ps1"], tmp_path / "ps1", _log_lse)


def _shrunk_topk(defn, k):
    """The indexer with topk k (its reference hard-codes `topk = 2048`)."""
    old = defn["axes"]["topk"]["value"]
    assert f"topk = {old}" in defn["reference"]
    return {**defn, "axes": {**defn["axes"], "topk": {**defn["axes"]["topk"], "value": k}},
            "reference": defn["reference"].replace(f"topk = {old}", f"topk = {k}")}


def test_dsa_topk_indexer(tmp_path):
    """Top-k cache tokens by relu(q k^T) weighted over heads, k dequantized from the deep_gemm fp8
    layout: 70 tokens over two random pages (the second partial), an empty request, 5 tokens; at the
    Definition's topk 2048 (-1 padding past seq_len) and at topk 16 (a cut; order largest first)."""
    d = DATASET["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"]
    _run_row(d, tmp_path, lambda o: (o[0][::-1],))
    small = _shrunk_topk(d, 16)
    row = _run_row(small, tmp_path / "k16", lambda o: (np.concatenate([o[0][:, :1], o[0][:, :-1]], axis=1),))
    # (the wrong answer: a token twice)
    # a solution that ignores the page table (tokens in cache order) is caught
    wrong = evaluate(small, row, root=tmp_path / "k16", repeats=1, solution=lambda defn, inp: fuelvk_solution(
        defn, {**inp, "block_table": inp["block_table"].flip(1)}))["evaluation"]
    assert wrong["status"] == "INCORRECT_NUMERICAL"


def test_dsa_indexer_rule_compares_scores_not_order(tmp_path):
    """FlashInfer-Bench's DSA top-k indexer evaluator compares the scores at the indices, sorted, not
    the indices: any order passes, and so does a token whose score ties the k-th (the reference's
    torch.topk may pick either); a lower-scored token, a token twice, a token of another request
    fail.  The tie is exact here: a key copied byte for byte in the fp8 cache."""
    d = _shrunk_topk(DATASET["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"], 16)
    row = row_for(d, tmp_path)
    inputs = gen_inputs(d, row["workload"], tmp_path)
    run = reference_fn(d)
    want = normalize(d, run(**inputs))["topk_indices"].long()
    ps = inputs["k_index_cache_fp8"].shape[1]
    table, n0 = inputs["block_table"][0].long(), int(inputs["seq_lens"][0])
    tokens = table[torch.arange(n0) // ps] * ps + torch.arange(n0) % ps          # request 0's global ids
    a = int(want[0, -1])                                                          # the k-th
    b = int(next(t for t in tokens.tolist() if t not in want[0].tolist()))
    cache = inputs["k_index_cache_fp8"].view(torch.uint8).reshape(-1, ps * (d["axes"]["index_head_dim"]["value"] + 4))
    dd = d["axes"]["index_head_dim"]["value"]
    for lo, width in ((0, dd), (ps * dd, 4)):                                    # its fp8 bytes, its scale
        src, dst = (lo + (t % ps) * width for t in (a, b))
        cache[b // ps, dst:dst + width] = cache[a // ps, src:src + width]
    want = normalize(d, run(**inputs))["topk_indices"].long()
    kept, other = (a, b) if a in want[0].tolist() else (b, a)
    swapped = torch.where(want == kept, torch.full_like(want, other), want)
    assert check_dsa_indexer(inputs, want.flip(1), want)[1] is None
    assert check_dsa_indexer(inputs, swapped, want)[1] is None
    assert not torch.equal(swapped, want)
    scores = _dsa_scores(inputs, tokens[None].expand(len(want), -1).clone())[0]
    low = int(tokens[scores.argmin()])
    assert "differ" in check_dsa_indexer(inputs, torch.where(want == kept, torch.full_like(want, low), want), want)[1]
    twice = want.clone()
    twice[0, 1] = twice[0, 0]
    assert "duplicate" in check_dsa_indexer(inputs, twice, want)[1]
    assert "out-of-range" in check_dsa_indexer(inputs, want.flip(0), want)[1]


def test_dsa_indexer_random_key_cache_is_packed_as_flashinfer_bench_does():
    """A random k_index_cache_fp8 is bfloat16 randn keys packed into deep_gemm's fp8 page layout (fp8
    bytes, then float32 scales amax / 448): it dequantizes back to the keys within fp8's precision."""
    k = torch.randn(3, 64, 1, 128, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    packed = pack_fp8_k_cache(k)
    assert packed.dtype == torch.int8 and packed.shape == (3, 64, 1, 132)
    flat = packed.view(torch.uint8).reshape(3, 64 * 132)
    fp8 = flat[:, :64 * 128].contiguous().view(torch.float8_e4m3fn).float().reshape(3, 64, 128)
    scale = flat[:, 64 * 128:].contiguous().view(torch.float32).reshape(3, 64, 1)
    back, ref = fp8 * scale, k.float()[:, :, 0]
    assert torch.allclose(scale[..., 0], ref.abs().amax(-1) / 448)
    assert ((back - ref).abs() <= ref.abs() * 2 ** -3 + scale * 2 ** -9).all()
