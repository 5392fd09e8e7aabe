"""Elementwise ops (numpy names): unary math, binary arithmetic with broadcasting, affine, clip, power.

Every float op runs the one generic kernel (shaders/elementwise.comp) in f32/f16/bf16/f64; inputs may
be any view (strided, broadcast, negative steps, offsets), half types compute in f32. Integer arrays
(add, subtract, multiply, maximum, minimum, negative, abs, square, sign; and the array API's
floor_divide, remainder, bitwise ops through int_binary / int_unary) run shaders/intops.comp, exact.
"""
import math
import operator

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..array import Array
from ..errors import DTypeError, ValueCastError
from ..kernels.elementwise import (API_BINARY_OPS, BINARY, BINARY_OPS, F32_F64_ONLY, FLAGS, FUSABLE_UNARY, FUSED_NONE,
                                   MATH_OPS, NO_F64, ROUNDING_OPS, UNARY, UNARY_OPS, variant)
from ..kernels import kernel
from ..kernels.intops import INT_BINARY, INT_BINARY_OPS, INT_UNARY, INT_UNARY_OPS
from ._core import (ZERO2, cached_new, device_args, element_words, is_scalar, launch_new, launch_strided, new_like,
                    promote, result, scalar_words)
from .casts import astype
from .movement_core import copy

__all__ = list(UNARY_OPS) + list(ROUNDING_OPS) + list(MATH_OPS) + list(BINARY_OPS) + ["affine", "clip", "power",
                                                                                      "silu_mul", "gelu_mul"]


def _unary(op, family, x, spec=None, s0=ZERO2, s1=ZERO2, accepted=_dt.FLOAT_TAGS):
    """One launch of a single-input family; s0/s1 are scalar arguments (Python values), spec its
    specialization constants by name."""
    plain = s0 is ZERO2 and s1 is ZERO2     # no scalar: the op and dtype fix the whole launch
    if plain and type(x) is Array:
        out = cached_new((op, x.dtype), (x,))
        if out is not None:
            return out
    (x,), numpy_out = device_args(op, x)
    tag = _dt.float_tag(op, x.dtype, accepted)
    words = [scalar_words(op, s, x.dtype) if not isinstance(s, tuple) else s for s in (s0, s1)]
    out = launch_new((op, x.dtype) if plain else None, variant(family, tag, runtime.get().device.features), (x,),
                     x.shape, x.dtype, spec=spec, s0=words[0], s1=words[1])
    return result(out, numpy_out)


def _make_unary(name):
    spec = {"OP": UNARY[name]}

    def f(x):
        if name in INT_UNARY_OPS and _is_int(x):
            return int_unary(name, x)
        return _unary(name, "unary", x, spec=spec)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(x) (numpy semantics; f32/f16/bf16/f64)."
    return f


for _name in UNARY_OPS:
    if _name != "heaviside":
        globals()[_name] = _make_unary(_name)
abs = globals()["abs"]  # noqa: A001 - numpy's name


def _make_rounding(name):
    spec = {"OP": UNARY[name]}

    def f(x):
        if isinstance(x, Array) and x.dtype.kind in "biu":
            return copy(x)          # integers (and bools) are already integral: the standard's identity
        return _unary(name, "unary", x, spec=spec)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Elementwise {name}(x) (numpy semantics{', half to even' if name == 'round' else ''}; exact, "
                 "f32/f16/bf16/f64; integer arrays are returned as a copy).")
    return f


for _name in ROUNDING_OPS:
    globals()[_name] = _make_rounding(_name)
round = globals()["round"]  # noqa: A001 - numpy's name


def _accepted(name):
    """The float tags op `name` runs in (see kernels/elementwise.NO_F64 / F32_F64_ONLY)."""
    if name not in NO_F64 and name not in F32_F64_ONLY:
        return _dt.FLOAT_TAGS
    if name in NO_F64:
        return {d: t for d, t in _dt.FLOAT_TAGS.items() if t != "f64"}
    if name in F32_F64_ONLY:
        return {d: t for d, t in _dt.FLOAT_TAGS.items() if t in ("f32", "f64")}
    return _dt.FLOAT_TAGS


