"""take (index_select), take_along_axis (gather), scatter_add, index_add.

Oracles: numpy take / take_along_axis (bit-exact moves), torch CPU scatter_add / index_add on float64
copies. Accumulations use small integers where the exact result must be representable.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.ops import indexing as I
from oracles import FLOATS, assert_bits, assert_close

rng = np.random.default_rng(7)
IDS = [str(d) for d in FLOATS]
TAGS = fv.dtypes.FLOAT_TAGS
MOVE_DTYPES = FLOATS + [np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.bool_), np.dtype(np.int64),
                        np.dtype(np.uint16)]


def data(shape, dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dt)
    x = rng.standard_normal(shape).astype(dt)
    x.reshape(-1)[:1] = np.nan  # payloads and specials move bit for bit
    return x


def atomics_modes(dt=np.float32):
    """The accumulation variants this device runs for dt: CAS always, native float atomics if present."""
    feat = I.NATIVE_FEATURE[TAGS[np.dtype(dt)]]
    return ["cas"] + (["native"] if feat in runtime.get().device.features else [])


# -- take ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", MOVE_DTYPES, ids=[str(d) for d in MOVE_DTYPES])
def test_take(dt, launched):
    x = data((4, 5, 6), dt)
    for axis in (0, 1, 2, -1, None):
        n = x.size if axis is None else x.shape[axis]
        for idx in (rng.integers(-n, n, size=9), rng.integers(0, n, size=(2, 3)), np.array([], np.int64),
                    np.int64(n - 1)):
            assert_bits(fv.take(x, idx, axis), np.take(x, idx, axis))
    a = fv.asarray(x)
    for v, ref in ((a[:, ::-2, 1:], x[:, ::-2, 1:]), (a[2:], x[2:])):
        got = fv.take(v, [0, 1, 0], 1)
        assert isinstance(got, fv.Array)
        assert_bits(got.numpy(), np.take(ref, [0, 1, 0], 1))
    assert any(i.startswith(("index_select.", "index_select_ssbo.")) for i in launched)


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int8, np.float64], ids=str)
def test_take_rows_not_texels(dt, path, launched):
    """take along an axis whose rows are not whole texels: through gather (texel reads, word stores)
    where texel loads are faster, index_select's element path otherwise; numpy's bits either way, for
    strided x, negative and device indices."""
    x = data((6, 7, 5), dt)
    a = fv.asarray(x)
    for axis in (0, 1, 2):
        n = x.shape[axis]
        idx = rng.integers(-n, n, size=(2, 3))
        assert_bits(fv.take(x, idx, axis), np.take(x, idx, axis))
        assert_bits(fv.take(a[::-1, 1:], idx % x.shape[axis] if axis != 1 else idx % 6, axis).numpy(),
                    np.take(x[::-1, 1:], idx % x.shape[axis] if axis != 1 else idx % 6, axis))
    dev = fv.asarray(np.array([4, -1, 0, -7], np.int64))
    assert_bits(fv.take(a, dev, 1).numpy(), np.take(x, [4, -1, 0, -7], 1))
    want = "gather." if path == "texel" else "index_select_ssbo."
    assert any(i.startswith(want) for i in launched), launched


def test_take_device_indices_and_embedding():
    table = data((50, 16), np.float32)
    tok = rng.integers(0, 50, size=(3, 7))
    for idt in (np.int32, np.uint32, np.int64):
        ids = fv.asarray(tok.astype(idt))
        got = fv.take(table, ids, 0)
        assert isinstance(got, fv.Array)
        assert_bits(got.numpy(), table[tok])
    neg = fv.asarray(np.array([-1, -50, 3], np.int64))
    assert_bits(fv.take(table, neg, 0).numpy(), table[[-1, -50, 3]])
    strided = fv.asarray(tok.astype(np.int32))[:, ::2]
    assert_bits(fv.take(table, strided, 0).numpy(), table[tok[:, ::2]])


# -- take_along_axis -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", MOVE_DTYPES, ids=[str(d) for d in MOVE_DTYPES])
def test_take_along_axis(dt, path, launched):
    """Both load paths (x and the indices through texel views, or the storage buffers), rows shorter
    and longer than the kernel's output words, strided views, each device index dtype."""
    x = data((4, 5, 6), dt)
    for axis in (0, 1, 2):
        shp = list(x.shape)
        shp[axis] = 7
        idx = rng.integers(-x.shape[axis], x.shape[axis], size=shp)
        assert_bits(fv.take_along_axis(x, idx, axis), np.take_along_axis(x, idx, axis))
        shp = [1] * 3
        shp[axis] = 3  # broadcast indices
        idx = rng.integers(0, x.shape[axis], size=shp)
        assert_bits(fv.take_along_axis(x, idx, axis), np.take_along_axis(x, idx, axis))
    idx = rng.integers(0, x.size, size=11)
    assert_bits(fv.take_along_axis(x, idx, None), np.take_along_axis(x.reshape(-1), idx, 0))
    a = fv.asarray(x)
    for idt in (np.int64, np.int32, np.uint32):
        ids = fv.asarray(rng.integers(0, 3, size=(6, 5, 4)).astype(idt))
        got = fv.take_along_axis(a[:, ::-1, 1:4].transpose(2, 1, 0), ids[:3, :, ::-1], 2)
        want = np.take_along_axis(x[:, ::-1, 1:4].transpose(2, 1, 0), ids.numpy()[:3, :, ::-1], 2)
        assert_bits(got.numpy(), want)
    assert f"gather{'' if path == 'texel' else '_ssbo'}.b{np.dtype(dt).itemsize}" in launched


