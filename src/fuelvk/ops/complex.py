"""Complex arithmetic (complex64 / complex128, interleaved float pairs): the complex_unary and
complex_binary kernels (shaders/complex.comp), and casts into complex dtypes composed from writes
through the float component views (a complex array's real part is a stride-2 float view).

These are internal: fuelvk.api.elementwise dispatches the public elementwise names here when an
operand is complex, so fuelvk.exp(z), z * w, abs(z) ... take the same names as for real arrays.
Promotion is the array API's: complex64 with float64 (or complex128) gives complex128; Python
scalars (complex, float, int) take the array's precision; integer and bool arrays do not mix with
complex ones (DTypeError). The kernels compute in double, so they need shaderFloat64.
"""
import numbers

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray
from ..array import complex_part as component   # the real (0) / imaginary (1) float view, same buffer
from ..errors import DTypeError
from ..kernels.complex import BINARY_OPS, UNARY_OPS, WG
from ..kernels.registry import kernel
from ._core import contiguous, new_like

__all__ = []   # reached through fuelvk.api.elementwise (the public names)

_TAGS = {_dt.complex64: "c64", _dt.complex128: "c128"}
_REAL = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}
_COMPLEX = {_dt.float32: _dt.complex64, _dt.float64: _dt.complex128, _dt.float16: _dt.complex64,
            _dt.bfloat16: _dt.complex64}


def is_complex(x):
    """A complex Array, numpy complex array / scalar or Python complex."""
    if isinstance(x, (Array, np.ndarray, np.generic)):
        return x.dtype.kind == "c"
    return isinstance(x, complex)


def as_pairs(x):
    """Complex Array x as its float view with a trailing axis of 2 (re, im): what the movement
    kernels can move (they take up to 8-byte elements)."""
    return Array(x.buffer, x.shape + (2,), tuple(2 * s for s in x.strides) + (1,), 2 * x.offset, _REAL[x.dtype])


def from_pairs(f):
    """The complex Array whose pairs view is the contiguous float Array f (shape (..., 2))."""
    f = contiguous(f)
    return Array(f.buffer, f.shape[:-1], tuple(s // 2 for s in f.strides[:-1]), f.offset // 2, _COMPLEX[f.dtype])


def to_complex(op, x, dt):
    """Array x as a new-or-same contiguous Array of complex dtype dt (real x: imaginary part 0)."""
    if not isinstance(x, Array):
        x = asarray(np.asarray(x, dtype=dt))
    if x.dtype == dt:
        return contiguous(x)
    if x.dtype.kind in "biu":
        raise DTypeError(f"{op}: an integer / bool array ({x.dtype}) does not promote with complex {dt} "
                         "(the array API has no mixed-kind promotion); cast it first")
    out = new_like(x.shape, dt)
    re, im = component(out, 0), component(out, 1)
    if x.dtype.kind == "c":
        re[...] = component(x, 0).astype(re.dtype)
        im[...] = component(x, 1).astype(im.dtype)
    else:
        re[...] = x if x.dtype == re.dtype else x.astype(re.dtype)
        im[...] = 0.0
    return out


def _result_dtype(op, xs):
    """The complex dtype of an op over xs (Arrays and Python scalars), by the array API's rules."""
    wide = False
    for x in xs:
        d = getattr(x, "dtype", None)
        if isinstance(x, Array) or isinstance(x, np.ndarray):
            if d.kind in "biu":
                raise DTypeError(f"{op}: an integer / bool array ({d}) does not promote with a complex operand "
                                 "(the array API has no mixed-kind promotion); cast it first")
            wide |= d in (_dt.float64, _dt.complex128)
        elif isinstance(x, np.generic):
            wide |= d in (np.dtype(np.float64), np.dtype(np.complex128))
        elif not isinstance(x, numbers.Number):
            raise DTypeError(f"{op}: unsupported operand {type(x).__name__}")
    return _dt.complex128 if wide else _dt.complex64


def _check_device(op):
    if "float64" not in runtime.get().device.features:
        raise DTypeError(f"{op}: complex arithmetic computes in float64, which {runtime.get().device.name} "
                         "lacks (shaderFloat64)")


def _launch(fam, op_id, out, xs):
    ctx = runtime.get()
    args = dict(out=out, n=out.size, off_out=out.offset * (2 if out.dtype.kind == "c" else 1), OP=op_id)
    for name, a, in zip(("x", "y"), xs):
        args[name] = a
        args[f"off_{name}"] = 2 * a.offset
        args[f"step_{name}"] = 0 if a.size == 1 and out.size != 1 else 1
    if fam == "complex_unary":
        args["off_y"], args["step_y"] = 0, 0
    if out.size:
        ctx.launch(kernel(fam, _TAGS[xs[0].dtype]), ctx.groups(-(-out.size // WG)), **args)
    return out


def unary(op, x):
    """op(x) of a complex Array (UNARY_OPS); abs gives the real dtype."""
    _check_device(op)
    x = contiguous(x)
    out = new_like(x.shape, _REAL[x.dtype] if op == "abs" else x.dtype)
    return _launch("complex_unary", UNARY_OPS[op], out, [x])


def binary(op, a, b):
    """a op b (BINARY_OPS) where a or b is complex: broadcast, promoted, one launch."""
    _check_device(op)
    dt = _result_dtype(op, [a, b])
    arrays = [v for v in (a, b) if isinstance(v, Array)]
    shape = np.broadcast_shapes(*[v.shape for v in arrays]) if arrays else ()
    ops = []
    for v in (a, b):
        if not isinstance(v, Array):
            v = asarray(np.asarray(v, dtype=dt))                       # a scalar: one element, step 0
        else:
            v = to_complex(op, v, dt)
            if v.shape != shape and v.size != 1:
                v = contiguous(v.broadcast_to(shape))
        ops.append(v)
    out = new_like(tuple(shape), dt)
    if out.size == 0:
        return out
    return _launch("complex_binary", BINARY_OPS[op], out, ops)
