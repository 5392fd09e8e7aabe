"""PyTorch integration: `import fuelvk.torch` registers the torch device "fuelvk" and fuelvk's ops as
torch.ops.fuelvk.*.

    import torch, fuelvk.torch
    model.to("fuelvk"); model(x.to("fuelvk"))    # aten ops on fuelvk kernels (device.py, _aten.py)
    y = torch.ops.fuelvk.softmax(x, -1)          # CPU tensors in, CPU tensors out
    o = fuelvk.torch.scaled_dot_product_attention(q, k, v, is_causal=True)

The device is registered at import (register_device(), idempotent) because that is the contract
users expect from `import fuelvk.torch` (as `import torch_xla` does); the CPU fallback for aten ops
without a fuelvk kernel is in _fallback.py. A torch.ops.fuelvk op called with CPU tensors uploads
its inputs, runs the Vulkan kernel and downloads the result; called with fuelvk-device tensors it
uses their memory and returns device tensors (no transfer). Ops have fake kernels (torch.compile,
fullgraph) and, where differentiable, autograd formulas built from fuelvk ops. Weights (nn.Parameters, and tensors
marked with keep_uploaded) stay uploaded in a small cache keyed by (data_ptr, _version, shape,
strides, dtype): see WeightCache for what it cannot see. Functional aten kernels replay launch plans
recorded on their second call with the same operand layouts (_plans.py; clear_plans()).
Mutating ops: add_assign_scaled, slice_write_, scatter_add_, index_add_ (functional twins:
add_scaled, slice_write, scatter_add, index_add, which autograd differentiates).
"""
try:
    import torch
except ImportError as e:   # fuelvk itself does not need torch
    raise ImportError("fuelvk.torch needs PyTorch (pip install torch); the rest of fuelvk works without it") from e

from ._bridge import WEIGHTS, WeightCache, keep_uploaded, to_array, to_numpy, to_tensor
from ._ops import OPS
from ._fallback import FallbackError, FallbackWarning, fallback_stats, reset_fallback_stats
from . import _aten, _aten_nn, _distributed, _fallback, _plans, device  # noqa: F401 (_aten_nn: its kernels join _aten.KERNELS)

_LIBS = []   # the torch.library registrations (kept alive for the process)


def register_device():
    """Register the device: PrivateUse1 named "fuelvk" (device.register_backend), the aten kernels
    (_aten.py, _aten_nn.py), the CPU fallback (_fallback.py) and the c10d collectives
    (_distributed.py). Idempotent; `import fuelvk.torch` calls it."""
    if not device.register_backend():
        return
    kernels = torch.library.Library("aten", "IMPL")
    _aten.register(kernels)
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_fallback.fallback, "PrivateUse1")
    _LIBS.extend((kernels, fallback))
    _distributed.register()


register_device()

__all__ = [
    "FallbackError",
    "FallbackWarning",
    "OPS",
    "WEIGHTS",
    "WeightCache",
    "clear_cache",
    "clear_plans",
    "fallback_stats",
    "keep_uploaded",
    "register_device",
    "reset_fallback_stats",
    "scaled_dot_product_attention",
    "to_array",
    "to_numpy",
    "to_tensor",
]


def clear_cache():
    """Drop every cached weight upload (after writes torch's version counter does not see)."""
    WEIGHTS.clear()


def clear_plans():
    """Drop every aten launch plan (_plans.py), e.g. after changing a FUELVK_* route setting read per call."""
    _plans.clear()


def scaled_dot_product_attention(q, k, v, *, is_causal=False, scale=None, window=(-1, -1), alibi_slopes=None,
                                 softcap=None):
    """The attention output alone (torch.ops.fuelvk.scaled_dot_product_attention also returns lse)."""
    return torch.ops.fuelvk.scaled_dot_product_attention(q, k, v, is_causal, scale, list(window), alibi_slopes,
                                                         softcap)[0]
