"""Timing with device timestamp queries: warm-up, repeats, median and p10/p90."""
import statistics

from .. import runtime


def _pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def measure(fn, warmup=2, repeats=10):
    """Time fn() (which records fuelvk work) on the device.

    Returns {"median_ms", "p10_ms", "p90_ms", "wall_median_ms", "repeats", "device_timestamps"}.
    """
    ctx = runtime.get()
    for _ in range(warmup):
        fn()
    ctx.stream.synchronize()
    timer = ctx.timer()
    dev, wall = [], []
    for _ in range(repeats):
        timer.start()
        fn()
        d, w = timer.stop()
        dev.append(d)
        wall.append(w)
    return {"median_ms": statistics.median(dev), "p10_ms": _pct(dev, 0.1), "p90_ms": _pct(dev, 0.9),
            "wall_median_ms": statistics.median(wall), "repeats": repeats,
            "device_timestamps": timer.device_timestamps}
