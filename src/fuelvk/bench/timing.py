"""Timing: device time from timestamp queries for fuelvk work, wall time for CPU references; warm-up,
repeats, median and p10/p90 either way."""
import statistics
import time

from .. import runtime


def _pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def stats(ms):
    return {"median_ms": statistics.median(ms), "p10_ms": _pct(ms, 0.1), "p90_ms": _pct(ms, 0.9),
            "repeats": len(ms)}


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
    return {**stats(dev), "wall_median_ms": statistics.median(wall), "device_timestamps": timer.device_timestamps}


def cpu_ms(fn, warmup=1, repeats=5):
    """Least process CPU ms of fn() followed by a synchronize: on a CPU device (lavapipe) the driver's
    worker threads run the kernels, so this is the work itself, whichever share of the host's cores the
    threads got (their device time halves or doubles with that on a shared 2-core host; this does not).
    Host recording is included: use it for kernels that take far longer than their launch."""
    ctx = runtime.get()
    for _ in range(warmup):
        fn()
    ctx.stream.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        ctx.stream.synchronize()
        best = min(best, time.process_time() - t)
    return best * 1e3


def host_measure(fn, warmup=1, repeats=10):
    """Wall time of a synchronous host call (numpy, torch CPU), same statistics as measure()."""
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1e3)
    return stats(ms)


def host_ms(fn, repeats=5):
    """Median wall ms of fn() after one warm-up call."""
    return host_measure(fn, 1, repeats)["median_ms"]
