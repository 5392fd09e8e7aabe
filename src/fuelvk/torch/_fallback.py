"""The CPU fallback of the fuelvk device: an aten op with no fuelvk kernel runs on torch's CPU kernels.

Registered as the boxed fallback of PrivateUse1 (torch.library.Library("_", "IMPL").fallback), so
it catches every op without a fuelvk kernel; fuelvk kernels that meet a case they do not handle
(a dtype, a mode) raise Unhandled and land here too. Inputs are downloaded, the op runs on the CPU,
tensor results are uploaded, and arguments the op writes into (schema `Tensor(a!)`: in-place and
out= ops) get the CPU result written back; a result that is such an argument is returned as the
original fuelvk tensor. View ops (a return aliasing an input without writing) are not computed:
torch's Meta kernel makes the view on the same storage, as for ops fuelvk registers itself.

The first fallback of each op warns once, naming the op; FUELVK_TORCH_FALLBACK=0 (read at each
call) turns a fallback into a FallbackError instead, as PYTORCH_ENABLE_MPS_FALLBACK does for MPS;
fallback_stats() counts the fallbacks per op.
"""
import torch
from torch.utils._pytree import tree_map

from ..errors import DTypeError
from . import device as fuelvk_device
from ._fallback_log import ENV, FallbackError, FallbackWarning, fallback_stats, note, reset_fallback_stats  # noqa: F401

_views = {}   # OpOverload -> whether its first return is a view of an input (from the schema)


class Unhandled(Exception):
    """Raised by a fuelvk kernel for a case it does not cover (the message says which): run on the CPU."""


def _is_view(op):
    v = _views.get(op)
    if v is None:
        rets = op._schema.returns
        v = _views[op] = bool(rets) and rets[0].alias_info is not None and not rets[0].alias_info.is_write
    return v


def fallback(op, *args, **kwargs):
    """The boxed PrivateUse1 fallback torch calls for any op without a fuelvk kernel."""
    if _is_view(op):
        try:
            return op.redispatch(fuelvk_device.META, *args, **kwargs)
        except (NotImplementedError, RuntimeError):
            pass   # no Meta kernel: computed on the CPU below (a copy, not a view)
    return run_on_cpu(op, args, kwargs)


def run_on_cpu(op, args, kwargs, reason=None, name=None):
    """Run op on the CPU for fuelvk arguments (see the module docstring); name: what to count it as."""
    note(name or op.name(), reason)
    written = _written_args(op, args, kwargs)
    cpu_of = {}   # id(fuelvk tensor) -> its CPU copy

    def down(x):
        if isinstance(x, torch.Tensor) and fuelvk_device.is_fuelvk(x):
            c = cpu_of.get(id(x))
            if c is None:
                host = fuelvk_device.download(x)
                c = cpu_of[id(x)] = host.clone() if id(x) in written else host
            return c
        if isinstance(x, torch.device) and x.type == fuelvk_device.NAME:
            return torch.device("cpu")
        return x

    cargs, ckwargs = _numbers_as_tensors(op, tree_map(down, args), tree_map(down, kwargs))
    if _makes_fuelvk(kwargs):   # a factory asked for fuelvk: make it on the CPU, upload below
        ckwargs["device"] = torch.device("cpu")
    out = op(*cargs, **ckwargs)
    orig_of = {id(cpu_of[i]): t for i, t in written.items()}
    for i, t in written.items():   # write the CPU results back into the fuelvk arguments
        c = cpu_of[i]
        if tuple(c.shape) != tuple(t.shape):
            fuelvk_device.resize_(t, tuple(c.shape))
        fuelvk_device.copy_from(c, t)

    def up(x):
        if isinstance(x, torch.Tensor):
            orig = orig_of.get(id(x))
            if orig is not None:
                return orig
            try:
                return fuelvk_device.upload(x)
            except DTypeError as e:   # a dtype the device holds no tensors of (complex, float8_e5m2, ...)
                raise DTypeError(f"{op.name()} ran on the CPU (fuelvk has no kernel for it), but its {x.dtype} "
                                 f"result cannot live on the {fuelvk_device.NAME} device: {e}") from None
        return x
    return tree_map(up, out)


def _numbers_as_tensors(op, args, kwargs):
    """torch hands a boxed kernel a wrapped-number tensor (x % 2 runs remainder.Tensor) as a Python
    number; calling the op again needs the tensor back."""
    args = list(args)
    for i, a in enumerate(op._schema.arguments):
        if str(a.type) != "Tensor":
            continue
        if i < len(args) and isinstance(args[i], (bool, int, float, complex)):
            args[i] = torch.tensor(args[i])
        elif a.name in kwargs and isinstance(kwargs[a.name], (bool, int, float, complex)):
            kwargs[a.name] = torch.tensor(kwargs[a.name])
    return args, kwargs


def _makes_fuelvk(kwargs):
    d = kwargs.get("device")
    return d is not None and torch.device(d).type == fuelvk_device.NAME


def _written_args(op, args, kwargs):
    """{id(fuelvk tensor): tensor} for every argument the op's schema marks as written (a!)."""
    out = {}
    for i, a in enumerate(op._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, torch.Tensor) and fuelvk_device.is_fuelvk(t):
                out[id(t)] = t
    return out
