"""Evaluate fuelvk as a FlashInfer-Bench Solution: Definitions + workload JSONL -> Trace JSONL.

Per workload row: inputs as the row says (random: FlashInfer-Bench's generator, seeded by the
workload uuid, `probs` of a sampling Definition softmax-normalized and a DSA indexer's fp8 key cache
packed from bfloat16 randn keys, as FlashInfer-Bench does;
scalar: the value; safetensors: resolved against the dataset root as FlashInfer-Bench does,
loaded when the file and the safetensors package are there, else derived when the Definition's
constraints fix it, else status INPUT_UNAVAILABLE), the Definition's `reference` run in torch (CPU),
the same inputs through fuelvk, and FlashInfer-Bench's correctness rule: an element fails only if
BOTH its absolute error and its relative error |x - y| / (|y| + 1e-8) exceed the tolerance (1e-2
each), and a row fails when more than 1 - required_matched_ratio of the elements fail (ratio 1.0,
0.95 for moe: TOLERANCES; sampling: sample frequencies, check_sampling; the DSA top-k indexer: the
scores at its indices, sorted, check_dsa_indexer).  fuelvk's addition:
NaN/inf must match position by position (FlashInfer-Bench fails any non-finite solution output,
even where the reference has one).

Solutions (SOLUTIONS) are matched to a Definition by its name pattern AND its full signature
(input/output names, dtypes, shapes by axis name, axes const/var), never by op_type alone: a
fused_add_rmsnorm Definition is op_type rmsnorm too, and the plain rmsnorm solution would drop its
residual.  A Definition no solution matches gets status NO_SOLUTION and is never run.  fuelvk's own
exports name their function in a `fuelvk_api:` tag (called with inputs by name).  A solution's
build returns a zero-argument callable that runs the op on device-resident inputs and returns the
outputs on the host (the timed unit).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import inspect
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from . import kinds
from .convert import TORCH_DTYPES, np_dtype, to_numpy, to_torch

ATOL = RTOL = 1e-2
INPUT_UNAVAILABLE = "INPUT_UNAVAILABLE"   # fuelvk's status: a safetensors input we could not load
NO_SOLUTION = "NO_SOLUTION"               # fuelvk's status: no solution's name and signature match
STATUSES = ("PASSED", "INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR",
            INPUT_UNAVAILABLE, NO_SOLUTION)
# FlashInfer-Bench's per-kind rules (bench/eval_config.yaml, evaluators/lowbit.py): the fraction of
# elements that must be within tolerance.  Keyed by op_type; default 1.0.
# sampling: FlashInfer-Bench's statistical check (check_sampling) with its defaults, used as they are
# (SamplingEvaluator: VALIDATION_TRIALS_DEFAULT, TVD_THRESHOLD_DEFAULT, _sample_token_distributions'
# target_batch_size and num_trials); only tests lower them (on small vocabularies).
TOLERANCES = {"moe": {"required_matched_ratio": 0.95},
              "sampling": {"validation_trials": 100, "batch_rows": 10000, "draws": 500000,
                           "tvd_threshold": 0.2}}


class Unavailable(Exception):
    pass


class NoSolution(Exception):
    pass


# -- loading -----------------------------------------------------------------------------------------

def load_definitions(path):
    """{name: Definition dict} from a .json file or a folder of them (searched recursively)."""
    p = Path(path)
    files = sorted(p.rglob("*.json")) if p.is_dir() else [p]
    return {d["name"]: d for d in (json.loads(f.read_text()) for f in files)}


def load_workloads(path):
    """[(trace row, folder it came from)] from a .jsonl file or a folder of them."""
    p = Path(path)
    files = sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]
    return [(json.loads(line), f.parent) for f in files
            for line in f.read_text().splitlines() if line.strip()]


def axis_values(defn, wl):
    vals = {a: d["value"] for a, d in defn["axes"].items() if d["type"] == "const"}
    vals.update(wl["axes"])
    return vals


def shapes(defn, wl, role="inputs"):
    vals = axis_values(defn, wl)
    return {n: None if t["shape"] is None else [vals[a] for a in t["shape"]] for n, t in defn[role].items()}


# -- inputs --------------------------------------------------------------------------------------------

def rand_tensor(shape, dtype, gen):
    """FlashInfer-Bench's random inputs: randn for floats, [-1024, 1024) ints, fair bools."""
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.randn(shape, generator=gen).clamp_(-2.0, 2.0).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    low, high = (-128, 128) if dtype is torch.int8 else (-1024, 1024)
    return torch.randint(low, high, shape, generator=gen, dtype=dtype)


def _derive_indptr(defn, wl, name):
    """A ragged indptr of length 2 is fixed by the constraint total == indptr[-1]: [0, total]."""
    vals = axis_values(defn, wl)
    shape = shapes(defn, wl)[name]
    for c in defn.get("constraints") or []:
        m = re.fullmatch(r"\s*(\w+)\s*==\s*(\w+)\[-1\]\.item\(\)\s*", c)
        if m and m.group(2) == name and shape == [2] and m.group(1) in vals:
            return torch.tensor([0, vals[m.group(1)]], dtype=TORCH_DTYPES[defn["inputs"][name]["dtype"]])
    return None


def find_dataset_root(definitions, workloads):
    """The dataset root FlashInfer-Bench resolves blob paths against (its TraceSet root): the nearest
    folder, from the workloads path upward then from the definitions path upward, that holds both
    definitions/ and workloads/; else the current directory (FlashInfer-Bench with no root)."""
    for start in (Path(workloads).resolve(), Path(definitions).resolve()):
        for folder in ([start] if start.is_dir() else []) + list(start.parents):
            if (folder / "definitions").is_dir() and (folder / "workloads").is_dir():
                return folder
    return Path.cwd()


def _load_safetensors(defn, wl, name, spec, root):
    """A blob input at root / path (an absolute path as is), checked for the Definition's shape and
    dtype as FlashInfer-Bench's load_safetensors does."""
    path = Path(spec["path"])
    path = path if path.is_absolute() else Path(root) / path
    why = None
    try:
        import safetensors.torch as st
        if path.exists():
            blob = st.load_file(str(path))
            if spec["tensor_key"] not in blob:
                raise ValueError(f"input {name}: no key {spec['tensor_key']!r} in {path}")
            t = blob[spec["tensor_key"]]
            want_shape, want_dtype = shapes(defn, wl)[name], TORCH_DTYPES[defn["inputs"][name]["dtype"]]
            if list(t.shape) != want_shape or t.dtype != want_dtype:
                raise ValueError(f"input {name}: {path} [{spec['tensor_key']}] is {t.dtype} {list(t.shape)}, "
                                 f"the Definition wants {want_dtype} {want_shape}")
            return t
        why = f"{path} not found"
    except ImportError:
        why = "the safetensors package is not installed"
    t = _derive_indptr(defn, wl, name)
    if t is None:
        raise Unavailable(f"input {name}: safetensors {spec['path']} [{spec['tensor_key']}]: {why}, "
                          f"and the Definition's constraints do not determine it")
    return t


