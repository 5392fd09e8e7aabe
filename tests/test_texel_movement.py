"""Copies, concatenate and slice assignment on both load paths (issue 18, movement): views that are
runs of whole 16-byte texels go through copy_texels.comp (texel loads; stores through the texel view
or the storage buffer), everything else through strided_copy / write.comp. Each path must give numpy's
bits for every element width, aligned and offset-by-one views, and runs that are not whole texels."""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.ops import movement
from fuelvk.runtime import loadpath

rng = np.random.default_rng(1818)
DTYPES = [np.uint8, np.float16, np.float32, np.float64, np.int64]   # b1, b2, b4, b8 (two b8 kinds)


@pytest.fixture(params=["texel", "texel_load_ssbo_store", "ssbo"])
def path(request, monkeypatch):
    """Forces the path: FUELVK_TEXEL_LOADS=1 (texel loads and stores), texel loads with storage-buffer
    stores (what lavapipe's probe picks), or FUELVK_TEXEL_LOADS=0 (storage buffers only)."""
    if request.param == "texel_load_ssbo_store":
        monkeypatch.setattr(movement.loadpath, "texel_paths", lambda ctx: (True, False))
    else:
        monkeypatch.setenv(loadpath.ENV, "1" if request.param == "texel" else "0")
    return request.param


def spy_launches(monkeypatch, record):
    """The list record(variant, launch keywords) fills, one entry per launch (None: not recorded)."""
    ctx = runtime.get()
    seen, real = [], ctx.launch

    def spy(variant, *a, **k):
        entry = record(variant, k)
        if entry is not None:
            seen.append(entry)
        return real(variant, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


@pytest.fixture
def texel_launches(monkeypatch):
    """The TEXW specialization of every copy_texels / concat_texels launch during the test."""
    return spy_launches(monkeypatch, lambda v, k: k["TEXW"] if v.family in ("copy_texels", "concat_texels") else None)


def data(shape, dt):
    return (rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dt).itemsize, dtype=np.uint8)
            .view(dt).reshape(shape))   # random bits: NaN payloads and signed zeros for the floats


