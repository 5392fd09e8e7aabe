"""torch.ops.fuelvk.*: fuelvk's public ops as torch.library custom ops (CPU tensors in and out).

Registered from the op records (fuelvk/ops/_opdef.py): every record with a torch schema becomes
torch.ops.fuelvk.<name> with an implementation (upload, run the fuelvk function, download), a fake
kernel from the record's shape rule (contiguous outputs, as the real kernels return) and the record's
gradient formula (_grad.FORMULAS, written with torch.ops.fuelvk ops only). A mutating record also
gets its functional twin (record.functional), which carries the gradient. Declared here by hand only
what has no fuelvk function of its own: setitem's torch forms (slice_write_ / slice_write) and the
in-place scatters (scatter_add_ / index_add_).
"""
import functools
import inspect

import torch

from ..ops._opdef import Meta, opdefs
from . import _grad as grad_formulas
from ._bridge import TO_TORCH, is_device_tensor, numpy_dtype, results_on_device, to_array, to_tensor

NS = "fuelvk"
OPS = {}   # name -> CustomOpDef

# Keyword arguments a torch op always passes: its schema returns lse, which its backward reads.
ALWAYS = {"scaled_dot_product_attention": {"return_lse": True}, "paged_attention": {"return_lse": True}}
INDEX_ARGS = ("index", "indices")   # integer tensors fuelvk validates on the host (negative wrap, bounds)


def download(out):
    """torch tensors of a fuelvk result (an Array or a tuple of them)."""
    return tuple(to_tensor(o) for o in out) if isinstance(out, tuple) else to_tensor(out)


def _device_aware(fn):
    """fn with results (and fake results) on the fuelvk device when any tensor argument is there."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        on = any(is_device_tensor(x) for x in torch.utils._pytree.tree_leaves((args, kwargs)))
        if not on:
            return fn(*args, **kwargs)
        with results_on_device():
            return fn(*args, **kwargs)
    return run


def define(name, schema, impl, fake, grad=None, mutates=()):
    """Register fuelvk::name; grad(inputs, outputs, *grads) -> input grads (see _grad.backward).

    CPU tensors in, CPU tensors out; fuelvk-device tensors in, device tensors out, with no copy."""
    op = torch.library.custom_op(f"{NS}::{name}", _device_aware(impl), mutates_args=mutates, schema=schema)
    op.register_fake(_device_aware(fake))
    if grad is not None:
        op.register_autograd(grad_formulas.backward(grad), setup_context=grad_formulas.setup(grad))
    OPS[name] = op
    return op


def like(x, *rest, **kw):
    return torch.empty(x.shape, dtype=x.dtype)


# -- schemas ----------------------------------------------------------------------------------------
def _split_top(text):
    """text split at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[(" and 1 or (ch in "])" and -1 or 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def schema_args(schema):
    """The argument names of a schema, in order."""
    args = schema[schema.index("(") + 1:schema.rindex("->")].rstrip().removesuffix(")")
    return [a.split("=")[0].split()[-1] for a in _split_top(args)]


def schema_outputs(schema):
    """How many tensors a schema returns."""
    ret = schema[schema.rindex("->") + 2:].strip()
    return len(_split_top(ret[1:-1])) if ret.startswith("(") else 1


def _pairs(pad_width):
    """[b0, a0, b1, a1, ...] (numpy's order: first dim first) -> ((b0, a0), (b1, a1), ...)."""
    return tuple(zip(pad_width[0::2], pad_width[1::2]))


def to_numpy_index(index):
    """Indices go to fuelvk as host arrays: it validates them (negative wrap, bounds) before upload.
    Device indices stay on the device (fuelvk validates them there)."""
    return to_array(index, "index") if is_device_tensor(index) else index.detach().numpy()


def _meta(t, op):
    return Meta(tuple(t.shape), numpy_dtype(op, t.dtype))


def _convert(op, name, v, tensor):
    """A torch argument as the fuelvk function takes it; tensor(t) converts one tensor."""
    if isinstance(v, torch.Tensor):
        return tensor(v)
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
        return [tensor(t) for t in v]
    if name == "pad_width":
        return _pairs(v)
    if isinstance(v, (list, tuple)):
        return tuple(v)
    if isinstance(v, torch.dtype):
        return numpy_dtype(op, v)
    return v


