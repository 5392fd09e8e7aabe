"""Arrays larger than one binding (maxStorageBufferRange): ops bind windows and split their launches.

Most cases shrink the binding limit (device_limits) so that small arrays take every split path; the
split result must be bit-identical to the unsplit one (same kernels, same per-element work), and to
numpy for exact ops. Two real cases pass lavapipe's 128 MiB: a 300 MiB f32 add and the x @ W.T
matvec of a 28672 x 4096 f32 weight (448 MiB).
"""
import time

import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.ops.conv import im2col as _im2col
from fuelvk.runtime.memory import MIN_BYTES

F32 = np.float32
LIMIT = 1 << 18     # 256 KiB bindings: the arrays below are 1-3 MiB


@pytest.fixture
def small_binding(device_limits):
    def shrink(limit=LIMIT):
        device_limits(maxStorageBufferRange=limit)
    return shrink


def _rng():
    return np.random.default_rng(20)


def _data():
    rng = _rng()
    a = rng.standard_normal((700, 1000)).astype(F32)
    return {"a": a, "b": rng.standard_normal((1000,)).astype(F32), "g": rng.standard_normal((700, 1000)).astype(F32),
            "x4": rng.standard_normal((2, 8, 100, 128)).astype(F32),
            "cs": rng.standard_normal((100, 128)).astype(F32), "sn": rng.standard_normal((100, 128)).astype(F32),
            "q": rng.standard_normal((2, 8, 40, 64)).astype(F32), "kv": rng.standard_normal((2, 2, 4, 300, 64)).astype(F32)}


