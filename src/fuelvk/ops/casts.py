"""astype: dtype casts between every stored real dtype.

Between the float types (f8e4m3fn, f16, bf16, f32, f64): cast.comp, described here. With an integer
or bool side: icast.comp (numpy's rules; float -> int truncates, NaN -> 0, out of range saturates).

Every pair is one dispatch of shaders/cast.comp, which takes any view (strided, broadcast, negative
steps, offset) and rounds once, to nearest even, in integer arithmetic (bit-exact on any driver).
Deliberate differences from ml_dtypes: f32/f16/bf16/f64 -> float8_e4m3fn saturates to +-448 on
overflow and for +-inf, as torch's ``.to(torch.float8_e4m3fn)`` does (ml_dtypes gives NaN).
NaN payloads follow numpy/ml_dtypes (kernels/casts.py nan_rule).
"""
from .. import dtypes as _dt
from ..errors import DTypeError
from .. import runtime
from ..kernels import kernel
from ..kernels.registry import wide_or_plain
from . import complex as _cx
from ._core import device_args, launch_strided, new_like, result
from .._device import check_device

__all__ = ["astype"]

_FMT = {_dt.float8_e4m3fn: "f8e4m3", _dt.float16: "f16", _dt.bfloat16: "bf16", _dt.float32: "f32",
        _dt.float64: "f64"}


_IFMT = {_dt.bool_: "bool", _dt.int8: "i8", _dt.int16: "i16", _dt.int32: "i32", _dt.int64: "i64",
         _dt.uint8: "u8", _dt.uint16: "u16", _dt.uint32: "u32", _dt.uint64: "u64", _dt.float32: "f32",
         _dt.float64: "f64"}


def _steps(src, dst):
    """The dispatches of src -> dst: [(variant, dtype after it)]. A cast with an integer or bool side
    runs icast.comp; float16 / bfloat16 / float8 go through float32 with cast.comp (int -> f32 rounds,
    then f32 -> half rounds: double rounding only for integers beyond 2^24)."""
    if src in _FMT and dst in _FMT:
        return [(cast_variant(src, dst), dst)]
    steps = []
    if src not in _IFMT:
        steps.append((cast_variant(src, _dt.float32), _dt.float32))
        src = _dt.float32
    tail = []
    if dst not in _IFMT:
        tail = [(cast_variant(_dt.float32, dst), dst)]
        mid = _dt.float32
    else:
        mid = dst
    if src != mid:
        steps.append((kernel("icast", f"{_IFMT[src]}_to_{_IFMT[mid]}"), mid))
    return steps + tail


def cast_variant(src, dst):
    """The cast kernel variant for src -> dst dtypes, or a DTypeError naming what is accepted."""
    s, d = _FMT.get(src), _FMT.get(dst)
    if s is None or d is None:
        ok = ", ".join(str(t) for t in _FMT)
        raise DTypeError(f"astype: no cast kernel from {src} to {dst}; casts are supported between {ok} "
                         "(and from any dtype to itself, which copies)")
    return wide_or_plain("cast", "cast_w64", f"{s}_to_{d}", runtime.get().device.features)


def astype(x, dtype, *, copy=True, device=None):
    """x cast to dtype: a new contiguous array, or x itself when copy=False and the dtype already
    matches (the array API's rule; numpy's astype(copy=...))."""
    (xa,), numpy_out = device_args("astype", x)
    if device is not None:
        check_device("astype", device)
    try:
        dt = _dt.dtype(dtype)
    except DTypeError as e:
        raise DTypeError(f"astype: {e}") from None
    if dt == xa.dtype and not copy:
        return result(xa, numpy_out)
    if dt == xa.dtype:
        return result(xa.copy(), numpy_out)
    if xa.dtype.kind == "c" or dt.kind == "c":
        return result(_complex_astype(xa, dt), numpy_out)
    out = xa
    for v, step_dt in _steps(xa.dtype, dt):
        nxt = new_like(xa.shape, step_dt)
        launch_strided(v, nxt, [out])
        out = nxt
    return result(out, numpy_out)


def _complex_astype(xa, dt):
    """A cast with a complex side: complex -> complex casts the (re, im) float pairs view; a real
    array goes into the real part (imaginary 0). Complex -> real is refused (it would drop the
    imaginary part; the standard leaves it unspecified); complex -> bool is fuelvk.astype's (x != 0: the
    comparisons sit above this module)."""
    if dt.kind != "c":
        raise DTypeError(f"astype: {xa.dtype} -> {dt} would drop the imaginary part; use real(x) (and cast it)")
    if xa.dtype.kind == "c":
        return _cx.from_pairs(astype(_cx.as_pairs(xa), _cx._REAL[dt]))
    if xa.dtype.kind in "biu":
        xa = astype(xa, _cx._REAL[dt])
    return _cx.to_complex("astype", xa, dt)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare

declare(OpDef("astype", astype, lambda x, dtype, copy=True, device=None: Meta(tuple(x.shape), _dt.dtype(dtype)),
              numpy=lambda x, dtype, copy=True, device=None: x.astype(dtype),
              torch=lambda x, dtype, copy=True, device=None: x.to(_torch_dtype(dtype)),
              reference="x", grad="astype", schema="(Tensor x, ScalarType dtype) -> Tensor"))


def _torch_dtype(dt):
    import torch
    dt = _dt.dtype(dt)
    return torch.bfloat16 if dt.name == "bfloat16" else getattr(torch, dt.name)
