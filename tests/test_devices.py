"""Several devices in one process: two logical devices (two VkDevices) on the one physical device
lavapipe exposes, listed by FUELVK_DEVICES. Arrays are created on either, ops run on their inputs'
device and give numpy's results there, mixing devices is a DeviceError naming both, to_device copies
bit-exact, threads use both devices at once, and arrays of a closed device raise DeviceError."""
import inspect
import threading

import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import config, runtime
from fuelvk.errors import DeviceError


@pytest.fixture(scope="module")
def two():
    """(device 0, device 1): FUELVK_DEVICES names the default device twice."""
    sel = config.get("FUELVK_DEVICE") or str(runtime.get().device.index)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FUELVK_DEVICES", f"{sel},{sel}")
        yield tuple(fv.devices())
        runtime.close(1)


@pytest.fixture(autouse=True)
def _second_device_validation_clean(two):
    """conftest checks the default device's validation messages; this checks device 1's."""
    yield
    ctx = runtime.opened(1)
    if ctx is not None and ctx.device.messenger is not None:
        ctx.stream.synchronize()
        msgs = ctx.device.messenger.take()
        assert not msgs, "Vulkan validation messages on device 1:\n" + "\n".join(m[:2000] for m in msgs)


def _exact(got, want):
    got, want = np.asarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


def test_two_logical_devices_are_listed_and_distinct(two):
    d0, d1 = two
    assert (d0.index, d1.index) == (0, 1) and d0 != d1 and d0 == fv.Device(0) and d1 == fv.Device(1)
    assert len({d0, d1, fv.Device(1)}) == 2
    info = fv.__array_namespace_info__()
    assert info.devices() == [d0, d1] and info.default_device() == d0 == fv.asarray([1.0]).device
    c0, c1 = d0.context(), d1.context()
    assert c0 is runtime.get() and c1 is not c0 and c1.device.handle != c0.device.handle
    assert c0.device.index == c1.device.index and d0.name == d1.name       # one physical device
    assert repr(d1) == f"fuelvk.Device(1, {c1.device.name!r})"
    assert fv.device_info(d1)["name"] == c1.device.name


@pytest.mark.parametrize("which", [0, 1])
def test_creation_functions_create_on_device(two, which):
    d = two[which]
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    made = {
        "asarray": (fv.asarray(h, device=d), h),
        "empty": (fv.empty((2, 3), device=d), None),
        "zeros": (fv.zeros((2, 3), device=d), np.zeros((2, 3), np.float32)),
        "ones": (fv.ones(5, device=d), np.ones(5, np.float32)),
        "full": (fv.full((2, 2), 7, dtype=fv.int32, device=d), np.full((2, 2), 7, np.int32)),
        "full complex": (fv.full(3, 1 + 2j, device=d), np.full(3, 1 + 2j, np.complex64)),
        "arange": (fv.arange(2, 9, 3, device=d), np.arange(2, 9, 3)),
        "linspace": (fv.linspace(0, 1, 5, device=d), np.linspace(0, 1, 5).astype(np.float32)),
        "eye": (fv.eye(3, k=1, device=d), np.eye(3, k=1, dtype=np.float32)),
        "from_dlpack": (fv.from_dlpack(h, device=d), h),
    }
    for name, (a, want) in made.items():
        assert a.device == d, name
        if want is not None:
            _exact(a.numpy(), want)
    x = made["asarray"][0]
    for name, a, want in (("zeros_like", fv.zeros_like(x), np.zeros_like(h)),
                          ("ones_like", fv.ones_like(x), np.ones_like(h)),
                          ("full_like", fv.full_like(x, 3), np.full_like(h, 3)),
                          ("empty_like", fv.empty_like(x), None)):
        assert a.device == d, name        # *_like: x's device by default
        if want is not None:
            _exact(a.numpy(), want)
    other = two[1 - which]
    assert fv.zeros_like(x, device=other).device == other