def _make_math(name):
    spec, accepted = {"OP": UNARY[name]}, _accepted(name)

    def f(x):
        return _unary(name, "unary", x, spec=spec, accepted=accepted)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(x) (numpy semantics, to a few ulp; {', '.join(_accepted(name).values())})."
    return f


for _name in MATH_OPS:
    globals()[_name] = _make_math(_name)


def heaviside(x, h0=0.0):
    """numpy.heaviside(x, h0) with a scalar h0: 0 for x < 0, h0 at 0, 1 for x > 0, NaN stays NaN."""
    return _unary("heaviside", "unary", x, spec={"OP": UNARY["heaviside"]}, s0=h0)


def rsqrt(x):
    """torch.rsqrt: 1 / sqrt(x) in one launch (two roundings in the compute type, torch CPU's bits; half
    types compute in f32 and round once). Not an array API function, so not exported: the PyTorch
    device's aten.rsqrt (and pow(x, -0.5)) call it."""
    return _unary("rsqrt", "unary", x, spec={"OP": UNARY["rsqrt"]})


_INT_TAGS = {_dt.int8: "i8", _dt.int16: "i16", _dt.int32: "i32", _dt.int64: "i64", _dt.uint8: "u8",
             _dt.uint16: "u16", _dt.uint32: "u32", _dt.uint64: "u64"}


def _int_scalar(op, value, dt):
    """An integer scalar operand of an integer array (a float scalar would make numpy promote to a
    float dtype, and fuelvk has no int -> float cast kernel yet)."""
    if isinstance(value, (float, np.floating)):
        raise DTypeError(f"{op}: a float scalar with a {dt} array: numpy promotes to a float dtype; cast the "
                         "array first (x.astype(...)) or use an integer scalar")
    return element_words(op, value, dt)


def int_binary(op, a, b):
    """Integer a OP b (shaders/intops.comp) for the ops in kernels/intops.INT_BINARY_OPS; a and b
    are Arrays of one integer dtype, or one of them a Python / numpy integer scalar."""
    a_s, b_s = is_scalar(a), is_scalar(b)
    if not a_s and not b_s:
        (a, b), numpy_out = device_args(op, a, b)
        if a.dtype != b.dtype:
            dt = np.result_type(a.dtype, b.dtype)
            if dt.kind not in "iu":
                raise DTypeError(f"{op}: operands of dtypes {a.dtype} and {b.dtype} promote to {dt}; {op} takes "
                                 "integer operands")
            a, b = promote(op, [a, b])
    else:
        (arr,), numpy_out = device_args(op, b if a_s else a)
        a, b = (a, arr) if a_s else (arr, b)
    dt = (b if a_s else a).dtype
    tag = _INT_TAGS.get(dt)
    if tag is None:
        raise DTypeError(f"{op}: dtype {dt} is not an integer dtype fuelvk computes in; accepted: "
                         f"{', '.join(map(str, _INT_TAGS))}")
    if op == "pow":
        _refuse_negative_exponent(b, b_s, dt)
    out = _launch_binary(op, kernel("int_binary", tag), {"OP": INT_BINARY[op]}, a, b, a_s, b_s, dt,
                         _int_scalar)
    return result(out, numpy_out)


def _refuse_negative_exponent(b, b_s, dt):
    """numpy's rule for integer ** integer: a negative exponent is a ValueError (the standard leaves it
    unspecified). An exponent array of a signed dtype is checked on the device: its negative elements
    counted (a float32 sum of 0 / 1, exact: any nonzero count is > 0), one synchronisation."""
    if b_s:
        neg = b < 0
    elif dt.kind == "i" and b.size:
        from .comparison import less
        from .movement import where
        from .reduction import sum as _sum
        neg = _sum(where(less(b, 0), 1.0, 0.0)).item() > 0
    else:
        neg = False
    if neg:
        raise ValueCastError("pow: integers to negative integer powers are not allowed (numpy's rule); cast the "
                             "base to a float dtype first")


