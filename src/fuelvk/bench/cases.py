"""Bench cases from the op specs' workload rows: selection, CPU scale-down, inputs, references, routes.

Scale-down (CPU devices such as lavapipe, or any device with `max_bytes`/`max_flops` given): while a
case's roofline bytes or FLOPs exceed the budget, its largest forall dimensions (Dim indices and
Shape index elements; all those equal to the largest value at once, so broadcast and contraction
dims stay equal) are halved; a halving the spec's shape rules reject is skipped for the next. The case keeps its case id; the row reports the shape that ran and
`scale` = original size / scaled size (size = max(roofline bytes, bytes of all its tensors)). Default budget on CPU devices: 8 MiB and 0.5 GFLOP per
case, so each case runs in milliseconds to tens of milliseconds on lavapipe.

Inputs follow the spec's rules for generated data, with values chosen so every op is defined on
them: floats uniform in [0.5, 1.5) (log, sqrt, divide), integers in [0, smallest extent of the
float inputs) (valid indices on any axis), bool random, uint8 (GGML blocks) in [0, 60) so every
f16 block scale is finite.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field

import numpy as np

from ..specs import get_spec, load_specs
from ..specs.instance import instantiate
from ..specs.model import SpecError
from ..specs.rows import expand

CPU_MAX_BYTES = 8 << 20
CPU_MAX_FLOPS = 500e6

# --quick: one representative case per op (the first that matches the pattern, "" = the first case),
# spanning memory-bound elementwise / reduction / movement ops and compute-bound matmul.
QUICK = [("add", "float32"), ("silu", "float32"), ("astype", "float32-bfloat16"), ("sum", "float32"),
         ("softmax", "float32"), ("rms_norm", "float32"), ("cumsum", "float32"), ("rope", "float32"),
         ("matmul", "decode"), ("matmul", "square-1k-float32"), ("scaled_dot_product_attention", "decode-4k-float32")]


@dataclass
class BenchCase:
    spec: object
    case_id: str
    bindings: dict
    some: tuple
    call: dict = field(default_factory=dict)     # Instance.call(): params, inputs, outputs
    flops: int = 0
    bytes: int = 0
    scale: float = 1.0
    full_shape: str = ""

    @property
    def op(self):
        return self.spec.fuelvk_api

    @property
    def shape(self):
        return shape_text(self.call["inputs"])


def shape_text(inputs):
    def one(v):
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return "x".join(str(d) for d in v[0]) or "scalar"
    return " ".join(f"{n}={one(v)}" for n, v in inputs.items())


def _runnable(spec):
    return spec.status == "implemented" and spec.fuelvk_api


def select(ops=None, pattern=None, quick=False):
    """The spec cases to run: `ops` names ops (fuelvk api or spec name, else a family; None = every
    implemented op), `pattern` a regex searched in '<op> <case id>'. Raises ValueError naming what did not match."""
    specs = load_specs()
    if quick:
        chosen = []
        for api, pat in QUICK:
            spec = _find(specs, api)
            if spec is None or not _runnable(spec):
                continue
            hit = next((c for c in expand(spec) if pat in c.case_id), None)
            if hit is not None:
                chosen.append((spec, hit))
    else:
        wanted = []
        for name in ops or []:
            hits = [s for s in specs.values() if name in (s.name, s.fuelvk_api)
                    or (s.fuelvk_api or "").split(".")[-1] == name]     # an op by name first,
            hits = hits or [s for s in specs.values() if s.family == name]    # else a family
            if not hits:
                apis = sorted({s.fuelvk_api for s in specs.values() if _runnable(s)})
                fams = sorted({s.family for s in specs.values()})
                raise ValueError(f"bench: --ops {name!r} names no op spec; ops: {', '.join(apis)}; "
                                 f"families: {', '.join(fams)}")
            bad = [s.name for s in hits if not _runnable(s)]
            if bad and len(bad) == len(hits):
                raise ValueError(f"bench: --ops {name!r}: {', '.join(bad)} is spec-only (no fuelvk implementation)")
            wanted += [s for s in hits if _runnable(s) and s not in wanted]
        if not ops:
            wanted = [s for s in specs.values() if _runnable(s)]
        chosen = [(s, c) for s in wanted for c in expand(s)]
    if pattern:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"bench: --filter {pattern!r} is not a regular expression: {e}") from None
        chosen = [(s, c) for s, c in chosen if rx.search(f"{s.fuelvk_api} {c.case_id}")]
    if not chosen:
        raise ValueError(f"bench: no workload case matches ops={ops or 'all'} filter={pattern!r}"
                         f"{' (--quick)' if quick else ''}")
    return [BenchCase(s, c.case_id, dict(c.bindings), tuple(c.some)) for s, c in chosen]


def _find(specs, api):
    try:
        return get_spec(api, specs)
    except SpecError:
        return None


def _call(inst):
    """Instance.call() with a list input's ([shapes], dtype) as [(shape, dtype), ...]."""
    call = inst.call()
    call["inputs"] = {n: [(s, dt) for s in shape] if isinstance(shape, list) else (shape, dt)
                      for n, (shape, dt) in call["inputs"].items()}
    return call


