"""Evaluate fuelvk as a FlashInfer-Bench Solution: Definitions + workload JSONL -> Trace JSONL.

Per workload row: inputs as the row says (random: FlashInfer-Bench's generator, seeded by the
workload uuid; scalar: the value; safetensors: loaded when the file and the safetensors package
are there, else derived when the Definition's constraints fix it, else status INPUT_UNAVAILABLE),
the Definition's `reference` run in torch (CPU), the same inputs through fuelvk, and
FlashInfer-Bench's correctness rule: an element fails only if BOTH its absolute error and its
relative error |x - y| / (|y| + 1e-8) exceed the tolerance (1e-2 each by default).  fuelvk's
addition: NaN/inf must match position by position (FlashInfer's rule lets NaN pass silently).

Solutions (definition -> fuelvk call) are picked by the `fuelvk_api:` tag of fuelvk's own exports,
else by op_type: rmsnorm, gemm, gqa_ragged (SOLVERS).  A solver returns a zero-argument callable
that runs the op on device-resident inputs and returns the outputs on the host (the timed unit).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ATOL = RTOL = 1e-2
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
                "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
                "bool": torch.bool}
INPUT_UNAVAILABLE = "INPUT_UNAVAILABLE"   # fuelvk's status: a safetensors input we could not load


class Unavailable(Exception):
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


def _load_safetensors(defn, wl, name, spec, root):
    path = Path(spec["path"])
    path = path if path.is_absolute() else Path(root) / path
    why = None
    try:
        import safetensors.torch as st
        if path.exists():
            return st.load_file(str(path))[spec["tensor_key"]]
        why = f"{path} not found"
    except ImportError:
        why = "the safetensors package is not installed"
    t = _derive_indptr(defn, wl, name)
    if t is None:
        raise Unavailable(f"input {name}: safetensors {spec['path']} [{spec['tensor_key']}]: {why}, "
                          f"and the Definition's constraints do not determine it")
    return t


def gen_inputs(defn, wl, root="."):
    """{name: tensor or python scalar} for one workload (Unavailable when a blob is missing)."""
    gen = torch.Generator().manual_seed(int(hashlib.sha256(wl["uuid"].encode()).hexdigest()[:8], 16))
    shp, out = shapes(defn, wl), {}
    for name, t in defn["inputs"].items():
        spec = wl["inputs"].get(name, {"type": "random"})
        if spec["type"] == "scalar":
            out[name] = spec["value"]
        elif spec["type"] == "safetensors":
            out[name] = _load_safetensors(defn, wl, name, spec, root)
        else:
            out[name] = rand_tensor(shp[name], TORCH_DTYPES[t["dtype"]], gen)
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


# -- numpy <-> torch -----------------------------------------------------------------------------------

def to_numpy(t):
    """torch CPU tensor -> numpy (bfloat16 / float8 through ml_dtypes, bit for bit)."""
    import ml_dtypes
    special = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
               torch.float8_e4m3fn: (torch.int8, ml_dtypes.float8_e4m3fn),
               torch.float8_e5m2: (torch.int8, ml_dtypes.float8_e5m2)}
    t = t.contiguous()
    if t.dtype in special:
        iv, npd = special[t.dtype]
        return t.view(iv).numpy().view(npd)
    return t.numpy()


def to_torch(a):
    a = np.asarray(a)
    name = a.dtype.name
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        iv = np.int16 if name == "bfloat16" else np.int8
        return torch.from_numpy(a.view(iv).copy()).view(TORCH_DTYPES[name])
    return torch.from_numpy(np.array(a, copy=True))


# -- fuelvk solutions ------------------------------------------------------------------------------------

def _tag(defn, key):
    return [t.split(":", 1)[1] for t in defn.get("tags") or [] if t.startswith(key + ":")]


def _solve_exported(defn, inputs):
    """fuelvk's own exports: call fuelvk.<fuelvk_api>(**inputs, **params) (names as the spec's)."""
    import fuelvk
    fn = fuelvk
    for part in _tag(defn, "fuelvk_api")[0].split("."):
        fn = getattr(fn, part)
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
        raise RuntimeError("rmsnorm: no EPS = <value> in the reference; cannot tell fuelvk the epsilon")
    return float(m.group(1))


def _solve_rmsnorm(defn, inputs):
    import fuelvk
    x, w = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("hidden_states", "weight"))
    eps = float(inputs["eps"]) if "eps" in inputs else _eps_of(defn)
    return lambda: (fuelvk.rms_norm(x, eps=eps, weight=w).numpy(),)


def _solve_gemm(defn, inputs):
    """C = A @ B.T when B is stored [N, K] (FlashInfer's layout: B's first axis is C's last)."""
    import fuelvk
    a, b = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("A", "B"))
    (c,) = defn["outputs"].values()
    b_t = defn["inputs"]["B"]["shape"][0] == c["shape"][-1]
    odt = c["dtype"] if c["dtype"] != defn["inputs"]["A"]["dtype"] else None
    return lambda: (fuelvk.matmul(a, b.T if b_t else b, odt).numpy(),)


