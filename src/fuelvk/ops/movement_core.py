"""Contiguize and copy: the strided_copy kernel behind every dispatcher's layout fix-up."""
from .. import dtypes as _dt
from .. import runtime
from ..kernels.movement_core import copy_variant
from ._core import device_args, fits, launch_strided, new_like, result

__all__ = ["ascontiguousarray", "copy"]


def _copy_into_new(x):
    out = new_like(x.shape, x.dtype)
    if not fits(x, out):   # larger than one binding: the write kernel, which moves 2-D tiles of a transpose
        from ..kernels import kernel
        from .movement import launch_write
        launch_write(kernel("write_slice", _dt.width_tag(x.dtype)), out, x)
        return out
    launch_strided(copy_variant(_dt.width_tag(x.dtype), runtime.get().device.features), out, [x])
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
