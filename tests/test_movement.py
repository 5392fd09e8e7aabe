"""Data movement: strided_copy (ascontiguousarray/copy), flip, roll, triu/tril, concatenate, masked_fill
and slice assignment, bit for bit against numpy (random bit patterns, so NaN payloads included)."""
import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk.kernels import kernel
from oracles import assert_bits

# one dtype per byte width, plus others of the same width (moves must not care about the dtype)
WIDTH_DTYPES = [np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.float32), np.dtype(np.float64)]
OTHER_DTYPES = [np.dtype(np.bool_), np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.bfloat16),
                np.dtype(np.float16), np.dtype(np.int32), np.dtype(np.int64)]
IDS = lambda d: str(d)  # noqa: E731


def bits(shape, dt, rng):
    """Random bit patterns of dtype dt (NaNs with payloads, subnormals, -0 ... for float types)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    n = int(np.prod(shape))
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def views(a):
    """(name, numpy view, fuelvk view) pairs: contiguous, transposed, sliced, negative step, broadcast, offset."""
    d = fv.asarray(a)
    out = [("contig", a, d), ("T", a.T, d.T), ("neg", a[::-1, ::-2], d[::-1, ::-2]),
           ("slice", a[1:, 2:7], d[1:, 2:7]), ("offset", a[3], d[3]),
           ("bcast", np.broadcast_to(a[:1], (4,) + a.shape), d[:1].broadcast_to((4,) + a.shape)),
           ("newaxis", a[:, None, ::3], d[:, None, ::3])]
    return out


# -- strided_copy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES, ids=IDS)
def test_strided_copy_views(dt):
    a = bits((9, 13), dt, np.random.default_rng(1))
    for name, nv, dv in views(a):
        got = fv.ascontiguousarray(dv)
        assert got.is_contiguous, name
        assert_bits(got, np.ascontiguousarray(nv))
        assert_bits(fv.copy(dv), nv)


def test_strided_copy_nan_payloads_bit_exact():
    for dt, u in ((np.float32, np.uint32), (np.float64, np.uint64), (np.float16, np.uint16),
                  (ml_dtypes.bfloat16, np.uint16)):
        nb = np.dtype(u).itemsize * 8
        m = (1 << (nb - 1)) - 1
        pats = np.array([m, m - 1, (m >> 1) + 1, m ^ (1 << (nb - 3)), 1 << (nb - 1) | 5], dtype=u)
        a = np.tile(pats, 7).view(dt).reshape(5, 7)
        assert_bits(fv.ascontiguousarray(fv.asarray(a).T), a.T)
        assert_bits(fv.ascontiguousarray(a[::-1]), a[::-1])


@pytest.mark.parametrize("rank", range(0, 9))
def test_strided_copy_ranks(rank):
    rng = np.random.default_rng(rank)
    shape = tuple(int(x) for x in rng.integers(1, 4, size=rank))
    a = bits(shape, np.float32, rng)
    d = fv.asarray(a)
    perm = tuple(reversed(range(rank)))
    assert_bits(fv.ascontiguousarray(d.transpose(perm)), a.transpose(perm))
    if rank:
        key = tuple(slice(None, None, -1) if i % 2 else slice(None) for i in range(rank))
        assert_bits(fv.ascontiguousarray(d[key].transpose(perm)), a[key].transpose(perm))


@pytest.mark.parametrize("n", [0, 1, 7, 1023, 1024, 1025, 4099])
@pytest.mark.parametrize("dt", WIDTH_DTYPES, ids=IDS)
def test_strided_copy_sizes(n, dt):
    a = bits((n, 2), dt, np.random.default_rng(n))
    assert_bits(fv.ascontiguousarray(fv.asarray(a)[::-1, 1]), a[::-1, 1])
    assert_bits(fv.ascontiguousarray(fv.asarray(a).T), a.T)


def test_strided_copy_signed_variants_listed():
    names = {n for t in ("b1", "b2", "b4", "b8") for n in kernel("strided_copy", t).names}
    assert {"strided_copy", "strided_copy_signed_b2", "strided_copy_signed_b4", "strided_copy_signed_b8"} <= names


@pytest.mark.parametrize("wide", [True, False], ids=["w64", "no-int64"])
@pytest.mark.parametrize("dt", WIDTH_DTYPES + [np.dtype(ml_dtypes.bfloat16)], ids=IDS)
def test_strided_copy_contiguous_paths(dt, wide, monkeypatch):
    """Contiguous copies: LINEAR (4 elements per access; b2/b4 through 64-bit words with shaderInt64)
    when offsets are multiples of 4, the index path otherwise; odd sizes exercise the tail. On the
    storage-buffer load path (whole-texel runs take copy_texels on the texel path: test_texel_movement)."""
    from fuelvk import runtime
    from fuelvk.kernels.elementwise import LINEAR
    from fuelvk.ops import _core
    from fuelvk.runtime import loadpath
    monkeypatch.setenv(loadpath.ENV, "0")
    ctx = runtime.get()
    if not wide:
        if dt.itemsize == 8:
            pytest.skip("b8 kernels need shaderInt64 on any path")
        monkeypatch.setattr(ctx.device, "features", set(ctx.device.features) - {"int64"})
    elif "int64" not in ctx.device.features:
        pytest.skip("device lacks shaderInt64")
    seen, get = [], ctx.pipelines.get
    monkeypatch.setattr(ctx, "plans", {})
    monkeypatch.setattr(_core, "SMALL", {})  # LINEAR at every size (small launches would take the index path)
    monkeypatch.setattr(ctx.pipelines, "get", lambda v, spec=(), *a, **k: (
        seen.append((v.id, (ctx.pipelines.signature(v).spec_ids.get(LINEAR), 1) in tuple(spec))),
        get(v, spec, *a, **k))[1])
    rng = np.random.default_rng(7)
    tag = f"b{dt.itemsize}"
    fam = "strided_copy_w64" if wide and tag in ("b2", "b4") else "strided_copy"
    for n, off in ((1, 0), (3, 4), (4, 0), (1030, 0), (1031, 4), (1031, 1), (517, 2), (20001, 8)):
        h = bits(n + 8, dt, rng)
        seen.clear()
        assert_bits(fv.copy(fv.asarray(h)[off:off + n]), h[off:off + n])
        assert seen == [(f"{fam}.{tag}", off % 4 == 0)], seen
    seen.clear()
    h = bits(1, dt, rng)   # a constant (all-stride-0) input also takes the LINEAR path
    assert_bits(fv.copy(fv.asarray(h).broadcast_to((1030,))), np.broadcast_to(h, (1030,)))
    assert seen == [(f"{fam}.{tag}", True)], seen


def test_ascontiguousarray_returns_contiguous_input_itself():
    d = fv.asarray(np.arange(6, dtype=np.float32))
    assert fv.ascontiguousarray(d) is d
    c = fv.copy(d)
    assert c.buffer is not d.buffer


def test_transposed_copy_large():
    """One >= 16M-element case: a transposed 4096 x 4096 float32 to contiguous."""
    a = np.arange(4096 * 4096, dtype=np.uint32).view(np.float32).reshape(4096, 4096)
    got = fv.ascontiguousarray(fv.asarray(a).T).numpy()
    assert np.array_equal(got.view(np.uint32), np.ascontiguousarray(a.T).view(np.uint32))


# -- flip / roll ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES[:2], ids=IDS)
def test_flip(dt):
    a = bits((5, 6, 7), dt, np.random.default_rng(2))
    for axis in (None, 0, 1, -1, (0, 2)):
        assert_bits(fv.flip(a, axis), np.flip(a, axis))
    for name, nv, dv in views(a[0]):
        assert_bits(fv.flip(dv, 0), np.flip(nv, 0))
    assert_bits(fv.flip(np.float32(3.0)), np.flip(np.float32(3.0)))
    assert fv.flip(fv.asarray(a), 1).is_contiguous


@pytest.mark.parametrize("n", [0, 1, 255, 1025])
def test_flip_sizes(n):
    a = bits((n,), np.int16, np.random.default_rng(n))
    assert_bits(fv.flip(a), a[::-1])


@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES[:1], ids=IDS)
def test_roll(dt):
    a = bits((4, 5, 6), dt, np.random.default_rng(3))
    for shift, axis in ((1, 0), (-2, 1), (13, 2), (7, None), (0, 0), ((1, -3), (0, 2)), ((2, 3), 1), (-100, -1), ((2, -7), None)):
        assert_bits(fv.roll(a, shift, axis), np.roll(a, shift, axis))
    for name, nv, dv in views(a[0]):
        assert_bits(fv.roll(dv, 3, -1), np.roll(nv, 3, -1))
        assert_bits(fv.roll(dv, -5, None), np.roll(nv, -5, None))
    assert_bits(fv.roll(np.zeros((0, 3), dt), 2, 1), np.zeros((0, 3), dt))
    with pytest.raises(fv.ShapeError, match="shifts must be integers"):
        fv.roll(a, 1.5)


def test_roll_and_flip_rank_above_six():
    a = bits((2, 3, 2, 3, 2, 3, 2, 2), np.float32, np.random.default_rng(4))
    assert_bits(fv.roll(a, (1, 2, 1, 1, 1, 2, 1, 1), tuple(range(8))), np.roll(a, (1, 2, 1, 1, 1, 2, 1, 1), tuple(range(8))))
    assert_bits(fv.flip(fv.asarray(a).transpose(7, 0, 6, 1, 5, 2, 4, 3), (0, 2, 4, 6)),
                np.flip(a.transpose(7, 0, 6, 1, 5, 2, 4, 3), (0, 2, 4, 6)))


# -- triu / tril ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES[:1], ids=IDS)
def test_triu_tril(dt):
    a = bits((3, 6, 9), dt, np.random.default_rng(5))
    for k in (0, 1, -2, 8, 9, -6, -100, 100):
        assert_bits(fv.triu(a, k), np.triu(a, k))
        assert_bits(fv.tril(a, k), np.tril(a, k))
    for name, nv, dv in views(a[0]):
        assert_bits(fv.triu(dv, 1), np.triu(nv, 1))
        assert_bits(fv.tril(dv, -1), np.tril(nv, -1))
    assert_bits(fv.tril(a[0, 0]), np.tril(a[0, 0]))         # 1-D: numpy's square broadcast
    assert_bits(fv.triu(np.zeros((0, 4), dt)), np.zeros((0, 4), dt))


def test_triu_large_batch_rank():
    a = bits((2, 2, 2, 2, 2, 2, 5, 33), np.float32, np.random.default_rng(6))
    assert_bits(fv.triu(fv.asarray(a).swapaxes(0, 5), 2), np.triu(a.swapaxes(0, 5), 2))


# -- concatenate ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_concatenate(dt):
    rng = np.random.default_rng(7)
    a, b, c = bits((3, 4, 5), dt, rng), bits((3, 1, 5), dt, rng), bits((3, 0, 5), dt, rng)
    for axis in (1, -2):
        assert_bits(fv.concatenate([a, b, c, a], axis), np.concatenate([a, b, c, a], axis))
    assert_bits(fv.concatenate([a, a[::-1]], 0), np.concatenate([a, a[::-1]], 0))
    assert_bits(fv.concatenate([a, a], None), np.concatenate([a, a], None))
    da = fv.asarray(a)
    got = fv.concatenate([da.transpose(2, 1, 0), np.ascontiguousarray(a.transpose(2, 1, 0)),
                          da[:1].broadcast_to((3, 4, 5)).transpose(2, 1, 0)], 2)
    assert isinstance(got, fv.Array)
    assert_bits(got, np.concatenate([a.transpose(2, 1, 0), a.transpose(2, 1, 0),
                                     np.broadcast_to(a[:1], (3, 4, 5)).transpose(2, 1, 0)], 2))
    assert_bits(fv.concatenate([a[0, 0]], 0), a[0, 0])


@pytest.mark.parametrize("path", ["texel", "ssbo"], indirect=True)
@pytest.mark.parametrize("dt", WIDTH_DTYPES, ids=IDS)
def test_concatenate_ragged_rows(dt, path):
    """Pieces whose column windows are not whole 16-byte words (write_rows: whole-word stores inside a
    window, element stores at its ragged ends, which neighbouring pieces share): pieces of 0, 1, 3
    and odd columns, outputs under one word, offset / strided / reversed / broadcast sources."""
    rng = np.random.default_rng(11)
    for cols in ((37, 1, 0, 3, 90), (1, 2), (3,), (129, 131)):
        parts = [bits((3, c), dt, rng) for c in cols]
        assert_bits(fv.concatenate(parts, 1), np.concatenate(parts, 1))
    a = bits((5, 150), dt, rng)
    d = fv.asarray(a)
    pairs = [(a[:, 7:80], d[:, 7:80]), (a[::2, ::-3], d[::2, ::-3]), (a[1:2, 3:4], d[1:2, 3:4]),
             (a[:, 150:], d[:, 150:]), (np.broadcast_to(a[2:3, 5:41], (5, 36)), d[2:3, 5:41].broadcast_to((5, 36))),
             (a[::-1, 1:], d[::-1, 1:])]
    for pa, pb in [(pairs[0], pairs[1]), (pairs[2], pairs[0]), (pairs[3], pairs[4]), (pairs[5], pairs[2])]:
        want = np.concatenate([pa[0][:pb[0].shape[0]], pb[0][:pa[0].shape[0]]], 1)
        got = fv.concatenate([pa[1][:pb[1].shape[0]], pb[1][:pa[1].shape[0]]], 1)
        assert_bits(got, want)
    c = bits((2, 3, 7, 3), dt, rng)     # axis 1 of a 4-D array: windows of 7 * 3-element rows
    assert_bits(fv.concatenate([c, c[:, :1], c[:, ::-1]], 1), np.concatenate([c, c[:, :1], c[:, ::-1]], 1))
    assert_bits(fv.stack([d[0, 1:], d[1, :-1]], axis=0), np.stack([a[0, 1:], a[1, :-1]], axis=0))


def test_setitem_ragged_rows():
    """a[rows, cols] = b with a contiguous dst row (write_rows): the elements around the window and the
    overlap of source and destination as numpy."""
    rng = np.random.default_rng(12)
    a = bits((6, 45), np.int16, rng)
    d = fv.asarray(a.copy())
    want = a.copy()
    for key, val in (((slice(1, 5), slice(3, 40)), a[:4, 5:42]), ((2, slice(7, 9)), a[0, :2])):
        d[key] = val
        want[key] = val
    d[1:4, 2:] = d[0:3, :-2]
    want[1:4, 2:] = want[0:3, :-2]
    assert_bits(d, want)


def test_concatenate_many_inputs_and_promotion():
    parts = [np.full((2, i + 1), i, np.float32) for i in range(20)]
    assert_bits(fv.concatenate(parts, 1), np.concatenate(parts, 1))
    a, b = np.ones((2, 2), np.float16), np.ones((1, 2), np.float32)
    assert_bits(fv.concatenate([fv.asarray(a), fv.asarray(b)]), np.concatenate([a, b]))


def test_concatenate_errors():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(fv.ShapeError, match="concatenate.*differ"):
        fv.concatenate([a, np.zeros((3, 2), np.float32)], 0)
    with pytest.raises(fv.ShapeError, match="concatenate.*out of range"):
        fv.concatenate([a, a], 2)
    with pytest.raises(fv.ShapeError, match="same number of dimensions"):
        fv.concatenate([a, np.zeros(3, np.float32)])
    with pytest.raises(fv.ShapeError, match="zero-dimensional"):
        fv.concatenate([np.float32(1), np.float32(2)])
    with pytest.raises(fv.ShapeError, match="at least one"):
        fv.concatenate([])


# -- masked_fill ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES, ids=IDS)
def test_masked_fill(dt):
    rng = np.random.default_rng(8)
    a = bits((6, 7), dt, rng)
    mask = rng.integers(0, 2, size=(6, 7)).astype(bool)
    value = 1 if np.dtype(dt).kind in "iub" else -0.375
    want = np.where(mask, np.asarray(value).astype(dt), a)
    assert_bits(fv.masked_fill(a, mask, value), want)
    assert_bits(fv.masked_fill(a, mask.astype(np.uint8) * 7, value), want)          # uint8 mask, nonzero
    # broadcast mask, strided input and mask views
    row = rng.integers(0, 2, size=(7,)).astype(bool)
    assert_bits(fv.masked_fill(fv.asarray(a)[::-1], fv.asarray(row), value),
                np.where(row, np.asarray(value).astype(dt), a[::-1]))
    assert_bits(fv.masked_fill(fv.asarray(a).T, fv.asarray(mask)[::-1].T, value),
                np.where(mask[::-1].T, np.asarray(value).astype(dt), a.T))


def test_masked_fill_special_values_and_sizes():
    for n in (0, 1, 1025):
        a = np.arange(n, dtype=np.float64)
        m = (a % 3) == 0
        for v in (np.nan, -np.inf, -0.0):
            assert_bits(fv.masked_fill(a, m, v), np.where(m, v, a))
    a = np.zeros((4, 4), ml_dtypes.bfloat16)
    assert_bits(fv.masked_fill(a, np.eye(4, dtype=bool), 1.1), np.where(np.eye(4, dtype=bool), a.dtype.type(1.1), a))


def test_masked_fill_errors():
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(fv.DTypeError, match="masked_fill: mask must be bool or uint8, got float32"):
        fv.masked_fill(a, np.zeros((3, 4), np.float32), 1.0)
    with pytest.raises(fv.ShapeError, match=r"masked_fill: mask of shape \(2, 4\) does not broadcast"):
        fv.masked_fill(a, np.zeros((2, 4), bool), 1.0)
    with pytest.raises(fv.ShapeError, match="does not broadcast"):
        fv.masked_fill(a, np.zeros((2, 3, 4), bool), 1.0)
    with pytest.raises(fv.DTypeError, match="fill value must be a real scalar"):
        fv.masked_fill(a, np.zeros((3, 4), bool), "x")


# -- slice assignment (write_slice) ---------------------------------------------------------------
@pytest.mark.parametrize("dt", WIDTH_DTYPES + OTHER_DTYPES, ids=IDS)
def test_setitem_any_alignment(dt):
    rng = np.random.default_rng(9)
    base = bits((7, 11), dt, rng)
    for key in (np.s_[1:4, 3:8], np.s_[:, 1], np.s_[2], np.s_[::-2, 1::3], np.s_[..., 5:6], np.s_[3, 3],
                np.s_[:, ::-1], np.s_[None, 1:2]):
        target = base[key]
        val = bits(target.shape, dt, rng)
        want = base.copy()
        want[key] = val
        d = fv.asarray(base)
        d[key] = val
        assert_bits(d, want)
        d = fv.asarray(base)                       # from a device view, transposed
        d[key] = fv.asarray(np.ascontiguousarray(val.T)).T
        assert_bits(d, want)


def test_setitem_kv_cache_append_and_broadcast():
    cache = fv.zeros((2, 16, 3, 5), np.float16)     # (batch, seq, heads, dim)
    want = np.zeros((2, 16, 3, 5), np.float16)
    rng = np.random.default_rng(10)
    pos = 0
    for step in (1, 3, 1, 5):                       # odd positions: b2 writes at any alignment
        new = rng.standard_normal((2, step, 3, 5)).astype(np.float16)
        cache[:, pos:pos + step] = new
        want[:, pos:pos + step] = new
        pos += step
    assert_bits(cache, want)
    cache[:, pos:, 1] = 2.5                          # scalar broadcast
    want[:, pos:, 1] = 2.5
    cache[1, :, :, 0] = np.arange(3, dtype=np.float16)   # row broadcast
    want[1, :, :, 0] = np.arange(3, dtype=np.float16)
    assert_bits(cache, want)


def test_setitem_casts_and_overlap():
    a = np.arange(10, dtype=np.float32)
    d = fv.asarray(a)
    d[1:] = d[:-1]                                   # overlapping source: numpy semantics
    want = a.copy()
    want[1:] = a[:-1]
    assert_bits(d, want)
    d[:3] = fv.asarray(np.array([1.5, 2.5, 3.5], np.float64))     # device cast f64 -> f32
    want[:3] = [1.5, 2.5, 3.5]
    assert_bits(d, want)
    b = fv.asarray(np.zeros(4, np.int8))
    b[1:3] = [7, -8]
    assert_bits(b, np.array([0, 7, -8, 0], np.int8))
    e = fv.asarray(np.zeros((0, 3), np.float32))
    e[:] = 1.0
    assert e.shape == (0, 3)


def test_setitem_errors():
    d = fv.asarray(np.zeros((3, 4), np.float32))
    with pytest.raises(fv.ShapeError, match="setitem: cannot write into a broadcast view"):
        d[:1].broadcast_to((5, 4))[...] = 1.0
    with pytest.raises(fv.ShapeError, match="could not broadcast a value of shape \\(3,\\) into a view of shape \\(3, 2\\)"):
        d[:, :2] = np.zeros(3, np.float32)
    with pytest.raises(fv.FuelVKIndexError):
        d[5] = 1.0
    with pytest.raises(IndexError):
        d[np.array([0, 1])] = 1.0
    with pytest.raises(fv.DTypeError, match="astype"):
        d[0] = fv.asarray(np.zeros(4, np.complex64))   # (int -> float casts exist: icast.comp)
    assert_bits(d, np.zeros((3, 4), np.float32))    # nothing was written


def test_kernel_names_listed():
    import json
    import subprocess
    import sys
    listing = json.loads(subprocess.run([sys.executable, "-m", "fuelvk", "kernels", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    names = {k["name"] for k in listing}
    want = {f"{f}_{w}" for f in ("flip", "roll", "triu", "tril") for w in ("b2", "b4", "b8")}
    want |= {f"{f}_{w}" for f in ("write_slice", "write_rows") for w in ("b1", "b2", "b4", "b8")} | {f"masked_fill_{w}" for w in ("b1", "b2", "b4", "b8")}
    want |= {"concat_along_dim", "concat_along_dim_f16", "concat_along_dim_bf16", "concat_along_dim_f64",
             "strided_copy", "strided_copy_signed_b2", "strided_copy_signed_b4", "strided_copy_signed_b8",
             "add_assign_scaled"}
    assert want <= names, want - names
