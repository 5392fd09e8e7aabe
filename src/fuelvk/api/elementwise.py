"""Elementwise functions of the array API where fuelvk's op needs more than its real kernel:

- complex operands: the public names (exp, log, sqrt, sin ... atanh, add, multiply, divide, pow,
  abs, sign, square, reciprocal, negative, round, isnan / isinf / isfinite) dispatch complex Arrays
  (and Python complex scalars) to fuelvk.ops.complex (shaders/complex.comp); everything else goes
  to the real op of the same name unchanged. The operators (z * w, -z, abs(z)) reach these
  through fuelvk's top-level names.

- clip(x, /, min=None, max=None): bounds may be None, Python scalars or arrays (broadcast to x's
  shape), any real dtype; the result keeps x's dtype and shape. Float32 with scalar bounds is the
  single clamp kernel (fuelvk.ops.elementwise.clip); everything else is maximum then minimum
  (integer kernels for integers, exact). numpy's positional clip(x, lo, hi) is the same call.
"""
import functools
import inspect
import numbers

import numpy as np

from .. import dtypes as _dt
from .. import layout
from ..array import Array, asarray
from ..errors import DTypeError
from ..ops import complex as _cx
from ..ops import elementwise as _ew
from ..ops import public_ops
from ..ops._core import cached_new
from ..ops.comparison import less
from ..ops.movement import where
from . import utility as _util

__all__ = ["clip"]
_REAL_OPS = dict(public_ops())


def _complex_operands(x1, x2):
    return (_cx.is_complex(x1) or _cx.is_complex(x2)) and (isinstance(x1, Array) or isinstance(x2, Array))


