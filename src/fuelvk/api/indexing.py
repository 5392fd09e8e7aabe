"""Advanced indexing of the array object (Array.__getitem__ / __setitem__ route here), composed from
device ops:

- x[mask]: a bool Array over x's leading dims (fuelvk.api.searching.boolean_index: the true positions,
  then a take); a 0-d bool Array adds an axis of length 1 or 0; a mask with a 0-length dim where x's
  is not (what numpy and the standard accept) selects nothing.
- x[i, idx, ...]: integer Arrays mixed with ints, slices, None and Ellipsis (numpy's rule, which the
  standard follows): the basic indices make a view; the integer arrays and the ints beside them
  broadcast to one shape B, become one flat index into the indexed dims (idx0 * n1 + idx1 ...,
  int64 kernels), and one take gathers; B's dims sit where the array indices are when they are
  adjacent in the key, else in front. Negative indices wrap; an index out of bounds is a
  FuelVKIndexError (one bounds count read back per index array: a synchronization).
- x[mask] = value: where(mask, value, x) written back through x (value a scalar or broadcastable
  Array of x's dtype).
"""
import math
import operator

import numpy as np

from .. import _hooks
from .. import dtypes as _dt
from .. import layout
from ..array import Array, asarray
from ..errors import FuelVKIndexError
from ..ops.comparison import greater_equal, less
from ..ops.elementwise import int_binary
from ..ops.indexing import take
from ..ops.movement import where
from ..ops.reduction import sum as _sum

__all__ = []


def _is_index_array(k):
    return isinstance(k, (Array, np.ndarray, list))


def _as_array(k):
    return k if isinstance(k, Array) else asarray(np.asarray(k))


def _mask_index(x, mask):
    from .searching import boolean_index
    k = mask.ndim
    if k > x.ndim or any(ks not in (xs, 0) for xs, ks in zip(x.shape, mask.shape)):
        raise FuelVKIndexError(f"boolean index of shape {mask.shape} does not match the indexed dims "
                               f"{x.shape[:k]} of an array of shape {x.shape}")
    if k == 0:
        return x.expand_dims(0).copy() if mask.item() else x.expand_dims(0)[:0].copy()
    if any(ks != xs for xs, ks in zip(x.shape, mask.shape)):
        from ..array import empty
        return empty((0,) + x.shape[k:], x.dtype)
    return boolean_index(x, mask)


def _checked(idx, n):
    """idx (integer Array) as int64 in [0, n): negatives wrap, out of bounds raises."""
    idx = idx.astype(_dt.int64) if idx.dtype != _dt.int64 else idx
    if idx.size:
        bad = int(_sum(less(idx, -n)).item()) + int(_sum(greater_equal(idx, n)).item())
        if bad:
            raise FuelVKIndexError(f"index out of bounds for an axis of size {n} ({bad} of {idx.size} indices; "
                                   f"accepted [{-n}, {n}))")
        idx = int_binary("remainder", idx, n)
    return idx


def getitem(x, key):
    """x[key] for a key with an Array (or numpy array / list) in it."""
    key = key if isinstance(key, tuple) else (key,)
    bools = [k for k in key if isinstance(k, Array) and k.dtype == _dt.bool_
             or isinstance(k, np.ndarray) and k.dtype == np.bool_]
    if bools:
        if len(key) != 1:
            raise FuelVKIndexError("a boolean array index must be the whole key (x[mask]); mixed with other "
                                   "indices it is not supported")
        return _mask_index(x, _as_array(key[0]))
    n_ell = sum(k is Ellipsis for k in key)
    n_real = sum(k is not None and k is not Ellipsis for k in key)
    if n_ell > 1:
        raise FuelVKIndexError("an index can only have a single ellipsis ('...')")
    if n_real > x.ndim:
        raise FuelVKIndexError(f"too many indices: array is {x.ndim}-dimensional, {n_real} were indexed")
    if n_ell == 0:
        key = key + (Ellipsis,)
    # Basic part: advanced entries (arrays, and ints among them) become full slices of the view.
    basic, adv_pos, adv_dims, adv_idx, out_dim, dim = [], [], [], [], 0, 0
    for i, k in enumerate(key):
        if k is Ellipsis:
            basic.append(k)
            out_dim += x.ndim - n_real
            dim += x.ndim - n_real
        elif k is None or isinstance(k, slice):
            basic.append(k)
            out_dim += 1
            dim += k is not None
        else:
            if not _is_index_array(k):
                try:
                    k = operator.index(k)
                except TypeError:
                    raise FuelVKIndexError(f"only integers, slices, None, ... and integer / bool arrays are "
                                           f"valid indices, got {type(k).__name__}") from None
            else:
                k = _as_array(k)
                if k.dtype.kind not in "iu":
                    raise FuelVKIndexError(f"array indices must be integer or bool, got {k.dtype}")
            basic.append(slice(None))
            adv_pos.append(i)
            adv_dims.append(out_dim)
            adv_idx.append((k, x.shape[dim]))
            out_dim += 1
            dim += 1
    view = x.index_view(tuple(basic))
    arrays = [(_checked(k, n) if isinstance(k, Array) else k, n) for k, n in adv_idx]
    bshape = layout.broadcast_shapes("getitem", *[k.shape for k, _ in arrays if isinstance(k, Array)])
    for k, n in arrays:
        if not isinstance(k, Array) and not -n <= k < n:
            raise FuelVKIndexError(f"index {k} is out of bounds for an axis of size {n}")
    flat = None
    for k, n in arrays:
        k = k if isinstance(k, Array) else k % n     # (array indices are wrapped by _checked)
        if flat is None:
            flat = k
            continue
        flat = int_binary("multiply", flat, n) if isinstance(flat, Array) else flat * n
        flat = int_binary("add", flat, k) if isinstance(flat, Array) else int_binary("add", k, flat)
    rest = [d for d in range(view.ndim) if d not in adv_dims]
    m = math.prod(view.shape[d] for d in adv_dims)
    src = view.transpose(adv_dims + rest).reshape((m,) + tuple(view.shape[d] for d in rest))
    flat = flat.broadcast_to(bshape) if flat.shape != bshape else flat
    out = take(src, flat.copy() if not flat.is_contiguous else flat, axis=0)
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    if adjacent and adv_dims[0] > 0:
        nb, p = len(bshape), adv_dims[0]
        order = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim))
        out = out.transpose(order).copy()
    return out


def setitem_mask(x, mask, value):
    """x[mask] = value for a bool Array mask of x's shape (or a broadcastable one)."""
    from ..ops.movement import setitem
    mask = _as_array(mask)
    if mask.ndim > x.ndim or any(ks != xs for xs, ks in zip(x.shape, mask.shape)):
        raise FuelVKIndexError(f"boolean index of shape {mask.shape} does not match the indexed dims "
                               f"{x.shape[:mask.ndim]} of an array of shape {x.shape}")
    mask = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
    if isinstance(value, Array) and value.dtype != x.dtype:
        value = value.astype(x.dtype)
    elif not isinstance(value, Array):
        value = asarray(np.asarray(value, dtype=x.dtype))
    setitem(x, Ellipsis, where(mask, value, x))


# Array.__getitem__ / __setitem__ reach these through fuelvk._hooks (array.py imports no op).
_hooks.bind(advanced_getitem=getitem, mask_setitem=setitem_mask)