def _solve_gqa_ragged(defn, inputs):
    """Per sequence b: SDPA on q[qo_indptr[b]:qo_indptr[b+1]] and its kv slice, causal masks
    bottom-right aligned (fuelvk's and the reference's convention); lse converted to log2 when the
    Definition's lse is 2-based."""
    import fuelvk
    if "causal" not in defn["name"] and "causal" not in (defn.get("description") or "").lower():
        raise RuntimeError("gqa_ragged: only causal definitions are mapped")
    q, k, v = (fuelvk.asarray(to_numpy(inputs[n])) for n in ("q", "k", "v"))
    qo = inputs["qo_indptr"].tolist()
    kv = inputs["kv_indptr"].tolist()
    scale = float(inputs["sm_scale"])
    want_lse = "lse" in defn["outputs"]
    lse_text = (defn["outputs"].get("lse", {}).get("description") or "") + defn["reference"]
    log2 = "2-based" in lse_text or "base-2" in lse_text or "math.log(2" in lse_text
    total_q, hq, d = q.shape
    odt = to_numpy(torch.empty(0, dtype=TORCH_DTYPES[defn["outputs"]["output"]["dtype"]])).dtype

    def call():
        out = np.zeros((total_q, hq, d), odt)
        lse = np.full((total_q, hq), -np.inf, np.float32)
        for b in range(len(qo) - 1):
            q0, q1, k0, k1 = qo[b], qo[b + 1], kv[b], kv[b + 1]
            if q1 <= q0 or k1 <= k0:
                continue
            qb, kb, vb = (t[None].transpose(0, 2, 1, 3) for t in (q[q0:q1], k[k0:k1], v[k0:k1]))
            r = fuelvk.scaled_dot_product_attention(qb, kb, vb, is_causal=True, scale=scale,
                                                    return_lse=want_lse)
            o, l_ = r if want_lse else (r, None)
            out[q0:q1] = o.numpy()[0].transpose(1, 0, 2)
            if want_lse:
                lse[q0:q1] = l_.numpy()[0].T / (math.log(2.0) if log2 else 1.0)
        return (out, lse) if want_lse else (out,)
    return call


SOLVERS = {"rmsnorm": _solve_rmsnorm, "gemm": _solve_gemm, "gqa_ragged": _solve_gqa_ragged}


def fuelvk_solution(defn, inputs):
    """The fuelvk call for a Definition, prepared on `inputs`: a callable returning host outputs."""
    if _tag(defn, "fuelvk_api"):
        return _solve_exported(defn, inputs)
    if defn["op_type"] in SOLVERS:
        return SOLVERS[defn["op_type"]](defn, inputs)
    raise NotImplementedError(f"no fuelvk solution for op_type {defn['op_type']!r} ({defn['name']})")


# -- comparison, timing ------------------------------------------------------------------------------------