# name -> f(device arrays) ; every op family with a split path
CASES = {
    "add_broadcast": lambda d: d["A"] + d["B"],
    "exp_unaligned_view": lambda d: fv.exp(d["A"][3:, 5:]),
    "mul_scalar_flipped": lambda d: d["A"][::-1] * 3.0,
    "astype_f16": lambda d: fv.astype(d["A"][1:], np.float16),
    "astype_bf16_to_f32": lambda d: fv.astype(fv.astype(d["A"], ml_dtypes.bfloat16), F32),
    "copy_transposed": lambda d: fv.copy(d["A"][:300, :200].T),
    "less_scalar": lambda d: d["A"] < 0.5,
    "equal_broadcast": lambda d: fv.equal(d["A"], d["A"][3]),
    "masked_fill": lambda d: fv.masked_fill(d["A"], d["A"] > 1.0, -7.0),
    "flip": lambda d: fv.flip(d["A"], axis=1),
    "flip_all": lambda d: fv.flip(d["A"]),
    "roll_axis1": lambda d: fv.roll(d["A"], 17, axis=1),
    "roll_axis0_and_1": lambda d: fv.roll(d["A"], (-5, 3), axis=(0, 1)),
    "roll_flat": lambda d: fv.roll(d["A"], 1234),
    "triu_batched": lambda d: fv.triu(d["A"].reshape(70, 10, 1000), 3),
    "triu_one_matrix": lambda d: fv.triu(d["A"][::-1], 40),
    "tril_one_matrix": lambda d: fv.tril(d["A"][3:], -300),
    "tril_batched": lambda d: fv.tril(d["A"].reshape(70, 10, 1000), -2),
    "pad_edge_last": lambda d: fv.pad(d["A"], ((0, 0), (3, 2)), mode="edge"),
    "concatenate": lambda d: fv.concatenate([d["A"], d["G"][:50]], axis=0),
    "concatenate_axis1": lambda d: fv.concatenate([d["A"], d["G"][:, :9]], axis=1),
    "setitem": lambda d: _setitem(d),
    "add_assign_scaled": lambda d: fv.add_assign_scaled(fv.copy(d["A"]), d["B"], 0.25),
    "sum_rows": lambda d: fv.sum(d["A"], axis=1),
    "sum_all": lambda d: fv.sum(d["A"]),
    "mean_all_f16": lambda d: fv.mean(fv.astype(d["A"], np.float16)),
    "max_all": lambda d: fv.max(d["A"][2:]),
    "sum_axis0": lambda d: fv.sum(d["A"][:, :300], axis=0),
    "argmax_rows": lambda d: fv.argmax(d["A"], axis=-1),
    "cumsum_rows": lambda d: fv.cumsum(d["A"], axis=1),
    "cumsum_axis0": lambda d: fv.cumsum(d["A"][:, :400], axis=0),
    "argmin_axis0": lambda d: fv.argmin(d["A"], axis=0),
    "rms_norm": lambda d: fv.rms_norm(d["A"], 1e-6, d["B"]),
    "layer_norm_view": lambda d: fv.layer_norm(d["A"][:, ::-1], 1e-5, d["B"], d["B"]),
    "rms_norm_backward": lambda d: fv.rms_norm_backward(d["A"], d["G"]),
    "layer_norm_backward_weights": lambda d: fv.concatenate(
        [r.reshape(-1) for r in fv.layer_norm_backward(d["A"], d["G"], 1e-5, d["B"], d["B"])]),
    "softmax": lambda d: fv.softmax(d["A"]),
    "softmax_backward": lambda d: fv.softmax_backward(d["A"], d["G"]),
    "rope": lambda d: fv.rope(d["X4"], d["CS"], d["SN"]),
    "rope_interleaved_view": lambda d: fv.rope(d["X4"][:, :, 3:], d["CS"][3:], d["SN"][3:], interleaved=True),
    "attention_gqa_causal": lambda d: _attention(d),
    "attention_backward": lambda d: _attention_backward(d),
    "take_rows": lambda d: fv.take(d["A"], np.array([[699, 0, 350], [5, -1, 699]]), axis=0),
    "take_cols_device_idx": lambda d: fv.take(d["A"], fv.asarray(np.array([3, 999, 3, 0], np.int64)), axis=1),
    "take_flat": lambda d: fv.take(d["A"][::-1], np.arange(0, 700_000, 997)),
    "take_big_result": lambda d: fv.take(d["A"][:60], np.arange(600) % 60, axis=0),
    "index_add_rows": lambda d: fv.index_add(d["A"], 0, np.array([699, 0, 350, 0, 5]), d["G"][:5] * 0.5),
    "index_add_big_src": lambda d: fv.index_add(d["A"][:100], 0, np.arange(700) % 97, d["G"]),
    "scatter_add_rows": lambda d: fv.scatter_add(d["A"], 0, (np.arange(3000).reshape(3, 1000) * 7) % 700,
                                                 d["G"][:3]),
    "take_along_last_axis": lambda d: fv.take_along_axis(d["A"], (np.arange(2100).reshape(700, 3) * 13) % 1000,
                                                         axis=1),
    "conv2d_images": lambda d: fv.conv2d(d["A"].reshape(175, 1, 4, 1000)[:, :, :, 3:], d["CS"][0, :18].reshape(2, 1, 3, 3),
                                         d["B"][:2], padding=1),
    "pad_backward_reflect": lambda d: fv.pad_backward(d["A"].reshape(70, 10, 1000), ((0, 0), (2, 1), (3, 3)),
                                                      mode="reflect"),
    "pad_backward_const": lambda d: fv.pad_backward(d["A"], ((0, 0), (3, 4))),
    "im2col": lambda d: _im2col(d["A"].reshape(175, 1, 4, 1000)[:, :, :, 3:], 3, padding=1),
    "matvec_xWT": lambda d: fv.matmul(d["A"][:1], d["A"][100:].T),
    "matmul_M_and_N": lambda d: fv.matmul(d["A"][:300], d["A"][50:650].T),
    "matmul_batched_bf16_weight": lambda d: fv.matmul(d["A"][:200].reshape(2, 100, 1000),
                                                      fv.astype(d["A"][300:], ml_dtypes.bfloat16).T),
    "matmul_batched_both": lambda d: fv.matmul(d["A"].reshape(7, 100, 1000)[:, :40], d["G"].reshape(7, 1000, 100)),
    "matmul_batched_one_entry_big": lambda d: fv.matmul(d["A"][:3].reshape(3, 1, 1000),
                                                        d["G"].reshape(1, 1000, 700)),
    "matmul_vector": lambda d: fv.matmul(d["A"][7], d["A"].T),
}


def _attention(d):
    o, lse = fv.scaled_dot_product_attention(d["Q"][:, :, 5:], d["KV"][0], d["KV"][1], is_causal=True,
                                             return_lse=True, alibi_slopes=np.linspace(0.1, 1, 8),
                                             causal_alignment="bottom_right")
    return fv.concatenate([o.reshape(-1), lse.reshape(-1)])


def _attention_backward(d):
    q, k, v = d["Q"][:, :, 5:], d["KV"][0], d["KV"][1]
    o, lse = fv.scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True, causal_alignment="bottom_right")
    grads = fv.scaled_dot_product_attention_backward(o * 0.5, q, k, v, o, lse, is_causal=True,
                                                     causal_alignment="bottom_right")
    return fv.concatenate([g.reshape(-1) for g in grads])


def _setitem(d):
    y = fv.copy(d["A"])
    y[5:650:2, ::-1] = d["G"][:323]
    return y


