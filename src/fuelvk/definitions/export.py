"""fuelvk op specs -> FlashInfer-Bench Definitions (and workload rows for them).

One Definition per public op, derived from its spec (specs/*.yaml) at the first workload case whose
dtypes FlashInfer-Bench can name:
- axes: a Dim index is a const axis with the row's value (a few batch/sequence Dims are var: the op
  record's export var_dims);
  a Shape index of rank r gives var axes S0..S{r-1}; an axis the spec computes (a let such as H_out,
  broadcast_shapes(A, B), reduced(S, axis)...) is a var axis named after the let or `{tensor}_d{i}`,
  its value given by each workload.
- parameters (eps, axis, ...) are fixed at the row's values: module constants in the reference and
  `fuelvk_param:NAME=JSON` tags (what `definitions run` passes to fuelvk); `fuelvk_api:NAME` tags name
  the function; `fuelvk_mutates:NAME` an input the function writes in place (fresh for every call).
  Optional inputs are those the row passes (`some`); an absent one is `None`.
- reference: references.REFERENCES[op] wrapped into a module with `run` (see references.py).
Ops in references.SKIP, or with no dtype case FlashInfer-Bench can express, are skipped with a reason.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..specs import load_specs
from ..specs import rows as _rows
from ..specs.evaluate import evaluate
from ..specs.expr import Node, parse
from ..specs.instance import instantiate
from ..specs.model import SpecError
from ..ops._opdef import opdefs
from .references import LETS, REFERENCES, SKIP

_RECORDS = opdefs().values()

FI_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
             "int64", "int32", "int16", "int8", "bool")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1")
# Per-op settings from the op records (OpDef.export, fuelvk/ops/<family>.py):
# var_dims: Dims that vary per call in a model (batch / tokens), as FlashInfer marks M or batch_size var.
VAR_DIMS = {r.name: r.export["var_dims"] for r in _RECORDS if "var_dims" in r.export}
# --small caps every Dim and Shape index at the first of SMALL_CAPS that instantiates, then lowers
# each index alone as far as it goes (a conv with groups=96 keeps C=96 but gets 8x8 images);
# SMALL_FLOOR raises the caps where the function enforces a limit the spec does not state; SMALL_KEEP
# keeps a ratio the caps would erase (GQA: query heads per kv head).
SMALL_CAPS = (8, 16, 32, 64, 128)
SMALL_FLOOR = {r.name: r.export["small_floor"] for r in _RECORDS if "small_floor" in r.export}
SMALL_KEEP = {r.name: r.export["small_keep"] for r in _RECORDS if "small_keep" in r.export}


def _api(spec):
    return spec.fuelvk_api


def _capped(spec, bindings, names, cap):
    out = dict(bindings)
    for name in names:
        v = bindings[name]
        out[name] = [min(n, cap) for n in v] if spec.forall[name].name == "Shape" else min(v, cap)
    keep = SMALL_KEEP.get(_api(spec))
    if keep and keep[0] in names and bindings[keep[0]] % bindings[keep[1]] == 0:
        out[keep[1]] = max(1, out[keep[0]] // (bindings[keep[0]] // bindings[keep[1]]))
    return out


def _valid(spec, bindings, some):
    try:
        instantiate(spec, bindings, some)
        return True
    except SpecError:
        return False


def _instance(spec, case, small):
    bindings = dict(case.bindings)
    if small:
        caps = [c for c in SMALL_CAPS if c >= SMALL_FLOOR.get(_api(spec), 0)]
        names = [k for k in bindings if k in spec.forall and spec.forall[k].name in ("Dim", "Shape")]
        uniform = next((c for c in caps if _valid(spec, _capped(spec, bindings, names, c), case.some)), None)
        if uniform is not None:
            bindings = _capped(spec, bindings, names, uniform)
            for name in names:
                for cap in (c for c in caps if c < uniform):
                    trial = _capped(spec, bindings, [name], cap)
                    if _valid(spec, trial, case.some):
                        bindings = trial
                        break
    return instantiate(spec, bindings, case.some)


def _axes_of(spec, inst, tname):
    """[(axis name, value, is_const)] of tensor tname, from its shape term's structure."""
    t, shape = spec.tensors[tname], inst.shapes[tname]
    node = parse(t.shape)
    if node.kind != "list":
        return [(f"{tname}_d{i}", n, False) for i, n in enumerate(shape)]
    out = []
    for item in node.a:
        n = len(evaluate(Node("list", [item]), inst.env))
        if item.kind == "name":
            kind = spec.forall.get(item.a)
            const = kind is not None and kind.name == "Dim" and item.a not in VAR_DIMS.get(_api(spec), ())
            names = [item.a]
        elif item.kind == "star" and item.a.kind == "name":
            const, names = False, [f"{item.a.a}{i}" for i in range(n)]
        else:
            const, names = False, [f"{tname}_d{len(out) + i}" for i in range(n)]
        out += [(nm, shape[len(out) + i], const) for i, nm in enumerate(names)]
    return out