def gen_inputs(defn, wl, root="."):
    """{name: tensor or python scalar} for one workload, as FlashInfer-Bench's gen_inputs: a random
    input of shape null is a Python scalar; a sampling Definition's `probs` are softmax(randn).
    Raises Unavailable when a blob is missing, ValueError when one is malformed."""
    gen = torch.Generator().manual_seed(int(hashlib.sha256(wl["uuid"].encode()).hexdigest()[:8], 16))
    shp, out = shapes(defn, wl), {}
    for name, t in defn["inputs"].items():
        spec = wl["inputs"].get(name, {"type": "random"})
        if spec["type"] == "scalar":
            out[name] = spec["value"]
        elif spec["type"] == "safetensors":
            out[name] = _load_safetensors(defn, wl, name, spec, root)
        elif shp[name] is None:
            out[name] = rand_tensor((), TORCH_DTYPES[t["dtype"]], gen).item()
        else:
            out[name] = rand_tensor(shp[name], TORCH_DTYPES[t["dtype"]], gen)
            if defn["op_type"] == "sampling" and name == "probs":
                out[name] = torch.softmax(out[name], dim=-1)
            if is_dsa_indexer(defn) and name == "k_index_cache_fp8":   # as DsaTopkIndexerEvaluator
                c = {a: x.get("value") for a, x in defn["axes"].items()}
                k = torch.randn(shp[name][0], c["page_size"], 1, c["index_head_dim"], generator=gen)
                out[name] = pack_fp8_k_cache(k.to(torch.bfloat16))
    return out


# -- reference -------------------------------------------------------------------------------------------

def reference_fn(defn):
    scope = {}
    exec(compile(defn["reference"], f"<reference {defn['name']}>", "exec"), scope)  # noqa: S102 (its purpose)
    return scope["run"]


def normalize(defn, out):
    names = list(defn["outputs"])
    if isinstance(out, dict):
        return {k: out[k] for k in names}
    if not isinstance(out, (tuple, list)):
        out = (out,)
    if len(out) != len(names):
        raise RuntimeError(f"{len(out)} outputs returned, {len(names)} defined ({', '.join(names)})")
    return dict(zip(names, out))


# -- fuelvk solutions ------------------------------------------------------------------------------------

def _tag(defn, key):
    return [t.split(":", 1)[1] for t in defn.get("tags") or [] if t.startswith(key + ":")]


def _solve_exported(defn, inputs):
    """fuelvk's own exports: call fuelvk.<fuelvk_api>(**inputs, **params) (names as the spec's)."""
    import fuelvk
    fn = fuelvk
    for part in _tag(defn, "fuelvk_api")[0].split("."):
        fn = getattr(fn, part)
    fn = inspect.unwrap(fn)   # the op the spec describes (a top-level array API wrapper names it)
    params = {}
    for t in _tag(defn, "fuelvk_param"):
        k, v = t.split("=", 1)
        params[k] = json.loads(v)
    host = {k: to_numpy(v) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    mutated = set(_tag(defn, "fuelvk_mutates"))
    dev = {k: fuelvk.asarray(v) if isinstance(v, np.ndarray) and k not in mutated else v
           for k, v in host.items()}

    def call():   # an input written in place is uploaded afresh each call (and timed with it)
        out = fn(**{**dev, **{k: fuelvk.asarray(host[k]) for k in mutated}}, **params)
        out = out if isinstance(out, tuple) else (out,)
        return tuple(o.numpy() for o in out)
    return call


def _eps_of(defn):
    m = re.search(r"\bEPS\s*=\s*([0-9.eE+-]+)", defn["reference"])
    if m is None:
        raise RuntimeError(f"{defn['name']}: no EPS = <value> in the reference; cannot tell fuelvk epsilon")
    return float(m.group(1))


def _solve_rmsnorm(defn, inputs):
    import fuelvk
    x, w = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("hidden_states", "weight"))
    eps = _eps_of(defn)
    return lambda: (fuelvk.rms_norm(x, eps=eps, weight=w).numpy(),)


def _solve_fused_add_rmsnorm(defn, inputs):
    """FlashInfer's fused_add_rmsnorm: fuelvk.fused_add_rmsnorm (one launch: residual += hidden_states
    in place, output = rmsnorm of the unrounded float32 sum * weight, rounded once, as the reference).
    The residual it writes is uploaded afresh for every call (and timed with it).  Rows are
    independent: a batch over one binding (rmsnorm_h7168 at 11,949 rows and more) runs in row
    batches that each fit, as the op's FuelVKMemoryError asks."""
    import fuelvk
    x, res = (to_numpy(inputs[n]) for n in ("hidden_states", "residual"))
    w, eps = fuelvk.asarray(to_numpy(inputs["weight"])), _eps_of(defn)
    limit = fuelvk.runtime.get().device.limits.maxStorageBufferRange
    per = max(1, limit // max(x.shape[1] * x.dtype.itemsize, 1))
    cuts = range(0, max(x.shape[0], 1), per)
    xs = [fuelvk.asarray(x[i:i + per]) for i in cuts]

    def call():
        outs = [fuelvk.fused_add_rmsnorm(xb, fuelvk.asarray(res[i:i + per]), w, eps=eps).numpy()
                for i, xb in zip(cuts, xs)]
        return (outs[0] if len(outs) == 1 else np.concatenate(outs),)
    return call


def _solve_gemm(defn, inputs):
    """C = A @ B.T (FlashInfer's layout: B is stored [N, K])."""
    import fuelvk
    a, b = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("A", "B"))
    c = defn["outputs"]["C"]["dtype"]
    odt = c if c != defn["inputs"]["A"]["dtype"] else None
    return lambda: (fuelvk.matmul(a, b.T, odt).numpy(),)