def _complex_aware(name, kind, complex_op=None):
    """The public function `name`: complex operands to fuelvk.ops.complex (`kind` unary / binary),
    the rest to the real op it replaces (fuelvk.ops, or fuelvk.api.utility for pow)."""
    real = getattr(_util, name) if name in _util.__all__ else _REAL_OPS[name]
    cop = complex_op or name
    # real is fuelvk.ops.elementwise's op of this name: a repeat of a geometry it ran is its cached
    # whole-op plan (ops/_core.cached_new, keyed by the op's name and dtype), taken here directly
    cached = real.__module__ == _ew.__name__ and real.__name__ == name and name != "power"

    # The real op's signature (the op specs check it, and FlashInfer-Bench's runner passes arguments
    # by name): anything but plain complex operands goes to the real op as called.
    if kind == "unary":
        @functools.wraps(real)
        def f(*args, **kwargs):
            if len(args) == 1 and not kwargs and isinstance(args[0], Array):
                x = args[0]
                if cached and type(x) is Array:
                    out = cached_new((name, x.dtype), args)
                    if out is not None:
                        return out
                if x.dtype.kind == "c":
                    return _cx.unary(cop, x)
            return real(*args, **kwargs)
    else:
        @functools.wraps(real)
        def f(*args, **kwargs):
            if len(args) == 2 and not kwargs:
                a, b = args
                if type(a) is Array and type(b) is Array:
                    if cached and a.dtype == b.dtype:
                        out = cached_new((name, a.dtype), args)
                        if out is not None:
                            return out
                    if a.dtype.kind != "c" and b.dtype.kind != "c":
                        return real(a, b)    # two real device arrays (the hot path): no complex operand
                if _complex_operands(a, b):
                    return _cx.binary(cop, a, b)
            return real(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (real.__doc__ or f"Elementwise {name}.") + "\n\nComplex operands: fuelvk.ops.complex (C99 Annex G " \
        "special values)."
    return f


for _name in ("negative", "square", "reciprocal", "sign", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt",
              "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "abs"):
    globals()[_name] = _complex_aware(_name, "unary")
    __all__.append(_name)
for _name, _op in (("add", "add"), ("subtract", "subtract"), ("multiply", "multiply"), ("divide", "divide"),
                   ("pow", "pow"), ("power", "pow")):
    globals()[_name] = _complex_aware(_name, "binary", _op)
    __all__.append(_name)
del _name, _op


def _parts(z):
    return _cx.component(z, 0), _cx.component(z, 1)


def isnan(x, /):
    """NaN test; a complex element is NaN when either component is."""
    if isinstance(x, Array) and x.dtype.kind == "c":
        re, im = _parts(x)
        return where(_REAL_OPS["not_equal"](re, re), True, _REAL_OPS["not_equal"](im, im))
    return _util.isnan(x)


def isinf(x, /):
    """Infinity test; a complex element is infinite when either component is (even if the other is NaN)."""
    if isinstance(x, Array) and x.dtype.kind == "c":
        re, im = _parts(x)
        inf_eq = _REAL_OPS["equal"]
        return where(inf_eq(_ew.abs(re), float("inf")), True, inf_eq(_ew.abs(im), float("inf")))
    return _util.isinf(x)


def isfinite(x, /):
    """Finiteness test; a complex element is finite when both components are."""
    if isinstance(x, Array) and x.dtype.kind == "c":
        re, im = _parts(x)
        return where(less(_ew.abs(re), float("inf")), less(_ew.abs(im), float("inf")), False)
    return _util.isfinite(x)


def round(x, /):  # noqa: A001 - the standard's name
    """Round half to even; complex: each component."""
    if isinstance(x, Array) and x.dtype.kind == "c":
        out = x.copy()
        for part in _parts(out):
            part[...] = _REAL_OPS["round"](part)
        return out
    return _REAL_OPS["round"](x)


def _compare_complex(name, x1, x2):
    """x1 == x2 / x1 != x2 with a complex operand: both components compared (exact)."""
    dt = _cx._result_dtype(name, [x1, x2])
    parts = []
    for v in (x1, x2):
        if isinstance(v, Array):
            v = _cx.to_complex(name, v, dt)
            parts.append(_parts(v))
        else:
            c = complex(v)
            parts.append((c.real, c.imag))
    (r1, i1), (r2, i2) = parts
    if name == "equal":
        return where(equal(r1, r2), equal(i1, i2), False)
    return where(not_equal(r1, r2), True, not_equal(i1, i2))


@functools.wraps(_REAL_OPS["equal"])
def equal(*args, **kwargs):
    if len(args) == 2 and not kwargs and _complex_operands(*args):
        return _compare_complex("equal", *args)
    return _REAL_OPS["equal"](*args, **kwargs)


@functools.wraps(_REAL_OPS["not_equal"])
def not_equal(*args, **kwargs):
    if len(args) == 2 and not kwargs and _complex_operands(*args):
        return _compare_complex("not_equal", *args)
    return _REAL_OPS["not_equal"](*args, **kwargs)


def astype(x, dtype, /, *, copy=True, device=None):
    """x cast to dtype (fuelvk.ops.casts.astype, complex dtypes included), on device= when given; complex
    to bool is x != 0 (numpy's, torch's: true where either part is nonzero)."""
    if isinstance(x, Array) and device is not None:
        x = x.to_device(device)     # the standard: the result lives on device= (itself where x does)
    if _cx.is_complex(x) and isinstance(x, Array) and _dt.dtype(dtype) == _dt.bool_:
        return not_equal(x, 0)
    return _REAL_OPS["astype"](x, dtype, copy=copy, device=device)


__all__ += ["isnan", "isinf", "isfinite", "round", "astype", "equal", "not_equal"]



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
    """Clamp x to [min, max] (either may be None; NaN in x or in a bound gives NaN). numpy in, numpy
    out, as fuelvk's ops."""
    if isinstance(x, np.ndarray):
        up = [asarray(v) if isinstance(v, np.ndarray) else v for v in (x, min, max)]
        return clip(*up).numpy()
    if not isinstance(x, Array):
        raise DTypeError(f"clip: expected a fuelvk.Array, got {type(x).__name__}")
    if x.dtype == _dt.bool_ or x.dtype.kind == "c":
        raise DTypeError(f"clip: x must have a real numeric dtype, got {x.dtype}")
    lo, hi = _bound("clip", x, min), _bound("clip", x, max)
    shape = layout.broadcast_shapes("clip", x.shape, *[b.shape for b in (lo, hi) if isinstance(b, Array)])
    if shape != x.shape:
        x = x.broadcast_to(shape)    # the result takes the shape of x and the bounds broadcast (numpy's)
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


# The op each function extends, for inspect.unwrap (the op records and specs describe that op);
# clip keeps the standard's signature for inspect.signature.
round.__wrapped__, astype.__wrapped__ = _REAL_OPS["round"], _REAL_OPS["astype"]
clip.__signature__ = inspect.signature(clip)
clip.__wrapped__ = _ew.clip
