"""fuelvk.Array: host round trips for every dtype, free views, numpy interop, index errors."""
import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from oracles import assert_bits

RNG = np.random.default_rng(7)
ALL_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, ml_dtypes.float8_e4m3fn, np.int8, np.int16,
              np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.bool_]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip_bit_exact(dt):
    raw = RNG.integers(0, 256, size=(5, 7) + (np.dtype(dt).itemsize,), dtype=np.uint8)
    host = raw.view(dt).reshape(5, 7) if dt is not np.bool_ else raw[..., 0].astype(bool)
    a = fv.asarray(host)
    assert a.dtype == np.dtype(dt) and a.shape == (5, 7)
    assert_bits(a.numpy(), host)
    assert_bits(np.asarray(a), host)
    assert_bits(a[::-1, 1::3].numpy(), host[::-1, 1::3])   # strided download


def test_views_match_numpy():
    host = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    a = fv.asarray(host)
    cases = [
        (a.T, host.T), (a.transpose(1, 0, 2), host.transpose(1, 0, 2)), (a[1:3, ::-2, 4], host[1:3, ::-2, 4]),
        (a[..., None, 2], host[..., None, 2]), (a[-1], host[-1]), (a.reshape(20, 6), host.reshape(20, 6)),
        (a.reshape(-1), host.reshape(-1)), (a[:, :, :1].broadcast_to((4, 5, 3)), np.broadcast_to(host[:, :, :1], (4, 5, 3))),
        (a.flip(1), np.flip(host, 1)), (a.flip(), np.flip(host)), (a[:, :1].squeeze(1), host[:, :1].squeeze(1)),
        (a.expand_dims(0), host[None]), (a.swapaxes(0, 2), host.swapaxes(0, 2)), (a.mT, np.swapaxes(host, -1, -2)),
        (a[:0], host[:0]), (a[5:], host[5:]),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        assert_bits(got.numpy(), np.ascontiguousarray(want))
    v = a.reshape(20, 6)
    assert v.buffer is a.buffer, "a contiguous reshape is a view"


def test_reshape_of_noncontiguous_view_copies():
    host = RNG.standard_normal((4, 6)).astype(np.float32)
    a = fv.asarray(host).T                       # (6, 4), not contiguous
    r = a.reshape(24)
    assert_bits(r.numpy(), host.T.reshape(24))
    assert r.buffer is not a.buffer
    r2 = fv.asarray(host)[:, ::2].reshape(2, 2, 3)   # non-collapsible: copy
    assert_bits(r2.numpy(), host[:, ::2].reshape(2, 2, 3))


def test_properties_and_scalars():
    a = fv.asarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert (a.ndim, a.size, a.itemsize, a.nbytes, len(a)) == (2, 6, 8, 48, 2)
    assert a[1, 2].item() == 5.0 and float(a[0, 1]) == 1.0
    assert a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert "fuelvk.Array" in repr(a)
    assert fv.zeros((3, 2), fv.float16).numpy().tolist() == [[0, 0]] * 3


def test_index_errors():
    a = fv.asarray(np.zeros((3, 4), np.float32))
    with pytest.raises(fv.FuelVKIndexError, match="out of bounds"):
        a[3]
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0]
    with pytest.raises(IndexError, match="boolean array index must be the whole key"):
        a[np.array([True, False, True]), 0]      # (integer arrays and lists index as numpy's)
    with pytest.raises(IndexError, match="out of bounds"):
        a[np.array([0, 3])]
    with pytest.raises(fv.ShapeError, match="cannot reshape"):
        a.reshape(5, 3)
    with pytest.raises(fv.ShapeError):
        a.broadcast_to((2, 4))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        a.transpose(0, 2)
    with pytest.raises(fv.DTypeError, match="unsupported dtype"):
        fv.asarray(np.zeros(2, np.longdouble))   # (complex64 / complex128 are stored: the array API names them)
    with pytest.raises(fv.ShapeError, match="negative dimensions"):
        fv.empty((-1, 2))


def test_operators_call_the_public_ops():
    """Array's operators reach the public op objects themselves (one device wrapper, the ops layer's cached
    plans): fuelvk/__init__ wraps only the raw helpers it binds, not the public ops a second time."""
    from fuelvk import _hooks
    for name in ("add", "subtract", "multiply", "divide", "negative", "abs", "equal", "matmul", "astype", "copy"):
        assert _hooks.op(name) is getattr(fv, name), name
    a = fv.asarray(np.arange(4, dtype=np.float32))
    assert np.array_equal((a + a * 2.0).numpy(), np.arange(4, dtype=np.float32) * 3)