def _solve_rope_cos_sin_cache(defn, inputs):
    """FlashInfer's apply_rope_with_cos_sin_cache (NeoX): cos, sin = cos_sin_cache[positions] halves,
    rotary_dim from the cache's width.  As the reference: q, k and the float32 tables in float32,
    rounded once to the output dtype (fuelvk.take gathers the rows: torch's indexing, negatives
    from the end, out of range an error)."""
    import fuelvk
    q, k = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("q", "k"))
    cache = fuelvk.asarray(to_numpy(inputs["cos_sin_cache"]))
    pos = fuelvk.asarray(to_numpy(inputs["positions"]))
    rot = cache.shape[-1]
    odt = {n: np_dtype(defn["outputs"][n]["dtype"]) for n in ("q_out", "k_out")}

    def call():
        cs = fuelvk.take(cache, pos, axis=0)                       # [tokens, rot]
        cos = cs[:, None, :rot // 2]                               # [tokens, 1, rot/2]: over heads
        sin = cs[:, None, rot // 2:]
        return tuple(fuelvk.rope(x.astype("float32"), cos, sin, rotary_dim=rot).astype(odt[n]).numpy()
                     for x, n in ((q, "q_out"), (k, "k_out")))
    return call


FLOATS = ("float32", "float16", "bfloat16")


class Solution:
    """A fuelvk solution: the Definitions it serves (name pattern AND signature) and its build.

    tensors: {name: "axis axis ... : dtypes"} with dtypes "float" (FLOATS), a dtype name, or "=other"
    (the dtype of tensor `other`); a scalar is "scalar: dtype" (shape null).  Inputs and outputs are
    told apart by `outputs`.  axes: {name: "const" | "var"}; const values are free (the kind, not
    the file: rmsnorm_h7168 is served as rmsnorm_h4096)."""

    def __init__(self, name, pattern, axes, inputs, outputs, build):
        self.name, self.pattern, self.axes, self.build = name, re.compile(pattern), axes, build
        self.inputs, self.outputs = (
            {n: self._parse(t) for n, t in d.items()} for d in (inputs, outputs))

    @staticmethod
    def _parse(text):
        shape, dt = (p.strip() for p in text.split(":"))
        return None if shape == "scalar" else shape.split(), dt

    def refuses(self, defn):
        """None when this solution serves defn, else why not (one line)."""
        if not self.pattern.fullmatch(defn["name"]):
            return f"name does not match {self.pattern.pattern}"
        axes = {a: d["type"] for a, d in defn["axes"].items()}
        if axes != self.axes:
            return f"axes {axes} differ from {self.axes}"
        tensors = {**defn["inputs"], **defn["outputs"]}
        for role, want in (("inputs", self.inputs), ("outputs", self.outputs)):
            if list(defn[role]) != list(want):
                return f"{role} ({', '.join(defn[role])}) differ from ({', '.join(want)})"
            for n, (shape, dt) in want.items():
                t = defn[role][n]
                if t["shape"] != shape:
                    return f"{n}: shape {t['shape']} differs from {shape}"
                ok = (t["dtype"] in FLOATS if dt == "float" else
                      t["dtype"] == tensors[dt[1:]]["dtype"] if dt.startswith("=") else t["dtype"] == dt)
                if not ok:
                    return f"{n}: dtype {t['dtype']} is not {dt}"
        return None


_RMS_AXES = {"batch_size": "var", "hidden_size": "const"}
_RMS_X = "batch_size hidden_size"
_RAGGED_AXES = {"num_qo_heads": "const", "num_kv_heads": "const", "head_dim": "const",
                "len_indptr": "var", "total_q": "var", "total_kv": "var"}
_PAGED_AXES = {"batch_size": "var", "num_qo_heads": "const", "num_kv_heads": "const", "head_dim": "const",
               "num_pages": "var", "page_size": "const", "len_indptr": "var", "num_kv_indices": "var"}
_KV_CACHE = {"k_cache": "num_pages page_size num_kv_heads head_dim: =q",
             "v_cache": "num_pages page_size num_kv_heads head_dim: =q"}
_PAGES = {"kv_indptr": "len_indptr: int32", "kv_indices": "num_kv_indices: int32"}
_MLA_AXES = {"batch_size": "var", "num_qo_heads": "const", "head_dim_ckv": "const", "head_dim_kpe": "const",
             "page_size": "const", "num_pages": "var", "len_indptr": "var", "num_kv_indices": "var"}
_LAST_PAGE = {"kv_last_page_len": "batch_size: int32"}


def _PREFILL_VARIANTS(axes):
    """(suffix, axes, last-page input) of the paged prefill signatures: kv_last_page_len [batch_size]
    with a batch_size axis; kv_last_page_len [len_indptr] (the reference reads the first batch_size)
    or none at all (every page full) without one."""
    no_batch = {a: t for a, t in axes.items() if a != "batch_size"}
    return (("", axes, _LAST_PAGE),
            ("_last_page_indptr", no_batch, {"kv_last_page_len": "len_indptr: int32"}),
            ("_full_pages", no_batch, {}))


_MLA_CACHE = {"ckv_cache": "num_pages page_size head_dim_ckv: =q_nope",
              "kpe_cache": "num_pages page_size head_dim_kpe: =q_nope"}

_MOE_CONSTS = ("num_local_experts", "hidden_size", "intermediate_size", "gemm1_out_size", "top_k",
               "num_hidden_blocks", "num_intermediate_blocks", "num_gemm1_out_blocks")
# The fp8 block-scale activations and expert weight stacks every fp8 MoE kind shares.
_MOE_FP8_TENSORS = {
    "hidden_states": "seq_len hidden_size: float8_e4m3fn",
    "hidden_states_scale": "num_hidden_blocks seq_len: float32",
    "gemm1_weights": "num_local_experts gemm1_out_size hidden_size: float8_e4m3fn",
    "gemm1_weights_scale": "num_local_experts num_gemm1_out_blocks num_hidden_blocks: float32",
    "gemm2_weights": "num_local_experts hidden_size intermediate_size: float8_e4m3fn",
    "gemm2_weights_scale": "num_local_experts num_hidden_blocks num_intermediate_blocks: float32"}
_DS_CONSTS = ("num_experts", "num_local_experts", "hidden_size", "intermediate_size", "gemm1_out_size",
              "num_hidden_blocks", "num_intermediate_blocks", "num_gemm1_out_blocks")
# FlashInfer's trtllm MoE Definitions: fp4 (float32 weights in the Definition, bfloat16 activations) and
# fp8 per-tensor (fp8 weights and activations, per-expert output scales).
_TRTLLM_MOE_AXES = {"seq_len": "var", **dict.fromkeys(
    ("num_experts", "hidden_size", "intermediate_size", "gemm1_out_size", "top_k"), "const")}
_FLOAT_MOE_TENSORS = {"hidden_states": "seq_len hidden_size: bfloat16",
                      "gemm1_weights": "num_experts gemm1_out_size hidden_size: float32",
                      "gemm2_weights": "num_experts hidden_size intermediate_size: float32"}
_FP8_TENSOR_MOE_TENSORS = {"hidden_states": "seq_len hidden_size: float8_e4m3fn",
                           "gemm1_weights": "num_experts gemm1_out_size hidden_size: float8_e4m3fn",
                           "output1_scales_scalar": "num_experts: float32",
                           "output1_scales_gate_scalar": "num_experts: float32",
                           "gemm2_weights": "num_experts hidden_size intermediate_size: float8_e4m3fn",
                           "output2_scales_scalar": "num_experts: float32"}
_GDN_HEADS = {"num_q_heads": "const", "num_k_heads": "const", "num_v_heads": "const", "head_size": "const"}


def _MLA_Q(rows):
    return {"q_nope": f"{rows} num_qo_heads head_dim_ckv: float",
            "q_pe": f"{rows} num_qo_heads head_dim_kpe: =q_nope"}


def _MLA_OUT(rows):
    return {"output": f"{rows} num_qo_heads head_dim_ckv: =q_nope", "lse": f"{rows} num_qo_heads: float32"}


SOLUTIONS = (
    Solution("fuelvk_rmsnorm", r"rmsnorm_h\d+", _RMS_AXES,
             {"hidden_states": f"{_RMS_X}: float", "weight": "hidden_size: =hidden_states"},
             {"output": f"{_RMS_X}: =hidden_states"}, _solve_rmsnorm),
    Solution("fuelvk_fused_add_rmsnorm", r"fused_add_rmsnorm_h\d+", _RMS_AXES,
             {"hidden_states": f"{_RMS_X}: float", "residual": f"{_RMS_X}: =hidden_states",
              "weight": "hidden_size: =hidden_states"},
             {"output": f"{_RMS_X}: =hidden_states"}, _solve_fused_add_rmsnorm),
    Solution("fuelvk_gemm", r"gemm_n\d+_k\d+", {"M": "var", "N": "const", "K": "const"},
             {"A": "M K: float", "B": "N K: =A"}, {"C": "M N: float"}, _solve_gemm),
    Solution("fuelvk_gqa_ragged_causal", r"gqa_ragged_prefill_causal_h\d+_kv\d+_d\d+", _RAGGED_AXES,
             {"q": "total_q num_qo_heads head_dim: float",
              "k": "total_kv num_kv_heads head_dim: =q", "v": "total_kv num_kv_heads head_dim: =q",
              "qo_indptr": "len_indptr: int32", "kv_indptr": "len_indptr: int32",
              "sm_scale": "scalar: float32"},
             {"output": "total_q num_qo_heads head_dim: =q", "lse": "total_q num_qo_heads: float32"},
             kinds.solve_gqa_ragged),
    # Paged kinds come in the dataset's signature variants (kv_last_page_len or not, sized batch_size or
    # len_indptr, a batch_size axis or not): one Solution each, one build (the reference's rule for each).
    *(Solution(f"fuelvk_gqa_paged_decode{suffix}", r"gqa_paged_decode_h\d+_kv\d+_d\d+_ps\d+", _PAGED_AXES,
               {"q": "batch_size num_qo_heads head_dim: float", **_KV_CACHE, **_PAGES, **last,
                "sm_scale": "scalar: float32"},
               {"output": "batch_size num_qo_heads head_dim: =q", "lse": "batch_size num_qo_heads: float32"},
               kinds.solve_gqa_paged)
      for suffix, last in (("", {}), ("_last_page", _LAST_PAGE))),
    *(Solution(f"fuelvk_gqa_paged_prefill_causal{suffix}", r"gqa_paged_prefill_causal_h\d+_kv\d+_d\d+_ps\d+",
               {**axes, "total_q": "var"},
               {"q": "total_q num_qo_heads head_dim: float", **_KV_CACHE, "qo_indptr": "len_indptr: int32",
                **_PAGES, **last, "sm_scale": "scalar: float32"},
               {"output": "total_q num_qo_heads head_dim: =q", "lse": "total_q num_qo_heads: float32"},
               kinds.solve_gqa_paged)
      for suffix, axes, last in _PREFILL_VARIANTS(_PAGED_AXES)),
    *(Solution(f"fuelvk_mla_paged_decode{suffix}", r"mla_paged_decode_h\d+_ckv\d+_kpe\d+_ps\d+", _MLA_AXES,
               {**_MLA_Q("batch_size"), **_MLA_CACHE, **_PAGES, **last, "sm_scale": "scalar: float32"},
               _MLA_OUT("batch_size"), kinds.solve_mla_paged)
      for suffix, last in (("", {}), ("_last_page", _LAST_PAGE))),
    *(Solution(f"fuelvk_mla_paged_prefill_causal{suffix}", r"mla_paged_prefill_causal_h\d+_ckv\d+_kpe\d+_ps\d+",
               {**axes, "total_q": "var"},
               {**_MLA_Q("total_q"), **_MLA_CACHE, "qo_indptr": "len_indptr: int32", **_PAGES, **last,
                "sm_scale": "scalar: float32"},
               _MLA_OUT("total_q"), kinds.solve_mla_paged)
      for suffix, axes, last in _PREFILL_VARIANTS(_MLA_AXES) if suffix != "_last_page_indptr"),
    Solution("fuelvk_dsa_sparse_attention", r"dsa_sparse_attention_h\d+_ckv\d+_kpe\d+_topk\d+_ps\d+",
             {"num_tokens": "var", "num_qo_heads": "const", "head_dim_ckv": "const", "head_dim_kpe": "const",
              "page_size": "const", "topk": "const", "num_pages": "var"},
             {**_MLA_Q("num_tokens"), **_MLA_CACHE, "sparse_indices": "num_tokens topk: int32",
              "sm_scale": "scalar: float32"},
             _MLA_OUT("num_tokens"), kinds.solve_dsa_paged),
    Solution("fuelvk_dsa_topk_indexer_fp8", r"dsa_topk_indexer_fp8_h\d+_d\d+_topk\d+_ps\d+",
             {"batch_size": "var", "num_index_heads": "const", "index_head_dim": "const", "page_size": "const",
              "topk": "const", "max_num_pages": "var", "num_pages": "var", "kv_cache_num_heads": "const",
              "head_dim_with_scale": "const"},
             {"q_index_fp8": "batch_size num_index_heads index_head_dim: float8_e4m3fn",
              "k_index_cache_fp8": "num_pages page_size kv_cache_num_heads head_dim_with_scale: int8",
              "weights": "batch_size num_index_heads: float32", "seq_lens": "batch_size: int32",
              "block_table": "batch_size max_num_pages: int32"},
             {"topk_indices": "batch_size topk: int32"}, kinds.solve_dsa_topk_indexer),
    Solution("fuelvk_mla_ragged_causal", r"mla_ragged_prefill_causal_h\d+_qk\d+_vo\d+",
             {"num_qo_heads": "const", "num_kv_heads": "const", "qk_dim": "const", "vo_dim": "const",
              "total_q": "var", "total_kv": "var", "len_indptr": "var"},
             {"q": "total_q num_qo_heads qk_dim: float", "k": "total_kv num_kv_heads qk_dim: =q",
              "v": "total_kv num_kv_heads vo_dim: =q", "qo_indptr": "len_indptr: int32",
              "kv_indptr": "len_indptr: int32", "sm_scale": "scalar: float32"},
             {"output": "total_q num_qo_heads vo_dim: =q", "lse": "total_q num_qo_heads: float32"},
             kinds.solve_mla_ragged),
    *(Solution(f"fuelvk_{m}_sampling", rf"{m}_sampling_from_probs_v\d+",
               {"batch_size": "var", "vocab_size": "const"},
               {"probs": "batch_size vocab_size: float32",
                **({"top_k": "batch_size: int32"} if "top_k" in m else {}),
                **({"top_p": "batch_size: float32"} if "top_p" in m else {})},
               {"samples": "batch_size: int64"}, kinds.solve_sampling)
      for m in ("top_k", "top_p", "top_k_top_p")),
    Solution("fuelvk_mamba_ssu_decode", r"mamba_ssu_decode_h\d+_d\d+_s\d+_ng\d+",
             {"batch_size": "var", "state_cache_size": "var", "nheads": "const", "head_dim": "const",
              "dstate": "const", "ngroups": "const"},
             {"state": "state_cache_size nheads head_dim dstate: float",
              "x": "batch_size nheads head_dim: =state",
              "dt": "batch_size nheads head_dim: =state", "A": "nheads head_dim dstate: float32",
              "B": "batch_size ngroups dstate: =state", "C": "batch_size ngroups dstate: =state",
              "D": "nheads head_dim: =state", "dt_bias": "nheads head_dim: =state",
              "state_batch_indices": "batch_size: int32"},
             {"output": "batch_size nheads head_dim: =x",
              "new_state": "state_cache_size nheads head_dim dstate: =state"},
             kinds.solve_mamba_ssu),
    Solution("fuelvk_gdn_decode", r"gdn_decode_qk\d+_v\d+_d\d+_k_last",
             {"batch_size": "var", "seq_len": "const", **_GDN_HEADS},
             {"q": "batch_size seq_len num_q_heads head_size: float",
              "k": "batch_size seq_len num_k_heads head_size: =q",
              "v": "batch_size seq_len num_v_heads head_size: =q",
              "state": "batch_size num_v_heads head_size head_size: float32", "A_log": "num_v_heads: float32",
              "a": "batch_size seq_len num_v_heads: =q", "dt_bias": "num_v_heads: float32",
              "b": "batch_size seq_len num_v_heads: =q", "scale": "scalar: float32"},
             {"output": "batch_size seq_len num_v_heads head_size: =q",
              "new_state": "batch_size num_v_heads head_size head_size: float32"},
             kinds.solve_gdn_decode),
    Solution("fuelvk_gdn_mtp", r"gdn_mtp_qk\d+_v\d+_d\d+_k_last",
             {"batch_size": "var", "seq_len": "var", "pool_size": "var", **_GDN_HEADS},
             {"q": "batch_size seq_len num_q_heads head_size: float",
              "k": "batch_size seq_len num_k_heads head_size: =q",
              "v": "batch_size seq_len num_v_heads head_size: =q",
              "initial_state": "pool_size num_v_heads head_size head_size: float32",
              "initial_state_indices": "batch_size: int32", "A_log": "num_v_heads: float32",
              "a": "batch_size seq_len num_v_heads: =q", "dt_bias": "num_v_heads: float32",
              "b": "batch_size seq_len num_v_heads: =q", "scale": "scalar: float32",
              "intermediate_states_buffer": "pool_size seq_len num_v_heads head_size head_size: float32"},
             {"output": "batch_size seq_len num_v_heads head_size: =q",
              "final_state": "pool_size num_v_heads head_size head_size: float32"},
             kinds.solve_gdn_mtp),
    Solution("fuelvk_gdn_prefill", r"gdn_prefill_qk\d+_v\d+_d\d+_k_last",
             {"total_seq_len": "var", "num_seqs": "var", "len_cu_seqlens": "var", **_GDN_HEADS},
             {"q": "total_seq_len num_q_heads head_size: float",
              "k": "total_seq_len num_k_heads head_size: =q",
              "v": "total_seq_len num_v_heads head_size: =q",
              "state": "num_seqs num_v_heads head_size head_size: float32", "A_log": "num_v_heads: float32",
              "a": "total_seq_len num_v_heads: =q", "dt_bias": "num_v_heads: float32",
              "b": "total_seq_len num_v_heads: =q", "cu_seqlens": "len_cu_seqlens: int64",
              "scale": "scalar: float32"},
             {"output": "total_seq_len num_v_heads head_size: =q",
              "new_state": "num_seqs num_v_heads head_size head_size: float32"},
             kinds.solve_gdn_prefill),
    Solution("fuelvk_moe_fp8_block_scale_renorm", r"moe_fp8_block_scale_renorm_topk\d+_e\d+_h\d+_i\d+",
             {"seq_len": "var", **dict.fromkeys(_MOE_CONSTS, "const")},
             {"routing_logits": "seq_len num_local_experts: bfloat16", **_MOE_FP8_TENSORS},
             {"output": "seq_len hidden_size: bfloat16"}, kinds.solve_moe_fp8_renorm),
    *(Solution(f"fuelvk_moe_fp8_block_scale_ds_routing{suffix}", kinds.DS_ROUTING_NAME,
               {"seq_len": "var", **dict.fromkeys(consts, "const")},
               {"routing_logits": "seq_len num_experts: float32", "routing_bias": "num_experts: bfloat16",
                **_MOE_FP8_TENSORS,
                "local_expert_offset": "scalar: int32", "routed_scaling_factor": "scalar: float32"},
               {"output": "seq_len hidden_size: bfloat16"}, kinds.solve_moe_fp8_ds_routing)
      # DeepSeek-V3's Definition has top_k in its name only; Kimi K2's has a top_k axis too
      for suffix, consts in (("", _DS_CONSTS), ("_topk_axis", _DS_CONSTS + ("top_k",)))),
    *(Solution(f"fuelvk_moe_{fmt}_{routing}", rf"{prefix}_topk{k}_e\d+_h\d+_i\d+", _TRTLLM_MOE_AXES,
               {"routing_logits": "seq_len num_experts: bfloat16", **tensors, **bias},
               {"output": "seq_len hidden_size: bfloat16"}, build)
      for fmt, prefix, tensors in (("float", "trtllm_fp4_block_scale_moe", _FLOAT_MOE_TENSORS),
                                   ("fp8_per_tensor", "trtllm_fp8_per_tensor_scale_moe", _FP8_TENSOR_MOE_TENSORS))
      for routing, k, bias, build in (
          ("renorm", r"\d+", {}, kinds.solve_moe_trtllm_renorm),
          ("llama4", "1", {"routing_bias": "num_experts: bfloat16"}, kinds.solve_moe_trtllm_llama4))),
    Solution("fuelvk_moe_float_routed", r"trtllm_fp4_block_scale_routed_moe_topk\d+_e\d+_h\d+_i\d+",
             _TRTLLM_MOE_AXES, {"topk_ids": "seq_len top_k: int32", **_FLOAT_MOE_TENSORS},
             {"output": "seq_len hidden_size: bfloat16"}, kinds.solve_moe_trtllm_routed),
    Solution("fuelvk_rope_cos_sin_cache_neox", r"rope_with_cos_sin_cache_neox_style_d\d+_rd\d+",
             {"num_tokens": "var", "num_qo_heads": "var", "num_kv_heads": "var", "head_size": "const",
              "rotary_dim": "const", "max_seq_len": "var"},
             {"q": "num_tokens num_qo_heads head_size: float",
              "k": "num_tokens num_kv_heads head_size: =q",
              "cos_sin_cache": "max_seq_len rotary_dim: float32", "positions": "num_tokens: int64"},
             {"q_out": "num_tokens num_qo_heads head_size: =q",
              "k_out": "num_tokens num_kv_heads head_size: =q"},
             _solve_rope_cos_sin_cache),
)


def match_solution(defn, solutions=SOLUTIONS):
    """(the Solution serving defn, None) or (None, why none does): name pattern AND signature."""
    found = [s for s in solutions if s.refuses(defn) is None]
    if len(found) == 1:
        return found[0], None
    if found:
        raise RuntimeError(f"{defn['name']}: several solutions match ({', '.join(s.name for s in found)})")
    named = [f"{s.name} refused: {s.refuses(defn)}" for s in solutions if s.pattern.fullmatch(defn["name"])]
    if named:
        return None, f"no fuelvk solution for {defn['name']}: " + "; ".join(named)
    return None, f"no fuelvk solution for {defn['name']} (op_type {defn['op_type']})"


def fuelvk_solution(defn, inputs):
    """The fuelvk call for a Definition, prepared on `inputs`: a callable returning host outputs.
    Raises NoSolution when no solution's name and signature match (nothing is run)."""
    if _tag(defn, "fuelvk_api"):
        return _solve_exported(defn, inputs)
    sol, why = match_solution(defn)
    if sol is None:
        raise NoSolution(why)
    return sol.build(defn, inputs)


# -- comparison, timing ------------------------------------------------------------------------------------

def compare(got, want, atol=ATOL, rtol=RTOL, required_matched_ratio=1.0):
    """(max abs error, max rel error, ok) under FlashInfer-Bench's rule: ok when at least
    required_matched_ratio of the elements are within atol or rtol; equal non-finites count as exact."""
    x, y = got.to(torch.float64), want.to(torch.float64)
    if x.numel() == 0:
        return 0.0, 0.0, True
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))
    abs_err = torch.where(same, torch.zeros_like(x), (x - y).abs())
    abs_err = torch.where(torch.isnan(abs_err), torch.full_like(x, math.inf), abs_err)
    rel_err = abs_err / (y.abs().nan_to_num(0.0) + 1e-8)
    bad = (abs_err > atol) & (rel_err > rtol)
    stray = bool((~same & ~torch.isfinite(x)).any())   # a non-finite the reference lacks: never matched
    matched = 1.0 - float(bad.sum()) / x.numel()
    return float(abs_err.max()), float(rel_err.max()), not stray and matched >= required_matched_ratio


