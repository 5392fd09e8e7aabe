"""fuelvk from several threads at once: mixed ops checked against numpy, arrays handed between
threads, no hang, no exception, and the process still works single-threaded afterwards.

FUELVK_STRESS_S sets how long the threads run (default 20 s; CI runs the default).
"""
import os
import queue
import threading
import time

import numpy as np

import fuelvk as fv

DURATION = float(os.environ.get("FUELVK_STRESS_S", "20"))
JOIN_GRACE = 120.0   # a thread still running this long after the deadline is hung


def _close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


def _exact(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), np.ascontiguousarray(want).reshape(-1).view(np.uint8))


def _mixed_ops(rng, shared_h, shared):
    """One random op on fresh and shared arrays, checked against numpy."""
    n = int(rng.integers(1, 3000))
    h = rng.standard_normal(n).astype(np.float32)
    x = fv.asarray(h)
    k = int(rng.integers(0, 8))
    if k == 0:     # elementwise chain (exact in f32: *2 and +1 round like numpy)
        _exact(((x * 2.0) + 1.0).numpy(), (h * np.float32(2)) + np.float32(1))
    elif k == 1:   # matmul against an array created by the main thread
        m = int(rng.integers(1, 40))
        a_h = rng.standard_normal((m, shared_h.shape[0])).astype(np.float32)
        _close(fv.matmul(fv.asarray(a_h), shared).numpy(), a_h.astype(np.float64) @ shared_h, 1e-4, 1e-4)
    elif k == 2:   # reductions
        _close(fv.sum(x).numpy(), h.astype(np.float64).sum(), 1e-5, 1e-3)
        _exact(fv.max(x).numpy(), np.asarray(h.max()))
    elif k == 3:   # casts (exact, round to nearest even)
        _exact(fv.astype(x, fv.float16).numpy(), h.astype(np.float16))
    elif k == 4:   # slicing and slice assignment
        y = fv.zeros((n,))
        y[::2] = x[::2]
        want = np.zeros(n, np.float32)
        want[::2] = h[::2]
        _exact(y.numpy(), want)
        _exact(x[::-1][1:].numpy(), h[::-1][1:])
    elif k == 5:   # upload / download round trip, 2-d and a strided view
        h2 = rng.integers(-1000, 1000, (7, 33)).astype(np.int32)
        a2 = fv.asarray(h2)
        _exact(a2.numpy(), h2)
        _exact(a2.T[::3].numpy(), h2.T[::3])
    elif k == 6:   # many small ops recorded before one read (batches shared with the other threads)
        acc, want = x, h
        for _ in range(20):
            acc, want = acc + x, want + h
        _exact(acc.numpy(), want)
    else:          # garbage collected from any thread: arrays in reference cycles
        cyc = [fv.exp(x)]
        cyc.append(cyc)
        _close(cyc[0].numpy(), np.exp(h.astype(np.float64)), 3e-6, 3e-6)
    return 1


def test_threads_mixed_ops_and_handoff():
    rng0 = np.random.default_rng(0)
    shared_h = rng0.standard_normal((33, 17)).astype(np.float32)
    shared = fv.asarray(shared_h)   # made here, used by every worker
    deadline = time.monotonic() + DURATION
    errors, counts = [], {}
    handoff = queue.Queue(maxsize=64)
    done = object()

    def guarded(name, body):
        def run():
            try:
                counts[name] = body()
            except BaseException as e:   # noqa: BLE001 -- reported by the main thread
                import traceback
                errors.append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
                try:
                    handoff.put_nowait(done)
                except queue.Full:
                    pass
        return threading.Thread(target=run, name=name, daemon=True)

    def worker(seed):
        def body():
            rng, n = np.random.default_rng(seed), 0
            while time.monotonic() < deadline and not errors:
                n += _mixed_ops(rng, shared_h, shared)
            return n
        return body

    def producer():
        rng, n = np.random.default_rng(100), 0
        while time.monotonic() < deadline and not errors:
            h = rng.standard_normal(int(rng.integers(1, 5000))).astype(np.float32)
            x = fv.asarray(h)
            handoff.put((x * 3.0 - 1.0, (h * np.float32(3)) - np.float32(1)), timeout=JOIN_GRACE)
            n += 1
        handoff.put(done, timeout=JOIN_GRACE)
        return n

    def consumer():
        n = 0
        while True:
            item = handoff.get(timeout=DURATION + JOIN_GRACE)
            if item is done:
                return n
            y, want = item   # recorded by the producer, maybe not yet submitted
            _exact((y + 0.0).numpy(), want)
            _exact(y.numpy(), want)
            n += 1

    threads = [guarded(f"worker{i}", worker(i + 1)) for i in range(4)]
    threads += [guarded("producer", producer), guarded("consumer", consumer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(deadline - time.monotonic(), 0) + JOIN_GRACE)
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads hung: {hung} (ops done: {counts})"
    assert not errors, "\n".join(errors)
    print(f"\nops per thread in {DURATION:g} s: {counts}")
    assert all(counts[f"worker{i}"] > 0 for i in range(4)) and counts["consumer"] == counts["producer"]
    # the process still works single-threaded
    _exact(fv.add(np.arange(5, dtype=np.float32), np.float32(1)), np.arange(1, 6, dtype=np.float32))
