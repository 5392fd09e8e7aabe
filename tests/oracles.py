"""Tolerances (one per-dtype table) and comparison helpers shared by all tests."""
import ml_dtypes
import numpy as np

import fuelvk as fv

# (rtol, atol) for results of approximate math; exact operations are compared bit for bit.
TOL = {
    np.dtype(np.float32): (2e-6, 1e-6),
    np.dtype(np.float16): (1e-3, 1e-4),
    np.dtype(ml_dtypes.bfloat16): (8e-3, 1e-3),
    np.dtype(np.float64): (1e-13, 1e-13),
}
# Transcendental functions (exp/log/sin/cos/tanh/...): f32 and half types use the device's f32
# builtins (Vulkan allows a few ulp, absolute error for sin/cos); f64 uses shaders/common/math64.glsl.
TRANS_TOL = {
    np.dtype(np.float32): (3e-6, 3e-6),
    np.dtype(np.float16): (1e-3, 1e-4),
    np.dtype(ml_dtypes.bfloat16): (8e-3, 1e-3),
    np.dtype(np.float64): (2e-15, 1e-14),
}
FLOATS = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)]


def tol(dt, table=TOL, scale=1.0):
    r, a = table[np.dtype(dt)]
    return r * scale, a * scale


def to_numpy(x):
    return x.numpy() if isinstance(x, fv.Array) else np.asarray(x)


def assert_close(got, want, dt=None, table=TOL, scale=1.0):
    got, want = to_numpy(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    dt = np.dtype(dt or got.dtype)
    r, a = tol(dt, table, scale)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=r, atol=a, equal_nan=True)


def _nan_payloads_exact():
    """Vulkan float arithmetic does not promise NaN payloads or NaN signs (GPUs canonicalize NaN:
    -NaN from negative() came back as +NaN on NVIDIA); CPU devices (lavapipe, the CI driver) keep
    them, so there they are compared bit for bit."""
    return fv.device_info()["type"] == "cpu"


def assert_bits(got, want):
    """Bit-exact comparison (signed zeros included; NaN payloads too on CPU devices)."""
    got, want = to_numpy(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    g = np.ascontiguousarray(got).view(f"u{got.dtype.itemsize}")
    w = np.ascontiguousarray(want).view(f"u{want.dtype.itemsize}")
    bad = (g != w).ravel()
    if got.dtype.kind == "f" or got.dtype.name in ("bfloat16", "float8_e4m3fn"):
        if not _nan_payloads_exact():
            gn = np.isnan(got.astype(np.float64)).ravel()
            bad &= ~(gn & np.isnan(want.astype(np.float64)).ravel())
    bad = np.flatnonzero(bad)
    assert bad.size == 0, f"{bad.size} elements differ, first at {bad[:5]}: got {got.ravel()[bad[:5]]} want {want.ravel()[bad[:5]]}"


def rand(shape, dt, rng, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(dt)


def spy_plans(monkeypatch, take):
    """A list extended with take(plan) for every launch_strided plan built while the test runs (the plan
    cache emptied so every launch plans)."""
    from fuelvk import runtime
    from fuelvk.ops import _core
    seen, real = [], _core._plan

    def spy(*a, **k):
        plan = real(*a, **k)
        seen.extend(take(plan))
        return plan
    monkeypatch.setattr(_core, "_plan", spy)
    monkeypatch.setattr(runtime.get(), "plans", {})
    return seen
