"""Manipulation functions of the array API.

Views where the standard allows them (reshape when the strides permit, expand_dims, squeeze,
permute_dims, moveaxis, broadcast_to, matrix_transpose, unstack); everything that must produce new
memory runs the movement kernels on the device: concat/stack through write_slice, tile and repeat
as a broadcast view copied by the strided-copy kernel (or `take` for per-element repeats).
"""

import numpy as np

from .. import layout
from ..array import Array, asarray
from ..errors import DTypeError, FuelVKIndexError, ShapeError, ValueCastError
from ..ops.movement import concatenate
from ..ops.indexing import take

__all__ = ["reshape", "concat", "stack", "expand_dims", "squeeze", "permute_dims", "moveaxis", "broadcast_to",
           "broadcast_arrays", "tile", "repeat", "unstack", "matrix_transpose"]


def _arr(op, x):
    if isinstance(x, Array):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return asarray(x)
    raise DTypeError(f"{op}: expected a fuelvk.Array (or a numpy array), got {type(x).__name__}")


def _axes(op, axis, ndim, allow_repeat=False):
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(layout.normalize_axis(op, a, ndim) for a in axes)
    if not allow_repeat and len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {axes}")
    return out


def reshape(x, /, shape, *, copy=None):
    """A view when the strides allow it, else a contiguous copy; copy=True always copies, copy=False
    refuses to (ValueCastError) where a view is impossible."""
    x = _arr("reshape", x)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else layout.as_shape("reshape", shape)
    shape = layout.resolve_reshape(x.size, shape)
    if copy is False and layout.reshape_strides(x.shape, x.strides, shape) is None:
        raise ValueCastError(f"reshape: copy=False, but shape {x.shape} with strides {x.strides} cannot be viewed "
                             f"as {shape} without a copy")
    out = x.reshape(shape)
    return out.copy() if copy else out


def concat(arrays, /, *, axis=0):
    """Join arrays along an existing axis (axis=None: flattened), with type promotion."""
    if not isinstance(arrays, (tuple, list)):
        raise ShapeError("concat: expects a tuple or list of arrays")
    return concatenate([_arr("concat", a) for a in arrays], axis=axis)


def stack(arrays, /, *, axis=0):
    """Join same-shape arrays along a new axis (each is a view with the axis inserted, then concat)."""
    if not isinstance(arrays, (tuple, list)) or not arrays:
        raise ShapeError("stack: expects a non-empty tuple or list of arrays")
    xs = [_arr("stack", a) for a in arrays]
    if any(x.shape != xs[0].shape for x in xs):
        raise ShapeError(f"stack: all inputs must have the same shape, got {[x.shape for x in xs]}")
    ax = layout.normalize_axis("stack", axis, xs[0].ndim + 1)
    return concatenate([x.expand_dims(ax) for x in xs], axis=ax)


def expand_dims(x, /, axis=0):
    """x with a size-1 axis inserted at `axis` (a view; -1 appends)."""
    x = _arr("expand_dims", x)
    if isinstance(axis, int) and not isinstance(axis, bool) and not -x.ndim - 1 <= axis <= x.ndim:
        raise FuelVKIndexError(f"expand_dims: axis {axis} is out of range [{-x.ndim - 1}, {x.ndim}] for an array "
                               f"of rank {x.ndim}")
    return x.expand_dims(axis)


def squeeze(x, /, axis):
    """x without the given size-1 axes (a view); squeezing an axis that is not 1 is a ShapeError."""
    x = _arr("squeeze", x)
    return x.squeeze(_axes("squeeze", axis, x.ndim))


def permute_dims(x, /, axes):
    """A view of x with its axes in the order `axes` (no copy)."""
    x = _arr("permute_dims", x)
    return x.transpose(tuple(axes))