def _launch_binary(op, v, spec, a, b, a_s, b_s, dt, words, op_key=None):
    """out = a OP b through binary-kernel variant v; a scalar operand (a_s / b_s) is passed as push-constant
    words (words(op, value, dt)) with the array bound twice and FLAGS a_scalar / b_scalar telling the
    kernel which; spec: the variant's specialization constants by name; op_key: the whole-op plan key
    (_scalar_key) a scalar launch is cached under."""
    if a_s:
        return launch_new(op_key, v, (b, b), b.shape, dt, spec, s0=words(op, a, dt), flags_extra=FLAGS["a_scalar"])
    elif b_s:
        return launch_new(op_key, v, (a, a), a.shape, dt, spec, s1=words(op, b, dt), flags_extra=FLAGS["b_scalar"])
    else:
        out = new_like(layout.broadcast_shapes(op, a.shape, b.shape), dt)
        launch_strided(v, out, [a, b], spec)
    return out


def int_unary(op, x):
    """Integer OP(x) (shaders/intops.comp) for kernels/intops.INT_UNARY_OPS."""
    (x,), numpy_out = device_args(op, x)
    tag = _INT_TAGS.get(x.dtype)
    if tag is None:
        raise DTypeError(f"{op}: dtype {x.dtype} is not an integer dtype fuelvk computes in")
    out = new_like(x.shape, x.dtype)
    launch_strided(kernel("int_unary", tag), out, [x], {"OP": INT_UNARY[op]})
    return result(out, numpy_out)


def _is_int(x):
    d = getattr(x, "dtype", None)
    return isinstance(x, (Array, np.ndarray)) and d in _INT_TAGS


_BINARY_SPEC = {name: {"OP": i} for name, i in BINARY.items()}   # one dict per op: launch_strided's key


def _binary(op, a, b):
    if type(a) is Array and type(b) is Array and a.dtype == b.dtype:
        # The common case first (two device arrays of one float dtype; every check below is the
        # general path's, in its order): no scalar, upload or promotion to consider; a repeat of a
        # geometry is one cached plan (cached_new).
        dt = a.dtype
        out = cached_new((op, dt), (a, b))
        if out is not None:
            return out
        tag = _accepted(op).get(dt)
        pa, pb = a.buffer.pool, b.buffer.pool
        if tag is not None and pa is not None and not pa.closed and pb is not None and not pb.closed:
            shape = a.shape if a.shape == b.shape else layout.broadcast_shapes(op, a.shape, b.shape)
            return launch_new((op, dt), variant("binary", tag, runtime.get().device.features), (a, b), shape, dt,
                              _BINARY_SPEC[op])
    skey = _scalar_key(op, a, b)
    if skey is not None:
        arr = a if skey[2] == "b" else b
        out = cached_new(skey, (arr, arr))
        if out is not None:
            return out
    if op in INT_BINARY_OPS and (_is_int(a) or _is_int(b)):
        arrays = isinstance(a, (Array, np.ndarray)) and isinstance(b, (Array, np.ndarray))
        if not arrays or a.dtype == b.dtype:
            return int_binary(op, a, b)
        if np.result_type(a.dtype, b.dtype).kind in "iu":     # int8 + int16, int + bool: numpy's int result
            (a, b), numpy_out = device_args(op, a, b)
            return result(int_binary(op, *promote(op, [a, b])), numpy_out)
        # int with float (or uint64 with int64): numpy's float result, through the float kernel below
    a_s, b_s = is_scalar(a), is_scalar(b)
    if a_s and b_s:
        a, b = device_args(op, a, b)[0]  # both scalars: numpy arrays of numpy's dtype
        numpy_out, a_s, b_s = True, False, False
    else:
        a, b, numpy_out = _operands(op, a, b, a_s, b_s)
    dt = (b if a_s else a).dtype
    if op == "divide" and dt.kind in "biu":      # numpy's true division of integers: float64
        a, b = (a if a_s else astype(a, _dt.float64)), (b if b_s else astype(b, _dt.float64))
        dt = _dt.float64
    tag = _dt.float_tag(op, dt, _accepted(op))
    v = variant("binary", tag, runtime.get().device.features)
    if skey is not None and (b if a_s else a) is not arr:   # the array was converted: no plan for the original
        skey = None
    return result(_launch_binary(op, v, {"OP": BINARY[op]}, a, b, a_s, b_s, dt, scalar_words, skey), numpy_out)


