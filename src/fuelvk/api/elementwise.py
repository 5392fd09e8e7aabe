"""Elementwise functions of the array API whose standard signature differs from fuelvk's op:

- clip(x, /, min=None, max=None): bounds may be None, Python scalars or arrays (broadcast to x's
  shape), any real dtype; the result keeps x's dtype and shape. Float32 with scalar bounds is the
  single clamp kernel (fuelvk.ops.elementwise.clip); everything else is maximum then minimum
  (integer kernels for integers, exact). numpy's positional clip(x, lo, hi) is the same call.
"""
import numbers

import numpy as np

from .. import dtypes as _dt
from .. import layout as L
from ..array import Array
from ..errors import DTypeError, ShapeError
from ..ops import elementwise as _ew

__all__ = ["clip"]


def _bound(op, x, v):
    """v as something maximum / minimum take against x without changing x's dtype."""
    if v is None or isinstance(v, Array):
        return v
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.generic)):
        raise DTypeError(f"{op}: a bound must be None, a real Python scalar or a fuelvk.Array, got {v!r}")
    if x.dtype.kind in "iu":
        if not float(v).is_integer():
            raise DTypeError(f"{op}: a float bound {v!r} with an integer array ({x.dtype})")
        info = np.iinfo(x.dtype)
        return int(min(max(int(v), info.min), info.max))   # outside the dtype's range: it cannot bind
    return float(v)


def clip(x, /, min=None, max=None):  # noqa: A002 - the standard's names
    """Clamp x to [min, max] (either may be None; NaN in x or in a bound gives NaN)."""
    if not isinstance(x, Array):
        raise DTypeError(f"clip: expected a fuelvk.Array, got {type(x).__name__}")
    if x.dtype == _dt.bool_ or x.dtype.kind == "c":
        raise DTypeError(f"clip: x must have a real numeric dtype, got {x.dtype}")
    lo, hi = _bound("clip", x, min), _bound("clip", x, max)
    for b in (lo, hi):
        if isinstance(b, Array) and L.broadcast_shapes("clip", b.shape, x.shape) != x.shape:
            raise ShapeError(f"clip: a bound of shape {b.shape} does not broadcast to x's shape {x.shape}")
    if x.dtype == _dt.float32 and not isinstance(lo, Array) and not isinstance(hi, Array):
        return _ew.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    out = x
    if lo is not None:
        out = _ew.maximum(out, lo.astype(x.dtype) if isinstance(lo, Array) and lo.dtype != x.dtype else lo)
    if hi is not None:
        out = _ew.minimum(out, hi.astype(x.dtype) if isinstance(hi, Array) and hi.dtype != x.dtype else hi)
    if out is x:
        return x.copy()
    return out if out.dtype == x.dtype else out.astype(x.dtype)