def timed(fn, repeats, budget_s=1.0):
    """(last result, median ms): one warm-up, then up to `repeats` runs within about budget_s."""
    fn()
    times, out, start = [], None, time.perf_counter()
    while len(times) < max(repeats, 1):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() - start > budget_s:
            break
    return out, statistics.median(times)


_ENV = None


def environment():
    global _ENV
    if _ENV is None:
        import fuelvk
        info = fuelvk.device_info()
        libs = {"fuelvk": getattr(fuelvk, "__version__", "dev"), "torch": torch.__version__,
                "numpy": np.__version__, "vulkan_driver": str(info["driver"]),
                "vulkan_api": str(info["api_version"])}
        _ENV = {"hardware": f"{info['name']} ({info['type']})", "libs": libs}
    return _ENV


def evaluate(defn, row, root=".", solution=fuelvk_solution, repeats=5, atol=ATOL, rtol=RTOL):
    """One Trace dict (FlashInfer-Bench schema) for one workload row; root: the dataset root that
    blob paths are relative to.  With fuelvk's solutions, a Definition none matches gets NO_SOLUTION
    before anything (inputs, reference, fuelvk) runs."""
    wl = row["workload"]
    ev = {"status": None, "environment": environment(),
          "timestamp": datetime.datetime.now(datetime.UTC).isoformat(), "log": ""}
    trace = {"definition": defn["name"], "workload": wl, "solution": "fuelvk", "evaluation": ev}
    if solution is fuelvk_solution and not _tag(defn, "fuelvk_api"):
        sol, why = match_solution(defn)
        if sol is None:
            ev.update(status=NO_SOLUTION, log=why)
            return trace
    try:
        inputs = gen_inputs(defn, wl, root)
    except Unavailable as e:
        ev.update(status=INPUT_UNAVAILABLE, log=str(e))
        return trace
    except Exception as e:  # noqa: BLE001 -- a malformed blob is reported, and says so
        ev.update(status="RUNTIME_ERROR", log=f"inputs: {type(e).__name__}: {e}")
        return trace
    try:
        run = reference_fn(defn)
        want, ref_ms = timed(lambda: normalize(defn, run(**inputs)), repeats)
    except Exception as e:  # noqa: BLE001 -- a broken reference is reported, and says so
        ev.update(status="RUNTIME_ERROR", log=f"reference failed: {type(e).__name__}: {e}")
        return trace
    try:
        call = solution(defn, inputs)
        got, ms = timed(call, repeats)
        got = normalize(defn, got)
    except NoSolution as e:
        ev.update(status=NO_SOLUTION, log=str(e))
        return trace
    except Exception as e:  # noqa: BLE001 -- the solution failing is a result, not a crash of the evaluator
        ev.update(status="RUNTIME_ERROR", log=f"{type(e).__name__}: {e}")
        return trace
    got = {n: g if isinstance(g, torch.Tensor) else to_torch(g) for n, g in got.items()}
    for name, spec in defn["outputs"].items():
        g, w = got[name], want[name] if isinstance(want[name], torch.Tensor) else torch.as_tensor(want[name])
        if list(g.shape) != list(w.shape):
            ev.update(status="INCORRECT_SHAPE",
                      log=f"{name}: shape {list(g.shape)}, reference {list(w.shape)}")
            return trace
        if g.dtype != TORCH_DTYPES[spec["dtype"]]:
            ev.update(status="INCORRECT_DTYPE", log=f"{name}: dtype {g.dtype}, defined {spec['dtype']}")
            return trace
    if is_dsa_indexer(defn):
        ev["correctness"], why = check_dsa_indexer(inputs, got["topk_indices"], want["topk_indices"], atol, rtol)
        if why:
            ev.update(status="INCORRECT_NUMERICAL", log=why)
    elif defn["op_type"] == "sampling":
        try:
            ev["correctness"], why = check_sampling(defn, inputs, solution, got["samples"])
        except Exception as e:  # noqa: BLE001 -- as above: the solution failing is a result
            ev.update(status="RUNTIME_ERROR", log=f"{type(e).__name__}: {e}")
            return trace
        if why:
            ev.update(status="INCORRECT_NUMERICAL", log=why)
    else:
        max_abs = max_rel = 0.0
        ratio = TOLERANCES.get(defn["op_type"], {}).get("required_matched_ratio", 1.0)
        for name in defn["outputs"]:
            a, r, ok = compare(got[name], want[name], atol, rtol, ratio)
            max_abs, max_rel = max(max_abs, a), max(max_rel, r)
            if not ok:
                ev["status"] = "INCORRECT_NUMERICAL"
                ev["log"] += (f"{name}: exceeds atol={atol} and rtol={rtol} on more than {1 - ratio:.0%} "
                              f"of the elements (max abs {a:.3g}, max rel {r:.3g})\n")
        ev["correctness"] = {"max_relative_error": max_rel, "max_absolute_error": max_abs}
    if ev["status"] is None:
        ev["status"] = "PASSED"
        ev["performance"] = {"latency_ms": ms, "reference_latency_ms": ref_ms,
                             "speedup_factor": ref_ms / ms if ms > 0 else 0.0}
    return trace


