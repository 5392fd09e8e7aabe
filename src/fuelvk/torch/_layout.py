"""Result layouts of the fuelvk device's aten kernels: torch CPU's strides, so that code reading a result's
layout (.stride(), as_strided, .view, data_ptr arithmetic) sees what it sees on the CPU.

torch's elementwise ops (TensorIterator) allocate their output dense in the memory order of their
inputs, and clone / empty_like (preserve_format) keep a dense input's strides; fuelvk's ops return
C-contiguous results. follows_inputs() runs such a kernel on views of its operands with the dims
permuted into that memory order (slowest first): the kernel's C-contiguous result, its dims put back
in place, has torch's strides. No copy, and the kernel reads its operands in memory order.

The rules, from aten (TensorIteratorBase::compute_fast_setup_type, compute_strides,
reorder_dimensions, allocate_or_resize_outputs; empty_like and infer_dense_strides), implemented once
here: iterator_strides and preserved_strides.
"""
import torch

from ..errors import ShapeError
from .. import layout
from ..layout import broadcast_shapes
from . import device as fuelvk_device
from .device import dense_order, non_overlapping_and_dense

Tensor = torch.Tensor


def contiguous_strides(shape):
    return tuple(fuelvk_device._contiguous(shape))


def _is_contiguous(shape, strides):
    """torch's is_contiguous(): size-1 dims' strides do not count; an empty tensor is contiguous."""
    return 0 in shape or layout.is_contiguous(shape, strides)


def _is_channels_last(shape, strides):
    """torch's is_contiguous(memory_format=torch.channels_last) (4-d only)."""
    if len(shape) != 4:
        return False
    if 0 in shape:
        return True
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def channels_last_strides(shape):
    n, c, h, w = (max(int(x), 1) for x in shape)
    return (h * w * c, 1, w * c, c)


def _order(shape, operand_strides):
    """TensorIterator's permutation: dims fastest first, by the operands' strides (broadcast dims 0),
    the first operand that orders a pair deciding it; an insertion sort that leaves ambiguous pairs."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))

    def should_swap(d0, d1):
        for st in operand_strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def iterator_strides(shape, operands):
    """The strides torch's TensorIterator gives the output of an elementwise op over `operands`
    ((shape, strides) each; a number is ((), ())) whose broadcast shape is `shape`."""
    shape = tuple(shape)
    if all(tuple(s) == shape for s, _ in operands):   # the fast set-ups: same shapes
        if all(_is_contiguous(s, st) for s, st in operands):
            return contiguous_strides(shape)
        if all(_is_channels_last(s, st) for s, st in operands):
            return channels_last_strides(shape)
        if all(non_overlapping_and_dense(s, st) for s, st in operands) and \
                all(tuple(st) == tuple(operands[0][1]) for _, st in operands):
            return tuple(operands[0][1])
    ndim = len(shape)
    full = []
    for s, st in operands:
        lead = ndim - len(s)
        full.append([0] * lead + [0 if n == 1 and shape[lead + i] != 1 else x
                                  for i, (n, x) in enumerate(zip(s, st))])
    perm = _order(shape, full)
    if perm == list(range(ndim - 1, -1, -1)):
        return contiguous_strides(shape)
    strides, acc = [0] * ndim, 1
    for d in perm:
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def preserved_strides(shape, strides):
    """empty_like's preserve_format (clone's default): a non-overlapping dense tensor's own strides,
    otherwise dense strides in its memory order (infer_dense_strides)."""
    shape, strides = tuple(shape), tuple(strides)
    if non_overlapping_and_dense(shape, strides):
        return strides
    perm = _order(shape, [[x for x in strides]])
    out, acc = [0] * len(shape), 1
    for d in perm:
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def partial_overlap(a, b):
    """torch's MemOverlapStatus::Partial of fuelvk tensors a and b: on the same memory, both dense, their
    byte ranges meet, and they are not the same range with the same strides (too hard to tell: False)."""
    if not fuelvk_device.is_fuelvk(b) or fuelvk_device.buffer_of(a) is not fuelvk_device.buffer_of(b):
        return False
    if not a.numel() or not b.numel() or not non_overlapping_and_dense(tuple(a.shape), a.stride()) or \
            not non_overlapping_and_dense(tuple(b.shape), b.stride()):
        return False
    a0, b0 = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    a1, b1 = a0 + a.numel() * a.element_size(), b0 + b.numel() * b.element_size()
    if (a0, a1) == (b0, b1):
        return a.stride() != b.stride()
    return a0 < b1 and b0 < a1


def restride(t, strides):
    """Fresh contiguous result t with these strides: t itself when they are contiguous, else a copy (for
    kernels that cannot run in another memory order: index)."""
    shape = tuple(t.shape)
    if tuple(strides) == contiguous_strides(shape):
        return t
    if _is_contiguous(shape, strides):   # differs in size-1 dims only: same memory, relabelled
        return fuelvk_device._make(fuelvk_device.buffer_of(t), shape, strides, t.storage_offset(), t.dtype)
    out = fuelvk_device.empty(shape, t.dtype, list(strides))
    fuelvk_device.array(out)[...] = fuelvk_device.array(t)
    return out


def _canonical(t):
    """t is C-contiguous with torch's contiguous strides (size-1 dims included)."""
    if not t.is_contiguous():
        return False
    shape = t.shape
    return 1 not in shape or t.stride() == contiguous_strides(shape)


