"""astype: dtype casts between the float types (f8e4m3fn, f16, bf16, f32, f64).

Every pair is one dispatch of shaders/cast.comp, which takes any view (strided, broadcast, negative
steps, offset) and rounds once, to nearest even, in integer arithmetic (bit-exact on any driver).
Deliberate differences from ml_dtypes: f32/f16/bf16/f64 -> float8_e4m3fn saturates to +-448 on
overflow and for +-inf, as torch's ``.to(torch.float8_e4m3fn)`` does (ml_dtypes gives NaN).
NaN payloads follow numpy/ml_dtypes (kernels/casts.py nan_rule).
"""
from .. import dtypes as _dt
from ..errors import DTypeError
from ..kernels import kernel
from ._core import device_args, launch_strided, new_like, result

__all__ = ["astype"]

_FMT = {_dt.float8_e4m3fn: "f8e4m3", _dt.float16: "f16", _dt.bfloat16: "bf16", _dt.float32: "f32",
        _dt.float64: "f64"}


def cast_variant(src, dst):
    """The cast kernel variant for src -> dst dtypes, or a DTypeError naming what is accepted."""
    s, d = _FMT.get(src), _FMT.get(dst)
    if s is None or d is None:
        ok = ", ".join(str(t) for t in _FMT)
        raise DTypeError(f"astype: no cast kernel from {src} to {dst}; casts are supported between {ok} "
                         "(and from any dtype to itself, which copies)")
    return kernel("cast", f"{s}_to_{d}")


def astype(x, dtype):
    """x cast to dtype (always a new contiguous array, like numpy's astype(copy=True))."""
    (xa,), numpy_out = device_args("astype", x)
    try:
        dt = _dt.dtype(dtype)
    except DTypeError as e:
        raise DTypeError(f"astype: {e}") from None
    if dt == xa.dtype:
        from .movement_core import copy
        return result(copy(xa), numpy_out)
    v = cast_variant(xa.dtype, dt)
    out = new_like(xa.shape, dt)
    launch_strided(v, out, [xa])
    return result(out, numpy_out)
