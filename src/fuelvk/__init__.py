"""fuelvk: ML kernels on any Vulkan device, with a numpy-style API.

    import fuelvk as fv
    a = fv.asarray(np.ones((4, 4), np.float32))
    b = fv.exp(a) + 1.0          # Array in -> Array out
    fv.exp(np.ones(3))           # numpy in -> numpy out
"""
import inspect as _inspect

from . import dtypes
from ._device import on_device as _on_device
from .array import Array, asarray, empty, zeros
from .dtypes import (bfloat16, bool_, complex64, complex128, float8_e4m3fn, float16, float32, float64, int8, int16,
                     int32, int64, uint8, uint16, uint32, uint64)
from .errors import (BuildError, DeviceError, DTypeError, FuelVKError, FuelVKIndexError, FuelVKMemoryError,
                     ShapeError, UnsupportedError, ValueCastError, FormatError, LinAlgError)
from .info import device_info, memory_info, synchronize
from . import quant  # noqa: E402,F401  (fuelvk.quant namespace)
from .ops import public_ops as _public_ops

__version__ = "0.1.0"

_WRAPPED = {}


def _on_inputs_device(fn):
    """A public function wrapped to run on its inputs' device (fuelvk._device.on_device); one wrapper per
    function, so a name exported twice (fv.matmul, fv.linalg.matmul) stays one object. Classes and the
    inspection functions (no device work) stay as they are."""
    if not _inspect.isfunction(fn) or fn.__module__ in ("fuelvk.api.info", "fuelvk._device") \
            or _WRAPPED.get(getattr(fn, "__wrapped__", None)) is fn:      # already a wrapper (Array's hooks)
        return fn
    if fn not in _WRAPPED:
        _WRAPPED[fn] = _on_device(fn)
    return _WRAPPED[fn]


asarray, empty, zeros = _on_inputs_device(asarray), _on_inputs_device(empty), _on_inputs_device(zeros)

#: Public ops (each has a spec in fuelvk/specs): every name in an ops module's __all__, except the
#: route pickers (`matmul_route`, ...), which report a choice rather than compute.
OPS = []
for _name, _fn in _public_ops():
    globals()[_name] = _on_inputs_device(_fn)
    if not _name.endswith("_route"):
        OPS.append(_name)
del _name, _fn

#: The Python array API namespace (README "Array API"): fuelvk's top level is it. Functions composed
#: from the ops above live in fuelvk.api (no kernel, no op spec of their own).
from .api import public as _api_public   # noqa: E402
__array_api_version__ = "2024.12"
_API = [n for n, _ in _api_public()]
for _name, _fn in _api_public():
    globals()[_name] = _on_inputs_device(_fn)
del _name, _fn
from .api import linalg   # noqa: E402  (the array API's linalg extension)
for _mod in (linalg, quant):
    for _name in _mod.__all__:
        setattr(_mod, _name, _on_inputs_device(getattr(_mod, _name)))
del _mod, _name
from . import _hooks   # noqa: E402
from .api.searching import boolean_index as _boolean_index   # noqa: E402
# Array's operators and methods (a + b, a.astype, a[mask], ...) call the ops bound here (array.py sits
# below the ops in the import graph, so it cannot import them).
_hooks.bind(**{_name: globals()[_name] for _name in OPS + _API + [n for n, _ in _public_ops()]},
            boolean_index=_boolean_index)
_hooks.bind(**{_name: _on_inputs_device(_fn) for _name, _fn in _hooks._OPS.items()})   # helpers bound raw
e, inf, nan, pi, newaxis = 2.718281828459045, float("inf"), float("nan"), 3.141592653589793, None

__all__ = ["Array", "asarray", "empty", "zeros", "synchronize", "device_info", "memory_info", "dtypes",
           "FuelVKError", "DTypeError", "ShapeError", "FuelVKIndexError", "FuelVKMemoryError",
           "UnsupportedError", "DeviceError", "BuildError", "ValueCastError", "FormatError", "LinAlgError",
           "float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "bool_", "bool", "complex64", "complex128",
           "__array_api_version__", "e", "inf", "nan", "pi", "newaxis", "linalg"] + [n for n, _ in _public_ops()] + _API

bool = bool_  # noqa: A001 - the array API's name of the bool dtype (shadows the builtin in this module only)
