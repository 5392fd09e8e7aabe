"""One record per public op (OpDef), declared once at the end of its family module ops/<family>.py.

Everything outside the op's function that must know about the op reads its record instead of a
table of its own: the torch custom ops (torch/_ops.py: schema, fake kernel from the shape rule,
gradient), the bench (bench/cases.py: numpy / torch baselines, route), the FlashInfer-Bench export
(definitions/: reference body, var dims, skip reason), generated specs (specs/: a `templates:`
entry of a family YAML filled in from `spec=`) and the test tables (tests/test_opdefs.py).

Adding a unary elementwise op therefore takes the shader case, its kernels/ table line, one
`unary(...)` line in ops/elementwise.py's record block and a test (docs/DEVELOPING.md "Adding an op").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np


@dataclass(frozen=True)
class Meta:
    """An array seen by a shape rule: shape and numpy dtype, no data."""
    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self):
        return len(self.shape)


@dataclass(frozen=True)
class OpDef:
    """What fuelvk knows about one public op besides its kernels.

    name: the public name (spec fuelvk_api: "exp", "quant.quantize").
    fn: the function.
    out: the output rule, out(*inputs, **params) -> Meta or a tuple of Meta (None for an output the
        call does not return), inputs given as Meta (a list of Meta for a list input), params as the
        function takes them. Pure Python: the torch fake kernel and the spec test use it.
    numpy: a numpy reference taking the spec's argument names (bench baseline, test oracle); None =
        numpy's function of the same name, where there is one.
    torch: the torch baseline of the bench (a callable, or "torch.dotted.name" resolved when used);
        None = torch's function of the same name for ops without params.
    reference: the FlashInfer-Bench reference (plain torch source): an expression for the single
        output `output`, or (helpers, body) with the body assigning each output by its spec name.
    grad: the gradient formula of the torch op: a key of fuelvk.torch._grad.FORMULAS (None: none).
    route: the route resolver (ops/_routes.py) of ops that choose an execution route, by name.
    mutates: inputs the function writes in place; functional: the record of its functional twin.
    schema: the torch.ops.fuelvk schema (None: no torch op). Its arguments go to the function by
        position (by name where the function takes them keyword-only); torch/_ops.py converts them.
    spec: fields of a spec generated from a family template (specs/<family>.yaml `templates:`):
        template name, ref_api, flops per element, workload row set; None: written out in the YAML.
    export: FlashInfer-Bench export settings: skip (reason), var_dims, lets, small_floor, small_keep.
    adapt: {param: function} turning a spec parameter's encoding into the value the function takes.
    """
    name: str
    fn: Callable
    out: Callable
    numpy: Callable | None = None
    torch: Callable | str | None = None
    reference: str | tuple | None = None
    grad: str | None = None
    route: str | None = None
    mutates: tuple = ()
    functional: str | None = None
    schema: str | None = None
    spec: dict | None = None
    export: dict = field(default_factory=dict)
    adapt: dict = field(default_factory=dict)

    @property
    def reference_source(self):
        """(helpers, body) of the FlashInfer-Bench reference, or None."""
        if self.reference is None:
            return None
        return ("", f"output = {self.reference}") if isinstance(self.reference, str) else self.reference


OPDEFS: dict[str, OpDef] = {}   # public name -> record, in declaration order


def declare(*records):
    """Register records (one per public op; a second record for a name is a bug)."""
    for r in records:
        if r.name in OPDEFS and OPDEFS[r.name] is not r:
            raise ValueError(f"op {r.name!r} is declared twice")
        OPDEFS[r.name] = r
    return records


def opdefs():
    """Every record. Each ops module declares its records at import, and fuelvk/__init__ imports every
    ops module (ops.public_ops) before any other fuelvk module can run, so the table is complete."""
    return OPDEFS


def get(name):
    """The record of public op `name` ("exp", "quant.quantize" or "quantize")."""
    defs = opdefs()
    if name in defs:
        return defs[name]
    hits = [r for r in defs.values() if r.name.split(".")[-1] == name]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"no op record named {name!r}")


# -- shape rules ------------------------------------------------------------------------------------
def same(*inputs, **params):
    """The output has the first input's shape and dtype (passed by position or by name)."""
    x = inputs[0] if inputs else next(v for v in params.values() if isinstance(v, Meta))
    return Meta(tuple(x.shape), np.dtype(x.dtype))


def broadcast(*shapes):
    """numpy's broadcast of shapes."""
    return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def binary(a, b):
    """numpy broadcasting and promotion of two operands (Meta or Python scalars)."""
    arrays = [m for m in (a, b) if isinstance(m, Meta)]
    dt = np.result_type(*(m.dtype for m in arrays))
    return Meta(broadcast(*(m.shape for m in arrays)), dt)


def axes_of(axis, ndim):
    """The normalized, sorted axes an axis argument names (None = all)."""
    if axis is None:
        return list(range(ndim))
    axis = (axis,) if isinstance(axis, int) else axis
    return sorted({a % ndim if ndim else 0 for a in axis})


def reduced(shape, axis, keepdims=False):
    ax = axes_of(axis, len(shape))
    if keepdims:
        return tuple(1 if i in ax else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in ax)


def numel(shape):
    return math.prod(shape)


# -- unary elementwise records from one table line --------------------------------------------------
def unary(name, fn, *, ref_api=None, numpy=None, torch=None, reference=None, grad=None, flops=1, rows="unary"):
    """The record of a unary elementwise op fn(x) -> same shape and dtype, with a generated spec
    (specs/elementwise.yaml `templates: unary`, row set `rows`, `flops` per element), a torch op
    "(Tensor x) -> Tensor" and the FlashInfer-Bench reference torch.<name>(x) unless given."""
    return OpDef(name, fn, same, numpy=numpy, torch=torch, reference=reference or f"torch.{name}(x)", grad=grad,
                 schema="(Tensor x) -> Tensor",
                 spec={"template": "unary", "ref_api": ref_api or f"numpy.{name}", "flops": flops, "rows": rows})


# -- FlashInfer-Bench reference helpers shared by several records ------------------------------------
REF_GRADS = '''
def _grads(f, args, grad):
    """Gradients of f(*args) against `grad` for the arguments that are not None (autograd)."""
    with torch.enable_grad():
        leaves = [a.detach().requires_grad_(True) if a is not None else None for a in args]
        out = f(*leaves)
        wanted = [a for a in leaves if a is not None]
        got = torch.autograd.grad(out, wanted, grad)
    it = iter(got)
    return [next(it) if a is not None else None for a in leaves]
'''
