"""What the rest of fuelvk uses: find a spec, its roofline for one call, its workload cases."""
from __future__ import annotations

from pathlib import Path

from . import rows
from .instance import infer, instantiate
from .model import SpecError, load_file
from .validate import default_paths

_CACHE: dict = {}


def load_specs(paths=None):
    """{op name: Spec} for the given files (default: fuelvk's own, cached)."""
    key = None if paths is None else tuple(str(Path(p).resolve()) for p in paths)
    if key not in _CACHE:
        specs = {}
        for path in default_paths() if paths is None else paths:
            for spec in load_file(path):
                if spec.name in specs:
                    raise SpecError(f"op {spec.name} is specified twice ({specs[spec.name].file}, {path})")
                specs[spec.name] = spec
        _CACHE[key] = specs
    return _CACHE[key]


def get_spec(op_name, specs=None):
    """The spec named `op_name`: its entry name (RMSNormFwdOp) or its fuelvk_api (rms_norm)."""
    specs = load_specs() if specs is None else specs
    if op_name in specs:
        return specs[op_name]
    hits = [s for s in specs.values() if s.fuelvk_api and op_name in (s.fuelvk_api, s.fuelvk_api.split(".")[-1])]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise SpecError(f"{op_name!r} names several specs: {', '.join(s.name for s in hits)}")
    raise SpecError(f"no spec named {op_name!r}")


def eval_roofline(op_name, **bindings):
    """(flops, bytes) of one call given its params, indices and dtype indices; some=[optional tensors].

        eval_roofline("rms_norm", B=[2048], N=4096, T="bfloat16", some=["weight"])
    """
    some = bindings.pop("some", ())
    return instantiate(get_spec(op_name), bindings, some).roofline()


def roofline_of_call(op_name, inputs, **params):
    """(flops, bytes) of a call seen from its inputs {name: (shape, dtype)} and its parameter values."""
    spec = get_spec(op_name)
    env = infer(spec, inputs, params)
    indices = {k: v for k, v in env.values.items() if k in spec.forall}
    some = [n for n in inputs if spec.tensors[n].optional is True]
    return instantiate(spec, {**params, **indices}, some).roofline()


def workloads(op_name):
    """One dict per case of the op's workload rows: op, case_id, label, params, indices, some,
    inputs/outputs {name: (shape, dtype)} (a list of them for a list input), flops, bytes."""
    spec = get_spec(op_name)
    for case in rows.expand(spec):
        inst = instantiate(spec, case.bindings, case.some)
        out = {"op": spec.name, "fuelvk_api": spec.fuelvk_api, "case_id": case.case_id, "label": case.label}
        out.update(inst.call())
        out["flops"], out["bytes"] = inst.roofline()
        out["inputs"] = {n: _pairs(v) for n, v in out["inputs"].items()}
        yield out


def _pairs(v):
    shape, dtype = v
    return [(s, dtype) for s in shape] if isinstance(shape, list) else (shape, dtype)


def missing_specs(names):
    """The names (fuelvk public ops) that no spec's fuelvk_api names, in the given order."""
    apis = set()
    for s in load_specs().values():
        if s.fuelvk_api:
            apis |= {s.fuelvk_api, s.fuelvk_api.split(".")[-1]}
    return [n for n in names if n not in apis]
