"""Inspection and data-type functions of the array API: __array_namespace_info__, isdtype,
result_type, can_cast, finfo, iinfo, and the Device object arrays report.

All host-side metadata (dtypes are numpy dtype objects, as in numpy and CuPy): no device work.
"""
import ml_dtypes
import numpy as np

from .. import dtypes as _dt
from ..array import Array
from .._device import DEVICE, Device, check_device, devices  # noqa: F401 (the standard's names)
from ..errors import DTypeError

__all__ = ["__array_namespace_info__", "isdtype", "result_type", "can_cast", "finfo", "iinfo", "Device",
           "devices"]


# Standard dtype names fuelvk stores (float64 where the device has shaderFloat64; the kernels say so).
_STANDARD = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
             "float64", "complex64", "complex128")
_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f" or d in (_dt.bfloat16, _dt.float8_e4m3fn),
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc" or d in (_dt.bfloat16, _dt.float8_e4m3fn),
}


class _Info:
    """What __array_namespace_info__() returns (the standard's inspection API)."""

    def capabilities(self):
        # nonzero / unique_* / x[mask] read their output length back (a synchronization, as CuPy).
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def extensions(self):
        """The standard's extensions fuelvk implements (beyond the standard's inspection API, which has no
        such query): linalg; the fft extension is out of scope (fuelvk.fft does not exist)."""
        return ("linalg",)

    def default_device(self):
        return DEVICE

    def devices(self):
        return devices()

    def default_dtypes(self, *, device=None):
        check_device("default_dtypes", device)
        return {"real floating": _dt.float32, "complex floating": _dt.complex64,
                "integral": _dt.int64, "indexing": _dt.int64}

    def dtypes(self, *, device=None, kind=None):
        check_device("dtypes", device)
        out = {n: np.dtype(n) for n in _STANDARD}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if isdtype(d, kind)}


def __array_namespace_info__():
    return _Info()


def _as_dtype(op, x):
    if isinstance(x, Array):
        return x.dtype
    try:
        return np.dtype(x)
    except TypeError:
        raise DTypeError(f"{op}: expected a dtype or an array, got {type(x).__name__} {x!r}") from None


def isdtype(dtype, kind):
    """The standard's isdtype: kind is a dtype, a kind name, or a tuple of them."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    dtype = _as_dtype("isdtype", dtype)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise DTypeError(f"isdtype: unknown kind {kind!r}; accepted: {', '.join(_KINDS)} or a dtype")
        return _KINDS[kind](dtype)
    return dtype == _as_dtype("isdtype", kind)


def result_type(*arrays_and_dtypes):
    """The promoted dtype (numpy 2's rules, a superset of the standard's table; Python scalars are weak)."""
    if not arrays_and_dtypes:
        raise DTypeError("result_type: needs at least one array or dtype")
    args = [a if isinstance(a, (bool, int, float, complex)) else _as_dtype("result_type", a)
            for a in arrays_and_dtypes]
    if all(isinstance(a, (bool, int, float, complex)) for a in args):
        raise DTypeError("result_type: needs at least one array or dtype (got only Python scalars)")
    return np.result_type(*args)


def can_cast(from_, to):
    """Whether from_ (a dtype or array) casts to `to` under the standard's (numpy's 'safe') rule."""
    return bool(np.can_cast(_as_dtype("can_cast", from_), _as_dtype("can_cast", to), "safe"))


class finfo_object:  # noqa: N801 - the standard's name
    """The standard's finfo result: Python floats, and the real dtype (float32 for complex64)."""
    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype")

    def __init__(self, f, dtype):
        self.bits, self.dtype = int(f.bits), dtype
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.smallest_normal = float(f.smallest_normal)

    def __repr__(self):
        return f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, dtype={self.dtype})"


class iinfo_object:  # noqa: N801
    """The standard's iinfo result: Python ints."""
    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, i, dtype):
        self.bits, self.max, self.min, self.dtype = int(i.bits), int(i.max), int(i.min), dtype

    def __repr__(self):
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"


def finfo(type):  # noqa: A002 - the standard's name
    """Machine limits of a float dtype (bits, eps, max, min, smallest_normal, dtype); a complex dtype
    gives its real component's."""
    dt = _as_dtype("finfo", type)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt == _dt.complex64 else np.float64)
    if dt.kind != "f" and dt not in (_dt.bfloat16, _dt.float8_e4m3fn):
        raise DTypeError(f"finfo: {dt} is not a floating dtype")
    return finfo_object(ml_dtypes.finfo(dt) if dt.kind == "V" or dt in (_dt.bfloat16, _dt.float8_e4m3fn)
                        else np.finfo(dt), dt)


def iinfo(type):  # noqa: A002
    """Machine limits of an integer dtype (bits, max, min, dtype)."""
    dt = _as_dtype("iinfo", type)
    if dt.kind not in "iu":
        raise DTypeError(f"iinfo: {dt} is not an integer dtype")
    return iinfo_object(np.iinfo(dt), dt)
