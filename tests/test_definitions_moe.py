"""fp8_block_matmul (shaders/fp8_block_matmul.comp, fuelvk/ops/moe.py): the MoE solutions' kernel,
x @ W.T with W float8_e4m3fn dequantized per element by its block's float32 scale inside the kernel;
and the DeepSeek-routing MoE kind as a FlashInfer-Bench solution (definitions/kinds.py).

Oracles: torch CPU in float64 on the expanded weight (fp8 -> float64 exactly, times the scale); the
Definitions' own references (torch CPU).
"""
import importlib
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.definitions import evaluate, fuelvk_solution, match_solution
from fuelvk.definitions.kinds import ds_routing, top_k_rows
from fuelvk.definitions.run import NO_SOLUTION, gen_inputs, reference_fn
from fuelvk.definitions.workloads import row_for
from fuelvk.errors import DTypeError, ShapeError
from fuelvk.ops.moe import fp8_block_matmul


def _stack(e, n, k, seed=0, every_byte=True):
    """(fp8 stack [e, n, k] as torch, as a fuelvk Array): randn clamped as FlashInfer-Bench draws it;
    with every_byte, expert 0's first rows hold all 256 codes (subnormals, +-448, both NaNs, -0)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(e, n, k, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    if every_byte:
        codes = torch.arange(256, dtype=torch.uint8)
        w.view(torch.uint8)[0].view(-1)[:256] = codes
    return w, fv.asarray(w.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn))


def _expand(w, s, bn, bk):
    n, k = w.shape
    rows = torch.arange(n) // bn
    cols = torch.arange(k) // bk
    return w.double() * s.double()[rows][:, cols]


def _check(got, x, w, s, bn, bk):
    ref = x.double() @ _expand(w, s, bn, bk).T
    bound = x.double().abs() @ _expand(w, s, bn, bk).abs().nan_to_num(0).T   # f32 summation error scale
    nan = torch.isnan(ref).numpy()
    assert (np.isnan(got) == nan).all()
    err = np.abs(got[~nan] - ref.numpy()[~nan])
    k = x.shape[1]   # f32 summation of k products: |error| <= k * 2^-24 * sum |terms| (and the dequant rounding)
    assert (err <= (k + 2) * 2.0**-24 * bound.numpy()[~nan]).all(), err.max()


@pytest.mark.parametrize("block,k", [(128, 262), ((64, 128), 260), ((32, 96), 256)])
def test_matches_float64_expansion(block, k):
    """Each expert of a stack, partial edge blocks, every fp8 code; x @ W.T against the float64
    product of the expanded weight.  k picks the load path: 262 bytes (expert views not word-aligned),
    260 32-bit words, 256 16-byte texels."""
    bn, bk = (block, block) if isinstance(block, int) else block
    e, n, m = 3, 150, 5
    w, wd = _stack(e, n, k)
    g = torch.Generator().manual_seed(1)
    s = torch.rand(e, -(-n // bn), -(-k // bk), generator=g) + 0.25
    x = torch.randn(m, k, generator=g)
    sd, xd = fv.asarray(s.numpy()), fv.asarray(x.numpy())
    for i in range(e):
        got = fp8_block_matmul(xd, wd[i], sd[i], block).numpy()
        assert got.shape == (m, n) and got.dtype == np.float32
        _check(got, x, w[i], s[i], bn, bk)


def test_k_split_by_the_loop_budget(monkeypatch):
    """A device loop budget under K: the sum runs in K spans (float32 partials), same result."""
    w, wd = _stack(1, 40, 512, seed=2, every_byte=False)
    s = torch.rand(1, 1, 4) + 0.5
    x = torch.randn(3, 512)
    whole = fp8_block_matmul(fv.asarray(x.numpy()), wd[0], fv.asarray(s[0].numpy())).numpy()
    dev = runtime.get().device
    assert dev.loop_budget is None or dev.loop_budget > 1000   # probed first: the monkeypatch restores it
    monkeypatch.setattr(dev, "loop_budget", 100)
    split = fp8_block_matmul(fv.asarray(x.numpy()), wd[0], fv.asarray(s[0].numpy())).numpy()
    _check(split, x, w[0], s[0], 128, 128)
    np.testing.assert_allclose(split, whole, rtol=1e-5, atol=1e-4)


def test_a_stack_over_one_binding_binds_one_expert(device_limits):
    """The expert stack is larger than one binding (shrunk to 256 KiB here; the dataset's 402 MB
    gemm1 stack is over lavapipe's 128 MiB): each expert's bytes are bound as a window."""
    w, wd = _stack(6, 256, 384, seed=3, every_byte=False)        # 6 x 96 KiB
    s = torch.rand(6, 2, 3) + 0.5
    x = torch.randn(2, 384)
    device_limits(maxStorageBufferRange=1 << 18)
    for i in (0, 5):
        got = fp8_block_matmul(fv.asarray(x.numpy()), wd[i], fv.asarray(s[i].numpy())).numpy()
        _check(got, x, w[i], s[i], 128, 128)


def test_empty_and_bad_inputs():
    _, wd = _stack(1, 128, 128, every_byte=False)
    s = fv.asarray(np.ones((1, 1), np.float32))
    assert fp8_block_matmul(np.zeros((0, 128), np.float32), wd[0], s).shape == (0, 128)
    with pytest.raises(DTypeError, match="float8_e4m3fn"):
        fp8_block_matmul(np.zeros((2, 128), np.float32), np.zeros((128, 128), np.float32), s)
    with pytest.raises(DTypeError, match="x float32"):
        fp8_block_matmul(np.zeros((2, 128), np.float16), wd[0], s)
    with pytest.raises(ShapeError, match=r"scale .* must be \(2, 1\)"):
        fp8_block_matmul(np.zeros((2, 128), np.float32), wd[0], s, block=(64, 128))
    with pytest.raises(ShapeError, match="x \\[M, K\\]"):
        fp8_block_matmul(np.zeros((2, 64), np.float32), wd[0], s)


# -- the DeepSeek-routing MoE kind as a FlashInfer-Bench solution (issue 19) ---------------------------------
# Oracle: each Definition's own `reference` (torch CPU), as the runner runs it.  The Definitions are the
# dataset's (tests/data/flashinfer/definitions, see its README); their references hard-code the hidden and
# intermediate sizes, so the runs here substitute smaller ones (7168 -> 256, 2048 -> 128: the real expert
# stacks are 1.4 GB of fp8 and the reference expands them to float32) and keep the routing geometry
# (256 or 384 experts, groups, top 8, local windows of 32 / 48) exactly.


DATA = Path(__file__).parent / "data" / "flashinfer" / "definitions"
DS = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"      # DeepSeek-V3 / R1, EP 8
KIMI = "moe_fp8_block_scale_ds_routing_topk8_ng1_kg1_e48_h7168_i2048"    # Kimi K2, EP 8: no groups
SMALL = {"hidden_size": 256, "intermediate_size": 128, "gemm1_out_size": 256, "num_hidden_blocks": 2,
         "num_intermediate_blocks": 1, "num_gemm1_out_blocks": 2}


def _ds_def(name=DS, shrink=True):
    full = json.loads((DATA / f"{name}.json").read_text())
    if not shrink:
        return full
    ref = full["reference"]
    assert ref.count("7168") and ref.count("2048")
    ref = ref.replace("7168", "256").replace("2048", "128")
    return {**full, "name": name.replace("_h7168_i2048", "_h256_i128"), "reference": ref,
            "axes": {k: {**v, "value": SMALL[k]} if k in SMALL else v for k, v in full["axes"].items()}}


def _ds_row(defn, seq_len, offset, uuid="ds"):
    return {"definition": defn["name"], "solution": None, "evaluation": None,
            "workload": {"uuid": uuid, "axes": {"seq_len": seq_len},
                         "inputs": {"local_expert_offset": {"type": "scalar", "value": offset},
                                    "routed_scaling_factor": {"type": "scalar", "value": 2.5}}}}


def _reference_picks(defn, inputs, monkeypatch):
    """(the reference's output, the experts its last torch.topk picked per token, as sets)."""
    calls = []
    topk = torch.topk

    def recording(*args, **kwargs):
        r = topk(*args, **kwargs)
        calls.append(r.indices)
        return r
    monkeypatch.setattr(torch, "topk", recording)
    out = reference_fn(defn)(**inputs)
    monkeypatch.setattr(torch, "topk", topk)
    return out, [set(r.tolist()) for r in calls[-1]]


@pytest.mark.parametrize("n,k", [(128, 8), (128, 10), (256, 8), (8, 4), (32, 2), (16, 1), (128, 1), (640, 8)])
def test_top_k_rows_keeps_the_experts_torch_keeps_among_ties(n, k):
    """Rows of few distinct values (ties at the k-th value in most rows; a 3-d batch as the grouped
    routing passes): the set each row keeps is torch.topk's on the CPU, exactly (its nth_element or,
    past n >= 64 k, partial_sort, picks among equal values)."""
    g = torch.Generator().manual_seed(n + k)
    x = (torch.randn(3, 40, n, generator=g) * 2).round() / 2
    x[0] = torch.randn(40, n, generator=g).bfloat16().float()      # bf16 router logits: some ties
    got = top_k_rows(fv.asarray(x.numpy()), k).numpy()
    want = torch.topk(x, k, dim=-1).indices
    assert got.shape == (3, 40, k)
    for r in range(3):
        assert [set(a) for a in got[r].tolist()] == [set(b) for b in want[r].tolist()]
    assert (x[1:].sort(-1, descending=True).values[..., k - 1] == x[1:].sort(-1, descending=True).values[..., k]).any()


@pytest.mark.parametrize("name", [DS, KIMI])
def test_ds_routing_picks_the_references_experts(name, monkeypatch):
    """The device routing (sigmoid, biased group scores, kept groups, top 8) picks exactly the experts
    the reference picks, token by token, and weighs them as it does (unbiased s, normalized, x 2.5)."""
    d = _ds_def(name)
    inputs = gen_inputs(d, _ds_row(d, 48, 0)["workload"])
    _, want = _reference_picks(d, inputs, monkeypatch)
    ids, w = ds_routing(fv.asarray(inputs["routing_logits"].numpy()),
                        fv.asarray(inputs["routing_bias"].float().numpy().astype(ml_dtypes.bfloat16)),
                        8, *((8, 4) if name == DS else (1, 1)), 2.5)
    got = ids.numpy()
    assert [set(r.tolist()) for r in got] == want
    s = torch.sigmoid(inputs["routing_logits"].double())
    sel = s.gather(1, torch.from_numpy(got))
    np.testing.assert_allclose(w.numpy(), (sel / sel.sum(1, keepdim=True) * 2.5).numpy(), rtol=1e-5)
    if name == DS:   # the groups matter: the unrestricted top 8 differs for some token
        b = s.float() + inputs["routing_bias"].float()
        assert any(set(r.tolist()) != p for r, p in zip(b.topk(8).indices, want))


def test_moe_fp8_ds_routing(monkeypatch):
    """The DeepSeek-V3 Definition (hidden 256, intermediate 128): passes against its reference with
    the local window at the first, a middle and the last 32 of 256 experts (tokens routed into and
    out of it), and with no tokens; a solution that ignores local_expert_offset, or routes without the bias, is caught."""
    d = _ds_def()
    assert match_solution(d)[0].name == "fuelvk_moe_fp8_block_scale_ds_routing"
    for offset in (0, 96, 224):
        row = _ds_row(d, 12, offset, f"ds{offset}")
        _, picks = _reference_picks(d, gen_inputs(d, row["workload"]), monkeypatch)
        local = sum(offset <= e < offset + 32 for p in picks for e in p)
        assert 0 < local < 12 * 8                    # some picks local, some on other ranks
        ev = evaluate(d, row, repeats=1)["evaluation"]
        assert ev["status"] == "PASSED", ev["log"]
    assert evaluate(d, _ds_row(d, 0, 0), repeats=1)["evaluation"]["status"] == "PASSED"   # no tokens
    row = _ds_row(d, 12, 96, "ds96")
    for wrong in ({"local_expert_offset": 0}, {"routing_bias": lambda b: torch.zeros_like(b)}):
        def solution(defn, inputs, wrong=wrong):
            return fuelvk_solution(defn, {**inputs, **{k: v(inputs[k]) if callable(v) else v
                                                       for k, v in wrong.items()}})
        bad = evaluate(d, row, repeats=1, solution=solution)["evaluation"]
        assert bad["status"] == "INCORRECT_NUMERICAL", (wrong, bad["log"])


def test_ds_routing_geometry_the_experts_cannot_give_is_an_error():
    """A name asking for 3 groups of 256 experts (or top 8 from one kept group of 4) is a typed error
    the runner reports, not a routing made up."""
    d = _ds_def()
    for name in ("topk8_ng3_kg1", "topk8_ng64_kg1"):
        bad = {**d, "name": d["name"].replace("topk8_ng8_kg4", name)}
        ev = evaluate(bad, _ds_row(bad, 2, 0), repeats=1)["evaluation"]
        assert ev["status"] == "RUNTIME_ERROR" and "ShapeError" in ev["log"] and "cannot give top 8" in ev["log"]


def test_moe_fp8_ds_routing_without_groups():
    """Kimi K2's Definition (384 experts, one group: a plain biased top 8; a top_k axis) passes with
    the window of 48 local experts at 336."""
    d = _ds_def(KIMI)
    assert match_solution(d)[0].name == "fuelvk_moe_fp8_block_scale_ds_routing_topk_axis"
    ev = evaluate(d, _ds_row(d, 16, 336), repeats=1)["evaluation"]
    assert ev["status"] == "PASSED", ev["log"]
    bad = evaluate(d, _ds_row(d, 16, 336), repeats=1, solution=lambda defn, inp: fuelvk_solution(
        defn, {**inp, "routed_scaling_factor": 1.0}))["evaluation"]
    assert bad["status"] == "INCORRECT_NUMERICAL"


def test_a_ds_routing_definition_of_another_signature_gets_no_solution(monkeypatch):
    """Name AND signature: the DeepSeek name with a float32 bias, bfloat16 logits, no offset input,
    or Kimi's with top_k a var axis, is refused and never run."""
    def never(*args, **kwargs):
        raise AssertionError("ran")
    d, kimi = _ds_def(shrink=False), _ds_def(KIMI, shrink=False)
    ins = d["inputs"]
    variants = [
        {**d, "inputs": {**ins, "routing_bias": {**ins["routing_bias"], "dtype": "float32"}}},
        {**d, "inputs": {**ins, "routing_logits": {**ins["routing_logits"], "dtype": "bfloat16"}}},
        {**d, "inputs": {k: v for k, v in ins.items() if k != "local_expert_offset"}},
        {**kimi, "axes": {**kimi["axes"], "top_k": {"type": "var"}}},
    ]
    monkeypatch.setattr(importlib.import_module("fuelvk.definitions.run"), "gen_inputs", never)
    for v in variants:
        assert match_solution(v)[0] is None
        ev = evaluate(v, _ds_row(v, 1, 0), repeats=1)["evaluation"]
        assert ev["status"] == NO_SOLUTION and v["name"] in ev["log"] and "refused" in ev["log"]


def test_generated_ds_rows_have_the_datasets_scalars(tmp_path):
    """`definitions workloads`: the scaling factor 2.5, a whole local window as the dataset's rows,
    a small routing_bias blob; a generated row of the (shrunk) DeepSeek Definition passes."""
    for name, window in ((DS, 32), (KIMI, 48)):
        d = _ds_def(name, shrink=False)
        offsets = set()
        for seed in range(8):
            ins = row_for(d, tmp_path, seed)["workload"]["inputs"]
            assert ins["routed_scaling_factor"] == {"type": "scalar", "value": 2.5}
            assert ins["routing_bias"]["type"] == "safetensors"
            offsets.add(ins["local_expert_offset"]["value"])
        assert len(offsets) > 1 and all(o % window == 0 and 0 <= o <= 384 - window for o in offsets)
    d = _ds_def()
    row = row_for(d, tmp_path, seed=1)
    bias = gen_inputs(d, row["workload"], tmp_path)["routing_bias"]
    assert bias.dtype == torch.bfloat16 and bias.shape == (256,) and 0 < bias.abs().max() < 0.5
    ev = evaluate(d, row, root=tmp_path, repeats=1)["evaluation"]
    assert ev["status"] == "PASSED", ev["log"]


# -- FlashInfer's trtllm MoE kinds: trtllm_fp4_block_scale_moe has float32 expert weights in the Definition
# (its kernel quantizes them to MxFP4 itself; the Definition and its reference never see fp4), and
# trtllm_fp8_per_tensor_scale_moe fp8 weights with per-expert output scales.  The dataset's Definitions
# (tests/data/flashinfer), their references' constants shrunk (hidden 64, intermediate 32; 8 of the 128
# experts, top 2, where the references loop over all E experts).

FP4_RENORM = "trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768"
FP4_LLAMA4 = "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192"
FP4_ROUTED = "trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768"
FP8_RENORM = "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768"
FP8_LLAMA4 = "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192"
SHRUNK_128 = {"E = 128": "E = 8", "H = 2048": "H = 64", "I = 768": "I = 32", "TOP_K = 8": "TOP_K = 2"}
TRTLLM_KINDS = {
    FP4_RENORM: ("fuelvk_moe_float_renorm", SHRUNK_128),
    FP4_LLAMA4: ("fuelvk_moe_float_llama4", {"H = 5120": "H = 64", "I = 8192": "I = 32"}),
    FP4_ROUTED: ("fuelvk_moe_float_routed", SHRUNK_128),
    FP8_RENORM: ("fuelvk_moe_fp8_per_tensor_renorm", SHRUNK_128),
    FP8_LLAMA4: ("fuelvk_moe_fp8_per_tensor_llama4", {"H = 5120": "H = 64", "I = 8192": "I = 32"}),
}


def _trtllm_def(name):
    full = json.loads((DATA / f"{name}.json").read_text())
    ref = full["reference"]
    for a, b in TRTLLM_KINDS[name][1].items():
        assert a in ref
        ref = ref.replace(a, b)
    consts = {"hidden_size": 64, "intermediate_size": 32, "gemm1_out_size": 64}
    if "E = 8" in ref:
        consts.update(num_experts=8, top_k=2)
    return {**full, "reference": ref,
            "axes": {k: {**v, "value": consts[k]} if k in consts else v for k, v in full["axes"].items()}}


def _wrong_route(name):
    """A solution routing wrongly: the lowest logits, or the packed weights' bits cleared."""
    def solution(defn, inputs):
        if name == FP4_ROUTED:
            return fuelvk_solution(defn, {**inputs, "topk_ids": inputs["topk_ids"] & ~0xFFFF})
        return fuelvk_solution(defn, {**inputs, "routing_logits": -inputs["routing_logits"]})
    return solution


@pytest.mark.parametrize("name", list(TRTLLM_KINDS))
def test_moe_trtllm_kinds(name, tmp_path):
    """Renormalize (TopK -> Softmax), Llama 4 (sigmoid top 1, the token row weighted before gemm1) and
    pre-computed routing (packed topk_ids, written as a blob by `definitions workloads`), float32 or
    per-tensor fp8 experts, each pass against the Definition's reference; a wrong routing is caught."""
    d = _trtllm_def(name)
    assert match_solution(d)[0].name == TRTLLM_KINDS[name][0]
    row = row_for(d, tmp_path, seed=3)
    ev = evaluate(d, row, root=tmp_path, repeats=1)["evaluation"]
    assert ev["status"] == "PASSED", ev["log"]
    bad = evaluate(d, row, root=tmp_path, repeats=1, solution=_wrong_route(name))["evaluation"]
    assert bad["status"] == "INCORRECT_NUMERICAL", bad["log"]


@pytest.mark.parametrize("name", [FP4_RENORM, FP8_RENORM])
def test_moe_trtllm_stacks_over_one_buffer_go_per_expert(name, tmp_path, monkeypatch):
    """A weight stack larger than the device's largest buffer (float32 e64 h4096 i1536: 3.2 GB over
    lavapipe's 2 GiB) is uploaded one expert at a time; forced here with a largest buffer smaller than
    the shrunk stacks: the row still passes, and the stacks were split (a FuelVKMemoryError before)."""
    from fuelvk.definitions import kinds
    d = _trtllm_def(name)
    row = row_for(d, tmp_path, seed=3)
    pool = runtime.get().pool
    made = []
    real = kinds._expert_stack

    def spy(inputs, wname):
        w = real(inputs, wname)
        made.append(type(w))
        return w
    monkeypatch.setattr(kinds, "_expert_stack", spy)
    # an expert's [64, 64] (float32 16 KiB, fp8 4 KiB) fits; the stacks of 8 experts do not
    monkeypatch.setattr(pool, "max_buffer", 16384 if name == FP4_RENORM else 4096)
    ev = evaluate(d, row, root=tmp_path, repeats=1)["evaluation"]
    monkeypatch.undo()
    assert ev["status"] == "PASSED", ev["log"]
    assert made and all(t is tuple for t in made), made


def test_a_float_moe_definition_of_another_signature_gets_no_solution():
    """A top-8 Definition with a routing_bias (neither the renormalize nor the Llama 4 signature), fp8
    weights under the fp4 name, or topk_ids int64, match no solution; nor fp8 per-tensor weights
    without their output scales."""
    llama, renorm, routed = (json.loads((DATA / f"{n}.json").read_text()) for n in (FP4_LLAMA4, FP4_RENORM,
                                                                                    FP4_ROUTED))
    biased_top8 = {**renorm, "inputs": {**renorm["inputs"], "routing_bias": llama["inputs"]["routing_bias"]}}
    fp8 = {**renorm, "inputs": {**renorm["inputs"],
                                "gemm1_weights": {**renorm["inputs"]["gemm1_weights"], "dtype": "float8_e4m3fn"}}}
    wide_ids = {**routed, "inputs": {**routed["inputs"], "topk_ids": {**routed["inputs"]["topk_ids"],
                                                                      "dtype": "int64"}}}
    per_tensor = json.loads((DATA / f"{FP8_RENORM}.json").read_text())
    unscaled = {**per_tensor, "inputs": {k: v for k, v in per_tensor["inputs"].items() if "scales" not in k}}
    for v in (biased_top8, fp8, wide_ids, unscaled):
        sol, why = match_solution(v)
        assert sol is None and v["name"] in why
