"""Pure shape/stride arithmetic (element units). No device, no numpy arrays."""
import math
import operator

from .errors import DTypeError, ShapeError, FuelVKIndexError


def as_int(op, value, what="axis"):
    """value as an int, as numpy takes sizes and axes: integers only (not bool, float or None)."""
    if is_bool(value):
        raise DTypeError(f"{op}: {what} must be an integer, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise DTypeError(f"{op}: {what} must be an integer, got {type(value).__name__} {value!r}") from None


def as_shape(op, shape):
    """A shape argument (an int or a sequence of ints, numpy's rule) as a tuple of ints >= 0."""
    if isinstance(shape, (tuple, list)):
        shape = tuple(as_int(op, n, "a shape entry") for n in shape)
    else:
        shape = (as_int(op, shape, "shape"),)
    if any(n < 0 for n in shape):
        raise ShapeError(f"{op}: negative dimensions are not allowed, got {shape}")
    return shape


def size_of(shape):
    return math.prod(shape)


def contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def is_contiguous(shape, strides):
    """True when the view walks memory linearly (size-1 dims may have any stride)."""
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


def broadcast_shapes(op, *shapes):
    """numpy broadcasting; ShapeError naming the op and the shapes when they do not broadcast."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(f"{op}: shapes {' and '.join(map(str, map(tuple, shapes)))} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape, strides, out_shape):
    """Strides of a view of (shape, strides) broadcast to out_shape (0 on broadcast dims)."""
    pad = len(out_shape) - len(shape)
    res = [0] * pad
    for n, s, o in zip(shape, strides, out_shape[pad:]):
        if n == o:
            res.append(s if n != 1 else 0)
        elif n == 1:
            res.append(0)
        else:
            raise ShapeError(f"cannot broadcast shape {tuple(shape)} to {tuple(out_shape)}")
    return tuple(res)


def collapse(shape, *stride_sets):
    """Merge adjacent dims that every operand walks as one (and drop size-1 dims).

    Returns (shape, [strides...]) of the smallest rank that addresses the same elements in the same
    order, which lets rank-N views run through a kernel with a small fixed rank.
    """
    dims = [(n, [st[i] for st in stride_sets]) for i, n in enumerate(shape) if n != 1]
    if not dims:
        return (), [() for _ in stride_sets]
    merged = [dims[0]]
    for n, ss in dims[1:]:
        pn, ps = merged[-1]
        if all(p == s * n for p, s in zip(ps, ss)):
            merged[-1] = (pn * n, ss)
        else:
            merged.append((n, ss))
    return tuple(n for n, _ in merged), [tuple(ss[k] for _, ss in merged) for k in range(len(stride_sets))]


def normalize_axis(op, axis, rank):
    if is_bool(axis):
        raise ShapeError(f"{op}: axis must be an integer, got the bool {axis!r}")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise ShapeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for an array of rank {rank}")
    return axis % rank if rank else 0


def is_bool(k):
    """A Python or numpy bool scalar (numpy's bool type is named "bool" in numpy 2, "bool_" before)."""
    return type(k).__name__ in ("bool", "bool_")


def index_view(shape, strides, offset, key):
    """Apply a numpy basic index (ints, slices with any step, None, Ellipsis) to a strided view.

    Returns (shape, strides, offset). Advanced (array) indexing is not a view and is rejected.
    A bool scalar is numpy's 0-d boolean mask, not the integer 0/1: all of them together add one
    axis of length 1 (every one True) or 0, which takes the ints of the key along as advanced
    indices: the axis sits where they are when they are adjacent in the key, else in front.
    """
    if not isinstance(key, tuple):
        key = (key,)
    if any(is_bool(k) for k in key):
        adv = [i for i, k in enumerate(key) if is_bool(k) or not (k is None or k is Ellipsis
                                                                   or isinstance(k, slice))]
        n = int(all(key[i] for i in adv if is_bool(key[i])))
        rest = tuple(k for k in key if not is_bool(k))
        out_shape, out_strides, offset = index_view(shape, strides, offset, rest)
        pos = 0
        if adv == list(range(adv[0], adv[-1] + 1)):   # adjacent: the new axis replaces them in place
            before = key[:adv[0]]
            n_real = sum(k is not None and k is not Ellipsis for k in rest)
            pos = sum(1 if k is not Ellipsis else len(shape) - n_real for k in before)
        return (out_shape[:pos] + (n,) + out_shape[pos:], out_strides[:pos] + (0,) + out_strides[pos:],
                offset)
    n_ell = sum(k is Ellipsis for k in key)
    if n_ell > 1:
        raise FuelVKIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(k is not None and k is not Ellipsis for k in key)
    if n_real > len(shape):
        raise FuelVKIndexError(f"too many indices: array is {len(shape)}-dimensional, {n_real} were indexed")
    if n_ell == 0:
        key = key + (Ellipsis,)
    out_shape, out_strides, dim = [], [], 0
    for k in key:
        if k is Ellipsis:
            for _ in range(len(shape) - n_real):
                out_shape.append(shape[dim])
                out_strides.append(strides[dim])
                dim += 1
        elif k is None:
            out_shape.append(1)
            out_strides.append(0)
        elif isinstance(k, slice):
            try:
                start, stop, step = k.indices(shape[dim])
            except ValueError:
                raise ShapeError(f"slice step cannot be zero (index {k})") from None
            except TypeError:
                raise DTypeError(f"slice indices must be integers or None, got {k}") from None
            n = len(range(start, stop, step))
            if n:
                offset += start * strides[dim]
            out_shape.append(n)
            out_strides.append(strides[dim] * step)
            dim += 1
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise FuelVKIndexError(
                    f"only integers, slices, None and ... are valid view indices, got {type(k).__name__}") from None
            if not -shape[dim] <= i < shape[dim]:
                raise FuelVKIndexError(f"index {i} is out of bounds for axis {dim} with size {shape[dim]}")
            offset += (i % shape[dim]) * strides[dim]
            dim += 1
    return tuple(out_shape), tuple(out_strides), offset


def reshape_strides(shape, strides, new_shape):
    """Strides that view (shape, strides) as new_shape without a copy, or None if impossible.

    numpy's no-copy reshape: dims are matched in groups of equal product; a group of old dims
    can be re-split only if it is itself contiguous.
    """
    if math.prod(shape) == 0:
        return contiguous_strides(new_shape)
    od = [n for n in shape if n != 1]
    os_ = [s for n, s in zip(shape, strides) if n != 1]
    nd = list(new_shape)
    ns = [0] * len(nd)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(nd) and oi < len(od):
        pn, po = nd[ni], od[oi]
        while pn != po:
            if pn < po:
                pn *= nd[nj]
                nj += 1
            else:
                po *= od[oj]
                oj += 1
        if any(os_[k] != od[k + 1] * os_[k + 1] for k in range(oi, oj - 1)):
            return None
        ns[nj - 1] = os_[oj - 1]
        for k in range(nj - 1, ni, -1):
            ns[k - 1] = ns[k] * nd[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    return tuple(ns)


def resolve_reshape(size, new_shape):
    new_shape = [as_int("reshape", n, "a shape entry") for n in new_shape]
    unknown = [i for i, n in enumerate(new_shape) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in new_shape):
        raise ShapeError(f"reshape: invalid shape {tuple(new_shape)}")
    if unknown:
        rest = math.prod(n for n in new_shape if n != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"reshape: cannot reshape array of size {size} into shape {tuple(new_shape)}")
        new_shape[unknown[0]] = size // rest
    if math.prod(new_shape) != size:
        raise ShapeError(f"reshape: cannot reshape array of size {size} into shape {tuple(new_shape)}")
    return tuple(new_shape)
