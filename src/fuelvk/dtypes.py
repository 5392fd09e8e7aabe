"""Dtypes fuelvk knows, their numpy (ml_dtypes) twins and the kernel tags they map to."""
import math
import numbers

import numpy as np
import ml_dtypes

from .errors import DTypeError, ValueCastError

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
float64 = np.dtype(np.float64)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
bool_ = np.dtype(np.bool_)
# The array API's complex dtypes (interleaved float pairs): stored, uploaded, downloaded and viewed;
# complex64 moves through the 8-byte movement kernels; arithmetic on them is not implemented yet
# (the ops' dtype checks say so), nor are complex128 copies (no 16-byte movement kernel).
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

ALL = (float32, float16, bfloat16, float64, float8_e4m3fn,
       int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_, complex64, complex128)

# Kernel variant tags of the float families (the inventory's f32/f16/bf16/f64 monomorphization).
FLOAT_TAGS = {float32: "f32", float16: "f16", bfloat16: "bf16", float64: "f64"}
TAG_DTYPES = {v: k for k, v in FLOAT_TAGS.items()}


def dtype(d):
    """Normalize anything numpy/ml_dtypes/torch-style names into a supported numpy dtype."""
    if isinstance(d, str) and d in ("bf16", "f16", "f32", "f64"):
        return TAG_DTYPES[d]
    if type(d).__module__ == "torch":   # torch.float32 ...: by name (torch.bool -> bool), no torch import
        d = str(d).removeprefix("torch.")
    try:
        dt = np.dtype(d)
    except TypeError:
        dt = None
    if dt is None or dt not in ALL:
        names = ", ".join(str(t) for t in ALL)
        raise DTypeError(f"unsupported dtype {d!r}; fuelvk supports {names}")
    return dt


def float_tag(op, dt, accepted=FLOAT_TAGS):
    """The f32/f16/bf16/f64 tag of dt, or a DTypeError naming the op and what it accepts."""
    tag = accepted.get(dt) if isinstance(accepted, dict) else (FLOAT_TAGS.get(dt) if dt in accepted else None)
    if tag is None:
        ok = ", ".join(str(t) for t in (accepted if not isinstance(accepted, dict) else accepted.keys()))
        raise DTypeError(f"{op}: dtype {dt} is not supported; accepted: {ok}")
    return tag


def width_tag(dt):
    """The byte-width tag (b1/b2/b4/b8) of the dtype-agnostic movement kernels."""
    if dt.itemsize > 8:
        raise DTypeError(f"{dt} ({dt.itemsize}-byte elements) cannot be moved by fuelvk's kernels yet; "
                         "the movement kernels take 1, 2, 4 and 8-byte elements")
    return f"b{dt.itemsize}"


def scalar_as(op, value, dt):
    """A real scalar as a 0-d numpy array of dt, under numpy's ``a[i] = value`` rule.

    One place for every Python/numpy scalar that becomes an element (fill values, setitem, scalar
    operands): integer dtypes take integers in range and finite floats (truncated toward zero), and
    refuse NaN, inf and out-of-range values (ValueCastError) instead of wrapping around; float and
    bool dtypes round / convert as numpy's cast does.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not (isinstance(value, numbers.Real) and not isinstance(value, np.generic)
            or isinstance(value, np.generic) and (value.dtype.kind in "biuf" or value.dtype in ALL)):
        raise DTypeError(f"{op}: expected a real scalar for a {dt} element, got {type(value).__name__} {value!r}")
    if dt.kind in "iu":
        if not isinstance(value, (numbers.Integral, np.integer, np.bool_)):
            f = float(value)
            if not math.isfinite(f):
                raise ValueCastError(f"{op}: {value!r} cannot be stored as {dt} (integers have no NaN or inf)")
            value = math.trunc(f)
        info = np.iinfo(dt)
        if not info.min <= int(value) <= info.max:
            raise ValueCastError(f"{op}: {value!r} is out of range for {dt} ([{info.min}, {info.max}])")
        return np.asarray(int(value), dt)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.integer)) \
                    and not -2**63 <= value < 2**63:
                value = float(value)
            return np.asarray(value).astype(dt)
    except OverflowError:
        raise ValueCastError(f"{op}: {value!r} is out of range for {dt}") from None