# -- DSA top-k indexer: FlashInfer-Bench's sorted-score check (bench/evaluators/dsa_topk_indexer.py) --------
# The indices are not compared as such: each must be a reachable token of its request (or -1), none twice,
# and the scores at the solution's indices, sorted, must match the scores at the reference's within atol or
# rtol -- so two tokens whose scores tie within rounding may come in either order, or either be chosen.

def is_dsa_indexer(defn):
    return defn["name"].startswith("dsa_topk_indexer")


def pack_fp8_k_cache(k):
    """bfloat16 keys [pages, page_size, 1, D] in deep_gemm's fp8 page layout [pages, page_size, 1, D + 4]
    int8 (per page: page_size * D fp8 bytes, then page_size float32 scales amax / 448), as
    FlashInfer-Bench's _pack_fp8_k_cache generates a random k_index_cache_fp8."""
    pages, ps, _, d = k.shape
    scale = k.abs().float().amax(dim=3, keepdim=True).clamp(1e-4) / 448.0
    fp8 = (k * (1.0 / scale)).to(torch.float8_e4m3fn).view(torch.uint8).reshape(pages, ps * d)
    packed = torch.cat([fp8, scale.reshape(pages, ps).contiguous().view(torch.uint8)], dim=1)
    return packed.view(torch.int8).reshape(pages, ps, 1, d + 4)