# -- scatter_add / index_add -----------------------------------------------------------------------
@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_scatter_add_index_add(dt, path, launched, monkeypatch):
    """Both load paths (src and the indices through texel views, or the storage buffers), each
    accumulation variant, strided views, host and device indices."""
    tag = TAGS[np.dtype(dt)]
    for mode in atomics_modes(dt):
        monkeypatch.setattr(I, "ATOMICS", mode)
        base = rng.integers(-8, 8, size=(4, 5, 6)).astype(dt)
        src = rng.integers(-8, 8, size=(6, 9, 8)).astype(dt)
        for axis in (0, 1, 2):
            ishape = [3, 4, 5]
            ishape[axis] = 6  # longer than base along axis, <= src everywhere
            idx = rng.integers(0, base.shape[axis], size=ishape)
            want = torch.tensor(base.astype(np.float64)).scatter_add(axis, torch.tensor(idx),
                                                                      torch.tensor(src.astype(np.float64)))
            assert_bits(fv.scatter_add(base, axis, idx, src), want.numpy().astype(dt))
            srci = np.take(src[:4, :5, :6], np.arange(7) % 4, axis=axis)  # 7 entries along axis
            idx1 = rng.integers(0, base.shape[axis], size=srci.shape[axis])
            want = torch.tensor(base.astype(np.float64)).index_add(axis, torch.tensor(idx1),
                                                                    torch.tensor(srci.astype(np.float64)))
            assert_bits(fv.index_add(base, axis, idx1, srci), want.numpy().astype(dt))
        # views: strided base / src / index, device indices
        a_base, a_src = fv.asarray(base), fv.asarray(src)
        idx = fv.asarray(rng.integers(0, 5, size=(4, 9, 6)).astype(np.int32))
        got = fv.scatter_add(a_base[:, ::-1], 1, idx[:, ::2, 1:], a_src[1:5, ::2, :5])
        want = torch.tensor(base[:, ::-1].astype(np.float64)).scatter_add(
            1, torch.tensor(idx.numpy()[:, ::2, 1:].astype(np.int64)),
            torch.tensor(src[1:5, ::2, :5].astype(np.float64)))
        assert_bits(got.numpy(), want.numpy().astype(dt))
        got = fv.index_add(a_base.transpose(1, 0, 2), 0, fv.asarray(np.array([4, 0, 4], np.int64)),
                           a_src[:4, :3, :6].transpose(1, 0, 2))
        want = torch.tensor(base.transpose(1, 0, 2).astype(np.float64)).index_add(
            0, torch.tensor([4, 0, 4]), torch.tensor(src[:4, :3, :6].transpose(1, 0, 2).astype(np.float64)))
        assert_bits(got.numpy(), want.numpy().astype(dt))
        suffix = "" if mode == "cas" else "_native"
        twin = "" if path == "texel" else "_ssbo"
        assert f"scatter_add{twin}.{tag}{suffix}" in launched and f"index_add{twin}.{tag}{suffix}" in launched
        launched.clear()


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_contention_and_collisions(dt, monkeypatch):
    """2^20 additions onto one element (no value may be dropped), and random collisions."""
    n = 1 << 20
    if dt in (np.float32, np.float64):
        src, want0 = np.ones(n, dt), float(n)  # exact in f32/f64 in any order
    else:
        # f16/bf16 cannot hold 2^20 or 2^20 - 1; +-1 in halves sums to 0 exactly (f32 scratch) and a
        # single dropped value would show as +-1.
        src, want0 = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(dt), 0.0
    idx = fv.asarray(np.zeros(n, np.int32))
    k = rng.integers(0, 37, size=20000)
    vals = rng.integers(-4, 5, size=20000).astype(dt)
    want_c = np.zeros(37)
    np.add.at(want_c, k, vals.astype(np.float64))
    for mode in atomics_modes(dt):
        monkeypatch.setattr(I, "ATOMICS", mode)
        got = fv.index_add(np.zeros(3, dt), 0, idx, src)
        assert_bits(np.asarray(got), np.array([want0, 0, 0], dt))
        got = fv.scatter_add(np.zeros(37, dt), 0, k, vals)
        assert_bits(got, want_c.astype(dt))