def same_bits(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def expect(path, seen, runs):
    """runs: whether the case is whole texels: copy_texels ran on the texel paths (its stores through
    the texel view exactly when the path forces texel stores), and never otherwise."""
    if path == "ssbo" or not runs:
        assert not seen
    else:
        assert seen and all(w == (path == "texel") for w in seen)
    seen.clear()


def per(dt):
    return 16 // np.dtype(dt).itemsize


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_contiguize_views(dt, path, texel_launches):
    p = per(dt)
    x = data((6, 5 * p), dt)
    X = fv.asarray(x)
    cases = [  # (view, whole texels)
        (np.s_[:, p:3 * p], True),            # aligned slice of rows
        (np.s_[1:5], True),                   # offset rows (contiguous, offset a whole texel)
        (np.s_[::-2, 2 * p:], True),          # negative outer stride
        (np.s_[:, 1:1 + 2 * p], p == 1),      # offset by one element (b8: one element = half a texel)
        (np.s_[:, :p + 1], False),            # run not a whole number of texels
        (np.s_[:, ::2], False),               # strided inner
        (np.s_[:, p // 2:p // 2 + p], p == 1),  # half-texel offset
    ]
    for sl, runs in cases:
        same_bits(fv.ascontiguousarray(X[sl]), x[sl])
        expect(path, texel_launches, runs)
    same_bits(fv.ascontiguousarray(X.T), x.T)   # a transpose: never texel runs
    expect(path, texel_launches, False)
    b = fv.asarray(data((1, 2 * p), dt))        # broadcast rows: outer stride 0
    same_bits(fv.ascontiguousarray(b.broadcast_to((3, 2 * p))), np.broadcast_to(b.numpy(), (3, 2 * p)))
    expect(path, texel_launches, True)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_concatenate_and_setitem(dt, path, texel_launches):
    p = per(dt)
    a, b, c = data((3, 2 * p), dt), data((3, 4 * p), dt), data((3, 3), dt)
    A, B, C = fv.asarray(a), fv.asarray(b), fv.asarray(c)
    same_bits(fv.concatenate([A, B], axis=1), np.concatenate([a, b], axis=1))   # rotate_half's shape
    expect(path, texel_launches, True)
    same_bits(fv.concatenate([A, A], axis=0), np.concatenate([a, a], axis=0))
    expect(path, texel_launches, True)
    same_bits(fv.concatenate([A, C, B], axis=1), np.concatenate([a, c, b], axis=1))   # A whole, then misaligned
    texel_launches.clear()
    # slice assignment (a KV-cache append): aligned, then offset by one element
    cache, new = data((4, 8 * p), dt), data((4, 2 * p), dt)
    for start, runs in ((2 * p, True), (2 * p + 1, p == 1)):
        K, want = fv.asarray(cache), cache.copy()
        K[:, start:start + 2 * p] = fv.asarray(new)
        want[:, start:start + 2 * p] = new
        same_bits(K, want)
        expect(path, texel_launches, runs)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_concatenate_pieces_in_one_launch(dt, path, monkeypatch):
    """2 to 4 pieces that are rows of whole texels (contiguous from the axis on, the dims before it
    collapsing to <= 3 for all pieces: slices, offsets, broadcast rows, transposed outer dims) are one
    concat_texels launch on the texel paths; 5 pieces, a piece not in whole texels, a negative row
    stride or 4 outer dims take a launch per piece; numpy's bits always."""
    seen = spy_launches(monkeypatch, lambda v, k: (v.family, k.get("PIECES")))
    p = per(dt)
    x = data((3, 2, 8 * p), dt)
    X = fv.asarray(x)
    row = fv.asarray(data((1, 1, 2 * p), dt))
    t = data((2, 5, 3, 4 * p), dt).transpose(0, 2, 1, 3)           # [B, S, H, D] -> [B, H, S, D]
    T = fv.asarray(np.ascontiguousarray(t.transpose(0, 2, 1, 3))).transpose(0, 2, 1, 3)
    f = data((2, 3, 2, 3, 2 * p), dt).transpose(0, 3, 2, 1, 4)
    F = fv.asarray(np.ascontiguousarray(f.transpose(0, 3, 2, 1, 4))).transpose(0, 3, 2, 1, 4)
    cases = [  # (device pieces, numpy pieces, axis, one launch)
        ([X[..., 4 * p:], X[..., :4 * p]], [x[..., 4 * p:], x[..., :4 * p]], 2, True),   # rotate_half's cat
        ([X, X[:, :1], X], [x, x[:, :1], x], 1, True),
        ([X[:2], X[1:], X[:1], X[2:]], [x[:2], x[1:], x[:1], x[2:]], 0, True),
        ([X[..., p:2 * p], row.broadcast_to((3, 2, 2 * p)), X[..., :p]],
         [x[..., p:2 * p], np.broadcast_to(row.numpy(), (3, 2, 2 * p)), x[..., :p]], 2, True),
        ([X[:1], X[:1]], [x[:1], x[:1]], 2, True),                                          # one row
        ([X] * 5, [x] * 5, 1, False),
        ([X[::-1], X], [x[::-1], x], 2, False),                                             # negative row stride
        ([X[..., 1:1 + p], X[..., :p]], [x[..., 1:1 + p], x[..., :p]], 2, p == 1),          # offset one element
        ([fv.ascontiguousarray(T[..., 2 * p:]), T[..., :2 * p]], [t[..., 2 * p:], t[..., :2 * p]], 3,
         True),                                                                             # rotate_half of q^T
        ([T[:, :2], T[:, 1:]], [t[:, :2], t[:, 1:]], 3, True),                               # 3 outer dims
        ([F[..., :p], F[..., p:]], [f[..., :p], f[..., p:]], 4, False),                       # 4 outer dims
    ]
    seen.clear()   # the contiguous piece's copy
    for dev, host, ax, one in cases:
        same_bits(fv.concatenate(dev, axis=ax), np.concatenate(host, axis=ax))
        texel = path != "ssbo" and one
        assert (seen == [("concat_texels", len(dev))]) == texel, (ax, len(dev), seen)
        seen.clear()
    y = data((3000, 3 * p), dt)                                                             # many rows
    Y = fv.asarray(y)
    same_bits(fv.concatenate([Y[:, :p], Y], axis=1), np.concatenate([y[:, :p], y], axis=1))
    assert (seen == [("concat_texels", 2)]) == (path != "ssbo")


def test_complex128_copy(path, texel_launches):
    x = (rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6))).astype(np.complex128)
    same_bits(fv.ascontiguousarray(fv.asarray(x)[:, 1:5]), x[:, 1:5])


def test_over_texel_limit_falls_back(path, texel_launches, monkeypatch):
    """A buffer beyond maxTexelBufferElements has no texel view: the storage-buffer kernels copy it."""
    lim = runtime.get().device.limits
    monkeypatch.setattr(lim, "maxTexelBufferElements", 4)
    x = data((4, 16), np.float32)
    same_bits(fv.ascontiguousarray(fv.asarray(x)[:, 4:12]), x[:, 4:12])
    X = fv.asarray(x)
    same_bits(fv.concatenate([X, X[:, :4]], axis=1), np.concatenate([x, x[:, :4]], axis=1))
    assert not texel_launches


def test_many_rows_and_rank3(path, texel_launches):
    """Runs of 3 texels over thousands of rows (the shader's i / run by multiply-high), and a rank-3 view."""
    x = data((3000, 20), np.float32)
    same_bits(fv.ascontiguousarray(fv.asarray(x)[:, 4:16]), x[:, 4:16])
    expect(path, texel_launches, True)
    y = data((5, 7, 24), np.float16)
    same_bits(fv.ascontiguousarray(fv.asarray(y)[:, ::2, 8:24]), y[:, ::2, 8:24])
    expect(path, texel_launches, True)


def test_run_divider():
    """divider's (m, s) give i // d exactly for every i < n, up to the largest texel count."""
    for d in list(range(1, 70)) + [1000, 4097, 65535, 1 << 20, (1 << 28) - 3]:
        for n in (1, d, 3 * d + 2, 1 << 20, 1 << 28):
            m, s = movement.divider(d, n)
            assert m < 1 << 32
            for i in {0, n - 1, n // 2, max(n - d, 0), (n - 1) // d * d, min(d, n - 1), max((n - 1) // d * d - 1, 0)}:
                assert (i * m) >> s == i // d, (d, n, i)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_flip_and_roll(dt, path, texel_launches):
    """flip of leading axes and roll of whole-texel ranges are texel copies; the last axis flipped,
    rolled by a part of a texel, or three axes rolled stay remap launches."""
    p = per(dt)
    x = data((4, 3, 2 * p), dt)
    X = fv.asarray(x)
    for axis, runs in ((0, True), ((0, 1), True), (None, False), (2, False)):
        same_bits(fv.flip(X, axis), np.flip(x, axis))
        expect(path, texel_launches, runs)
    for shift, axis, runs in (((1,), (0,), True), ((-2,), (1,), True), ((1, 2), (0, 1), True), ((p,), (2,), True),
                              ((1,), (2,), False), ((1, 1, p), (0, 1, 2), False), (5, None, False)):
        same_bits(fv.roll(X, shift, axis), np.roll(x, shift, axis))
        expect(path, texel_launches, runs)


@pytest.fixture
def remap_launches(monkeypatch):
    """The remap.comp families launched during the test (`flip` or its storage-only twin `flip_ssbo`)."""
    return spy_launches(monkeypatch, lambda v, k: v.family if v.source == "remap.comp" else None)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_remap_load_paths(dt, path, remap_launches):
    """remap.comp (last-axis flip, triu / tril, pad in every mode, pad backward constant) reads its
    source through a one-element-per-texel view on the texel paths and through the storage buffer
    (its `_ssbo` twin) otherwise; numpy's bits either way, on offset and strided views, rows shorter
    and longer than a run of 8."""
    x = data((3, 5, 19), dt)
    X = fv.asarray(x)
    views = [(x, X), (x[1:, 1:, 2:], X[1:, 1:, 2:]), (x[:, ::-2, ::3], X[:, ::-2, ::3])]
    for xv, Xv in views:
        same_bits(fv.flip(Xv, 2), np.flip(xv, 2))
        for k in (-1, 0, 2):
            same_bits(fv.triu(Xv, k), np.triu(xv, k))
            same_bits(fv.tril(Xv, k), np.tril(xv, k))
        pw = ((1, 0), (0, 2), (3, 1))
        same_bits(fv.pad(Xv, pw, mode="constant", constant_values=np.array(7).astype(dt)[()]),
                  np.pad(xv, pw, mode="constant", constant_values=np.array(7).astype(dt)[()]))
        same_bits(fv.pad(Xv, pw, mode="reflect"), np.pad(xv, pw, mode="reflect"))
        same_bits(fv.pad(Xv, pw, mode="edge"), np.pad(xv, pw, mode="edge"))
        same_bits(fv.pad_backward(Xv, pw), xv[1:xv.shape[0], 0:xv.shape[1] - 2, 3:xv.shape[2] - 1])
    texel = path != "ssbo"
    assert remap_launches and all(f.endswith("_ssbo") != texel for f in remap_launches), remap_launches
    assert {f.removesuffix("_ssbo") for f in remap_launches} == {"flip", "triu", "tril", "pad_const", "pad_reflect",
                                                                  "pad_replicate", "pad_backward_const"}


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_remap_words_edges(dt, path, remap_launches):
    """remap.comp stores whole 16-byte words: rows shorter than a word (words crossing rows), outputs
    smaller than a word, and outputs starting inside a word (rank 8 after merging: the host loops over
    the first dim, each block's output offset a part of a word) keep numpy's bits on every path."""
    for shape in ((1,), (3,), (5, 1), (7, 3), (4, 2, 5), (2, 33)):
        x = data(shape, dt)
        X = fv.asarray(x)
        same_bits(fv.flip(X, -1), np.flip(x, -1))
        same_bits(fv.pad(X, 1, mode="edge"), np.pad(x, 1, mode="edge"))
        if len(shape) >= 2:
            same_bits(fv.triu(X, 1), np.triu(x, 1))
    x = data((2, 3, 2, 3, 2, 3, 2, 5), dt)
    axes = (0, 2, 4, 6)   # alternating signs: no dims merge
    same_bits(fv.flip(fv.asarray(x), axes), np.flip(x, axes))
    assert remap_launches


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_remap_spans_cross_rows(dt, path, remap_launches):
    """remap.comp's straight-line path: an invocation's span of 4 output words (64 bytes) over rows
    at least that long enters the next row mid-span, every mode reading that row's own source
    position (flip, roll, triu / tril's diagonal, pad's fill rows and mirrored / clamped columns,
    pad backward's slice); rows one element longer than a span and just under two spans, contiguous
    and strided sources; numpy's bits on every path."""
    span = 64 // np.dtype(dt).itemsize
    for cols in (span + 1, 2 * span - 3):
        x = data((5, 3, cols), dt)
        for xv, Xv in ((x, fv.asarray(x)), (x[:, ::-1, ::2], fv.asarray(x)[:, ::-1, ::2])):
            same_bits(fv.flip(Xv, (0, 2)), np.flip(xv, (0, 2)))
            same_bits(fv.roll(Xv, 3, axis=2), np.roll(xv, 3, axis=2))
            same_bits(fv.triu(Xv, 2), np.triu(xv, 2))
            same_bits(fv.tril(Xv, -1), np.tril(xv, -1))
            pw = ((1, 1), (2, 0), (3, 2))
            fill = np.array(5).astype(dt)[()]
            same_bits(fv.pad(Xv, pw, constant_values=fill), np.pad(xv, pw, constant_values=fill))
            same_bits(fv.pad(Xv, pw, mode="reflect"), np.pad(xv, pw, mode="reflect"))
            same_bits(fv.pad(Xv, pw, mode="edge"), np.pad(xv, pw, mode="edge"))
            same_bits(fv.pad_backward(Xv, ((1, 0), (0, 1), (2, 1))), xv[1:, :-1, 2:-1])
    same_bits(fv.pad(fv.asarray(x[:0]), pw, constant_values=fill), np.pad(x[:0], pw, constant_values=fill))
    assert remap_launches


@pytest.fixture
def transpose_launches(monkeypatch):
    """The transpose.comp families launched during the test (`transpose` or `transpose_ssbo`)."""
    return spy_launches(monkeypatch, lambda v, k: v.family if v.source == "transpose.comp" else None)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_transpose_blocks(dt, path, transpose_launches):
    """Copies whose source is contiguous along the output's rows (x.T, batched transposes, offset and
    reversed views) go through transpose.comp's word blocks on every path: numpy's bits with rows and
    cols that are and are not multiples of a word, and blocks past the edges."""
    for shape in ((32, 48), (33, 70), (5, 3), (3, 17, 9)):
        x = data(shape, dt)
        X = fv.asarray(x)
        perm = (1, 0) if len(shape) == 2 else (0, 2, 1)
        same_bits(fv.ascontiguousarray(X.transpose(*perm)), np.ascontiguousarray(x.transpose(*perm)))
    x = data((20, 26), dt)
    X = fv.asarray(x)
    same_bits(fv.ascontiguousarray(X[3:, 5:].T), np.ascontiguousarray(x[3:, 5:].T))
    same_bits(fv.ascontiguousarray(X[::-1].T), np.ascontiguousarray(x[::-1].T))
    texel = path != "ssbo"
    assert len(transpose_launches) == 6 and all(f == ("transpose" if texel else "transpose_ssbo")
                                                 for f in transpose_launches), transpose_launches
