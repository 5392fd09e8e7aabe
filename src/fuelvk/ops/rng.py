"""Random numbers on the device (rng.comp, Philox4x32-10): not public ops (no __all__ names), the draws
behind the torch device's dropout. A draw is a pure function of (key, counter): the caller supplies the
key, so seeding stays with the caller (fuelvk.torch keys each draw from torch's CPU generator, which
makes runs reproducible under torch.manual_seed)."""
import math

from .. import dtypes as _dt
from .. import runtime
from ..errors import ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.rng import WG
from ._core import new_like

__all__ = []

MAX_ELEMENTS = 4 * 2 ** 32 - 4   # four per counter value (the counter's first word is the block index)


def _launch(mode, out, n, key, ctr=0, thr=0):
    if n > MAX_ELEMENTS:
        raise UnsupportedError(f"rng: {n} draws in one call; one key draws at most {MAX_ELEMENTS} (split the tensor)")
    k = int(key)
    if not 0 <= k < 2 ** 64:
        raise ShapeError(f"rng: key {key} is not a 64-bit unsigned integer")
    if n:
        ctx = runtime.get()
        ctx.launch(kernel("rng", mode), ctx.groups(-(-n // (4 * WG))), out=out, n=n, key0=k & 0xFFFFFFFF,
                   key1=k >> 32, ctr=int(ctr) & 0xFFFFFFFF, thr=thr)
    return out


def philox_words(n, key, ctr=0):
    """n uint32 words of Philox4x32-10 under key (a 64-bit int): word 4i + j is word j of the block at
    counter (i, ctr, 0, 0) -- Random123's philox4x32_10, so a host implementation checks it bit for bit."""
    return _launch("raw", new_like((n,), _dt.uint32), n, key, ctr)


def keep_mask(shape, keep, key, ctr=0):
    """A bool Array of `shape`: True with probability keep (0 <= keep <= 1; resolution 2^-32), element e
    True when word e of philox_words(...) is below round(keep * 2^32). keep 1 is all True."""
    if not 0.0 <= keep <= 1.0:
        raise ShapeError(f"keep_mask: keep probability {keep} is outside [0, 1]")
    n = math.prod(shape)
    out = new_like(tuple(shape), _dt.bool_)
    if keep >= 1.0:
        out[...] = True
        return out
    return _launch("keep", out, n, key, ctr, thr=min(int(round(keep * 2.0 ** 32)), 2 ** 32 - 1))