def compare(got, want, atol=ATOL, rtol=RTOL):
    """(max abs error, max rel error, ok) under FlashInfer-Bench's rule; equal non-finites count as exact."""
    x, y = got.to(torch.float64), want.to(torch.float64)
    if x.numel() == 0:
        return 0.0, 0.0, True
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))
    abs_err = torch.where(same, torch.zeros_like(x), (x - y).abs())
    abs_err = torch.where(torch.isnan(abs_err), torch.full_like(x, math.inf), abs_err)
    rel_err = abs_err / (y.abs().nan_to_num(0.0) + 1e-8)
    bad = (abs_err > atol) & (rel_err > rtol)
    return float(abs_err.max()), float(rel_err.max()), not bool(bad.any())


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
    """One Trace dict (FlashInfer-Bench schema) for one workload row."""
    wl = row["workload"]
    ev = {"status": None, "environment": environment(),
          "timestamp": datetime.datetime.now(datetime.UTC).isoformat(), "log": ""}
    trace = {"definition": defn["name"], "workload": wl, "solution": "fuelvk", "evaluation": ev}
    try:
        inputs = gen_inputs(defn, wl, root)
    except Unavailable as e:
        ev.update(status=INPUT_UNAVAILABLE, log=str(e))
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
    except Exception as e:  # noqa: BLE001 -- the solution failing is a result, not a crash of the evaluator
        ev.update(status="RUNTIME_ERROR", log=f"{type(e).__name__}: {e}")
        return trace
    max_abs = max_rel = 0.0
    for name, spec in defn["outputs"].items():
        g = got[name] if isinstance(got[name], torch.Tensor) else to_torch(got[name])
        w = want[name] if isinstance(want[name], torch.Tensor) else torch.as_tensor(want[name])
        if list(g.shape) != list(w.shape):
            ev.update(status="INCORRECT_SHAPE",
                      log=f"{name}: shape {list(g.shape)}, reference {list(w.shape)}")
            return trace
        if g.dtype != TORCH_DTYPES[spec["dtype"]]:
            ev.update(status="INCORRECT_DTYPE", log=f"{name}: dtype {g.dtype}, defined {spec['dtype']}")
            return trace
        a, r, ok = compare(g, w, atol, rtol)
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        if not ok:
            ev["status"] = "INCORRECT_NUMERICAL"
            ev["log"] += f"{name}: exceeds atol={atol} and rtol={rtol} (max abs {a:.3g}, max rel {r:.3g})\n"
    ev["correctness"] = {"max_relative_error": max_rel, "max_absolute_error": max_abs}
    if ev["status"] is None:
        ev["status"] = "PASSED"
        ev["performance"] = {"latency_ms": ms, "reference_latency_ms": ref_ms,
                             "speedup_factor": ref_ms / ms if ms > 0 else 0.0}
    return trace


def workload_elements(defn, row):
    """Elements of all input and output tensors: the size filter's measure."""
    wl = row["workload"]
    return sum(math.prod(s) for role in ("inputs", "outputs") for s in shapes(defn, wl, role).values() if s)


def run(definitions, workloads, out=None, max_workloads=None, max_elements=None, only=None,
        solution=fuelvk_solution, log=None, repeats=5):
    """Evaluate every workload row (of a known Definition) that passes the filters; returns the traces.

    max_elements skips rows whose tensors hold more elements in total (lavapipe is a CPU);
    max_workloads keeps the first N rows per Definition, after that filter; only: Definition names."""
    log = sys.stderr if log is None else log
    defs = load_definitions(definitions)
    rows = load_workloads(workloads)
    traces, taken = [], {}
    with open(out, "w") if out else contextlib.nullcontext() as sink:
        for i, (row, root) in enumerate(rows):
            name = row["definition"]
            tag = f"[{i + 1}/{len(rows)}] {name} {json.dumps(row['workload']['axes'])}"
            if name not in defs or (only and name not in only):
                why = "no such definition loaded" if name not in defs else "--only"
                print(f"{tag}: skipped ({why})", file=log)
                continue
            size = workload_elements(defs[name], row)
            if max_elements is not None and size > max_elements:
                print(f"{tag}: skipped ({size} elements > --max-elements {max_elements})", file=log)
                continue
            if max_workloads is not None and taken.get(name, 0) >= max_workloads:
                print(f"{tag}: skipped (--max-workloads {max_workloads})", file=log)
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
    return traces