def _roof(spec, bindings, some):
    inst = instantiate(spec, bindings, some)
    flops, nbytes = inst.roofline()
    return inst, flops, nbytes


def _dims(spec, bindings):
    """(key, position, value) of every scalable dimension: Dim indices and Shape index elements."""
    out = []
    for k, v in bindings.items():
        kind = spec.forall.get(k)
        if kind is not None and kind.name == "Dim" and isinstance(v, int) and v > 1:
            out.append((k, None, v))
        elif kind is not None and kind.name == "Shape" and isinstance(v, (list, tuple)):
            out += [(k, i, d) for i, d in enumerate(v) if isinstance(d, int) and d > 1]
    return out


def _int_list_params(spec, bindings):
    """(key, position, value) of the elements of int-list parameters (e.g. dequantize's shape=), which
    may mirror dimensions: they are halved along with equal dimensions, never alone."""
    return [(k, i, d) for k, v in bindings.items() if k in spec.params and isinstance(v, (list, tuple))
            and v and all(isinstance(d, int) and not isinstance(d, bool) for d in v) for i, d in enumerate(v)]


def _halvings(spec, bindings):
    """Candidate bindings, most preferred first: every dimension equal to the largest value halved at
    once (keeps broadcast and contraction dims equal), then each single dimension, largest first."""
    dims = _dims(spec, bindings)
    mirrors = _int_list_params(spec, bindings)
    for v in sorted({d for _, _, d in dims}, reverse=True):
        yield _halve(bindings, [(k, i) for k, i, d in dims + mirrors if d == v])
        if any(d == v for _, _, d in mirrors):
            yield _halve(bindings, [(k, i) for k, i, d in dims if d == v])
    for k, i, _ in sorted(dims, key=lambda t: -t[2]):
        yield _halve(bindings, [(k, i)])