def test_native_f64_atomics_when_available(monkeypatch):
    ctx = runtime.get()
    if "float64_atomic_add" not in ctx.device.features:
        monkeypatch.setattr(I, "ATOMICS", "native")
        with pytest.raises(fv.UnsupportedError, match="float64_atomic_add"):
            fv.index_add(np.zeros(2), 0, [0], np.ones(1))
        pytest.skip(f"{ctx.device.name} has no float64 atomic add (CAS variant tested above)")
    monkeypatch.setattr(I, "ATOMICS", "native")
    assert_bits(fv.index_add(np.zeros(2), 0, np.zeros(4096, np.int64), np.ones(4096)), np.array([4096.0, 0]))


def test_edges():
    base = data((3, 4), np.float32)
    assert_bits(fv.index_add(base, 1, np.array([], np.int64), np.zeros((3, 0), np.float32)), base)
    assert_bits(fv.scatter_add(base, 0, np.zeros((0, 4), np.int64), np.zeros((0, 4), np.float32)), base)
    assert fv.take(np.zeros((0, 3), np.float32), [1, 2], 1).shape == (0, 2)
    one = np.array([[1.5]], np.float32)
    assert_bits(fv.scatter_add(one, 1, [[0]], one), one * 2)
    big = data((1, 1000), ml_dtypes.bfloat16)
    idx = rng.integers(0, 1000, size=(1, 1000))
    want = torch.tensor(big.astype(np.float64)).scatter_add(1, torch.tensor(idx), torch.tensor(big.astype(np.float64)))
    assert_close(fv.scatter_add(big, 1, idx, big), want.numpy().astype(ml_dtypes.bfloat16), ml_dtypes.bfloat16)


