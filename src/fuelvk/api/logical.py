"""Logical functions (and the bitwise ones on bool arrays) of the array API, composed exactly from
two bit-exact kernels: the comparisons (compare.comp) and the select of fuelvk.where
(strided_copy + masked_copy). Non-bool inputs are first made bool by `x != 0` (numpy's truth rule:
NaN is true).

    logical_not(a)    = a == False          logical_xor(a, b) = a != b
    logical_and(a, b) = where(a, b, False)  logical_or(a, b)  = where(a, True, b)

Bitwise functions on integer dtypes run the integer kernel (shaders/intops.comp).
"""
from .. import dtypes as _dt
from ..array import Array, asarray
from ..errors import DTypeError
from ..ops.comparison import equal, not_equal
from ..ops.elementwise import int_binary, int_unary
from ..ops.movement import where

__all__ = ["logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
           "bitwise_invert"]


def _bool(x):
    if not isinstance(x, Array):
        x = asarray(x)
    return x if x.dtype == _dt.bool_ else not_equal(x, 0)


def logical_not(x, /):
    """Elementwise not x as bool (nonzero is True)."""
    return equal(_bool(x), False)


def logical_xor(x1, x2, /):
    """Elementwise x1 xor x2 as bool (nonzero is True), broadcast."""
    return not_equal(_bool(x1), _bool(x2))


def logical_and(x1, x2, /):
    """Elementwise x1 and x2 as bool (nonzero is True), broadcast."""
    return where(_bool(x1), _bool(x2), False)


def logical_or(x1, x2, /):
    """Elementwise x1 or x2 as bool (nonzero is True), broadcast."""
    return where(_bool(x1), True, _bool(x2))


def _bitwise(name, fn):
    def f(x1, x2, /):
        if _is_bool(x1) and _is_bool(x2):
            return fn(x1, x2)
        if _is_float(x1) or _is_float(x2):
            raise DTypeError(f"{name}: bitwise ops take integer or bool operands, got {_dtype_name(x1)} and "
                             f"{_dtype_name(x2)}")
        return int_binary(name, x1, x2)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}: the logical op on bool arrays, shaders/intops.comp on integers."
    return f


def _is_float(x):
    return isinstance(x, float) or isinstance(x, Array) and x.dtype.kind not in "biu"


def _is_bool(x):
    return isinstance(x, bool) or isinstance(x, Array) and x.dtype == _dt.bool_


def _dtype_name(x):
    return str(x.dtype) if isinstance(x, Array) else type(x).__name__


bitwise_and = _bitwise("bitwise_and", logical_and)
bitwise_or = _bitwise("bitwise_or", logical_or)
bitwise_xor = _bitwise("bitwise_xor", logical_xor)


def bitwise_invert(x, /):
    """~x: logical_not for bool arrays, the bits' complement for integers."""
    if _is_bool(x):
        return logical_not(x)
    if _is_float(x):
        raise DTypeError(f"bitwise_invert: takes an integer or bool operand, got {_dtype_name(x)}")
    return int_unary("bitwise_invert", x)