def _scalar_key(op, a, b):
    """The whole-op plan key (ops/_core.cached_new) of a device Array OP a Python float / int scalar: the
    op, the array's dtype, the scalar's side, type and value, and the sign of a float (-0.0 == 0.0, but
    they add differently); None for other operands, and for NaN (never equal to itself: no repeat)."""
    if type(a) is Array:
        arr, x, side = a, b, "b"
    elif type(b) is Array:
        arr, x, side = b, a, "a"
    else:
        return None
    t = type(x)
    if t is float:
        return None if x != x else (op, arr.dtype, side, t, x, math.copysign(1.0, x))
    return (op, arr.dtype, side, t, x) if t is int else None


def _make_binary(name):
    def f(a, b):
        return _binary(name, a, b)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(a, b) with numpy broadcasting (f32/f16/bf16/f64; Python scalars allowed)."
    return f


for _name in BINARY_OPS:
    globals()[_name] = _make_binary(_name)


def api_binary(op, a, b):
    """floor_divide, remainder or pow (kernels/elementwise.API_BINARY_OPS) of real operands with numpy's
    broadcasting and promotion: integers exact (shaders/intops.comp; a negative integer exponent is a
    ValueCastError, as numpy's ValueError), floats in the binary kernel (floor_divide / remainder
    numpy's bits by an exact fmod; pow with the array API's special cases). fuelvk.api's public
    floor_divide / remainder / pow are this."""
    if op not in API_BINARY_OPS:
        raise ValueError(f"api_binary: {op!r} is not one of {API_BINARY_OPS}")
    return _binary(op, a, b)


def affine(x, mul, add):
    """x * mul + add with scalar mul/add (two roundings, as numpy's x * mul + add)."""
    return _unary("affine", "affine", x, s0=mul, s1=add)


def clip(x, lo, hi):
    """numpy.clip with scalar bounds, float32 (the inventory's clamp): minimum(maximum(x, lo), hi) as
    numpy computes it: NaN in x stays NaN, a NaN bound gives NaN everywhere, lo > hi gives hi."""
    return _unary("clip", "clamp", x, s0=lo, s1=hi, accepted=(_dt.float32,))


def power(x, n):
    """x ** n. A float32 array and an integer n: repeated squaring (n < 0 uses 1/x, so power(0, -k) =
    inf), the op's gradient rule; anything else (array exponents, other dtypes, float n) is the
    array API's pow (api_binary("pow", x, n))."""
    n_int = None
    if is_scalar(n) and not isinstance(n, (bool, np.bool_)):
        try:
            n_int = operator.index(n)
        except TypeError:
            pass
    if n_int is None or getattr(x, "dtype", None) != _dt.float32 or not -2**31 <= n_int < 2**31:
        return _binary("pow", x, n)
    return _unary("power", "powi", x, s0=(n_int & 0xFFFFFFFF, 0), accepted=(_dt.float32,))


del _name


# -- fused chains: one pass instead of two or three ----------------------------------------------------
def _operands(op, a, b, a_s, b_s):
    """(a, b, numpy_out) of a float binary op with at most one scalar operand: the array operands
    uploaded (numpy inputs), two arrays promoted to one dtype; a scalar stays a Python / numpy scalar."""
    if a_s or b_s:
        (arr,), numpy_out = device_args(op, b if a_s else a)
        return (a, arr, numpy_out) if a_s else (arr, b, numpy_out)
    (a, b), numpy_out = device_args(op, a, b)
    return (*promote(op, [a, b]), numpy_out)


