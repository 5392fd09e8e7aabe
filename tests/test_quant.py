"""GGML quantization vs PyPI gguf (bit-exact both ways), fused qmatmul vs float64 dequant-then-matmul,
dequantize / qmatvec on both load paths (texel views and storage buffers: the same bits), the GGUF
loader, and typed errors on bad input."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import DTypeError, ShapeError, UnsupportedError
from fuelvk.kernels.quant import MATVEC_ROWS
from fuelvk.ops import quant as fq
from fuelvk.runtime import loadpath
from oracles import assert_bits

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType
QT = {"q4_0": Q.Q4_0, "q8_0": Q.Q8_0, "q4_k": Q.Q4_K, "q6_k": Q.Q6_K}
rng = np.random.default_rng(1234)


def block_bytes(kind):
    return gguf.GGML_QUANT_SIZES[QT[kind]]


def random_blocks(kind, n_rows, n_blocks, finite=True):
    """Random block bytes; with finite=True the f16 scale fields hold small finite values."""
    qk, bs = block_bytes(kind)
    b = rng.integers(0, 256, (n_rows, n_blocks, bs), dtype=np.uint8)
    if finite:
        scales = rng.uniform(-0.02, 0.02, (n_rows, n_blocks, 2)).astype(np.float16).view(np.uint8)
        at = {"q6_k": slice(208, 210), "q4_k": slice(0, 4)}.get(kind, slice(0, 2))
        b[..., at] = scales[..., : at.stop - at.start]
    return b.reshape(n_rows, n_blocks * bs)


def edge_rows():
    """Blocks of 32 that stress the rounding rules: zeros, signed zeros, ties, max magnitude, tiny."""
    blocks = [np.zeros(32), -np.zeros(32)]
    t = np.zeros(32)
    t[0] = 127.0                          # q8_0: d = 1, id = 1 -> exact ties at .5
    t[1:16] = np.arange(15) + 0.5
    t[16:31] = -(np.arange(15) + 0.5)
    blocks.append(t)
    t = np.zeros(32)
    t[0] = -8.0                           # q4_0: d = 1, x * id + 8.5 exact at half-integers
    t[1:] = np.linspace(-7.5, 7.5, 31)
    blocks.append(t)
    blocks.append(np.r_[3.0, -3.0, np.full(30, 1.5)])   # equal magnitudes: the first wins (argmax)
    blocks.append(np.r_[-3.0, 3.0, np.full(30, -1.5)])
    blocks.append(np.full(32, 3.0e38) * np.sign(np.linspace(-1, 1, 32) + 1e-3))   # f16 scale -> inf
    blocks.append(rng.uniform(-65504, 65504, 32))
    blocks.append(rng.uniform(-1, 1, 32) * 1e-30)      # tiny but normal scales
    blocks.append(np.r_[np.zeros(31), 1e-3])
    blocks.append(np.float32(2 ** -14) * np.arange(-16, 16))   # scales near f16 subnormals
    return np.stack(blocks).astype(np.float32).reshape(1, -1)


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("shape", [(1, 32), (3, 96), (2, 3, 64), (0, 64), (7, 2048)])
def test_quantize_matches_gguf(kind, shape):
    x = (rng.standard_normal(shape) * rng.uniform(0.01, 100)).astype(np.float32)
    want = gguf.quants.quantize(x, QT[kind]) if x.size else np.empty(shape[:-1] + (shape[-1] // 32 * block_bytes(kind)[1],), np.uint8)
    assert_bits(fq.quantize(x, kind), want)


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_quantize_edge_blocks(kind):
    x = edge_rows()
    with np.errstate(all="ignore"):
        want = gguf.quants.quantize(x, QT[kind])
    got = fq.quantize(fv.asarray(x), kind)
    assert isinstance(got, fv.Array)
    assert_bits(got, want)
    # dequantize(quantize(x)) also matches gguf's round trip
    with np.errstate(all="ignore"):
        assert_bits(fq.dequantize(got, kind), gguf.quants.dequantize(want, QT[kind]))


def test_quantize_offset_view_and_other_float_input():
    base = rng.standard_normal((5, 64)).astype(np.float32)
    xa = fv.asarray(base)[2:4]                        # offset view
    assert_bits(fq.quantize(xa, "q8_0"), gguf.quants.quantize(base[2:4], Q.Q8_0))
    xt = fv.asarray(np.ascontiguousarray(base.T))[:, :].T  # non-contiguous view -> copy
    assert_bits(fq.quantize(xt, "q4_0"), gguf.quants.quantize(base, Q.Q4_0))
    x16 = base.astype(np.float16)                    # numpy: converted on the host as gguf does
    assert_bits(fq.quantize(x16, "q8_0"), gguf.quants.quantize(x16, Q.Q8_0))


@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "q4_k", "q6_k"])
def test_dequantize_matches_gguf(kind):
    qk, _ = block_bytes(kind)
    for n_rows, n_blocks, finite in [(1, 1, True), (3, 5, True), (2, 3, False), (0, 2, True)]:
        b = random_blocks(kind, n_rows, n_blocks, finite)
        with np.errstate(all="ignore"):
            want = gguf.quants.dequantize(b, QT[kind]) if b.size else np.empty((0, n_blocks * qk), np.float32)
        assert_bits(fq.dequantize(b, kind), want)                            # shape from the byte shape
        assert_bits(fq.dequantize(b.reshape(-1), kind, want.shape), want)    # explicit shape


@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "q4_k", "q6_k"])
def test_dequantize_nonfinite_scales_bit_exact(kind):
    """Random scale bits (NaN / inf scales, both signs) give gguf's bits, NaN signs and payloads included:
    ~1 q4_k block in 6 has both a NaN d * sc * q and a NaN dmin * m, or only the latter (whose sign a
    driver that lowers a - b to a + (-b) flips)."""
    b = random_blocks(kind, 4, 24, finite=False)
    with np.errstate(all="ignore"):
        want = gguf.quants.dequantize(b, QT[kind])
    assert_bits(fq.dequantize(b, kind), want)


@pytest.mark.parametrize("kind", ["q4_0", "q4_k"])
def test_dequantize_large_and_views(kind):
    qk, bs = block_bytes(kind)
    b = random_blocks(kind, 9, 4096 // qk if kind == "q4_0" else 4)
    want = gguf.quants.dequantize(b, QT[kind])
    assert_bits(fq.dequantize(b, kind), want)
    ba = fv.asarray(b)
    assert_bits(fq.dequantize(ba[2:5], kind), want[2:5])                # even byte offset: no copy
    odd = fv.asarray(np.r_[np.uint8(7), b[1].reshape(-1)])[1:]          # odd byte offset: copied
    assert_bits(fq.dequantize(odd, kind, (want.shape[1],)), want[1])


def _ref_matmul(x, blocks, kind, n, k):
    w = gguf.quants.dequantize(blocks, QT[kind]).reshape(n, k).astype(np.float64)
    ref = x.astype(np.float64) @ w.T
    bound = np.abs(x.astype(np.float64)) @ np.abs(w).T
    return ref, bound


def _assert_mm(got, ref, bound):
    got = got.numpy() if isinstance(got, fv.Array) else got
    assert got.shape == ref.shape and got.dtype == np.float32
    err = np.abs(got - ref)
    assert np.all(err <= 2e-6 * bound + 1e-7), f"max err {err.max()} (bound {bound.max()})"


@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "q4_k", "q6_k"])
@pytest.mark.parametrize("route", fq.ROUTES)
def test_qmatmul_routes(kind, route):
    qk, _ = block_bytes(kind)
    for m, n, k in [(1, 1, qk), (3, 70, 2 * qk), (17, 130, 2 * qk)]:
        if kind in ("q4_0", "q8_0"):
            blocks = gguf.quants.quantize(rng.standard_normal((n, k)).astype(np.float32), QT[kind])
        else:
            blocks = random_blocks(kind, n, k // qk)
        x = rng.standard_normal((m, k)).astype(np.float32)
        ref, bound = _ref_matmul(x, blocks, kind, n, k)
        _assert_mm(fq.qmatmul(x, blocks, kind, (n, k), route=route), ref, bound)


def test_qmatmul_route(monkeypatch):
    """qmatmul_route reports the route qmatmul takes (matvec below DEQUANT_MIN_M[kind] rows of x,
    else dequant; route= or FUELVK_QMATMUL_ROUTE forces one) and checks the shapes as qmatmul does;
    nothing is launched."""
    qt = fq.QuantTensor(fv.asarray(np.zeros(4 * 18 * 2, np.uint8)), "q4_0", (4, 64))
    lim = fq.DEQUANT_MIN_M["q4_0"]
    assert fq.qmatmul_route((1, 64), (4, 64), kind="q4_0") == "matvec"
    assert fv.qmatmul_route(np.zeros((64,), np.float32), qt) == "matvec"
    assert fv.qmatmul_route(fv.zeros((2, 3, 64), fv.float32), qt) == "matvec"
    assert fq.qmatmul_route((lim - 1, 64), qt) == "matvec"
    assert fq.qmatmul_route((lim, 64), qt) == "dequant"
    assert fq.qmatmul_route((lim, 256), (4, 256), kind="Q6_K") == ("matvec" if lim < fq.DEQUANT_MIN_M["q6_k"] else "dequant")
    assert fq.qmatmul_route((5, 64), (4, 64), route="matvec") == "matvec"     # forced: no kind needed
    with pytest.raises(fv.DTypeError, match="pass kind="):
        fq.qmatmul_route((1, 64), (4, 64))
    monkeypatch.setenv("FUELVK_QMATMUL_ROUTE", "matvec")
    assert fq.qmatmul_route((5, 64), (4, 64), kind="q4_0") == "matvec"
    assert fq.qmatmul_route((1, 64), (4, 64), kind="q4_0", route="tiled") == "tiled"    # keyword wins
    with pytest.raises(ShapeError, match="does not match the weight shape"):
        fq.qmatmul_route((1, 32), (4, 64), kind="q4_0")
    with pytest.raises(ShapeError, match=r"must be \(N, K\)"):
        fq.qmatmul_route((1, 64), (64,), kind="q4_0")


def test_qmatmul_default_routes_views_and_quanttensor():
    n, k = 96, 4096
    w = rng.standard_normal((n, k)).astype(np.float32)
    blocks = gguf.quants.quantize(w, Q.Q4_0)
    qt = fq.QuantTensor(fv.asarray(blocks.reshape(-1)), "q4_0", (n, k))
    x = rng.standard_normal((2, 3, k)).astype(np.float32)
    ref, bound = _ref_matmul(x.reshape(6, k), blocks, "q4_0", n, k)
    got = fq.qmatmul(fv.asarray(x), qt)                                   # batched, M = 6: matvec
    assert isinstance(got, fv.Array) and got.shape == (2, 3, n)
    _assert_mm(got.numpy().reshape(6, n), ref, bound)
    xa = fv.asarray(np.ascontiguousarray(x.reshape(6, k)[:, ::-1]))[:, ::-1]  # strided view -> copied
    _assert_mm(fq.qmatmul(xa, qt), ref, bound)
    x1 = fv.asarray(x.reshape(6, k))[4]                                    # offset vector, M = 1: matvec
    _assert_mm(fq.qmatmul(x1, qt).numpy()[None], ref[4:5], bound[4:5])
    assert fq.qmatmul(np.zeros((0, k), np.float32), blocks, "q4_0", (n, k)).shape == (0, n)


@pytest.mark.parametrize("kind", ["q4_k", "q8_0"])
def test_qmatmul_dequant_route_chunks(kind, monkeypatch):
    """The dequant route (default from DEQUANT_MIN_M[kind] rows) in chunks of weight rows: uneven last
    chunk, each chunk's product written into its columns; one chunk returns the product itself."""
    qk, _ = block_bytes(kind)
    m, n, k = fq.DEQUANT_MIN_M[kind] + 1, 37, 2 * qk
    blocks = random_blocks(kind, n, k // qk)
    x = rng.standard_normal((m, k)).astype(np.float32)
    ref, bound = _ref_matmul(x, blocks, kind, n, k)
    assert fq.qmatmul_route(x, (n, k), kind=kind) == "dequant"
    _assert_mm(fq.qmatmul(x, blocks, kind, (n, k)), ref, bound)
    monkeypatch.setattr(fq, "DEQUANT_CHUNK_BYTES", 4 * k * 8)           # 8 weight rows a chunk: 5 chunks
    _assert_mm(fq.qmatmul(x, blocks, kind, (n, k)), ref, bound)


@pytest.fixture
def tex_masks(monkeypatch):
    """(family, TEX) of every dequant / qmatvec / tiled qmatmul launch during the test."""
    ctx = runtime.get()
    seen, orig = [], ctx.launch

    def spy(v, *a, **k):
        if v.id.startswith(("dequant", "qmatvec", "qmatmul_tiled")):
            seen.append((v.id.split(".")[0], k["TEX"]))
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


def _on_both_paths(monkeypatch, tex_masks, f):
    """f()'s arrays with texel loads forced on and off: asserts identical bits, returns the texel
    path's results and its TEX masks (the storage-buffer path must launch with TEX 0)."""
    out, masks = {}, {}
    for flag in ("1", "0"):
        monkeypatch.setenv(loadpath.ENV, flag)
        tex_masks.clear()
        out[flag] = [np.asarray(r.numpy() if isinstance(r, fv.Array) else r) for r in f()]
        masks[flag] = list(tex_masks)
    for a, b in zip(out["1"], out["0"]):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert masks["0"] and not any(t for _, t in masks["0"]), masks
    return out["1"], masks["1"]


# (rows, blocks per row, byte offset of the blocks): rows not a multiple of MATVEC_ROWS, rows whose
# byte length is no whole number of texels (the last texel partial; q4_0 / q8_0 / q6_k blocks start
# at every even byte of a texel), more sub-blocks per row than the 64 lanes, and offset views that
# put the blocks at each of the funnel shifts (byte % 16: 2, 4, 6, 8, 14) or on a later texel (q4_k:
# every fetch whole texels, TEX bit 2)
PATH_CASES = [(1, 1, 0), (MATVEC_ROWS + 1, 3, 2), (2 * MATVEC_ROWS + 3, 9, 6), (5, 70, 14), (3, 2, 4), (2, 5, 8),
              (MATVEC_ROWS + 3, 9, 32)]


@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "q4_k", "q6_k"])
def test_load_paths(kind, monkeypatch, tex_masks):
    """dequantize (bit-exact with gguf), qmatvec and the tiled qmatmul (within the matmul bound) give
    the same bits reading the blocks through texel views and through storage buffers."""
    qk, bs = block_bytes(kind)
    for n, nb, off in PATH_CASES:
        if qk == 256 and nb > 9:
            nb = 9                                          # 72 sub-blocks: lanes still loop
        b = random_blocks(kind, n, nb)
        flat = fv.asarray(np.r_[np.zeros(off, np.uint8), b.reshape(-1)])[off:]
        xs = rng.standard_normal((3, nb * qk + 4)).astype(np.float32)
        x = fv.asarray(xs)[0, 4:]                           # an offset (whole-texel) x
        want = gguf.quants.dequantize(b, QT[kind])
        (dq, mv, mm), masks = _on_both_paths(monkeypatch, tex_masks, lambda: (
            fq.dequantize(flat, kind, (n, nb * qk)), fq.qmatmul(x, flat, kind, (n, nb * qk), route="matvec"),
            fq.qmatmul(xs[:, 4:], flat, kind, (n, nb * qk), route="tiled")))
        assert_bits(dq, want)
        ref, bound = _ref_matmul(xs[:, 4:], b, kind, n, nb * qk)
        _assert_mm(mv[None], ref[:1], bound[:1])
        _assert_mm(mm, ref, bound)
        # blocks and output / x through views (the tiled kernel reads x through its storage buffer)
        whole = 4 if kind == "q4_k" and off % 16 == 0 else 0
        assert masks == [("dequant", 3 | whole), ("qmatvec", 3 | whole), ("qmatmul_tiled", 1 | whole)], masks


