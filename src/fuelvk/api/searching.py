"""Searching and set functions of the array API with data-dependent output shapes, composed on the
device from the sort kernel: nonzero, count_nonzero, unique_values / counts / inverse / all.

The one host step is the output length: nonzero and unique read one count back (a synchronization,
as CuPy does); every element-sized computation stays on the device:

- nonzero: a stable descending argsort of the flattened mask puts the true positions first, in
  order; the first `count` are split into coordinates with integer // and %.
- unique_*: a stable sort, a "differs from its predecessor" mask (NaNs are all distinct, -0 == +0,
  as the standard says), nonzero of that mask for the group starts; counts are differences of the
  starts, first indices the sort permutation at the starts, and the inverse is each sorted
  element's group (a running count of starts) put back through the inverse permutation.
"""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..array import Array, asarray
from ..errors import DTypeError, ShapeError
from .elementwise import not_equal   # (complex-aware)
from ..ops.elementwise import int_binary
from ..ops.indexing import take
from ..ops.movement import concatenate
from ..ops.reduction import cumsum
from ..ops.reduction import sum as _sum
from ..ops.sorting import argsort
from ..ops.comparison import greater_equal, less

UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")

__all__ = ["count_nonzero", "nonzero", "searchsorted", "unique_values", "unique_counts", "unique_inverse", "unique_all"]


def _arr(op, x):
    if isinstance(x, Array):
        return x
    raise DTypeError(f"{op}: expected a fuelvk.Array, got {type(x).__name__}")


def _mask(x):
    return x if x.dtype == _dt.bool_ else not_equal(x, 0)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """How many elements along axis are nonzero (NaN counts), as int64."""
    return _sum(_mask(_arr("count_nonzero", x)), axis=axis, keepdims=keepdims)


def _true_positions(flat_mask):
    """int64 positions of the true elements of a 1-d bool Array, in order (one count read back)."""
    n = int(_sum(flat_mask).item())
    if n == 0:
        return asarray(np.zeros(0, np.int64))
    return argsort(flat_mask, descending=True)[:n]


def boolean_index(x, mask):
    """x[mask] for a bool Array mask over x's leading dims: the true positions (nonzero's), then a
    take along the flattened leading dims."""
    k = mask.ndim
    if mask.shape != x.shape[:k]:
        raise ShapeError(f"boolean index of shape {mask.shape} does not match the indexed dims {x.shape[:k]}")
    pos = _true_positions(mask.reshape(-1))
    return take(x.reshape((-1,) + x.shape[k:]), pos, axis=0)


def nonzero(x, /):
    """A tuple of int64 coordinate arrays of the nonzero elements (row-major order)."""
    x = _arr("nonzero", x)
    if x.ndim == 0:
        raise ShapeError("nonzero: a 0-d array has no coordinates (the standard excludes it)")
    pos = _true_positions(_mask(x).reshape(-1))
    coords = []
    for n in reversed(x.shape):
        if pos.size == 0:
            coords.append(pos)
            continue
        coords.append(int_binary("remainder", pos, n))
        pos = int_binary("floor_divide", pos, n)
    return tuple(reversed(coords))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion points of x2 into the sorted 1-d x1, by one stable merge-sort of both: x2's values
    are placed before equal x1 values (side 'left') or after them ('right'); a running count of x1
    elements in the merged order, read at each x2 element (through the inverse permutation), is its
    insertion point. On the device; O((n1 + n2) log^2) like the sort itself."""
    x1, x2 = _arr("searchsorted", x1), _arr("searchsorted", x2)
    if x1.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be 1-d, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        x1 = take(x1, _arr("searchsorted", sorter))
    dt = np.result_type(x1.dtype, x2.dtype)
    x1, x2 = x1.astype(dt, copy=False), x2.astype(dt, copy=False)
    n1, n2 = x1.size, x2.size
    if n2 == 0 or n1 == 0:
        return asarray(np.zeros(x2.shape, np.int64))
    flat2 = x2.reshape(-1)
    merged = concatenate([flat2, x1] if side == "left" else [x1, flat2])
    perm = argsort(merged)
    is_x1 = greater_equal(perm, n2) if side == "left" else less(perm, n1)
    count = cumsum(is_x1.astype(_dt.float64)).astype(_dt.int64)     # exact below 2^53
    if merged.size >= 2**31:
        raise ShapeError(f"searchsorted: {merged.size} elements exceed the int32 keys of the inverse permutation")
    inv = argsort(perm.astype(_dt.int32))
    where_x2 = inv[:n2] if side == "left" else inv[n1:]
    return take(count, where_x2).reshape(x2.shape)


def _groups(op, x):
    """(sorted values, permutation, int64 group starts) of the flattened x."""
    x = _arr(op, x)
    flat = x.reshape(-1)
    perm = argsort(flat)
    s = take(flat, perm)
    if s.size == 0:
        return s, perm, asarray(np.zeros(0, np.int64))
    differs = not_equal(s[1:], s[:-1])
    head = asarray(np.ones(1, bool))
    starts = _true_positions(concatenate([head, differs]))
    return s, perm, starts


def unique_values(x, /):
    """The distinct values of x, sorted (NaNs distinct)."""
    s, _, starts = _groups("unique_values", x)
    return take(s, starts) if starts.size else s


def _counts(starts, n):
    ends = concatenate([starts[1:], asarray(np.array([n], np.int64))])
    return int_binary("subtract", ends, starts)


def unique_counts(x, /):
    """(values, counts) of the distinct values of x, sorted (NaNs distinct)."""
    s, _, starts = _groups("unique_counts", x)
    if not starts.size:
        return UniqueCountsResult(s, asarray(np.zeros(0, np.int64)))
    return UniqueCountsResult(take(s, starts), _counts(starts, s.size))


def _inverse(x, s, perm, starts):
    """Each element's group, in x's shape: a running count of starts in sorted order, scattered back
    by the inverse permutation (an argsort of the permutation, exact as int32 / uint32 keys)."""
    n = s.size
    if n == 0:
        return asarray(np.zeros(x.shape, np.int64))
    is_start = concatenate([asarray(np.ones(1, bool)), not_equal(s[1:], s[:-1])])
    group = int_binary("subtract", cumsum(is_start.astype(_dt.float64)).astype(_dt.int64), 1)   # exact < 2^53
    if n >= 2**31:
        raise ShapeError(f"unique_inverse: {n} elements exceed the int32 keys of the inverse permutation")
    inv = argsort(perm.astype(_dt.int32))
    return take(group, inv).reshape(x.shape)


def unique_inverse(x, /):
    """(values, inverse_indices) of the distinct values of x, sorted: values[inverse_indices] == x."""
    s, perm, starts = _groups("unique_inverse", x)
    values = take(s, starts) if starts.size else s
    return UniqueInverseResult(values, _inverse(x, s, perm, starts))


def unique_all(x, /):
    """(values, indices, inverse_indices, counts) of the distinct values of x, sorted (NaNs distinct)."""
    s, perm, starts = _groups("unique_all", x)
    if not starts.size:
        z = asarray(np.zeros(0, np.int64))
        return UniqueAllResult(s, z, asarray(np.zeros(x.shape, np.int64)), z)
    return UniqueAllResult(take(s, starts), take(perm, starts), _inverse(x, s, perm, starts),
                           _counts(starts, s.size))


del math
