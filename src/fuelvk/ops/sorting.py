"""Sorting (array API names): argsort and sort along an axis, stable, ascending or descending.

On the device: the sorted axis is moved last (a view, copied contiguous where needed), one bitonic
network sorts (key, index) pairs of every row at once (shaders/sort.comp: log2(P)(log2(P)+1)/2
compare-exchange dispatches for rows padded to P = 2^k), and sort gathers the values with the
take_along_axis kernel. Ties keep their input order (stable: the index breaks them); NaNs go last
(numpy's order; descending puts them first), -0 and +0 are equal. 64-bit dtypes are keyed on two
32-bit words (high word first), so they need no int64/float64 shader support. Complex keys take
numpy's order (values with a NaN part after the others; then real part, then imaginary): one
stable pass per key, least significant first.
"""
from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..errors import DTypeError, ShapeError
from ..kernels import kernel
from ..kernels.sorting import MODE_KEYS, MODE_STEP, MODE_WRITE, SORT_WG
from ..array import complex_part
from .comparison import not_equal
from ._core import contiguous, device_args, new_like, result
from .indexing import gather_along

__all__ = ["argsort", "sort"]

_TAGS = {_dt.float8_e4m3fn: "f8e4m3", _dt.float32: "f32", _dt.float16: "f16", _dt.bfloat16: "bf16", _dt.int8: "i8", _dt.int16: "i16",
         _dt.int32: "i32", _dt.uint8: "u8", _dt.uint16: "u16", _dt.uint32: "u32", _dt.bool_: "bool",
         _dt.float64: "f64", _dt.int64: "i64", _dt.uint64: "u64"}


def _argsort_last(op, x, descending):
    """int64 argsort of the contiguous rows of x (sorted axis last); x is a fresh contiguous view."""
    tag = _TAGS.get(x.dtype)
    if tag is None:
        raise DTypeError(f"{op}: dtype {x.dtype} is not supported; accepted: {', '.join(map(str, _TAGS))}, "
                         "complex64, complex128")
    n = x.shape[-1]
    rows = x.size // n
    p2 = 1 << (n - 1).bit_length()
    if rows * p2 >= 2**32:
        raise ShapeError(f"{op}: {rows} rows of {n} elements (padded to {p2}) exceed the kernel's 2^32 slots")
    words = x.dtype.itemsize // 4 or 1          # key words per element: 2 for 64-bit dtypes
    if (x.offset + x.size) * words >= 2**32:
        raise ShapeError(f"{op}: {x.offset + x.size} {x.dtype} elements exceed the kernel's 2^32 input words")
    ctx = runtime.get()
    v = kernel("sort", tag)
    keys = new_like((rows * p2 * words,), _dt.uint32)
    idx = new_like((rows * p2,), _dt.uint32)
    out = new_like(x.shape, _dt.int64)
    groups = ctx.groups(-(-rows * p2 // SORT_WG))

    def launch(mode, j=0, k=0):
        # x is read by MODE_KEYS only, out written by MODE_WRITE only; other modes bind keys there.
        ctx.launch(v, groups if mode != MODE_WRITE else ctx.groups(-(-rows * n // SORT_WG)), keys=keys, idx=idx,
                   x=x if mode == MODE_KEYS else keys, out=out if mode == MODE_WRITE else keys, n=n, p2=p2,
                   rows=rows, j=j, k=k, off_in=x.offset, desc=int(bool(descending)), pad=0, MODE=mode)

    launch(MODE_KEYS)
    k = 2
    while k <= p2:
        j = k // 2
        while j:
            launch(MODE_STEP, j, k)
            j //= 2
        k *= 2
    launch(MODE_WRITE)
    return out


def _argsort_rows(op, x, descending):
    """_argsort_last for any sortable dtype. Complex rows: numpy's order, (isnan(real), isnan(imag),
    real, imag) lexicographic, by one stable pass per key from the least significant one."""
    if x.dtype.kind != "c":
        return _argsort_last(op, x, descending)
    re, im = complex_part(x, 0), complex_part(x, 1)
    keys = [im, re, not_equal(im, im), not_equal(re, re)]
    last = x.ndim - 1
    perm = _argsort_last(op, contiguous(keys[0]), descending)
    for k in keys[1:]:
        ordered = gather_along(k, perm, 2, last, f"b{k.dtype.itemsize}")
        perm = gather_along(perm, _argsort_last(op, ordered, descending), 2, last, "b8")
    return perm


def _moved(op, x, axis):
    """(contiguous view with `axis` last, the permutation back, axis)."""
    if x.ndim == 0:
        raise ShapeError(f"{op}: a 0-d array has no axis to sort")
    ax = layout.normalize_axis(op, axis, x.ndim)
    perm = [a for a in range(x.ndim) if a != ax] + [ax]
    back = sorted(range(x.ndim), key=lambda a: perm[a])
    return contiguous(x.transpose(perm)), back, ax


def argsort(x, axis=-1, descending=False, stable=True):
    """Indices (int64) that sort x along axis; stable (ties in input order) whatever `stable` says."""
    (x,), numpy_out = device_args("argsort", x)
    v, back, _ = _moved("argsort", x, axis)
    if v.size == 0:
        return result(new_like(x.shape, _dt.int64), numpy_out)
    return result(_argsort_rows("argsort", v, descending).transpose(back), numpy_out)


def sort(x, axis=-1, descending=False, stable=True):
    """x sorted along axis (a stable sort: argsort, then a gather of the values)."""
    (x,), numpy_out = device_args("sort", x)
    v, back, _ = _moved("sort", x, axis)
    if v.size == 0:
        return result(new_like(x.shape, x.dtype), numpy_out)
    ids = _argsort_rows("sort", v, descending)
    if x.dtype.kind == "c":       # gathered per part: the gather kernel moves at most 8-byte elements
        out = new_like(v.shape, x.dtype)
        for part in (0, 1):
            complex_part(out, part)[...] = gather_along(complex_part(v, part), ids, 2, v.ndim - 1,
                                                        f"b{x.dtype.itemsize // 2}")
    else:
        out = gather_along(v, ids, 2, v.ndim - 1, f"b{x.dtype.itemsize}")
    return result(out.transpose(back), numpy_out)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
import numpy as _np

from ._opdef import Meta, OpDef, declare, same

declare(
    OpDef("argsort", argsort, lambda x, axis=-1, descending=False, stable=True: Meta(tuple(x.shape), _np.dtype(_np.int64)),
          reference="torch.sort(x, dim=axis, descending=descending, stable=True).indices"),   # ties: first index
    OpDef("sort", sort, same, reference="torch.sort(x, dim=axis, descending=descending, stable=True).values"),
)
