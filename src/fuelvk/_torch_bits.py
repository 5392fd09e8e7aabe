"""torch tensor <-> numpy, bit-exact: the dtype mapping below Array (asarray takes torch tensors
without importing fuelvk.torch, which sits above Array). Imported only when torch is.

Half and float8 tensors travel as same-width integer views (torch bf16 -> int16 -> ml_dtypes bf16),
so no value is ever rounded through another float type.
"""
import torch

from . import dtypes as _dt
from .errors import DTypeError

# torch dtype -> (numpy dtype fuelvk uses, torch dtype of the same width that numpy knows, or None)
_BITS = {torch.bfloat16: (_dt.bfloat16, torch.int16), torch.float8_e4m3fn: (_dt.float8_e4m3fn, torch.uint8)}
_PLAIN = {torch.float32: _dt.float32, torch.float16: _dt.float16, torch.float64: _dt.float64,
          torch.int8: _dt.int8, torch.int16: _dt.int16, torch.int32: _dt.int32, torch.int64: _dt.int64,
          torch.uint8: _dt.uint8, torch.uint16: _dt.uint16, torch.uint32: _dt.uint32, torch.bool: _dt.bool_}
TO_NUMPY = {**_PLAIN, **{t: v[0] for t, v in _BITS.items()}}
TO_TORCH = {v: k for k, v in TO_NUMPY.items()}


def numpy_dtype(op, dtype):
    """The fuelvk (numpy / ml_dtypes) dtype of a torch dtype, or a DTypeError naming the op."""
    dt = TO_NUMPY.get(dtype)
    if dt is None:
        raise DTypeError(f"torch.ops.fuelvk.{op}: torch dtype {dtype} has no fuelvk twin; accepted: "
                         + ", ".join(str(t) for t in TO_NUMPY))
    return dt


def to_numpy(t, op="?"):
    """A numpy view (no copy when t is a CPU tensor) with fuelvk's dtype, bits unchanged."""
    if t.device.type != "cpu":
        raise DTypeError(f"torch.ops.fuelvk.{op}: expects CPU tensors (fuelvk uploads them itself), got {t.device}")
    t = t.detach()
    dt = numpy_dtype(op, t.dtype)
    if t.dtype in _BITS:
        t = t.view(_BITS[t.dtype][1])   # same width: a reinterpreting view of any layout
    host = t.numpy()
    return host if host.dtype == dt else host.view(dt)