def moveaxis(x, source, destination, /):
    """Axes moved to new positions, the others kept in order (a view)."""
    x = _arr("moveaxis", x)
    src = _axes("moveaxis", source, x.ndim)
    dst = _axes("moveaxis", destination, x.ndim)
    if len(src) != len(dst):
        raise ShapeError(f"moveaxis: source {source!r} and destination {destination!r} differ in length")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.transpose(order)


def matrix_transpose(x, /):
    """A view of x with its last two axes swapped (x.mT)."""
    return _arr("matrix_transpose", x).mT


def broadcast_to(x, /, shape):
    """A view of x broadcast to shape (stride 0 on the new axes; no copy)."""
    x = _arr("broadcast_to", x)
    shape = layout.as_shape("broadcast_to", shape)
    if layout.broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast {x.shape} to {shape}")
    return x.broadcast_to(shape)


def broadcast_arrays(*arrays):
    """Views of the arrays broadcast to one shape (no copies)."""
    xs = [_arr("broadcast_arrays", a) for a in arrays]
    shape = layout.broadcast_shapes("broadcast_arrays", *[x.shape for x in xs])
    return [x.broadcast_to(shape) for x in xs]


def unstack(x, /, *, axis=0):
    """The views x[..., i, ...] along axis, as a tuple."""
    x = _arr("unstack", x)
    if x.ndim == 0:
        raise ShapeError("unstack: a 0-d array has no axis to unstack")
    ax = layout.normalize_axis("unstack", axis, x.ndim)
    return tuple(x[(slice(None),) * ax + (i,)] for i in range(x.shape[ax]))


def tile(x, repetitions, /):
    """numpy.tile: a broadcast view [r0, n0, r1, n1, ...] copied once and reshaped."""
    x = _arr("tile", x)
    reps = tuple(layout.as_int("tile", r, "a repetition") for r in repetitions)
    if any(r < 0 for r in reps):
        raise ShapeError(f"tile: repetitions must be >= 0, got {reps}")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    src = x.reshape((1,) * (nd - x.ndim) + x.shape)
    inter = []
    for n in src.shape:
        inter += [1, n]
    big = []
    for r, n in zip(reps, src.shape):
        big += [r, n]
    view = src.reshape(tuple(inter)).broadcast_to(tuple(big))
    return view.copy().reshape(tuple(r * n for r, n in zip(reps, src.shape)))


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated along axis (axis=None: of the flattened array).

    An integer `repeats` is a broadcast view copied on the device. An array `repeats` makes the
    output length data-dependent: it is read on the host (a synchronization, as in CuPy), the gather
    indices are built there, and `take` moves the data on the device."""
    x = _arr("repeat", x)
    if axis is None:
        x = x.reshape(-1)
        ax = 0
    else:
        ax = layout.normalize_axis("repeat", axis, x.ndim)
    if x.ndim == 0:
        x, ax = x.reshape(1), 0
    n = x.shape[ax]
    if isinstance(repeats, (Array, np.ndarray, list, tuple)):
        reps = np.asarray(repeats) if not isinstance(repeats, Array) else repeats.numpy()
        if reps.dtype.kind not in "iu":
            raise DTypeError(f"repeat: repeats must be integers, got {reps.dtype}")
        if reps.ndim > 1 or reps.size not in (1, n):
            raise ShapeError(f"repeat: repeats of shape {reps.shape} do not match axis {ax} of length {n}")
        if reps.size == 1:
            repeats = int(reps.reshape(()))
        else:
            if (reps < 0).any():
                raise ShapeError("repeat: repeats must be >= 0")
            return take(x, asarray(np.repeat(np.arange(n, dtype=np.int64), reps)), axis=ax)
    r = layout.as_int("repeat", repeats, "repeats")
    if r < 0:
        raise ShapeError(f"repeat: repeats must be >= 0, got {r}")
    v = x.expand_dims(ax + 1)
    big = x.shape[:ax + 1] + (r,) + x.shape[ax + 1:]
    return v.broadcast_to(big).copy().reshape(x.shape[:ax] + (n * r,) + x.shape[ax + 1:])