def _halve(bindings, where):
    b = dict(bindings)
    for key, pos in where:
        if pos is None:
            b[key] = b[key] // 2
        else:
            b[key] = [d // 2 if i == pos else d for i, d in enumerate(b[key])]
    return b


def _size(inst, nbytes):
    """Bytes a case occupies or moves: max(roofline bytes, all its tensors' bytes). An op that reads
    a few rows of a large table (take) moves little but must still allocate the table."""
    return max(nbytes, sum(inst.tensor_bytes(n) for n in inst.shapes))


def prepare(case, max_bytes=None, max_flops=None):
    """Instantiate the case, halving its largest dimensions until its size (_size) and FLOPs fit the
    budget (None = no limit); case.scale = full size / scaled size."""
    inst, flops, nbytes = _roof(case.spec, case.bindings, case.some)
    size = full = _size(inst, nbytes)
    case.full_shape = shape_text(_call(inst)["inputs"])
    bindings = case.bindings

    def over(f, b):
        return (max_bytes is not None and b > max_bytes) or (max_flops is not None and f > max_flops)

    while over(flops, size):
        for trial in _halvings(case.spec, bindings):
            try:
                t_inst, t_f, t_b = _roof(case.spec, trial, case.some)
            except (SpecError, ValueError, TypeError, ZeroDivisionError):
                continue            # the spec's rules reject this halving; try the next dimension
            t_size = _size(t_inst, t_b)
            if t_size < size or (t_size == size and t_f < flops):
                bindings, inst, flops, nbytes, size = trial, t_inst, t_f, t_b, t_size
                break
        else:
            break                   # nothing left to shrink
    case.bindings, case.flops, case.bytes = bindings, int(flops), int(nbytes)
    case.call = _call(inst)
    case.scale = full / size if size else 1.0
    return case


# ---- inputs ---------------------------------------------------------------------------------------

def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_inputs(case, seed=0):
    """{input name: numpy array (or list of them)} following the module docstring's value rules."""
    rng = np.random.default_rng(seed)
    items = case.call["inputs"]
    flat = [p for v in items.values() for p in (v if isinstance(v, list) else [v])]
    float_dims = [d for shape, dt in flat if np_dtype(dt).kind == "f" or dt == "bfloat16" for d in shape]
    bound = max(1, min(float_dims)) if float_dims else 2

    def one(shape, dt):
        dtype = np_dtype(dt)
        if dt == "bool":
            return rng.random(shape) < 0.5
        if dtype.kind in "iu":
            hi = 60 if dt == "uint8" else bound
            return rng.integers(0, hi, shape).astype(dtype)
        return rng.uniform(0.5, 1.5, shape).astype(np.float32).astype(dtype)

    return {n: [one(*p) for p in v] if isinstance(v, list) else one(*v) for n, v in items.items()}


def call_params(case):
    """The call's parameters as the function takes them: dtype parameters as numpy dtypes (None stays
    None), and the encodings the op's record converts (OpDef.adapt) converted."""
    out, adapt = {}, record(case.op).adapt
    for name, v in case.call["params"].items():
        p = case.spec.params[name]
        v = np_dtype(v) if (p.type.dtypes and isinstance(v, str)) else v
        out[name] = adapt[name](v) if name in adapt else v
    return out


# ---- fuelvk call, route ---------------------------------------------------------------------------

def fuelvk_fn(case, dev_inputs, params):
    """The call of the op a case's spec describes, arguments by the spec's names (a top-level array
    API wrapper with the standard's positional-only signature is unwrapped to that op)."""
    from ..specs.impl import resolve_api
    f = inspect.unwrap(resolve_api(case.op))
    return lambda: f(**dev_inputs, **params)


def record(api):
    """The op record (fuelvk/ops/_opdef.py) of a spec's fuelvk_api."""
    from ..ops._opdef import get
    return get(api)


def route_of(case, dev_inputs, params):
    """The execution route the op picks for this call, where its record names a route resolver (else None)."""
    rec = record(case.op)
    if rec.route is None:
        return None
    resolver = getattr(importlib.import_module(rec.fn.__module__), rec.route)
    takes = inspect.signature(resolver).parameters
    return resolver(**{k: v for k, v in {**dev_inputs, **params}.items() if k in takes and k != "route"})


def to_torch(x):
    import torch
    if isinstance(x, list):
        return [to_torch(v) for v in x]
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def _resolve(fn):
    """A record's baseline: a callable, or a "module.attr.attr" name imported now."""
    if not isinstance(fn, str):
        return fn
    mod, _, attr = fn.partition(".")
    out = importlib.import_module(mod)
    for part in attr.split("."):
        out = getattr(out, part)
    return out


def reference(impl, case, host_inputs, params):
    """A no-argument callable running `impl` ('numpy' or 'torch') on the case's inputs, or None when
    that library has no reference for the op. The op record's baseline (OpDef.numpy / OpDef.torch)
    takes the spec's names as keywords (one given by name, "torch.nn.functional.silu", takes the
    inputs positionally); else the library's same-named function takes the inputs
    positionally (numpy: and the params by name, which match numpy's for the numpy-style ops; torch:
    only ops without params). Inputs are converted before, not inside, the timed call."""
    api = case.op
    rec = record(api)
    if impl == "numpy":
        fn, mod, inputs = rec.numpy, np, host_inputs
    else:
        import torch
        fn, mod, inputs = rec.torch, torch, {k: to_torch(v) for k, v in host_inputs.items()}
    if isinstance(fn, str):              # a library function by name takes the inputs positionally
        fn, args = _resolve(fn), list(inputs.values())
        return lambda: fn(*args, **params)
    if fn is not None:
        return lambda: fn(**inputs, **params)
    fn = getattr(mod, api, None) if "." not in api and (not params or impl == "numpy") else None
    if not callable(fn):
        return None
    args = list(inputs.values())
    return lambda: fn(*args, **params)
