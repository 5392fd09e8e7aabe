"""The CPU fallback's ledger: counts per aten op, the one-time warning, and the FUELVK_TORCH_FALLBACK
switch. Below both the device (device.py notes the casts it hands to the CPU) and the boxed
fallback (_fallback.py), so neither imports the other for it."""
import threading
import warnings
from collections import Counter

from .. import config
from ..errors import UnsupportedError

ENV = "FUELVK_TORCH_FALLBACK"
_counts = Counter()
_warned = set()
_lock = threading.Lock()


class FallbackError(UnsupportedError):
    """An aten op has no fuelvk kernel and the CPU fallback is off (FUELVK_TORCH_FALLBACK=0)."""


class FallbackWarning(UserWarning):
    """An aten op ran on the CPU because fuelvk has no kernel for it (once per op)."""


def fallback_stats():
    """{aten op name: number of CPU fallbacks} since the start (or reset_fallback_stats())."""
    with _lock:
        return dict(_counts)


def reset_fallback_stats():
    with _lock:
        _counts.clear()


def note(name, reason=None):
    """Record one CPU fallback of aten op `name` (warn the first time), or raise FallbackError when off."""
    what = f"aten op {name}: fuelvk's kernel does not cover this case ({reason})" if reason else \
        f"aten op {name} has no fuelvk kernel"
    if not config.get(ENV):
        raise FallbackError(f"{what}, and {ENV}=0 forbids running it on the CPU; "
                            f"unset {ENV} (or set it to 1) to allow the CPU fallback")
    with _lock:
        _counts[name] += 1
        first = name not in _warned
        _warned.add(name)
    if first:
        warnings.warn(f"fuelvk: {what}; it runs on the CPU (inputs downloaded, results uploaded). {ENV}=0 makes "
                      "this an error; fuelvk.torch.fallback_stats() counts them.", FallbackWarning, stacklevel=4)