def test_load_path_limits(monkeypatch, tex_masks, device_limits):
    """Slots past maxTexelBufferElements bind the stub view (TEX bit clear) with the same results; an x
    that starts mid-texel is copied (the matvec's x chunks are whole texels either way)."""
    n, nb = 5, 4
    b = random_blocks("q4_0", n, nb)
    xs = rng.standard_normal(nb * 32 + 1).astype(np.float32)
    monkeypatch.setenv(loadpath.ENV, "1")

    def run():
        bd = fv.asarray(b)
        return [fq.dequantize(bd, "q4_0").numpy(), fq.qmatmul(fv.asarray(xs)[1:], bd, "q4_0", (n, nb * 32)).numpy()]
    want = run()
    assert tex_masks == [("dequant", 3), ("qmatvec", 3)], tex_masks
    tex_masks.clear()
    device_limits(maxTexelBufferElements=16)      # the stub slot (256 B) fits, no operand does
    got = run()
    assert tex_masks == [("dequant", 0), ("qmatvec", 0)], tex_masks
    for a, w in zip(got, want):
        assert_bits(a, w)
    assert_bits(got[0], gguf.quants.dequantize(b, Q.Q4_0))


def test_gguf_loader(tmp_path):
    path = tmp_path / "tiny.gguf"
    w4 = rng.standard_normal((8, 64)).astype(np.float32)
    w8 = rng.standard_normal((4, 32)).astype(np.float32)
    k4 = random_blocks("q4_k", 2, 1)
    norm = rng.standard_normal(16).astype(np.float32)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("blk.0.attn_q.weight", gguf.quants.quantize(w4, Q.Q4_0), raw_dtype=Q.Q4_0)
    writer.add_tensor("blk.0.ffn_up.weight", gguf.quants.quantize(w8, Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.add_tensor("blk.0.ffn_down.weight", k4, raw_dtype=Q.Q4_K)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    t = fq.load_gguf(path)
    q4 = t["blk.0.attn_q.weight"]
    assert isinstance(q4, fq.QuantTensor) and q4.kind == "q4_0" and q4.shape == (8, 64)
    assert q4.nbytes == 8 * 2 * 18                                         # still packed
    assert_bits(q4.dequantize(), gguf.quants.dequantize(gguf.quants.quantize(w4, Q.Q4_0), Q.Q4_0))
    assert_bits(fq.dequantize(t["blk.0.ffn_up.weight"]),
                gguf.quants.dequantize(gguf.quants.quantize(w8, Q.Q8_0), Q.Q8_0))
    assert t["blk.0.ffn_down.weight"].shape == (2, 256)
    assert_bits(fq.dequantize(t["blk.0.ffn_down.weight"]), gguf.quants.dequantize(k4, Q.Q4_K))
    assert_bits(t["blk.0.attn_norm.weight"], norm)
    x = rng.standard_normal(64).astype(np.float32)
    ref, bound = _ref_matmul(x[None], gguf.quants.quantize(w4, Q.Q4_0), "q4_0", 8, 64)
    _assert_mm(fq.qmatmul(fv.asarray(x), q4).numpy()[None], ref, bound)


def test_bad_input():
    good = gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32), Q.Q4_0)
    with pytest.raises(ShapeError, match="take 144 bytes"):
        fq.dequantize(good.reshape(-1)[:-1], "q4_0", (4, 64))             # wrong byte length
    with pytest.raises(ShapeError, match="whole blocks"):
        fq.dequantize(good[:, :-1], "q4_0")
    with pytest.raises(ShapeError, match="multiple of the q4_0 block size 32"):
        fq.quantize(np.ones((2, 48), np.float32), "q4_0")
    with pytest.raises(ShapeError, match="multiple of the q4_k block size 256"):
        fq.dequantize(np.zeros(144, np.uint8), "q4_k", (128,))
    with pytest.raises(DTypeError, match="unknown quant kind"):
        fq.dequantize(good, "q3_z")
    with pytest.raises(UnsupportedError, match="q5_k"):
        fq.dequantize(good, "q5_k")
    with pytest.raises(UnsupportedError, match="quantizing to q6_k"):
        fq.quantize(np.ones(256, np.float32), "q6_k")
    with pytest.raises(DTypeError, match="uint8"):
        fq.dequantize(good.view(np.int8), "q4_0")
    with pytest.raises(DTypeError, match="need kind"):
        fq.dequantize(good)
    with pytest.raises(DTypeError, match="float32"):
        fq.qmatmul(np.ones((1, 64), np.float16), good, "q4_0", (4, 64))
    with pytest.raises(ShapeError, match="does not match the weight shape"):
        fq.qmatmul(np.ones((1, 32), np.float32), good, "q4_0", (4, 64))
    with pytest.raises(ShapeError, match="multiple of the q4_0 block size"):
        fq.qmatmul(np.ones((1, 48), np.float32), np.zeros(4 * 27, np.uint8), "q4_0", (4, 48))
    with pytest.raises(fv.UnsupportedError, match="unknown route"):
        fq.qmatmul(np.ones((1, 64), np.float32), good, "q4_0", (4, 64), route="fast")
    with pytest.raises(DTypeError, match="float32"):
        fq.quantize(fv.asarray(np.ones(32, np.float64)), "q8_0")