class Caller:
    """Calls a record's function (or its shape rule) with a torch op's arguments: bound by the schema's
    names, passed positionally where the function takes them so and by name where keyword-only."""

    def __init__(self, rec, schema):
        self.rec, self.op = rec, rec.name.split(".")[-1]
        self.names = schema_args(schema)
        self.n_out = schema_outputs(schema)
        params = list(inspect.signature(rec.fn).parameters.values())
        self.positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]

    def __call__(self, fn, args, kwargs, tensor):
        """fn(converted arguments); tensor(t, name) converts one tensor argument."""
        given = dict(zip(self.names, args), **kwargs)
        pos, named = [], dict(ALWAYS.get(self.op, {}))
        for i, name in enumerate(self.names):
            if i < len(self.positional):
                pos.append(given[name] if name in given else self.positional[i].default)
            elif name in given:
                named[name] = given[name]
        last = max((i for i, n in enumerate(self.names[:len(pos)]) if n in given), default=-1)
        pos = [_convert(self.op, n, v, functools.partial(tensor, name=n)) for n, v in zip(self.names, pos[:last + 1])]
        named = {n: _convert(self.op, n, v, functools.partial(tensor, name=n)) for n, v in named.items()}
        return fn(*pos, **named)

    def outputs(self, out):
        """out as a tuple of n_out values (a missing optional gradient is None) or a single value."""
        if self.n_out > 1 and not isinstance(out, tuple):
            out = (out,) + (None,) * (self.n_out - 1)
        return out


def _empty_for_missing(outs):
    """A result that does not exist (no weight / no bias gradient) is returned as an empty tensor."""
    if not isinstance(outs, tuple):
        return outs
    return tuple(torch.empty(0, dtype=outs[0].dtype) if o is None else o for o in outs)


def _empty_of(meta):
    return None if meta is None else torch.empty(tuple(meta.shape), dtype=TO_TORCH[meta.dtype])


def register(rec):
    """torch.ops.fuelvk.<name> from an op record (and the functional twin of a mutating one)."""
    name, schema = rec.name.split(".")[-1], rec.schema
    call = Caller(rec, schema)

    def upload(fresh=()):
        return lambda t, name: to_numpy_index(t) if name in INDEX_ARGS else to_array(t, call.op, name in fresh)

    def fake_tensor(t, name):
        return _meta(t, call.op)

    if rec.mutates:
        def mutate(*args, **kwargs):
            arrays = {}

            def keep(t, name):
                arrays[name] = upload(rec.mutates)(t, name)
                return arrays[name]
            call(rec.fn, args, kwargs, keep)
            return arrays

        def inplace(*args, **kwargs):
            given = dict(zip(call.names, args), **kwargs)
            for n, a in mutate(*args, **kwargs).items():
                if n in rec.mutates:
                    given[n].copy_(to_tensor(a))

        def functional(*args, **kwargs):
            return to_tensor(mutate(*args, **kwargs)[rec.mutates[0]])

        define(name, schema, inplace, lambda *a, **kw: None, mutates=rec.mutates)
        twin = schema.replace("(a!)", "").replace("-> ()", "-> Tensor")
        define(rec.functional, twin, functional, like, grad_formulas.FORMULAS.get(rec.functional))
        return

    def impl(*args, **kwargs):
        return _empty_for_missing(download(call.outputs(call(rec.fn, args, kwargs, upload()))))

    def fake(*args, **kwargs):
        out = call.outputs(call(rec.out, args, kwargs, fake_tensor))
        return _empty_for_missing(tuple(map(_empty_of, out)) if isinstance(out, tuple) else _empty_of(out))

    define(name, schema, impl, fake, grad_formulas.FORMULAS[rec.grad] if rec.grad else None)


for _rec in list(opdefs().values()):
    if _rec.schema is not None:
        register(_rec)
del _rec


# -- torch forms of what fuelvk does through Python syntax or in place ------------------------------
def slice_key(ndim, dim, start, end, step):
    return (slice(None),) * (dim % ndim) + (slice(start, end, step),)


_setitem = opdefs()["setitem"].fn


def _slice_write_(dst, value, dim, start, end, step=1):
    d = to_array(dst, "slice_write_", fresh=True)
    key = slice_key(dst.dim(), dim, start, end, step)
    _setitem(d, key, to_array(value, "slice_write_"))
    dst[key].copy_(to_tensor(d[key]))


def _slice_write(dst, value, dim, start, end, step=1):
    d = to_array(dst, "slice_write", fresh=True)
    _setitem(d, slice_key(dst.dim(), dim, start, end, step), to_array(value, "slice_write"))
    return to_tensor(d)


define("slice_write_", "(Tensor(a!) dst, Tensor value, int dim, int start, int end, int step=1) -> ()",
       _slice_write_, lambda *a: None, mutates=("dst",))
define("slice_write", "(Tensor dst, Tensor value, int dim, int start, int end, int step=1) -> Tensor",
       _slice_write, like, grad_formulas.FORMULAS["slice_write"])


def _scatter_inplace(name):
    """The in-place twin <name>_ of a functional scatter op (torch's Tensor.scatter_add_ / index_add_)."""
    fn = opdefs()[name].fn

    def inplace(base, dim, index, src):
        base.copy_(to_tensor(fn(to_array(base, name + "_"), dim, to_numpy_index(index), to_array(src, name + "_"))))

    define(name + "_", "(Tensor(a!) base, int dim, Tensor index, Tensor src) -> ()", inplace, lambda *a: None,
           mutates=("base",))


_scatter_inplace("scatter_add")
_scatter_inplace("index_add")
