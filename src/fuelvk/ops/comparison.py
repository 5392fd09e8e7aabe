"""Comparisons (array-API names): equal, not_equal, less, less_equal, greater, greater_equal.

Elementwise on the device, for every dtype fuelvk stores, with numpy broadcasting; the result is a
bool Array (numpy in -> numpy out). One kernel family, shaders/compare.comp, compares through the
element bits, so results are exact (NaN unordered, -0 == +0, no denormal flushing).

Operand dtypes follow numpy's promotion: a Python scalar is weak (it takes the array's dtype, NEP
50); float dtypes are promoted with astype. An integer or bool array compared with a scalar is
compared exactly, as numpy does: an integer outside the dtype's range gives the all-True / all-False
answer (numpy 2's rule), a float bound is rounded to the integer that gives the same answer (exact
because numpy compares such ints in float64 without loss; int64 against a float is refused, since
numpy rounds int64 to float64 there). Two arrays of different dtypes are cast to numpy's result
dtype first, as numpy does.
"""
import math

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import asarray, complex_part
from ..errors import DTypeError
from ..kernels import kernel
from ..kernels.elementwise import COMPARE, COMPARE_OPS, FLAGS
from ._core import device_args, element_words, is_scalar, launch_strided, new_like, promote, result
from .movement import where

__all__ = list(COMPARE_OPS)

TAGS = {_dt.float32: "f32", _dt.float16: "f16", _dt.bfloat16: "bf16", _dt.float64: "f64",
        _dt.float8_e4m3fn: "f8e4m3fn", _dt.int8: "i8", _dt.int16: "i16", _dt.int32: "i32", _dt.int64: "i64",
        _dt.uint8: "u8", _dt.uint16: "u16", _dt.uint32: "u32", _dt.uint64: "u64", _dt.bool_: "bool"}
_FLOATS = (_dt.float32, _dt.float16, _dt.bfloat16, _dt.float64, _dt.float8_e4m3fn)
_MIRROR = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
           "greater": "less", "greater_equal": "less_equal"}   # s OP x == x MIRROR[OP] s


def _constant(op, shape, value):
    """The all-True / all-False answer (a scalar outside every value the array can hold)."""
    out = new_like(shape, _dt.bool_)
    runtime.get().stream.fill(out.buffer, (out.nbytes + 3) & ~3, 0x01010101 if value else 0)
    return out


def _int_bound(op, x, s):
    """(op, int scalar) equivalent to `x op s` for an integer/bool array x and a real scalar s,
    or (None, answer) when every element gives the same answer."""
    if not isinstance(s, (int, np.integer, bool, np.bool_)):
        f = float(s)
        if x.dtype == _dt.int64:
            raise DTypeError(f"{op}: comparing an int64 array with the float {s!r}: numpy rounds the int64 "
                             "values to float64 first, and fuelvk has no int64 -> float64 cast kernel; "
                             "compare with an integer")
        if math.isnan(f):
            return None, op == "not_equal"
        if math.isinf(f):
            return None, {"equal": False, "not_equal": True}.get(op, (f > 0) == (op in ("less", "less_equal")))
        if f != math.floor(f) and op in ("equal", "not_equal"):
            return None, op == "not_equal"
        s = math.ceil(f) if op in ("less", "greater_equal") else math.floor(f)
    s = int(s)
    info = np.iinfo(_dt.uint8 if x.dtype == _dt.bool_ else x.dtype)
    if info.min <= s <= info.max:
        return op, s
    above = s > info.max          # s is above (below) every element
    return None, {"equal": False, "not_equal": True}.get(op, above == (op in ("less", "less_equal")))


def _compare(op, a, b):
    a_s, b_s = is_scalar(a), is_scalar(b)
    if a_s and b_s:            # two scalars: the left one becomes a 0-d array of numpy's result dtype
        return _compare(op, np.asarray(a, np.result_type(a, b)), b)
    if a_s:
        return _compare(_MIRROR[op], b, a)
    if b_s:
        (x,), numpy_out = device_args(op, a)
        if x.dtype.kind == "c":     # == / != against the scalar as a 0-d array of x's dtype (else DTypeError)
            return result(_complex_equality(op, x, asarray(np.asarray(b, x.dtype))), numpy_out)
        dt = np.result_type(x.dtype, b)
        if x.dtype not in _FLOATS:
            k_op, s = _int_bound(op, x, b)
            if k_op is None:
                return result(_constant(op, x.shape, s), numpy_out)
            op, dt = k_op, (_dt.uint8 if x.dtype == _dt.bool_ else x.dtype)
            words = element_words(op, s, dt)
        else:
            x = promote(op, [x], dt)[0]
            words = element_words(op, b, x.dtype)
        out = new_like(x.shape, _dt.bool_)
        launch_strided(_variant(op, x.dtype), out, [x, x], {"OP": COMPARE[op]}, s1=words,
                       flags_extra=FLAGS["b_scalar"])
        return result(out, numpy_out)
    (x, y), numpy_out = device_args(op, a, b)
    if x.dtype.kind == "c" or y.dtype.kind == "c":
        return result(_complex_equality(op, x, y), numpy_out)
    if x.dtype != y.dtype:
        x, y = promote(op, [x, y])     # numpy's result dtype (icast.comp / cast.comp)
    out = new_like(layout.broadcast_shapes(op, x.shape, y.shape), _dt.bool_)
    launch_strided(_variant(op, x.dtype), out, [x, y], {"OP": COMPARE[op]})
    return result(out, numpy_out)


def _complex_equality(op, x, y):
    """== / != of complex arrays: both components compared (exact), through their float views."""
    if op not in ("equal", "not_equal") or x.dtype != y.dtype:
        raise DTypeError(f"{op}: complex operands support == and != of one complex dtype, got {x.dtype} {op} "
                         f"{y.dtype}")
    re = _compare(op, complex_part(x, 0), complex_part(y, 0))
    im = _compare(op, complex_part(x, 1), complex_part(y, 1))
    return where(re, True, im) if op == "not_equal" else where(re, im, False)


def _variant(op, dt):
    tag = TAGS.get(dt)
    if tag is None:
        raise DTypeError(f"{op}: dtype {dt} is not supported; accepted: {', '.join(map(str, TAGS))}")
    return kernel("compare", tag)


def _make(name):
    def f(a, b):
        return _compare(name, a, b)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Elementwise {name}(a, b) -> bool, numpy semantics and broadcasting, every dtype fuelvk "
                 "stores (Python / numpy scalars on either side).")
    return f


for _name in COMPARE_OPS:
    globals()[_name] = _make(_name)
del _name


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, binary as _binary_rule, declare

_SYMBOL = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
declare(*(OpDef(_n, globals()[_n], lambda a, b: Meta(_binary_rule(a, b).shape, np.dtype(bool)),
                reference=f"a {_SYMBOL[_n]} b", schema="(Tensor a, Tensor b) -> Tensor") for _n in COMPARE_OPS))