def _dsa_scores(inputs, indices):
    """[B, N] float32 scores sum_h w_h relu(q_h . k) at global token ids (-1: -inf), as the evaluator."""
    cache = inputs["k_index_cache_fp8"].view(torch.uint8)
    pages, ps, _, dw = cache.shape
    d = dw - 4
    flat = cache.reshape(pages, ps * dw)
    k_all = (flat[:, :ps * d].contiguous().view(torch.float8_e4m3fn).float().reshape(pages, ps, d)
             * flat[:, ps * d:].contiguous().view(torch.float32).reshape(pages, ps, 1))
    safe = indices.clamp(min=0).long()
    k = k_all[safe // ps, safe % ps]                                       # [B, N, D]
    per_head = torch.relu(torch.bmm(inputs["q_index_fp8"].float(), k.transpose(1, 2)))
    scores = (per_head * inputs["weights"].float().unsqueeze(2)).sum(dim=1)
    scores[indices < 0] = float("-inf")
    return scores


def check_dsa_indexer(inputs, got, want, atol=ATOL, rtol=RTOL):
    """(correctness, None if passed else why) under FlashInfer-Bench's DSA top-k indexer rule."""
    inf = {"max_relative_error": math.inf, "max_absolute_error": math.inf}
    got, want = got.to(torch.int64), want.to(torch.int64)
    ps = inputs["k_index_cache_fp8"].shape[1]
    table, lens = inputs["block_table"].long(), inputs["seq_lens"].long()
    valid, safe = got >= 0, got.clamp(min=0)
    match = (safe // ps).unsqueeze(2) == table.unsqueeze(1)               # [B, K, pages of the request]
    pos = match.long().argmax(dim=2) * ps + safe % ps
    bad = (valid & ~(match.any(dim=2) & (pos < lens.unsqueeze(1)))).any(dim=1)
    if bad.any():
        return inf, f"topk_indices: out-of-range indices in batch {bad.nonzero()[:, 0].tolist()}"
    srt = got.sort(dim=1).values
    dup = ((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any(dim=1)
    if dup.any():
        return inf, f"topk_indices: duplicate indices in batch {dup.nonzero()[:, 0].tolist()}"
    k = want.shape[1]
    scores = _dsa_scores(inputs, torch.cat([want, got], dim=1))
    ref, sol = (x.sort(dim=1, descending=True).values for x in scores.split(k, dim=1))
    a, r, ok = compare(sol, ref, atol, rtol)
    corr = {"max_relative_error": r, "max_absolute_error": a}
    return corr, None if ok else (f"topk_indices: the scores at the indices, sorted, differ from the reference's "
                                  f"beyond atol={atol} and rtol={rtol} (max abs {a:.3g}, max rel {r:.3g})")


# -- sampling: FlashInfer-Bench's statistical check (bench/evaluators/sampling.py) ---------------------------

def sampling_mask(defn, probs, top_k=None, top_p=None, eps=5e-2):
    """[batch, vocab] bool: the tokens a sample may take, as FlashInfer-Bench's
    _compute_valid_sampling_mask: the method from the name (top_k_top_p / top_k / top_p / none);
    top-k keeps probs >= the k-th largest (ties in) when 0 < k < vocab; top-p keeps the sorted
    prefix whose cumulative sum is <= p + eps (at least one token) when 0 < p < 1, on the ORIGINAL
    probs (not renormalized after top-k).  Note: a row with p <= 0 (greedy in the references) gets
    no top-p restriction, so the TVD check expects the top-k distribution there."""
    name = defn["name"].lower()
    method = next((m for m in ("top_k_top_p", "top_k", "top_p") if m in name), "none")
    probs = probs if probs.dim() > 1 else probs[None]
    b, v = probs.shape
    mask = torch.ones(b, v, dtype=torch.bool)
    for i in range(b):
        if method in ("top_k", "top_k_top_p"):
            k = int(top_k[i] if top_k.dim() else top_k)
            if 0 < k < v:
                mask[i] = probs[i] >= torch.sort(probs[i], descending=True).values[k - 1]
        if method in ("top_p", "top_k_top_p"):
            p = float(top_p[i] if top_p.dim() else top_p)
            if 0 < p < 1:
                vals, idx = torch.sort(probs[i], descending=True)
                nucleus = torch.cumsum(vals, 0) <= p + eps
                if not nucleus.any():
                    nucleus[0] = True
                keep = torch.zeros(v, dtype=torch.bool)
                keep[idx[nucleus]] = True
                mask[i] &= keep
    return mask


DRAW_CHUNK = 1 << 22   # samples one draws(n) call of check_sampling returns at most (32 MiB of int64)


def check_sampling(defn, inputs, solution, first):
    """(correctness, None if passed else why): FlashInfer-Bench's sampling check.  Every sample of
    `validation_trials` calls (the first is `first`) must lie in sampling_mask; then the batch,
    repeated to `batch_rows` rows, is sampled until `draws` samples per row, and each row's total
    variation distance to the masked, renormalized probs must be <= `tvd_threshold`.

    A solution whose callable has `draws(n)` (n independent draws a row, [B, n]: fuelvk's sampler,
    one cut search a row) gives the same samples in fewer calls: the validation calls' draws as one
    call, the repeated batch's trials * repeat draws a row in calls of at most DRAW_CHUNK samples.
    The statistics are unchanged (the same number of independent draws a row from the same rows);
    repeating 128k-token rows 10,000 times a call instead would cost hours on a CPU device."""
    cfg = TOLERANCES["sampling"]
    probs = inputs["probs"].to(torch.float32)
    b, v = probs.shape
    mask = sampling_mask(defn, probs, inputs.get("top_k"), inputs.get("top_p"))
    expected = probs * mask
    expected = expected / expected.sum(-1, keepdim=True)
    call = solution(defn, inputs)
    many = getattr(call, "draws", None)
    validation = [first]
    if many is not None and cfg["validation_trials"] > 1:   # [B, n] -> n calls' [B] samples, call-major
        validation.append(to_torch(many(cfg["validation_trials"] - 1)).T)
    else:
        validation += [None] * (cfg["validation_trials"] - 1)
    for s in validation:
        s = to_torch(normalize(defn, call())["samples"]) if s is None else s
        s = s.reshape(-1).to(torch.int64)
        if ((s < 0) | (s >= v)).any():
            bad = s[(s < 0) | (s >= v)].tolist()[:8]
            return {"max_relative_error": math.inf, "max_absolute_error": math.inf}, \
                f"samples {bad} out of the vocabulary [0, {v})"
        rows = torch.arange(s.numel()) % b
        outside = ~mask[rows, s]
        if outside.any():
            j = int(outside.nonzero()[0])
            return {"max_relative_error": math.inf, "max_absolute_error": math.inf}, \
                f"sample {int(s[j])} is outside the valid mask of row {int(rows[j])}"
    repeat = max(cfg["batch_rows"] // b, 1)
    trials = -(-cfg["draws"] // repeat)
    counts = torch.zeros(b * v, dtype=torch.float64)
    if many is not None:
        left = trials * repeat
        while left:
            n = min(left, max(1, DRAW_CHUNK // b))
            s = to_torch(many(n)).to(torch.int64)                   # [B, n]
            counts.index_add_(0, (torch.arange(b)[:, None] * v + s).reshape(-1),
                              torch.ones(s.numel(), dtype=torch.float64))
            left -= n
    else:
        big = {n: x.repeat(repeat, *([1] * (x.dim() - 1))) if isinstance(x, torch.Tensor) and x.dim() else x
               for n, x in inputs.items()}
        call = solution(defn, big)
        for _ in range(trials):
            s = to_torch(normalize(defn, call())["samples"]).reshape(-1).to(torch.int64)
            counts.index_add_(0, (torch.arange(s.numel()) % b) * v + s,
                              torch.ones(s.numel(), dtype=torch.float64))
    freqs = (counts / (trials * repeat)).reshape(b, v)
    tvd = 0.5 * (freqs - expected).abs().sum(-1)
    err = (freqs - expected).abs()
    corr = {"max_relative_error": float((err / (expected.abs() + 1e-8)).max()),
            "max_absolute_error": float(err.max()), "extra": {"tvd": float(tvd.max()), "tvds_per_batch": tvd.tolist()}}
    if tvd.max() > cfg["tvd_threshold"]:
        return corr, (f"samples: total variation distance {float(tvd.max()):.3f} > {cfg['tvd_threshold']} "
                      f"(row {int(tvd.argmax())}, {trials * repeat} draws per row)")
    return corr, None


def workload_elements(defn, row):
    """Elements of all input and output tensors: the size filter's measure."""
    wl = row["workload"]
    return sum(math.prod(s) for role in ("inputs", "outputs") for s in shapes(defn, wl, role).values() if s)


def _bar(i, n, width=20):
    done = width * i // max(n, 1)
    return f"[{'#' * done}{'-' * (width - done)}] {i}/{n}"


def summary_table(traces, skipped=None, served=None):
    """Text table: one line per Definition, a column per status (STATUSES) plus SKIPPED (rows the
    filters left out, `skipped` {name: count}), and a total line.  served {name: solution name or
    None} adds every Definition loaded (those without rows too) and a last column naming its solution."""
    skipped, served = skipped or {}, served or {}
    counts = {}
    for t in traces:
        row = counts.setdefault(t["definition"], dict.fromkeys(STATUSES, 0))
        row[t["evaluation"]["status"]] = row.get(t["evaluation"]["status"], 0) + 1
    for name, n in skipped.items():
        counts.setdefault(name, dict.fromkeys(STATUSES, 0))["SKIPPED"] = n
    for name in sorted(set(served) - set(counts)):
        counts[name] = {}
    cols = list(STATUSES) + ["SKIPPED"]
    cols += sorted({k for c in counts.values() for k in c} - set(cols))   # statuses not foreseen
    total = {c: sum(r.get(c, 0) for r in counts.values()) for c in cols}
    w = max([len("definition"), len("total")] + [len(n) for n in counts])
    lines = ["  ".join([f"{'definition':<{w}}"] + cols + (["solution"] if served else []))]
    for name, r in list(counts.items()) + [("total", total)]:
        cells = [f"{name:<{w}}"] + [f"{r.get(c, 0) or '.':>{len(c)}}" for c in cols]
        if served and name != "total":
            cells.append(served.get(name) or "none")
        lines.append("  ".join(cells))
    return "\n".join(lines)


def run(definitions, workloads, out=None, max_workloads=None, max_elements=None, only=None,
        solution=fuelvk_solution, log=None, repeats=5, dataset_root=None, table=None):
    """Evaluate every workload row (of a known Definition) that passes the filters; returns the traces.

    max_elements skips rows whose tensors hold more elements in total (lavapipe is a CPU);
    max_workloads keeps the first N rows per Definition, after that filter; only: Definition names.
    dataset_root: what blob paths are relative to (default: find_dataset_root(definitions, workloads)).
    Progress (a bar and one line per row) goes to `log` (stderr); the summary table to `table`."""
    log = sys.stderr if log is None else log
    defs = load_definitions(definitions)
    rows = load_workloads(workloads)
    root = Path(dataset_root) if dataset_root is not None else find_dataset_root(definitions, workloads)
    traces, taken, skipped = [], {}, {}
    with open(out, "w") if out else contextlib.nullcontext() as sink:
        for i, (row, _) in enumerate(rows):
            name = row["definition"]
            tag = f"{_bar(i + 1, len(rows))} {name} {json.dumps(row['workload']['axes'])}"
            if name not in defs or (only and name not in only):
                why = "no such definition loaded" if name not in defs else "--only"
                print(f"{tag}: skipped ({why})", file=log)
                continue
            size = workload_elements(defs[name], row)
            if max_elements is not None and size > max_elements:
                why = f"{size} elements > --max-elements {max_elements}"
            elif max_workloads is not None and taken.get(name, 0) >= max_workloads:
                why = f"--max-workloads {max_workloads}"
            else:
                why = None
            if why:
                skipped[name] = skipped.get(name, 0) + 1
                print(f"{tag}: skipped ({why})", file=log)
                continue
            taken[name] = taken.get(name, 0) + 1
            t = evaluate(defs[name], row, root, solution=solution, repeats=repeats)
            ev = t["evaluation"]
            perf = ev.get("performance")
            extra = (f" {perf['latency_ms']:.3f} ms vs torch {perf['reference_latency_ms']:.3f} ms "
                     f"(x{perf['speedup_factor']:.2f})" if perf else f" {ev['log'].strip()[:200]}")
            corr = ev.get("correctness")
            errs = (f" abs {corr['max_absolute_error']:.2e} rel {corr['max_relative_error']:.2e}"
                    if corr else "")
            print(f"{tag}: {ev['status']}{errs}{extra}", file=log, flush=True)
            traces.append(t)
            if sink:
                sink.write(json.dumps(t) + "\n")
                sink.flush()
    if table is not None:
        served = None
        if solution is fuelvk_solution:
            served = {n: (_tag(d, "fuelvk_api") or [None])[0] or getattr(match_solution(d)[0], "name", None)
                      for n, d in defs.items() if not only or n in only}
        print(summary_table(traces, skipped, served), file=table, flush=True)
    return traces