def fused(name, a, b, op, pre=None, post=None):
    """post(op(pre(a), b)) in one dispatch of the fused_ew kernel: `op` a binary op (BINARY_OPS), pre /
    post unary ops (FUSABLE_UNARY) or None. Same operands, broadcasting, scalars and dtypes as the
    float binary ops; each intermediate is rounded to the element type as the unfused ops store it,
    so the result has the bits of the unfused chain (post(op(pre(a), b)) as separate ops)."""
    for u in (pre, post):
        if u is not None and u not in FUSABLE_UNARY:
            raise DTypeError(f"{name}: {u!r} cannot be fused; fusable unary ops: {', '.join(FUSABLE_UNARY)}")
    if op not in BINARY:
        raise DTypeError(f"{name}: {op!r} is not a binary op; accepted: {', '.join(BINARY)}")
    a_s, b_s = is_scalar(a), is_scalar(b)
    if a_s and b_s:
        (a, b), numpy_out = device_args(name, np.asarray(a), np.asarray(b))
        a_s = b_s = False
    else:
        a, b, numpy_out = _operands(name, a, b, a_s, b_s)
    dt = (b if a_s else a).dtype
    tag = _dt.float_tag(name, dt, _accepted(op))
    spec = {"OP": BINARY[op], "PRE": FUSED_NONE if pre is None else UNARY[pre],
            "POST": FUSED_NONE if post is None else UNARY[post]}
    v = variant("fused_ew", tag, runtime.get().device.features)
    return result(_launch_binary(name, v, spec, a, b, a_s, b_s, dt, scalar_words), numpy_out)


def silu_mul(a, b):
    """silu(a) * b in one pass (SwiGLU: silu(x @ W_gate) * (x @ W_up)); the bits of fuelvk.silu(a) * b,
    numpy broadcasting, f32/f16/bf16/f64."""
    return fused("silu_mul", a, b, "multiply", pre="silu")


def gelu_mul(a, b):
    """gelu(a) * b in one pass (GeGLU; gelu's tanh approximation, as fuelvk.gelu); the bits of
    fuelvk.gelu(a) * b, numpy broadcasting, f32/f16/bf16/f64."""
    return fused("gelu_mul", a, b, "multiply", pre="gelu")


# -- op records (ops/_opdef.py): one line per public op ---------------------------------------------------
from ._opdef import OpDef, binary as _binary_rule, declare, same, unary


def _record(name, **kw):
    """The record of the unary function `name` this module generates from the kernels' op-id tables."""
    return unary(name, globals()[name], **kw)