def _literal(v):
    """Python source for a parameter value (non-finite floats included)."""
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_literal(x) for x in v)
        if isinstance(v, list):
            return f"[{inner}]"
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)


def _reference(spec, inst, inputs, outputs, dtypes):
    helpers, body = REFERENCES[_api(spec)]
    consts = [f"{p} = {_literal(inst.env.values[p])}" for p in spec.params]
    consts += [f"{n} = {_literal(inst.env.lookup(n))}" for n in LETS.get(_api(spec), ())]
    consts += [f"{n} = None   # optional input, absent here" for n, t in spec.inputs.items()
               if n not in inputs]
    pre = [f"    {n} = {n}.to(torch.float32)" for n in inputs if dtypes[n] in FLOAT_DTYPES]
    rets = [f"{o}.to(torch.{dtypes[o]})" for o in outputs]
    lines = ["import math", "", "import torch", "", "# Parameters fixed by this Definition."] + consts
    lines += [helpers.rstrip("\n")] if helpers else []
    lines += ["", "", "@torch.no_grad()", f"def run({', '.join(inputs)}):"] + pre
    lines += ["    " + ln if ln else "" for ln in body.split("\n")]
    lines += [f"    return {', '.join(rets)}"]
    return "\n".join(lines) + "\n"


def _dtype_ok(inst):
    return all(d in FI_DTYPES for d in inst.dtypes.values())


def fi_cases(spec):
    """The workload cases whose tensor dtypes are all FlashInfer-Bench dtypes (float64/uint have none)."""
    out = []
    for case in _rows.expand(spec):
        try:
            if _dtype_ok(instantiate(spec, case.bindings, case.some)):
                out.append(case)
        except SpecError:
            continue
    return out


def choose_case(spec):
    """The case a Definition is exported at: the first one FlashInfer-Bench can name, or None."""
    return next(iter(fi_cases(spec)), None)


def row_cases(spec):
    """One case per workload row, its dtype case rotating with the row index (all parameters and
    dtypes of the spec covered in about one case per row: what the tests evaluate, small)."""
    by_row = {}
    for case in fi_cases(spec):
        by_row.setdefault(case.row_index, []).append(case)
    return [cs[i % len(cs)] for i, cs in enumerate(by_row.values())]