def _in_order(fn, args, kwargs, shape, strides, positions, dim_at=None):
    """fn over args whose operands at `positions` are viewed in the memory order `strides` gives (slowest
    dim first); its tensor results get `strides` (same buffers, dims back in place). dim_at: (position,
    keyword) of a dim argument (or list of dims), renumbered for the permuted view."""
    ndim = len(shape)
    order = sorted(range(ndim), key=lambda d: (-strides[d], -d))   # slowest first
    args = list(args)
    for i in positions:
        t = args[i]
        if isinstance(t, Tensor) and fuelvk_device.is_fuelvk(t) and t.dim():
            lead = ndim - t.dim()
            size = [1] * lead + list(t.shape)
            st = [0] * lead + list(t.stride())
            args[i] = t.as_strided([size[d] for d in order], [st[d] for d in order], t.storage_offset())
    if dim_at is not None:
        pos, name = dim_at
        given = pos is not None and pos < len(args)
        dim = args[pos] if given else kwargs.get(name, -1)
        dim = [order.index(d % ndim) for d in dim] if isinstance(dim, (list, tuple)) else order.index(dim % ndim)
        if given:
            args[pos] = dim
        else:
            kwargs = {**kwargs, name: dim}
    result = fn(*args, **kwargs)
    return _relabel(result, shape, strides, order)


def _relabel(result, shape, strides, order):
    if isinstance(result, tuple):
        return tuple(_relabel(r, shape, strides, order) for r in result)
    if not (isinstance(result, Tensor) and fuelvk_device.is_fuelvk(result)) or result.dim() != len(shape):
        return result
    if not result.is_contiguous():   # not the kernel's usual fresh result: keep what it made, dims in place
        got = [0] * len(shape)
        for j, d in enumerate(order):
            got[d] = result.stride()[j]
        strides = got
    return fuelvk_device._make(fuelvk_device.buffer_of(result), shape, strides, result.storage_offset(),
                               result.dtype)


def follows_inputs(fn, operands=None):
    """Kernel fn (an elementwise op) with torch CPU's result layout (iterator_strides) over its
    positional operands `operands` (indices; None: every positional argument that is a tensor or a
    number). Contiguous operands (the common case) call fn directly."""
    def k(*args, **kwargs):
        positions = range(len(args)) if operands is None else [i for i in operands if i < len(args)]
        ops, shapes, canonical = [], [], True
        for i in positions:
            a = args[i]
            if isinstance(a, Tensor):
                if a.dim() == 0:
                    ops.append(((), ()))
                    continue
                canonical = canonical and _canonical(a) and a.numel() > 0
                ops.append((tuple(a.shape), a.stride()))
                shapes.append(tuple(a.shape))
            elif isinstance(a, (bool, int, float)):
                ops.append(((), ()))
        if canonical or not shapes:
            return fn(*args, **kwargs)
        try:
            shape = shapes[0] if len(shapes) == 1 else broadcast_shapes("aten", *shapes)
        except ShapeError:   # the kernel says what does not broadcast
            return fn(*args, **kwargs)
        strides = iterator_strides(shape, ops)
        if strides == contiguous_strides(shape):
            return fn(*args, **kwargs)
        return _in_order(fn, args, kwargs, shape, strides, positions)
    k.__name__ = getattr(fn, "__name__", "kernel")
    return k


def preserves_layout(fn, dim_at=None):
    """Kernel fn(self, ...) (clone, sort, flip) with empty_like's result layout for its memory_format
    argument (None: preserve_format); dim_at: see _in_order."""
    def k(self, *args, memory_format=None, **kwargs):
        shape = tuple(self.shape)
        if memory_format == torch.channels_last:
            if len(shape) != 4:
                raise RuntimeError("required rank 4 tensor to use channels_last format")
            strides = channels_last_strides(shape)
        elif memory_format in (None, torch.preserve_format) and not _canonical(self):
            strides = preserved_strides(shape, self.stride())
        else:
            return fn(self, *args, **kwargs)
        if strides == contiguous_strides(shape):
            return fn(self, *args, **kwargs)
        return _in_order(fn, (self,) + args, kwargs, shape, strides, (0,), dim_at)
    k.__name__ = getattr(fn, "__name__", "kernel")
    return k