# -- bad input -------------------------------------------------------------------------------------
def test_out_of_range_host_and_device_indices():
    x = data((4, 5), np.float32)
    for idx in ([5], [-6], fv.asarray(np.array([0, 7], np.int64)), fv.asarray(np.array([-9], np.int32))):
        with pytest.raises(IndexError, match="out of bounds"):   # device indices: at the read (next sync)
            np.asarray(fv.take(x, idx, 1))
    with pytest.raises(fv.FuelVKIndexError, match="take_along_axis"):
        fv.take_along_axis(x, np.full((4, 1), 5), 1)
    with pytest.raises(IndexError, match=r"accepted \[0, 5\)"):
        fv.scatter_add(x, 1, np.array([[-1]]), x)  # torch rejects negative indices here
    with pytest.raises(IndexError, match="index_add"):
        np.asarray(fv.index_add(x, 0, fv.asarray(np.array([4], np.uint32)), x[:1]))


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint32], ids=str)
def test_device_index_check_is_one_launch_and_exact(kind):
    """The device-side check of device indices is one index_bounds launch (no cast, no reduction, no
    copy), with no host wait; its verdict is exact at every edge of [lo, n) (negatives allowed or not,
    int64 values past 32 bits, the extremes of each dtype), on views at an offset and strided ones."""
    x = data((4, 5), np.float32)
    stream = runtime.get().stream
    info = np.iinfo(kind)
    edges = {np.int64: [2 ** 32, 2 ** 32 + 3, -(2 ** 32), -(2 ** 32) + 2, 2 ** 40, info.min, info.max],
             np.int32: [info.min, info.max, -2 ** 31 + 1], np.uint32: [info.max, 2 ** 31, 5]}[kind]
    good = np.array([0, 4, 2], kind)
    dev, xd = fv.asarray(good), fv.asarray(x)
    stream.synchronize()
    base = stream.dispatches
    got = fv.take(xd, dev, 1)
    assert stream.dispatches - base == 2   # the check + the take
    assert_bits(np.asarray(got), x[:, good])
    for v in edges + ([5, 4] if kind == np.uint32 else [5, -6, -1, 4, -5]):
        for negative_ok, op in ((True, fv.take), (False, I.index_select)):
            ok = (-5 if negative_ok else 0) <= int(v) < 5
            idx = fv.asarray(np.array([1, v, 2, 3, 0, 1, 2], kind))[1::2]   # a strided view at an offset
            if ok:
                assert_bits(np.asarray(op(x, idx, 1)), np.take(x, np.array([v, 3, 1], np.int64), 1))
                continue
            with pytest.raises(fv.FuelVKIndexError, match="out of bounds for an axis of size 5") as e:
                np.asarray(op(x, idx, 1))
            msg = str(e.value)
            if kind == np.int32 or -2 ** 31 < int(v) < 2 ** 31 - 1:
                assert f"index {int(v)} " in msg, msg
            else:   # past int32: the message gives the saturated bound
                assert ("<= -2147483648" in msg) if int(v) < 0 else (">= 2147483647" in msg), msg
            assert "1 bad of 3" in msg, msg


def test_device_index_check_reports_the_extremes_of_many():
    """Several bad indices (both sides, over many workgroups): the count and each side's extreme."""
    x = data((3, 7), np.float32)
    idx = np.zeros(5000, np.int64)
    idx[[17, 900, 4999]] = [-9, 12, 40]
    idx[2500] = -30
    with pytest.raises(fv.FuelVKIndexError, match=r"index -30 \(the smallest of 4 bad of 5000"):
        np.asarray(fv.take(x, fv.asarray(idx), 1))
    idx[[17, 2500]] = 0
    with pytest.raises(fv.FuelVKIndexError, match=r"index 40 \(the largest of 2 bad of 5000"):
        np.asarray(fv.take(x, fv.asarray(idx), 1))


def test_device_index_check_over_one_binding_checks_on_the_host(monkeypatch):
    """Indices whose span is over one binding are checked on the host (a wait), still exactly."""
    from fuelvk.ops import _core
    x = data((4, 5), np.float32)
    idx = fv.asarray(np.array([0, 1, 2, 3] * 64 + [5], np.int32))
    monkeypatch.setattr(I, "windowed", lambda a, lim=None: None)
    with pytest.raises(fv.FuelVKIndexError, match=r"index 5 is out of bounds .*1 bad of 257"):
        fv.take(x, idx, 1)   # raised at the call: the host check
    assert _core.windowed is not None