_ACT = "activation"   # spec row sets of specs/elementwise.yaml `templates: unary`
declare(
    _record("negative", reference="-x", grad="negative"),
    _record("square", reference="x * x", grad="square"),
    _record("sqrt", grad="sqrt"),
    _record("exp", grad="exp"),
    _record("log", grad="log"),
    _record("sin", grad="sin", rows="rope_table"),
    _record("cos", grad="cos", rows="rope_table"),
    _record("tanh", grad="tanh", rows=_ACT),
    # 1 / (1 + exp(-x)): negate, exp, add, divide.
    _record("sigmoid", ref_api="torch.sigmoid", numpy=lambda x: 1 / (1 + np.exp(-x)),
            reference="1.0 / (1.0 + torch.exp(-x))", grad="sigmoid", flops=4, rows=_ACT),
    # x * sigmoid(x).
    _record("silu", ref_api="torch.nn.functional.silu", numpy=lambda x: x / (1 + np.exp(-x)),
            torch="torch.nn.functional.silu", reference="x / (1.0 + torch.exp(-x))", grad="silu", flops=5, rows=_ACT),
    # The tanh approximation (torch.nn.functional.gelu(x, approximate='tanh'), as the inventory fixes it), not
    # erf: 0.5 x (1 + tanh(x (c + c' x^2))): square, * c', + c, * x, tanh, + 1, * x, * 0.5.
    _record("gelu", ref_api="torch.nn.functional.gelu", torch="torch.nn.functional.gelu",
            reference="0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))",
            grad="gelu", flops=8, rows=_ACT),
    _record("relu", ref_api="torch.relu", numpy=lambda x: np.maximum(x, 0),
            reference="torch.maximum(x, torch.zeros_like(x))", grad="relu", rows=_ACT),
    _record("abs", grad="abs"),
    _record("sign", grad="zero", flops=2),   # two compare/selects: x > 0 and x < 0
    _record("reciprocal", reference="1.0 / x", grad="reciprocal"),
    _record("floor"), _record("ceil"), _record("trunc"),
    _record("round"),   # half to even (numpy.round with decimals=0); exact
    _record("log1p"), _record("expm1"), _record("exp2"), _record("log2"), _record("log10"), _record("tan"),
    _record("sinh"), _record("cosh"), _record("asinh", ref_api="numpy.arcsinh"),
    _record("acosh", ref_api="numpy.arccosh"), _record("atanh", ref_api="numpy.arctanh"),
    _record("asin", ref_api="numpy.arcsin"), _record("acos", ref_api="numpy.arccos"),
    _record("atan", ref_api="numpy.arctan"),
    OpDef("heaviside", heaviside, same, numpy=lambda x, h0=0.0: np.heaviside(x, h0),
          reference="torch.where(x > 0, torch.ones_like(x), torch.where(x < 0, torch.zeros_like(x), "
                    "torch.full_like(x, h0)))", grad="zero", schema="(Tensor x, float h0=0.0) -> Tensor"),
    # the arithmetic ops have gradients and torch ops; the array API's others are fuelvk ops only
    *(OpDef(_n, globals()[_n], _binary_rule, reference=_r, grad=_n, schema="(Tensor a, Tensor b) -> Tensor")
      for _n, _r in (("add", "a + b"), ("subtract", "a - b"), ("multiply", "a * b"), ("divide", "a / b"),
                     ("maximum", "torch.maximum(a, b)"), ("minimum", "torch.minimum(a, b)"))),
    *(OpDef(_n, globals()[_n], _binary_rule, reference=f"torch.{_n}(a, b)")
      for _n in ("copysign", "hypot", "logaddexp", "atan2", "nextafter")),
    # fused chains: silu(a) * b is 5 + 1 flops, gelu(a) * b 8 + 1 (the unary records' counts)
    OpDef("silu_mul", silu_mul, _binary_rule, numpy=lambda a, b: a / (1 + np.exp(-a)) * b,
          torch=lambda a, b: __import__("torch").nn.functional.silu(a) * b,
          reference="a / (1.0 + torch.exp(-a)) * b", schema="(Tensor a, Tensor b) -> Tensor"),
    OpDef("gelu_mul", gelu_mul, _binary_rule,
          numpy=lambda a, b: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))) * b,
          torch=lambda a, b: __import__("torch").nn.functional.gelu(a, approximate="tanh") * b,
          reference="0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a))) * b",
          schema="(Tensor a, Tensor b) -> Tensor"),
    OpDef("affine", affine, same, numpy=lambda x, mul, add: x * mul + add, reference="x * mul + add", grad="affine",
          schema="(Tensor x, float mul, float add) -> Tensor"),
    OpDef("clip", clip, same, numpy=lambda x, lo, hi: np.clip(x, lo, hi),
          reference="torch.minimum(torch.maximum(x, torch.tensor(lo)), torch.tensor(hi))", grad="clip",
          schema="(Tensor x, float lo, float hi) -> Tensor"),
    OpDef("power", power, same, numpy=lambda x, n: np.power(x, n), reference="x ** n", grad="power",
          schema="(Tensor x, int n) -> Tensor"),
)