@pytest.mark.parametrize("kind", ["q4_0", "q8_0"])
def test_qmatvec_pairs(kind, monkeypatch):
    """q4_0 / q8_0 qmatvec takes blocks two at a time (PAIRS) where every pair starts on a 4-byte word,
    one at a time otherwise (odd blocks per row, blocks at an odd 16-bit word, odd-block K spans); both
    within the matmul bound, on both load paths, with lanes looping (more pairs than lanes) and with
    large / mixed-sign x (q4_0 pairs sum q * x and subtract 8 * sum x per block)."""
    ctx = runtime.get()
    seen, orig = [], ctx.launch

    def spy(v, *a, **k):
        if v.id.startswith("qmatvec"):
            seen.append(k["PAIRS"])
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    qk, bs = block_bytes(kind)
    for nb, off, pairs in [(2, 0, 1), (2 * 64 + 6, 4, 1), (3, 0, 0), (4, 2, 0), (129, 0, 0)]:
        n = MATVEC_ROWS + 5
        w = rng.standard_normal((n, nb * qk)).astype(np.float32)
        b = gguf.quants.quantize(w, QT[kind])
        flat = fv.asarray(np.r_[np.zeros(off, np.uint8), b.reshape(-1)])[off:]
        x = (rng.standard_normal(nb * qk) * np.exp(rng.uniform(-6, 6, nb * qk))).astype(np.float32)
        ref, bound = _ref_matmul(x[None], b, kind, n, nb * qk)
        for flag in ("1", "0"):
            monkeypatch.setenv(loadpath.ENV, flag)
            seen.clear()
            _assert_mm(fq.qmatmul(x, flat, kind, (n, nb * qk), route="matvec")[None], ref, bound)
            assert seen == [pairs], (nb, off, seen)
    # K split into spans of one lane step (a loop-capped device: one loop iteration a launch): each in pairs
    monkeypatch.setattr(ctx.device, "loop_budget", fq.matvec_k_loop(1)[2] + 1)
    span = fq.matvec_k_loop(fq.matvec_wg(ctx.device))[0] // qk    # blocks a span: the lanes x 1 block
    nb = 3 * span + 2                                # spans: 3 whole, 2 blocks
    b = gguf.quants.quantize(rng.standard_normal((3, nb * qk)).astype(np.float32), QT[kind])
    x = rng.standard_normal(nb * qk).astype(np.float32)
    ref, bound = _ref_matmul(x[None], b, kind, 3, nb * qk)
    seen.clear()
    _assert_mm(fq.qmatmul(x, b, kind, (3, nb * qk), route="matvec")[None], ref, bound)
    assert seen == [int(span % 2 == 0), int(span % 2 == 0), int(span % 2 == 0), 1], (span, seen)


@pytest.mark.parametrize("kind", ["q4_0", "q4_k"])
def test_qmatvec_workgroup_of_subgroups(kind, monkeypatch):
    """qmatvec's workgroup is one subgroup (matvec_wg); a wider one (several subgroups, as on a driver
    that picks a narrower subgroup than it reports) sums the subgroups' partials through shared memory,
    with the same result bound."""
    qk, _ = block_bytes(kind)
    n, nb = MATVEC_ROWS + 3, 6
    b = random_blocks(kind, n, nb)
    x = rng.standard_normal(nb * qk).astype(np.float32)
    ref, bound = _ref_matmul(x[None], b, kind, n, nb * qk)
    sgs = runtime.get().device.subgroup_size
    for wg in sorted({fq.matvec_wg(runtime.get().device), 64, 2 * sgs if 2 * sgs <= 64 else 64}):
        monkeypatch.setattr(fq, "matvec_wg", lambda device, wg=wg: wg)
        _assert_mm(fq.qmatmul(x, b, kind, (n, nb * qk), route="matvec")[None], ref, bound)