def test_device_index_check_binds_a_window_of_a_buffer_over_one_binding(device_limits):
    """Device indices in a buffer larger than one binding: a view whose span fits is checked on the
    device through a window (no host wait); a span over one binding is checked on the host, at the call."""
    stream = runtime.get().stream
    big = np.zeros(1 << 15, np.int32)          # 128 KiB
    big[20000] = 9
    dev = fv.asarray(big)
    device_limits(maxStorageBufferRange=1 << 16)
    calls = []
    real = stream.synchronize
    stream.synchronize = lambda: (calls.append(1), real())[1]
    try:
        I.checked_indices("t", dev[19000:21000], 5)             # 8 KB at an offset past the first binding
        I.checked_indices("t", dev[100:200], 5)
        assert not calls
    finally:
        del stream.synchronize
    with pytest.raises(fv.FuelVKIndexError, match=r"t: index 9 \(the largest of 1 bad of 2000"):
        stream.synchronize()
    with pytest.raises(fv.FuelVKIndexError, match=r"index 9 is out of bounds .*1 bad of 32768"):
        I.checked_indices("t", dev, 5)                           # over one binding: the host check


def test_a_failed_device_check_reaches_the_thread_that_made_it():
    """The stream is shared by threads: when another thread's synchronize finds the bad index first,
    it raises there, and the thread that took with it still gets the error at its own next read
    (never its clamped result in silence)."""
    import threading
    x = data((4, 5), np.float32)
    made, go, seen = threading.Event(), threading.Event(), []

    def bad_take():
        y = fv.take(x, fv.asarray(np.array([0, 7], np.int64)), 1)
        made.set()
        go.wait()
        try:
            seen.append(np.asarray(y))
        except fv.FuelVKIndexError as e:
            seen.append(e)
    t = threading.Thread(target=bad_take)
    t.start()
    made.wait()
    with pytest.raises(fv.FuelVKIndexError, match="index 7"):   # this thread synchronizes first
        runtime.get().stream.synchronize()
    go.set()
    t.join()
    assert len(seen) == 1 and isinstance(seen[0], fv.FuelVKIndexError), seen
    assert not runtime.get().stream.failures
    runtime.get().stream.synchronize()   # nothing owed any more


def test_a_failure_kept_for_a_thread_dies_with_it():
    """A thread that dies before synchronizing leaves no kept failure behind: nothing for a later thread
    (Linux reuses a dead thread's id) to receive, and no entry left over."""
    import gc
    import threading
    x = data((4, 5), np.float32)
    stream = runtime.get().stream
    made, go = threading.Event(), threading.Event()

    def bad_take_then_exit():
        fv.take(x, fv.asarray(np.array([0, 7], np.int64)), 1)
        made.set()
        go.wait()          # still alive when the main thread's synchronize finds the bad index
    t = threading.Thread(target=bad_take_then_exit)
    t.start()
    made.wait()
    with pytest.raises(fv.FuelVKIndexError, match="index 7"):
        stream.synchronize()
    assert len(stream.failures) == 1        # kept for t, which never reads
    go.set()
    t.join()
    del t
    gc.collect()
    assert not stream.failures              # gone with its thread object
    got, idents = [], []

    def later_read():
        idents.append(threading.get_ident())
        try:
            got.append(np.asarray(fv.take(x, [1], 1)))
        except fv.FuelVKIndexError as e:   # the old bookkeeping (by thread id) raised here
            got.append(e)
    for _ in range(3):
        t2 = threading.Thread(target=later_read)
        t2.start()
        t2.join()
    assert all(isinstance(g, np.ndarray) for g in got), got
    assert_bits(got[0], x[:, [1]])
    # a thread already finished when its failed check runs is not kept either
    done = threading.Thread(target=lambda: fv.take(x, fv.asarray(np.array([9], np.int32)), 1))
    done.start()
    done.join()
    with pytest.raises(fv.FuelVKIndexError, match="index 9"):
        stream.synchronize()
    assert not stream.failures