def definition(spec, case, small=False):
    """(Definition dict, var axis values of this case) for one spec case."""
    inst = _instance(spec, case, small)
    inputs = [n for n in spec.inputs if n in inst.shapes]
    outputs = [n for n in spec.outputs if n in inst.shapes]
    axes, shapes, var_values = {}, {}, {}
    for n in inputs + outputs:
        ax = _axes_of(spec, inst, n)
        shapes[n] = [a for a, _, _ in ax]
        for a, v, const in ax:
            if a in axes and axes[a].get("value", var_values.get(a)) != v:
                raise SpecError(f"{spec.name}: axis {a} takes two values")
            axes[a] = {"type": "const", "value": v} if const else {"type": "var"}
            if not const:
                var_values[a] = v
    consts = "_".join(f"{a.lower()}{d['value']}" for a, d in axes.items() if d["type"] == "const")
    dtype = inst.dtypes[inputs[0]] if inputs else inst.dtypes[outputs[0]]
    name = "_".join(p for p in (_api(spec).replace(".", "_"), consts, dtype) if p)
    params = {p: inst.env.values[p] for p in spec.params}
    desc = f"fuelvk.{_api(spec)} ({spec.name}, {spec.family})"
    if params:
        desc += " with " + ", ".join(f"{k}={v!r}" for k, v in params.items())
    tags = ["status:draft", f"fuelvk_api:{_api(spec)}", f"fuelvk_spec:{spec.name}"]
    tags += [f"fuelvk_param:{k}={json.dumps(v)}" for k, v in params.items()]
    tags += [f"fuelvk_mutates:{n}" for n in inputs if inst.mutated(n)]
    if spec.ref_api:
        tags.append(f"ref_api:{spec.ref_api}")
    defn = {
        "name": name, "op_type": spec.family, "tags": tags, "description": desc + ".", "axes": axes,
        "inputs": {n: {"shape": shapes[n], "dtype": inst.dtypes[n]} for n in inputs},
        "outputs": {n: {"shape": shapes[n], "dtype": inst.dtypes[n]} for n in outputs},
        "reference": _reference(spec, inst, inputs, outputs, inst.dtypes),
    }
    return defn, var_values


def workload_row(defn, var_values, label):
    uuid = f"fuelvk-{defn['name']}-{label}"
    return {"definition": defn["name"], "solution": None,
            "workload": {"uuid": uuid, "axes": var_values,
                         "inputs": {n: {"type": "random"} for n in defn["inputs"]}},
            "evaluation": None}


def export_one(spec, small=False, case=None):
    """(Definition, [workload rows]) or (None, reason); at `case` (default choose_case)."""
    api = _api(spec)
    if api in SKIP:
        return None, SKIP[api]
    if api not in REFERENCES:
        return None, "no torch reference written for it yet (definitions/references.py)"
    case = choose_case(spec) if case is None else case
    if case is None:
        return None, "no workload case whose dtypes FlashInfer-Bench can name (float64 / unsigned only)"
    defn, values = definition(spec, case, small)
    wl = [workload_row(defn, values, case.case_id)]
    if not small:   # the spec's other cases that fit this Definition (same dtypes, params, consts)
        for other in _rows.expand(spec):
            if other.case_id == case.case_id or other.dtype_case != case.dtype_case:
                continue
            try:
                d2, v2 = definition(spec, other)
            except SpecError:
                continue
            if d2["reference"] == defn["reference"] and d2["axes"] == defn["axes"]:
                wl.append(workload_row(defn, v2, other.case_id))
    return defn, wl


def export(out_dir, small=False, log=print):
    """Write DIR/definitions/<name>.json and DIR/workloads/<name>.jsonl; returns (names, {op: reason})."""
    out = Path(out_dir)
    (out / "definitions").mkdir(parents=True, exist_ok=True)
    (out / "workloads").mkdir(parents=True, exist_ok=True)
    written, skipped = [], {}
    for spec in load_specs().values():
        defn, wl = export_one(spec, small)
        if defn is None:
            skipped[spec.fuelvk_api] = wl
            log(f"skipped {spec.fuelvk_api}: {wl}")
            continue
        (out / "definitions" / f"{defn['name']}.json").write_text(json.dumps(defn, indent=2) + "\n")
        (out / "workloads" / f"{defn['name']}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wl))
        written.append(defn["name"])
    log(f"wrote {len(written)} definitions to {out / 'definitions'}, skipped {len(skipped)}")
    return written, skipped
