"""Crossing the torch <-> fuelvk boundary: bit-exact dtype mapping and the weight upload cache.

Half and float8 tensors travel as same-width integer views (torch bf16 -> int16 -> ml_dtypes bf16),
so no value is ever rounded through another float type.
"""
import contextlib
import threading
from collections import OrderedDict

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .. import config
from ..array import Array, asarray
from .._torch_bits import TO_NUMPY, TO_TORCH, numpy_dtype, to_numpy  # noqa: F401 (re-exported)
from .device import array, host_tensor, upload, wrap

DEVICE = "fuelvk"
_results = threading.local()   # .on_device: a custom op called with fuelvk tensors returns fuelvk tensors


def is_device_tensor(t):
    return isinstance(t, torch.Tensor) and t.device.type == DEVICE


@contextlib.contextmanager
def results_on_device(on=True):
    """While on, to_tensor() wraps Arrays as fuelvk-device tensors (no download) and torch factories
    default to the fuelvk device (so a custom op's fake kernel makes fuelvk fakes)."""
    before = getattr(_results, "on_device", False)
    _results.on_device = on
    try:
        if on:
            with torch.device(DEVICE):
                yield
        else:
            yield
    finally:
        _results.on_device = before


def to_tensor(a):
    """A torch CPU tensor holding the bits of a fuelvk Array (or numpy array); None stays None.

    Inside results_on_device(): a fuelvk-device tensor on the Array's buffer instead (no copy)."""
    if a is None:
        return None
    if getattr(_results, "on_device", False):
        return wrap(a) if isinstance(a, Array) else upload(host_tensor(a))
    return host_tensor(a)


def to_array(t, op="?", fresh=False):
    """The fuelvk Array for tensor t: uploaded, or from the weight cache; None stays None.

    fresh=True for arguments the fuelvk op writes into (a cached Array must never change).
    A fuelvk-device tensor is its own Array (no copy; a private copy when fresh).
    """
    if t is None:
        return None
    if is_device_tensor(t):
        return array(t).copy() if fresh else array(t)
    if not fresh and WEIGHTS.enabled and WEIGHTS.wants(t):
        return WEIGHTS.get(t, op)
    return asarray(to_numpy(t, op))


def keep_uploaded(*tensors):
    """Mark tensors that are not nn.Parameters (buffers: rope tables, quantized blocks) as weights.

    Only mark tensors whose in-place writes torch sees (their _version changes): see WeightCache.
    """
    for t in tensors:
        t._fuelvk_keep_uploaded = True
    return tensors[0] if len(tensors) == 1 else tensors


class WeightCache:
    """Uploaded copies of weights, so a layer's weights are not re-uploaded on every call.

    Weights are nn.Parameters and tensors marked with keep_uploaded(): any other tensor may be
    scratch memory (torch.compile's generated code reuses intermediate buffers without touching
    their version counters), so it is uploaded on every call.
    Key: (data_ptr, _version, shape, strides, dtype). torch bumps _version on every in-place write
    through autograd-visible aliases (optimizer steps, no_grad in-place ops, views, input mutations
    of compiled graphs), so a stale entry is never hit by those; a StorageWeakRef detects a freed
    storage whose address was reused. Writes that bypass the version counter (through `.data`, a
    numpy alias, or another tensor on the same storage) are invisible: call clear() after them, or
    set FUELVK_TORCH_CACHE=0. Only tensors of at least MIN_BYTES are cached (smaller uploads cost
    less than the bookkeeping); the cache is bounded by entry count and bytes (least recently used
    evicted first).
    """

    MIN_BYTES = 1 << 16

    def __init__(self, max_entries=64, max_bytes=512 << 20):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.enabled = config.get("FUELVK_TORCH_CACHE")
        self.entries = OrderedDict()
        self.nbytes = 0
        self.hits = self.misses = 0
        self.lock = threading.RLock()   # torch ops may run in several threads (the entries are shared)

    def clear(self):
        with self.lock:
            self.entries.clear()
            self.nbytes = 0

    def wants(self, t):
        """A weight (or a view of one, such as w.mT in matmul's backward) of at least MIN_BYTES."""
        w = t if t._base is None else t._base
        return (isinstance(w, torch.nn.Parameter) or getattr(w, "_fuelvk_keep_uploaded", False)) and \
            t.numel() * t.element_size() >= self.MIN_BYTES

    def get(self, t, op="?"):
        nbytes = t.numel() * t.element_size()
        if t.device.type != "cpu":
            return asarray(to_numpy(t, op))
        try:
            version = t._version
        except RuntimeError:   # inference-mode tensors have no version counter: never cached
            return asarray(to_numpy(t, op))
        key = (t.data_ptr(), version, tuple(t.shape), tuple(t.stride()), t.dtype)
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None and not hit[0].expired():
                self.entries.move_to_end(key)
                self.hits += 1
                return hit[1]
            if hit is not None:
                self._drop(key)
            self.misses += 1
            for k in [k for k, e in self.entries.items() if e[0].expired()]:   # freed tensors: drop now
                self._drop(k)
            arr = asarray(to_numpy(t, op))
            self.entries[key] = (StorageWeakRef(t.untyped_storage()), arr, nbytes)
            self.nbytes += nbytes
            while self.entries and (len(self.entries) > self.max_entries or self.nbytes > self.max_bytes):
                self._drop(next(iter(self.entries)))
            return arr

    def _drop(self, key):
        self.nbytes -= self.entries.pop(key)[2]


WEIGHTS = WeightCache()