def test_device_indices_unchecked_never_leave_bounds(monkeypatch):
    """With the host check off, the kernels clamp (reads) or skip (writes) bad device indices."""
    monkeypatch.setattr(I, "CHECK_DEVICE_INDICES", False)
    x = data((4, 5), np.float32)
    bad = fv.asarray(np.array([0, 9, -7, 2 ** 40, -(2 ** 40), 4], np.int64))
    got = fv.take(x, bad, 1).numpy()
    assert_bits(got, x[:, [0, 4, 0, 4, 0, 4]])  # 9 -> 4, -7 -> -2 -> 0, huge -> clamped
    got = fv.take_along_axis(x, fv.asarray(np.array([[9], [-1], [-9], [2]], np.int32)), 1).numpy()
    assert_bits(got, x[[0, 1, 2, 3], [4, 4, 0, 2]][:, None])
    sentinel = fv.asarray(np.full(64, 3.0, np.float32))
    for mode in atomics_modes():
        monkeypatch.setattr(I, "ATOMICS", mode)
        out = fv.index_add(fv.asarray(x), 1, fv.asarray(np.array([1, 5, -1, 2 ** 33], np.int64)),
                           fv.asarray(np.ones((4, 4), np.float32)))
        want = x.copy()
        want[:, 1] += 1
        want[:, 4] += 1  # -1 wraps to the last column (numpy-style in the kernel); 5 and 2^33 skipped
        assert_bits(out.numpy(), want)
        out = fv.scatter_add(fv.asarray(x), 0, fv.asarray(np.array([[7, 0, 1, 2, 3]], np.uint32)),
                             fv.asarray(np.ones((1, 5), np.float32)))
        want = x.copy()
        want[0, 1] += 1
        want[1, 2] += 1
        want[2, 3] += 1
        want[3, 4] += 1
        assert_bits(out.numpy(), want)
    assert_bits(sentinel.numpy(), np.full(64, 3.0, np.float32))


def test_bad_dtypes_and_shapes():
    x = data((4, 5), np.float32)
    with pytest.raises(fv.DTypeError, match="integers"):
        fv.take(x, [1.5], 0)
    with pytest.raises(fv.DTypeError, match="int32, uint32 or int64"):
        fv.take(x, fv.asarray(np.array([1], np.int16)), 0)
    with pytest.raises(fv.ShapeError, match="rank"):
        fv.take_along_axis(x, np.zeros(3, np.int64), 1)
    with pytest.raises(fv.ShapeError, match="same rank"):
        fv.scatter_add(x, 0, np.zeros(3, np.int64), x)
    with pytest.raises(fv.ShapeError, match="<= src shape"):
        fv.scatter_add(x, 0, np.zeros((2, 6), np.int64), x)
    with pytest.raises(fv.ShapeError, match="must be"):
        fv.index_add(x, 1, [0, 1], x)
    with pytest.raises(fv.ShapeError, match="1-D"):
        fv.index_add(x, 1, [[0]], x)
    with pytest.raises(fv.DTypeError, match="src has dtype float16"):
        fv.index_add(x, 0, [0], x[:1].astype(np.float16))
    with pytest.raises(fv.DTypeError, match="scatter_add"):
        fv.scatter_add(np.zeros((4, 5), np.int32), 0, np.zeros((1, 5), np.int64), np.zeros((4, 5), np.int32))
    with pytest.raises(fv.ShapeError, match="axis"):
        fv.take(x, [0], 2)


def test_device_index_check_axis_at_2_32():
    """The kernel holds the axis length in 32 bits: an axis of 2^32 or more is checked on the host, at
    the call (exactly: 2^32 - 1 passes, 2^32 is out); just below it the device check decides, exactly."""
    stream = runtime.get().stream
    ids = lambda *v: fv.asarray(np.array(v, np.int64))   # noqa: E731
    n = 2 ** 32
    I._bounds("take", "index_select", ids(0, n - 1), 0, n, "[0, 2^32)")             # host check: passes
    with pytest.raises(fv.FuelVKIndexError, match=f"index {n} is out of bounds"):
        I._bounds("take", "index_select", ids(0, n), 0, n, "[0, 2^32)")             # raised at the call
    with pytest.raises(fv.FuelVKIndexError, match=f"index {-n - 1} is out of bounds"):
        I._bounds("take", "index_select", ids(-n - 1, -n), -n, n, "[-2^32, 2^32)")
    m = n - 1                                                                       # the device's largest
    I._bounds("take", "index_select", ids(0, m - 1, -m), -m, m, "[-m, m)")
    stream.synchronize()
    I._bounds("take", "index_select", ids(0, m), 0, m, "[0, m)")                     # deferred
    with pytest.raises(fv.FuelVKIndexError, match="found by the device-side check"):
        stream.synchronize()