APPROX = {"layer_norm_backward_weights",   # partial sums combined in another order
          "index_add_rows", "index_add_big_src", "scatter_add_rows",   # atomic adds: any order
          "matmul_batched_both", "matmul_batched_one_entry_big",   # per-entry blocks may take another load path (summation order)
          "cumsum_axis0"}    # unsplit: columns element by element; split: the axis moved last, rows in blocked chunks


@pytest.fixture(scope="module")
def unsplit():
    """Each case's result with the real binding limit (nothing split)."""
    d = _device(_data())
    return d, {k: f(d).numpy() for k, f in CASES.items()}


def _device(h):
    return {"A": fv.asarray(h["a"]), "B": fv.asarray(h["b"]), "G": fv.asarray(h["g"]), "X4": fv.asarray(h["x4"]),
            "CS": fv.asarray(h["cs"]), "SN": fv.asarray(h["sn"]), "Q": fv.asarray(h["q"]), "KV": fv.asarray(h["kv"]),
            **h}


@pytest.mark.parametrize("case", list(CASES))
def test_split_matches_unsplit(case, unsplit, small_binding):
    d, ref = unsplit
    small_binding()
    before = runtime.get().stream.dispatches
    got = CASES[case](d).numpy()
    assert runtime.get().stream.dispatches - before > 1
    assert got.dtype == ref[case].dtype and got.shape == ref[case].shape
    if case in APPROX:
        np.testing.assert_allclose(got, ref[case], rtol=1e-5, atol=1e-4)
    else:
        assert np.array_equal(got, ref[case], equal_nan=True), np.max(np.abs(got.astype(float) - ref[case]))


def test_exact_ops_match_numpy(small_binding):
    h = _data()
    d = _device(h)
    small_binding()
    a, b = h["a"], h["b"]
    assert np.array_equal((d["A"] + d["B"]).numpy(), a + b)
    assert np.array_equal(fv.astype(d["A"][1:], np.float16).numpy(), a[1:].astype(np.float16))
    assert np.array_equal(fv.copy(d["A"][::-1, 7:]).numpy(), a[::-1, 7:])
    assert np.array_equal(fv.max(d["A"], axis=1).numpy(), a.max(axis=1))
    assert np.array_equal(fv.argmax(d["A"], axis=1).numpy(), a.argmax(axis=1))


@pytest.mark.parametrize("dtype", [np.float16, F32, np.float64])
@pytest.mark.parametrize("start", [1, 3, 129, 65537])
def test_windows_at_unaligned_offsets(dtype, start, small_binding):
    """Views starting mid-binding (element offsets that are not window-aligned) read and write right."""
    h = (np.arange(400_000) % 2000).astype(dtype)
    x = fv.asarray(h)
    small_binding(1 << 16)
    v = x[start:start + 200_000]
    assert np.array_equal((v * 2.0).numpy(), h[start:start + 200_000] * dtype(2))
    assert np.array_equal(fv.copy(v[::-3]).numpy(), h[start:start + 200_000][::-3])


def test_window_object():
    """A window binds an aligned sub-range of its slot with the slot's hazard key, and keeps it alive."""
    buf = runtime.get().pool.alloc(1 << 20)
    w = buf.window(1000, 5000)
    assert w.offset == buf.offset + 768 and w.size == 5120 - 768 and w.offset % MIN_BYTES == 0
    assert w.key == buf.key and w.handle == buf.handle and w.parent is buf
    w2 = w.window(300, 400)
    assert w2.start == 768 + 256 and w2.parent is buf
    assert buf.window(0, 1 << 30).size == buf.size


def test_reduce_long_rows_partials(small_binding):
    """A row longer than one binding: column-block partials combined once (mean divides once)."""
    h = _rng().standard_normal((3, 200_000)).astype(F32)
    x = fv.asarray(h)
    ref = {op: getattr(fv, op)(x, axis=1).numpy() for op in ("sum", "mean", "max", "min")}
    small_binding(1 << 16)
    for op, r in ref.items():
        assert np.array_equal(getattr(fv, op)(x, axis=1).numpy(), r), op


def test_long_rows_cumsum_argmax(small_binding):
    """Rows longer than one binding: cumsum by spans with a carry, argmax/argmin by span extremes."""
    h = _rng().standard_normal((2, 150_000)).astype(F32)
    h[1, 7] = h[1, 140_000] = 50.0       # a tie across spans: the lowest index wins
    h[0, 100_001] = np.nan
    x = fv.asarray(h)
    small_binding(1 << 16)
    assert np.array_equal(fv.argmax(x, axis=1).numpy(), [100_001, 7])
    assert np.array_equal(fv.argmin(x[1]).numpy(), np.argmin(h[1]))
    assert int(fv.argmax(x).numpy()) == 100_001
    got = fv.cumsum(x[1], axis=0).numpy()
    np.testing.assert_allclose(got, np.cumsum(h[1].astype(np.float64)), rtol=1e-5, atol=1e-2)