@pytest.mark.parametrize("which", [0, 1])
def test_ops_run_on_their_inputs_device(two, which):
    d = two[which]
    rng = np.random.default_rng(which)
    h = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    x, y = fv.asarray(h, device=d), fv.asarray(w, device=d)
    results = {
        "a * 2 + 1": ((x * 2.0 + 1.0), h * np.float32(2) + np.float32(1)),
        "exp": (fv.exp(x), np.exp(h)),
        "matmul": (x @ y, h @ w),
        "sum": (fv.sum(x, axis=1), h.sum(axis=1)),
        "max": (x.max(), h.max()),
        "sort": (fv.sort(x, axis=1), np.sort(h, axis=1)),
        "mask": (x[x > 0], h[h > 0]),
        "take": (fv.take(x, fv.asarray([3, 0], device=d), axis=0), h[[3, 0]]),
        "concat": (fv.concat([x, x]), np.concatenate([h, h])),
        "astype": (x.astype(fv.float16), h.astype(np.float16)),
        "int //": (fv.asarray([7, -7], device=d) // 2, np.array([3, -4])),
    }
    for name, (got, want) in results.items():
        assert got.device == d, name
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
    z = fv.zeros((4,), device=d)
    z[1:3] = 5.0                      # in-place write on its own device
    z += fv.ones(4, device=d)
    _exact(z.numpy(), np.array([1, 6, 6, 1], np.float32))
    assert z.device == d


def test_mixing_devices_is_a_device_error_naming_both(two):
    d0, d1 = two
    a, b = fv.ones(4, device=d0), fv.ones(4, device=d1)
    calls = {"add": lambda: fv.add(a, b), "operator": lambda: a + b, "concat": lambda: fv.concat([b, a]),
             "where": lambda: fv.where(b > 0, a, b), "setitem": lambda: a.__setitem__(slice(None), b),
             "matmul": lambda: fv.linalg.matmul(a, b)}
    for name, call in calls.items():
        with pytest.raises(DeviceError) as e:
            call()
        assert repr(d0) in str(e.value) and repr(d1) in str(e.value), name
    assert fv.add(a, 1.0).device == d0 and fv.add(b, np.ones(4, np.float32)).device == d1   # hosts join


def test_work_recorded_on_the_wrong_device_is_refused(two):
    """Below the public functions (their wrapper picks the device), a launch or copy binding another
    device's buffer is a DeviceError, never a dispatch on the wrong VkDevice."""
    b = fv.ones(4, device=two[1])
    raw_add = inspect.unwrap(fv.add)
    assert raw_add is not fv.add
    with pytest.raises(DeviceError, match=r"another fuelvk device \(1\)"):
        raw_add(b, b)                 # runs on the default context: its launch sees device 1's buffer
    with pytest.raises(DeviceError, match="another fuelvk device"):
        runtime.get().stream.fill(b.buffer, 16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                   np.int64, np.uint8, np.bool_, np.complex64])
def test_to_device_round_trip_is_bit_exact(two, dtype):
    d0, d1 = two
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 256, 64 * np.dtype(dtype).itemsize, dtype=np.uint8)
    h = (bits & 1).astype(np.bool_) if dtype is np.bool_ else bits.view(dtype)   # any bits (NaN payloads)
    a = fv.asarray(h)
    b = a.to_device(d1)
    assert a.device == d0 and b.device == d1 and b.buffer.pool is not a.buffer.pool
    _exact(b.numpy(), h)
    c = b.to_device(d0)
    assert c.device == d0
    _exact(c.numpy(), h)
    assert a.to_device(d0) is a and b.to_device(fv.Device(1)) is b      # same device: itself
    assert fv.asarray(b, device=d0).device == d0 and fv.asarray(b) is b
    with pytest.raises(fv.ValueCastError, match="copy=False"):
        fv.asarray(b, device=d0, copy=False)


def test_views_and_astype_device_argument(two):
    d0, d1 = two
    h = np.arange(20, dtype=np.float32).reshape(4, 5)
    v = fv.asarray(h, device=d1)[::2, 1:].T              # a strided view keeps its device
    assert v.device == d1
    _exact(v.to_device(d0).numpy(), h[::2, 1:].T)
    c = fv.astype(v, fv.int32, device=d0)                   # astype(device=): the result lives there
    assert c.device == d0
    _exact(c.numpy(), h[::2, 1:].T.astype(np.int32))


def test_threads_use_two_devices_concurrently(two):
    """Each thread works on its own device, checked against numpy; a thread with no device= input
    creates on the default device even while the other runs on device 1 (the current device is per
    thread)."""
    errors, barrier = [], threading.Barrier(3)

    def work(d, seed):
        try:
            rng = np.random.default_rng(seed)
            barrier.wait()
            for _ in range(30):
                h = rng.standard_normal(int(rng.integers(1, 500))).astype(np.float32)
                x = fv.asarray(h, device=d)
                y = fv.exp(x) * 2.0 - x
                assert y.device == d and fv.asarray([1.0]).device == two[0]
                np.testing.assert_allclose(y.numpy(), np.exp(h) * 2 - h, rtol=1e-5, atol=1e-5)
                assert float(fv.sum(x).numpy()) == pytest.approx(float(h.astype(np.float64).sum()), abs=1e-3)
        except BaseException as e:   # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(d, i)) for i, d in enumerate((two[0], two[1], two[1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors


def test_memory_of_dead_arrays_goes_back_on_the_second_device(two):
    d1 = two[1]
    fv.synchronize(d1)
    before = fv.memory_info(d1)["in_use_bytes"]
    arrays = [fv.ones(1 << 16, device=d1) for _ in range(8)]
    fv.synchronize(d1)
    assert fv.memory_info(d1)["in_use_bytes"] >= before + 8 * (4 << 16)
    del arrays
    fv.synchronize(d1)
    fv.ones(1, device=d1)       # an allocation takes dead slots back
    assert fv.memory_info(d1)["in_use_bytes"] <= before + 4096


def test_arrays_of_a_closed_device_raise_device_error(two):
    d0, d1 = two
    b = fv.arange(6, dtype=fv.float32, device=d1)
    a = fv.ones(6, device=d0)
    old = runtime.opened(1)
    runtime.close(1)
    assert old.closed and runtime.opened(1) is None and repr(d1) == "fuelvk.Device(1, <not started>)"
    for name, call in {"numpy": b.numpy, "op": lambda: fv.exp(b), "operator": lambda: b + 1,
                       "to_device": lambda: b.to_device(d0), "mixed": lambda: a + b}.items():
        with pytest.raises(DeviceError, match="closed"):
            call()
    assert b.device == d1                                    # still says where it lived
    _exact((a + a).numpy(), np.full(6, 2, np.float32))       # device 0 unaffected
    c = fv.ones(3, device=d1)                                # device 1 opens again, a new context
    assert runtime.opened(1) is not old and (c + c).numpy().tolist() == [2, 2, 2]


def test_device_arguments_are_checked(two, monkeypatch):
    with pytest.raises(DeviceError, match="not a fuelvk device"):
        fv.ones(2, device=fv.Device(2))
    with pytest.raises(DeviceError, match="not a fuelvk device"):
        fv.asarray([1.0], device="cpu")
    with pytest.raises(DeviceError, match="index must be an int"):
        fv.Device(-1)
    assert fv.ones(2, device="vulkan").device == two[0]
    sel = config.get("FUELVK_DEVICE") or str(runtime.get().device.index)
    monkeypatch.setenv("FUELVK_DEVICES", f"{sel},{sel},99")
    with pytest.raises(DeviceError, match="'99' .* matches no device"):
        fv.ones(2, device=fv.Device(2))
    assert runtime.opened(2) is None
    monkeypatch.setenv("FUELVK_DEVICES", "0,,0")
    with pytest.raises(DeviceError, match="FUELVK_DEVICES='0,,0' is not a device list"):
        fv.devices()
    monkeypatch.setenv("FUELVK_DEVICES", "0,0")
    monkeypatch.setenv("FUELVK_DEVICE", "1")
    with pytest.raises(DeviceError, match="disagree"):
        fv.devices()


def test_default_path_skips_the_device_lookup(monkeypatch):
    """With one device open the wrapper only tests a flag: it must not look at the inputs."""
    monkeypatch.setattr(runtime, "many", False)
    monkeypatch.setattr(fv._device, "_run", lambda *a: pytest.fail("device lookup on the one-device path"))
    x = fv.ones(3)
    _exact((fv.add(x, x) * 2).numpy(), np.full(3, 4, np.float32))


def test_the_second_device_is_closed_at_exit(tmp_path):
    """atexit closes every device's context (a hook registered before fuelvk runs after its close)."""
    import os
    import subprocess
    import sys
    sel = config.get("FUELVK_DEVICE") or str(runtime.get().device.index)
    script = ("import atexit, sys\n"
              "def after():\n"
              "    from fuelvk import runtime\n"
              "    print('closed' if runtime._others[1].closed and runtime.current() is None else 'open')\n"
              "atexit.register(after)\n"
              "import fuelvk as fv\n"
              "x = fv.ones(4, device=fv.devices()[1]) + fv.ones(4).to_device(fv.devices()[1])\n"
              "print(x.numpy().tolist())\n")
    env = dict(os.environ, FUELVK_DEVICES=f"{sel},{sel}")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[2.0,", "2.0,", "2.0,", "2.0]", "closed"]
