"""Contiguize and copy behind every dispatcher's layout fix-up: whole texel runs through copy_texels,
contiguous sources through strided_copy, other views gathered by remap.comp."""
from .. import dtypes as _dt
from .. import runtime
from ..array import Array
from ..kernels.movement_core import copy_variant
from ._core import device_args, fits, launch_strided, new_like, result
from ..kernels import kernel
from .movement import launch_remap, launch_write, texel_runs, transpose_tiles

__all__ = ["ascontiguousarray", "copy"]


def _copy_into_new(x):
    out = new_like(x.shape, x.dtype)
    src, dst = x, out
    if x.dtype.itemsize == 16:   # complex128: copied as float64 pairs (a trailing axis of 2)
        src, dst = (Array(a.buffer, a.shape + (2,), tuple(2 * st for st in a.strides) + (1,), 2 * a.offset,
                          _dt.float64) for a in (x, out))
    if texel_runs(dst, src):  # whole texels (slices, offset views) where texel loads are faster
        return out
    if not fits(src, dst):   # larger than one binding: the write kernel, which moves 2-D tiles of a transpose
        launch_write(kernel("write_slice", _dt.width_tag(src.dtype)), dst, src)
        return out
    tag = _dt.width_tag(src.dtype)
    if src.is_contiguous or not any(src.strides):   # strided_copy's LINEAR path: 4 elements per access
        launch_strided(copy_variant(tag, runtime.get().device.features), dst, [src])
    elif not transpose_tiles(dst, src):   # else a gather (steps, broadcasts, other permutations): remap.comp
        launch_remap("copy", kernel("flip", tag), dst, src, src.strides)
    return out


def ascontiguousarray(x):
    """x itself if already contiguous, else a contiguous copy (bit-exact, any dtype)."""
    (xa,), numpy_out = device_args("ascontiguousarray", x)
    if xa.is_contiguous and xa.offset == 0:
        return result(xa, numpy_out)
    return result(_copy_into_new(xa), numpy_out)


def copy(x):
    """A new contiguous array with the same contents (bit-exact)."""
    (xa,), numpy_out = device_args("copy", x)
    return result(_copy_into_new(xa), numpy_out)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import OpDef, declare, same

declare(OpDef("ascontiguousarray", ascontiguousarray, same, torch=lambda x: x.contiguous(), reference="x.clone()"),
        OpDef("copy", copy, same, torch=lambda x: x.clone(), reference="x.clone()", grad="identity",
              schema="(Tensor x) -> Tensor"))