def test_matmul_k_spans(small_binding):
    """A row of A / column of B longer than one binding: K spans as float32 partials."""
    rng = _rng()
    a, w = rng.standard_normal((3, 4096)).astype(F32), rng.standard_normal((50, 4096)).astype(F32)
    A, W = fv.asarray(a), fv.asarray(w)
    small_binding(4096)
    got = fv.matmul(A, W.T).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_quantize_dequantize_split(kind, small_binding):
    x = fv.asarray(_rng().standard_normal((700, 1024)).astype(F32))
    q = fv.quant.quantize(x[:, :992], kind).numpy()
    back = fv.quant.dequantize(q, kind, (700, 992))
    small_binding()
    assert np.array_equal(fv.quant.quantize(x[:, :992], kind).numpy(), q)
    assert np.array_equal(fv.quant.dequantize(fv.asarray(q), kind, (700, 992)).numpy(), back)


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("m", [1, 40])
def test_qmatmul_split(kind, m, small_binding):
    rng = _rng()
    q = fv.quant.quantize(fv.asarray(rng.standard_normal((700, 1024)).astype(F32)), kind)
    x = fv.asarray(rng.standard_normal((m, 1024)).astype(F32))
    ref = fv.quant.qmatmul(x, q, kind=kind, shape=(700, 1024)).numpy()
    small_binding()
    assert np.array_equal(fv.quant.qmatmul(x, q, kind=kind, shape=(700, 1024)).numpy(), ref)


UNSPLIT = {
    "conv2d_one_image": lambda x: fv.conv2d(x.reshape(1, 7, 100, 1000), fv.asarray(np.ones((2, 7, 3, 3), F32))),
    "take_along_axis_0": lambda x: fv.take_along_axis(x, fv.asarray(np.zeros((3, 1000), np.int64)), axis=0),
    "attention_one_long_head": lambda x: fv.scaled_dot_product_attention(
        x[:1, :64].reshape(1, 1, 1, 64), *(x[:110, :640].reshape(1, 1, 1100, 64),) * 2),
}


@pytest.mark.parametrize("op", list(UNSPLIT))
def test_unsplit_families_raise_typed_error(op, small_binding):
    """Families without a split path refuse an over-sized operand with a typed error naming the limit."""
    x = fv.asarray(_rng().standard_normal((700, 1000)).astype(F32))
    small_binding()
    with pytest.raises(fv.FuelVKMemoryError, match="maxStorageBufferRange"):
        UNSPLIT[op](x).numpy()


def test_single_row_over_binding_is_a_typed_error(small_binding):
    x = fv.asarray(np.ones((2, 100_000), F32))
    small_binding()
    with pytest.raises(fv.FuelVKMemoryError, match="softmax.*maxStorageBufferRange"):
        fv.softmax(x)


# -- real arrays over lavapipe's 128 MiB binding --------------------------------------------------
def _over_binding(nbytes):
    if nbytes <= runtime.get().device.limits.maxStorageBufferRange:
        pytest.skip("this device binds the whole array")


def test_add_300_mib():
    n = 300 * (1 << 20) // 4
    _over_binding(n * 4)
    a = np.arange(n, dtype=F32)
    x = fv.asarray(a)
    t = time.perf_counter()
    y = (x + x).numpy()
    print(f"\nf32 add over 300 MiB: {time.perf_counter() - t:.2f} s")
    assert np.array_equal(y, a + a)


def test_matvec_448_mib_weight():
    """x @ W.T with W [28672, 4096] f32 (FlashInfer-Bench gemm_n28672_k4096): split along N."""
    n, k = 28672, 4096
    _over_binding(n * k * 4)
    rng = _rng()
    w = (rng.integers(-8, 8, (n, 1)) * rng.integers(-8, 8, (1, k))).astype(F32)   # exact in f32
    xh = rng.integers(-4, 4, (1, k)).astype(F32)
    W, x = fv.asarray(w), fv.asarray(xh)
    t = time.perf_counter()
    y = fv.matmul(x, W.T).numpy()
    print(f"\nmatvec 1 x 4096 @ (28672 x 4096).T f32: {time.perf_counter() - t:.2f} s")
    assert np.array_equal(y, xh @ w.T)   # small integers: every partial sum is exact
