"""The row kernels (softmax, norms + backward, fused_add_rmsnorm, rope, cumsum) on both load paths
(issue 18 item 1): FUELVK_TEXEL_LOADS=1 reads rows in 16-byte texel chunks through texel views,
=0 through storage buffers only. Each case runs on both paths: the two must agree bit for bit (the
kernels visit the same elements in the same order either way) and match float64 references; aligned
rows, views offset by one element, row lengths that are not whole texels, a workgroup per row and
one invocation per row (LANE_ROWS), f32 / f16 / bf16 / f64."""
import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels.norm import LANE_ROWS_MIN_ROWS, ROW_SPLIT_MIN_ELEMS, ROW_TEXELS, SG_MIN_COLS, row_split_parts
from fuelvk.kernels.reduction import CUMSUM_TEXELS
from fuelvk.kernels.rope import ROPE_TEXELS
from fuelvk.runtime import loadpath
from oracles import FLOATS, TOL

rng = np.random.default_rng(1818)
BF16 = np.dtype(ml_dtypes.bfloat16)
IDS = [str(d) for d in FLOATS]
# (rows, cols, offset): a workgroup per row with several chunks per invocation and a partial last
# chunk; rows whose length is no whole number of texels (so most rows start mid-texel) offset by
# one; many short rows (one per invocation), aligned and offset by one
# one invocation per row (one per invocation), aligned and offset by one; a workgroup per row of whole
# texels (ALIGN: no element-by-element path compiled), and of rows as long offset by one (no ALIGN: the
# output's texels are whole but the rows are cut at x's)
CASES = [(3, 1029, 0), (5, 37, 1), (LANE_ROWS_MIN_ROWS + 3, 24, 0), (LANE_ROWS_MIN_ROWS + 1, 13, 1), (2, 520, 0),
         (2, 64, 1)]


@pytest.fixture
def launches(monkeypatch):
    """(variant id, TEX, LANE_ROWS, SPLIT, ALIGN) of every row-kernel launch during the test (not the
    reductions' final pass over weight-gradient partials)."""
    ctx = runtime.get()
    seen, orig = [], ctx.launch

    def spy(v, *a, **k):
        if "TEX" in k and not v.id.startswith("reduce"):
            seen.append((v.id, k["TEX"], k.get("LANE_ROWS", 0), k.get("SPLIT", 0), k.get("ALIGN", 0)))
        return orig(v, *a, **k)
    monkeypatch.setattr(ctx, "launch", spy)
    return seen


def rows_of(a, rows, cols, off):
    """An fv view of rows x cols elements of the flat array a starting at element off."""
    return fv.asarray(a)[off:off + rows * cols].reshape(rows, cols)


def on_both_paths(monkeypatch, launches, f):
    """f() (a tuple of arrays) with texel loads forced on and off: the results (identical bits), the
    TEX masks each path launched with and the LANE_ROWS values; the ALIGN masks must not depend on
    the path."""
    out, masks, aligns = {}, {}, {}
    for flag in ("1", "0"):
        monkeypatch.setenv(loadpath.ENV, flag)
        launches.clear()
        out[flag] = [np.asarray(r.numpy() if isinstance(r, fv.Array) else r) for r in f()]
        masks[flag] = [t for _, t, *_ in launches]
        aligns[flag] = [al for *_, al in launches]
    for a, b in zip(out["1"], out["0"]):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert masks["1"] and not any(masks["0"]), masks
    assert aligns["1"] == aligns["0"], aligns
    return out["1"], masks["1"], [lane for _, _, lane, *_ in launches]


def whole(dt, cols, off):
    """True when rows of cols elements at element offset off are whole texels (the ALIGN bits)."""
    per = 16 // np.dtype(dt).itemsize
    return cols % per == 0 and off % per == 0


def aligned_bits(launches, key, bits=ROW_TEXELS):
    """Whether each launch had `key`'s ALIGN bit."""
    return {bool(al & bits[key]) for *_, al in launches}


def close(got, want, dt, scale=1.0):
    r, a = TOL[np.dtype(dt)]
    mag = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 * r * scale, atol=4 * a * mag * scale)


def inputs(dt, rows, cols, off, k=3):
    n = rows * cols + off
    return [(rng.standard_normal(n) * 2).astype(dt) for _ in range(k)]


def sl(a, rows, cols, off):
    return a[off:off + rows * cols].reshape(rows, cols).astype(np.float64)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_softmax_paths(dt, monkeypatch, launches):
    for rows, cols, off in CASES:
        masks, lanes = check_softmax(dt, monkeypatch, launches, rows, cols, off)
        assert all(m & ROW_TEXELS["x"] for m in masks), masks          # every row has whole texels
        assert set(lanes) == {int(rows >= LANE_ROWS_MIN_ROWS and cols < SG_MIN_COLS)}, (rows, lanes)
        assert aligned_bits(launches, "x") == aligned_bits(launches, "o") == {whole(dt, cols, off)}, launches


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_softmax_split_paths(dt, monkeypatch, launches):
    """Softmax over long rows split across invocations (SPLIT 1: per-part max and sum, SPLIT 2: combine
    and apply) on both load paths: one row, rows not divisible by the parts' chunks, offset by one
    element; rows of -inf (NaN, as torch), with a NaN or +inf (NaN), -inf in whole parts only. The
    backward the same way (SPLIT 1: per-part dot(y, g), SPLIT 2: their sum in order, applied)."""
    n = 2 * ROW_SPLIT_MIN_ELEMS
    for rows, cols, off in [(1, n, 0), (3, n + 37, 1), (2, 2 * n + 5, 0)]:
        parts = row_split_parts(rows, cols)
        assert parts >= 2, (rows, cols, parts)
        x, g = inputs(dt, rows, cols, off, 2)
        (y, dx), masks, _ = on_both_paths(monkeypatch, launches, lambda: (
            fv.softmax(rows_of(x, rows, cols, off)),
            fv.softmax_backward(rows_of(x, rows, cols, off), rows_of(g, rows, cols, off))))
        assert [(v.split(".")[0], s) for v, _, _, s, _ in launches] == [
            ("softmax", 1), ("softmax", 2), ("softmax_last_dim_backward", 1), ("softmax_last_dim_backward", 2)], launches
        x64, g64 = sl(x, rows, cols, off), sl(g, rows, cols, off)
        e = np.exp(x64 - x64.max(-1, keepdims=True))
        close(y, e / e.sum(-1, keepdims=True), dt)
        close(dx, x64 * (g64 - (x64 * g64).sum(-1, keepdims=True)), dt, scale=cols ** 0.5)
        assert all(m & ROW_TEXELS["x"] for m in masks), masks
        assert aligned_bits(launches, "x") == {whole(dt, cols, off)}, launches
    x = rng.standard_normal((5, n)).astype(dt)
    x[0] = -np.inf
    x[1, 77] = np.nan
    x[2, n - 3] = np.inf
    x[3, :n // 2 + 3] = -np.inf           # the first parts all -inf: they add nothing
    x[4, ::3] = -np.inf
    (y,), _, _ = on_both_paths(monkeypatch, launches, lambda: (fv.softmax(fv.asarray(x)),))
    assert [s for _, _, _, s, _ in launches] == [1, 2], launches
    assert np.isnan(y[:3].astype(np.float64)).all()
    for r in (3, 4):
        x64 = x[r].astype(np.float64)
        e = np.exp(x64 - x64.max())
        close(y[r], e / e.sum(), dt)
        assert (y[r][np.isneginf(x64)] == 0).all()


def check_norms(dt, monkeypatch, launches, rows, cols, off, make=None):
    """rms_norm / layer_norm (+ backward, weight and bias gradients) and fused_add_rmsnorm of rows x cols
    at element offset off on both load paths against float64 (make(a, rows, cols, off): the x / grad
    view, default rows_of); returns the launches' TEX masks."""
    make = make or rows_of
    x, g, r = inputs(dt, rows, cols, off)
    w, b = (rng.standard_normal(cols + 1).astype(dt) for _ in range(2))
    X, G = (lambda: make(x, rows, cols, off)), (lambda: make(g, rows, cols, off))
    W, B = fv.asarray(w)[1:], fv.asarray(b)[:cols]      # the weight offset by one, the bias aligned

    def run():
        res = fv.asarray(r[off:off + rows * cols].reshape(rows, cols).copy())
        dx, dw = fv.rms_norm_backward(X(), G(), 1e-5, W)
        ldx, ldw, ldb = fv.layer_norm_backward(X(), G(), 1e-5, W, B)
        return (fv.rms_norm(X(), 1e-5, W), fv.layer_norm(X(), 1e-5, W, B), dx, dw, ldx, ldw, ldb,
                fv.fused_add_rmsnorm(X(), res, W, 1e-5), res)
    got, masks, _ = on_both_paths(monkeypatch, launches, run)
    x64, g64, r64 = sl(x, rows, cols, off), sl(g, rows, cols, off), sl(r, rows, cols, off)
    w64, b64 = w[1:].astype(np.float64), b[:cols].astype(np.float64)
    rstd = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
    xh = x64 * rstd
    gw = g64 * w64
    mu = x64.mean(-1, keepdims=True)
    lr = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    lxh = (x64 - mu) * lr
    s = x64 + r64
    want = [xh * w64, lxh * w64 + b64,
            rstd * (gw - xh * (gw * xh).mean(-1, keepdims=True)), (g64 * xh).sum(0),
            lr * (gw - gw.mean(-1, keepdims=True) - lxh * (gw * lxh).mean(-1, keepdims=True)),
            (g64 * lxh).sum(0), g64.sum(0),
            s / np.sqrt((s ** 2).mean(-1, keepdims=True) + 1e-5) * w64, s]
    for i, (a, e) in enumerate(zip(got, want)):
        close(a, e, dt, scale=(rows ** 0.5 if i in (3, 5, 6) else 1) * (4 if i in (2, 4) else 1))
    return masks


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_norm_paths(dt, monkeypatch, launches):
    for rows, cols, off in CASES:
        masks = check_norms(dt, monkeypatch, launches, rows, cols, off)
        assert all(m & ROW_TEXELS["x"] for m in masks), masks
        assert aligned_bits(launches, "x") == {whole(dt, cols, off)}, launches
        assert aligned_bits(launches, "o") == {whole(dt, cols, off)}, launches


def check_softmax(dt, monkeypatch, launches, rows, cols, off, make=None):
    """softmax and its backward of rows x cols at element offset off on both load paths against float64;
    returns the launches' TEX masks and LANE_ROWS values."""
    make = make or rows_of
    x, g, _ = inputs(dt, rows, cols, off)
    (y, dx), masks, lanes = on_both_paths(monkeypatch, launches, lambda: (
        fv.softmax(make(x, rows, cols, off)), fv.softmax_backward(make(x, rows, cols, off), make(g, rows, cols, off))))
    x64, g64 = sl(x, rows, cols, off), sl(g, rows, cols, off)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    close(y, e / e.sum(-1, keepdims=True), dt)
    close(dx, x64 * (g64 - (x64 * g64).sum(-1, keepdims=True)), dt, scale=cols ** 0.5)
    return masks, lanes


# Rows for the subgroup twins (a row to a subgroup): rows of one element, of fewer elements than a
# subgroup has invocations, odd and not whole texels, offset by one; more rows than a workgroup's units
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_norm_lane_rows_side_by_side(dt, monkeypatch, launches):
    """Forward rms_norm / layer_norm with one row an invocation and LANE_R rows side by side (a CPU device,
    every operand whole aligned texels: each weight / bias chunk read once for the invocation's rows):
    both load paths the same bits, the same bits as one row an invocation (LANE_R = 1), float64's values;
    row counts that leave an invocation's last rows past the end (37) or fill whole workgroups (64), with
    and without weight / bias. An offset weight (no ALIGN bit) and a loop budget too small for LANE_R rows
    keep one row an invocation. The kernel
    runs on any device; CPU devices take it (device type forced here)."""
    import fuelvk.ops.norm as norm_ops
    dev = runtime.get().device
    monkeypatch.setattr(dev, "device_type", "cpu")
    lane_r, orig, side_by_side = [], runtime.get().launch, norm_ops.LANE_R

    def spy(v, *a, **k):
        if k.get("LANE_ROWS"):
            lane_r.append(k.get("LANE_R", 1))
        return orig(v, *a, **k)
    monkeypatch.setattr(runtime.get(), "launch", spy)
    cols = 48
    for rows in (37, 64):
        x = (rng.standard_normal(rows * cols) * 2).astype(dt).reshape(rows, cols)
        w, b = (rng.standard_normal(cols + 1).astype(dt) for _ in range(2))

        def run(wv, bv):
            return (fv.rms_norm(x, 1e-5, wv), fv.layer_norm(x, 1e-5, wv, bv), fv.rms_norm(x, 1e-5),
                    fv.layer_norm(x, 1e-5, None, bv), fv.layer_norm(x, 1e-5))
        W, B = fv.asarray(w)[:cols], fv.asarray(b)[:cols]
        lane_r.clear()
        got, _, lanes = on_both_paths(monkeypatch, launches, lambda: run(W, B))
        assert set(lanes) == {1} and set(lane_r) == {side_by_side} and side_by_side > 1, (lanes, lane_r)
        monkeypatch.setattr(norm_ops, "LANE_R", 1)
        one = [np.asarray(r.numpy() if isinstance(r, fv.Array) else r) for r in run(W, B)]
        monkeypatch.setattr(norm_ops, "LANE_R", side_by_side)
        for a, e in zip(got, one):
            assert np.array_equal(a.view(np.uint8), e.view(np.uint8))
        x64, w64, b64 = x.astype(np.float64), w[:cols].astype(np.float64), b[:cols].astype(np.float64)
        xh = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
        mu = x64.mean(-1, keepdims=True)
        lxh = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        for a, e in zip(got, [xh * w64, lxh * w64 + b64, xh, lxh + b64, lxh]):
            close(a, e, dt)
        lane_r.clear()
        fv.rms_norm(x, 1e-5, fv.asarray(w)[1:])                 # the weight offset by one: no ALIGN bit
        assert lane_r == [1], lane_r
    # a loop budget that one row an invocation fits (2 passes x 48) but LANE_R rows' loops do not
    monkeypatch.setattr(dev, "loop_budget", 3 * cols)
    lane_r.clear()
    close(np.asarray(fv.rms_norm(x, 1e-5)), xh, dt)
    assert lane_r == [1], lane_r


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_norm_backward_lane_rows_side_by_side(dt, monkeypatch, launches):
    """rms_norm / layer_norm backward with weight-gradient partials, one row an invocation and LANE_R rows
    side by side (a CPU device, every operand whole aligned texels: the rows' g * xh and g summed in
    registers, stored once an invocation): both load paths the same bits, dx the same bits as one row an
    invocation (LANE_R = 1), dx / dweight / dbias float64's values; row counts that leave an invocation's
    last rows past the end (37: they add nothing) or fill whole workgroups (64); a bias gradient alone.
    Without gradient partials, or with the weight offset by one (no ALIGN bit), one row an invocation.
    Rows of the subgroup twins' length (SG_MIN_COLS forced down) take LANE_R rows from
    LANE_R_OVER_SG_ROWS rows on."""
    import fuelvk.ops.norm as norm_ops
    dev = runtime.get().device
    monkeypatch.setattr(dev, "device_type", "cpu")
    seen, orig, side_by_side = [], runtime.get().launch, norm_ops.LANE_R

    def spy(v, *a, **k):
        if "WGRAD" in k:
            seen.append((v.id.split(".")[0], k.get("LANE_ROWS", 0), k.get("LANE_R", 1), k["WGRAD"]))
        return orig(v, *a, **k)
    monkeypatch.setattr(runtime.get(), "launch", spy)
    cols = 48
    for rows in (37, 64):
        x, g = ((rng.standard_normal(rows * cols) * 2).astype(dt).reshape(rows, cols) for _ in range(2))
        w, b = (rng.standard_normal(cols + 1).astype(dt) for _ in range(2))
        W, B = fv.asarray(w)[:cols], fv.asarray(b)[:cols]

        def run():
            dx, dw = fv.rms_norm_backward(x, g, 1e-5, W)
            ldx, ldw, ldb = fv.layer_norm_backward(x, g, 1e-5, W, B)
            bdx, _, bdb = fv.layer_norm_backward(x, g, 1e-5, None, B)
            return dx, dw, ldx, ldw, ldb, bdx, bdb
        seen.clear()
        got, _, _ = on_both_paths(monkeypatch, launches, run)
        assert {(s[1], s[2], s[3]) for s in seen} == {(1, side_by_side, 1)} and side_by_side > 1, seen
        monkeypatch.setattr(norm_ops, "LANE_R", 1)
        seen.clear()
        one = [np.asarray(r.numpy() if isinstance(r, fv.Array) else r) for r in run()]
        assert {(s[1], s[2]) for s in seen} == {(1, 1)}, seen
        monkeypatch.setattr(norm_ops, "LANE_R", side_by_side)
        for i in (0, 2, 5):                                       # dx: the same sums in the same order
            assert np.array_equal(got[i].view(np.uint8), one[i].view(np.uint8))
        x64, g64, w64 = x.astype(np.float64), g.astype(np.float64), w[:cols].astype(np.float64)
        rstd = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
        xh, gw = x64 * rstd, g64 * w64
        mu = x64.mean(-1, keepdims=True)
        lr = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        lxh = (x64 - mu) * lr
        want = [rstd * (gw - xh * (gw * xh).mean(-1, keepdims=True)), (g64 * xh).sum(0),
                lr * (gw - gw.mean(-1, keepdims=True) - lxh * (gw * lxh).mean(-1, keepdims=True)),
                (g64 * lxh).sum(0), g64.sum(0),
                lr * (g64 - g64.mean(-1, keepdims=True) - lxh * (g64 * lxh).mean(-1, keepdims=True)), g64.sum(0)]
        for i, (a, e) in enumerate(zip(got, want)):
            close(a, e, dt, scale=rows ** 0.5 if i in (1, 3, 4, 6) else 4)
        seen.clear()
        fv.rms_norm_backward(x, g, 1e-5)                          # no partials
        fv.rms_norm_backward(x, g, 1e-5, fv.asarray(w)[1:])       # the weight offset by one: no ALIGN bit
        assert [s[2] for s in seen] == [1, 1], seen
    # rows as long as the subgroup twins take: one row an invocation with LANE_R rows from
    # LANE_R_OVER_SG_ROWS rows on (where the device has subgroup arithmetic; else one anyway)
    monkeypatch.setattr(norm_ops, "SG_MIN_COLS", 1)
    for rows, lanes in ((norm_ops.LANE_R_OVER_SG_ROWS, (1, side_by_side)), (LANE_ROWS_MIN_ROWS + 8, None)):
        x, g = ((rng.standard_normal(rows * cols)).astype(dt).reshape(rows, cols) for _ in range(2))
        W = fv.asarray(rng.standard_normal(cols).astype(dt))
        seen.clear()
        dx, dw = fv.rms_norm_backward(x, g, 1e-5, W)
        if lanes:
            assert [s[1:3] for s in seen] == [lanes], seen
        elif dev.features >= {"subgroup_arithmetic"}:
            assert seen[0][0].endswith("_sg"), seen
        x64, g64 = x.astype(np.float64), g.astype(np.float64)
        xh = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
        close(np.asarray(dw.numpy()), (g64 * xh).sum(0), dt, scale=rows ** 0.5)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_subgroup_row_paths(dt, monkeypatch, launches):
    """The `_sg` twins forced for every row length (SG_MIN_COLS = 1), on both load paths: the same bits
    either way and float64's values; with the host's subgroup-size guess right, too small (each
    subgroup loops over several units) and too large (subgroups left idle) for f32; a strided view."""
    import fuelvk.ops.norm as norm_ops
    if not runtime.get().device.features >= {"subgroup_arithmetic"}:
        pytest.skip("the device has no subgroup arithmetic: the plain families run (test_norm_paths)")
    monkeypatch.setattr(norm_ops, "SG_MIN_COLS", 1)
    dev = runtime.get().device
    guesses = [dev.subgroup_size] + ([dev.subgroup_size // 2, dev.subgroup_size * 2] if dt == np.float32 else [])
    for sgs in guesses:
        monkeypatch.setattr(dev, "subgroup_size", sgs)
        # ... and enough rows that a unit of the weight gradients' partials takes several (rows not whole
        # texels: a row's chunks meet other invocations than the previous row's)
        for rows, cols, off in [(LANE_ROWS_MIN_ROWS + 1, 1, 1), (3, 5, 0), (37, 13, 1), (5, 260, 0), (1100, 7, 1)]:
            masks, lanes = check_softmax(dt, monkeypatch, launches, rows, cols, off)
            assert all(v.split(".")[0].endswith("_sg") for v, *_ in launches) and set(lanes) == {0}, launches
            check_norms(dt, monkeypatch, launches, rows, cols, off)
            assert all(v.split(".")[0].endswith("_sg") for v, *_ in launches), launches

    def strided(a, rows, cols, off):                      # every other element: copied contiguous first
        return fv.asarray(a)[off:off + 2 * rows * cols].reshape(rows, 2 * cols)[:, ::2]
    rows, cols = 4, 33
    x = inputs(dt, rows, 2 * cols, 1, 1)[0]
    (y,), _, _ = on_both_paths(monkeypatch, launches, lambda: (fv.softmax(strided(x, rows, cols, 1)),))
    x64 = x[1:1 + 2 * rows * cols].reshape(rows, 2 * cols)[:, ::2].astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    close(y, e / e.sum(-1, keepdims=True), dt)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_norm_split_paths(dt, monkeypatch, launches):
    """rms_norm / layer_norm and their backward over few long rows split across invocations (SPLIT 1:
    per-part sums, SPLIT 2: the row's parts combined in order, applied; the weight / bias gradients
    from per-row partials) on both load paths: one row of whole texels, rows not divisible by the
    parts' chunks offset by one element (the weight offset by one too); layer_norm of rows far from
    zero (the parts' sums of squares about their own means, combined about the row's)."""
    n = 2 * ROW_SPLIT_MIN_ELEMS
    for rows, cols, off in [(1, n, 0), (3, n + 37, 1)]:
        assert row_split_parts(rows, cols) >= 2
        x, g, w = inputs(dt, rows, cols + 1, off, 3)
        x[:len(x) // 2] += 100                   # the first parts' means far from the row's
        W, B = fv.asarray(w)[1:cols + 1], fv.asarray(w)[:cols]

        def run():
            X, G = rows_of(x, rows, cols, off), rows_of(g, rows, cols, off)
            dx, dw = fv.rms_norm_backward(X, G, 1e-5, W)
            ldx, ldw, ldb = fv.layer_norm_backward(X, G, 1e-5, W, B)
            return fv.rms_norm(X, 1e-5, W), dx, dw, fv.layer_norm(X, 1e-5, W, B), ldx, ldw, ldb
        got, masks, _ = on_both_paths(monkeypatch, launches, run)
        assert [(v.split(".")[0], s) for v, _, _, s, _ in launches] == [
            (f, s) for f in ("rms_norm_last_dim_backward", "layer_norm_last_dim_backward", "rms_norm_last_dim",
                             "layer_norm_last_dim") for s in (1, 2)], launches
        x64, g64 = sl(x, rows, cols, off), sl(g, rows, cols, off)
        w64, b64 = w[1:cols + 1].astype(np.float64), w[:cols].astype(np.float64)
        rstd = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
        xh, gw = x64 * rstd, g64 * w64
        mu = x64.mean(-1, keepdims=True)
        lr = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        lxh = (x64 - mu) * lr
        want = [xh * w64, rstd * (gw - xh * (gw * xh).mean(-1, keepdims=True)), (g64 * xh).sum(0),
                lxh * w64 + b64, lr * (gw - gw.mean(-1, keepdims=True) - lxh * (gw * lxh).mean(-1, keepdims=True)),
                (g64 * lxh).sum(0), g64.sum(0)]
        for i, (a, e) in enumerate(zip(got, want)):
            close(a, e, dt, scale=(rows ** 0.5 if i in (2, 5, 6) else 1) * (4 if i in (1, 4) else 1))
        assert aligned_bits(launches, "x") == {whole(dt, cols, off)}, launches


def test_texel_limit_falls_back(monkeypatch, launches, device_limits):
    """Slots past maxTexelBufferElements bind the stub view: TEX clear, the same results."""
    x = fv.asarray(rng.standard_normal((64, 128)).astype(np.float32))
    monkeypatch.setenv(loadpath.ENV, "1")
    want = fv.softmax(x).numpy(), fv.rms_norm(x).numpy()
    assert all(t & ROW_TEXELS["x"] for _, t, *_ in launches)
    launches.clear()
    device_limits(maxTexelBufferElements=100)
    got = fv.softmax(x).numpy(), fv.rms_norm(x).numpy()
    assert launches and not any(t for _, t, *_ in launches), launches
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_rope_paths(dt, monkeypatch, launches):
    """RoPE: bit-exact against the torch formula (test_rope's reference) on both paths: aligned rows,
    rows offset by one element, head dims that are no whole number of texels, partial rotary dims
    with half tables, NeoX and GPT-J."""
    from test_rope import tables, torch_rope
    for (h, s, d, rot, half), off in [((2, 3, 32, 32, False), 0), ((2, 3, 32, 32, False), 1),
                                       ((2, 3, 18, 12, True), 0), ((3, 2, 20, 16, True), 1)]:
        n = h * s * d
        flat = rng.standard_normal(n + off).astype(dt)
        xn = flat[off:].reshape(h, s, d)
        cos, sin = tables((s, rot // 2 if half else rot), dt)
        for inter in (False, True):
            (y,), masks, _ = on_both_paths(monkeypatch, launches, lambda: (fv.rope(
                fv.asarray(flat)[off:].reshape(h, s, d), fv.asarray(cos), fv.asarray(sin), interleaved=inter,
                rotary_dim=rot),))
            want = torch_rope(xn, cos, sin, inter, rot, half)
            assert np.array_equal(y.view(np.uint8), want.view(np.uint8)), (h, s, d, rot, half, off, inter)
            span = rot if inter else rot // 2       # every x chunk whole: rows and (NeoX) half rows of texels
            x_whole = whole(dt, span, off) and whole(dt, d, off)
            assert aligned_bits(launches, "x", ROPE_TEXELS) == {x_whole}, launches
            assert aligned_bits(launches, "c", ROPE_TEXELS) == {whole(dt, span, 0) and whole(dt, d, 0)
                                                                and not (half and inter)}, launches


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_cumsum_paths(dt, monkeypatch, launches):
    """cumsum / cumulative_prod along unit-stride axes (slices read and written in 16-byte chunks): one
    invocation per slice and a workgroup per long slice (SCAN), aligned and offset by one, slices of
    no whole number of texels; along a leading axis, slices side by side as texels (COLS) or element by
    element."""
    from fuelvk.ops.reduction import cumulative_prod_along
    for rows, cols, off in [(6, 40, 0), (5, 37, 1), (5, 37, 0), (3, 2000, 0), (2, 3001, 1), (2, 3001, 0), (3, 64, 1)]:
        (x,) = inputs(dt, rows, cols, off, 1)
        x = (x.astype(np.float64) / 64 + 1).astype(dt)      # products of thousands stay near 1
        (cs, cp), masks, _ = on_both_paths(monkeypatch, launches, lambda: (
            fv.cumsum(rows_of(x, rows, cols, off), axis=-1), cumulative_prod_along(rows_of(x, rows, cols, off), -1)))
        x64 = sl(x, rows, cols, off)
        close(cs, np.cumsum(x64, -1), dt, scale=cols ** 0.5)
        np.testing.assert_allclose(cp.astype(np.float64), np.cumprod(x64, -1), rtol=2 * TOL[np.dtype(dt)][0] * cols)
        assert all(m & CUMSUM_TEXELS["x"] for m in masks), masks
        assert aligned_bits(launches, "x", CUMSUM_TEXELS) == aligned_bits(launches, "o", CUMSUM_TEXELS) == {
            whole(dt, cols, off)}, launches
    # along a leading axis: 16 adjacent columns walk as texels (COLS), also offset by a whole texel of
    # f32; offset by one element or 7 columns: element by element (no view bound)
    for rows, cols, off, views in [(300, 16, 0, True), (30, 16, 4, np.dtype(dt).itemsize >= 4), (30, 16, 1, False),
                                   (9, 7, 0, False)]:
        (x,) = inputs(dt, rows, cols, off, 1)
        (cs,), masks, _ = on_both_paths(monkeypatch, launches, lambda: (
            fv.cumsum(rows_of(x, rows, cols, off), axis=0),))
        close(cs, np.cumsum(sl(x, rows, cols, off), 0), dt, scale=rows ** 0.5)
        assert all(bool(m & CUMSUM_TEXELS["x"]) == views for m in masks), (rows, cols, off, masks)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_cumsum_split_paths(dt, monkeypatch, launches):
    """cumsum / cumulative_prod over long axes of few slices, split in segments (SPLIT 1: segment totals,
    SPLIT 2: each segment from its slice's earlier totals) on both load paths: axes not divisible by
    the segments, offset by one element, one slice, a strided axis (element by element). Integer
    values: every prefix is exact, so the carry across segments must be too (bit-exact to numpy)."""
    from fuelvk.ops.reduction import _CUMSUM_SPLIT_MIN, _cumsum_parts, cumulative_prod_along
    n = 2 * _CUMSUM_SPLIT_MIN
    for rows, cols, off in [(1, n, 0), (3, n + 37, 1), (2, 2 * n + 5, 0)]:
        assert _cumsum_parts(rows, cols, None) >= 2
        x = rng.integers(-8, 9, size=rows * cols + off).astype(dt)
        (cs,), masks, _ = on_both_paths(monkeypatch, launches, lambda: (fv.cumsum(rows_of(x, rows, cols, off), axis=-1),))
        assert [s for _, _, _, s, _ in launches] == [1, 2], launches
        assert np.array_equal(cs, np.cumsum(sl(x, rows, cols, off), -1).astype(dt)), (rows, cols, off)
        assert all(m & CUMSUM_TEXELS["x"] for m in masks), masks
    x = (rng.uniform(-1, 1, n + 3) / 256 + 1).astype(dt)
    (cp,), _, _ = on_both_paths(monkeypatch, launches, lambda: (cumulative_prod_along(fv.asarray(x)[3:], 0),))
    assert [s for _, _, _, s, _ in launches] == [1, 2], launches
    np.testing.assert_allclose(cp.astype(np.float64), np.cumprod(x[3:].astype(np.float64)), rtol=2 * TOL[np.dtype(dt)][0] * n)
    x = rng.integers(-8, 9, size=(n + 3, 3)).astype(dt)      # along a leading axis: strided, no views
    (cs,), masks, _ = on_both_paths(monkeypatch, launches, lambda: (fv.cumsum(fv.asarray(x), axis=0),))
    assert [s for _, _, _, s, _ in launches] == [1, 2] and not any(masks), launches
    assert np.array_equal(cs, np.cumsum(x.astype(np.float64), 0).astype(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
def test_cumsum_blocked_accuracy(dt, monkeypatch, launches):
    """The blocked compensated sum (each step's prefixes, over two 16-byte chunks, summed plainly, what
    their rounding lost carried exactly into one compensated step per step) keeps the compensated bound, half an ulp plus a few u times the
    running sum of |x| (4u here; |x| = x), independent of the length, which a plain running sum misses
    several times over (positive values summing to ~10^4): on the split route (long slices), one
    invocation per slice (in workgroups of _CUMSUM_SPLIT_WG for a few slices per core on a CPU device)
    and a workgroup per slice (SCAN), aligned and offset by one (chunks cut mid-slice), both load paths."""
    from fuelvk.kernels.registry import parallel_groups
    from fuelvk.ops.reduction import _CUMSUM_SPLIT_MIN, _CUMSUM_SPLIT_WG, _CUMSUM_WG
    ctx = runtime.get()
    n = 3 * _CUMSUM_SPLIT_MIN + 5
    u = np.finfo(dt).eps / 2
    # few slices a core on a CPU device: the serial walk in small workgroups; elsewhere a workgroup a slice
    few = _CUMSUM_SPLIT_WG * parallel_groups(ctx.device)
    few_route = (0, _CUMSUM_SPLIT_WG) if ctx.device.device_type == "cpu" else (1, None)
    walks, orig = [], ctx.launch
    monkeypatch.setattr(ctx, "launch", lambda v, *a, **k: (walks.append((k["SCAN"], k["WG"])), orig(v, *a, **k))[1])
    # offset 0 with slices of no whole number of texels: PEEL (whole-chunk steps inside a slice)
    for rows, cols, off, split, route in [(2, n, 0, [1, 2], None), (1, n, 1, [1, 2], None), (300, 1030, 1, [0], (0, _CUMSUM_WG)),
                                          (300, 1030, 0, [0], (0, _CUMSUM_WG)), (3, 1203, 0, [0], (1, None)),
                                          (3, 1200, 0, [0], (1, None)), (few, 1100, 1, [0], few_route)]:
        x = rng.uniform(0.5, 1.5, size=rows * cols + off).astype(dt)
        walks.clear()
        (cs,), _, _ = on_both_paths(monkeypatch, launches, lambda: (fv.cumsum(rows_of(x, rows, cols, off), axis=-1),))
        assert [s for _, _, _, s, _ in launches] == split, (rows, cols, launches)
        if route:     # SCAN and, for the serial walk, its workgroup size
            assert {(sc, wg if sc == 0 else None) for sc, wg in walks} == {route}, (rows, cols, walks)
        x64 = sl(x, rows, cols, off)
        want = np.cumsum(x64.astype(np.longdouble), -1)     # float64's own running sum is too coarse for f64
        bound = np.spacing(want.astype(dt)).astype(np.longdouble) / 2 + 4 * u * want
        assert (np.abs(cs.astype(np.longdouble) - want) <= bound).all(), (rows, cols, off)
        if dt == np.float32 and cols == n:     # the same slices through a plain f32 running sum miss it
            plain = np.cumsum(x64.astype(np.float32), -1, dtype=np.float32)
            assert (np.abs(plain.astype(np.longdouble) - want) > 4 * bound).any()



def signed_zero_slices(dt, rows, cols, off):
    """rows x cols values (flat, plus off in front) whose every prefix sum is exact: steps of a walk over
    {-1, 0, 1} (so running sums return to zero, where numpy's is +0), zeros of either sign, and each
    slice led by a run of -0s (the whole slice, none, one, a random length), where numpy's is -0."""
    x = np.diff(rng.integers(-1, 2, size=(rows, cols + 1)), axis=1).astype(np.float64)
    x[(x == 0) & (rng.random(x.shape) < 0.5)] = -0.0
    for r in range(rows):
        x[r, :(cols, 0, 1, int(rng.integers(0, cols + 1)))[r % 4]] = -0.0
    return np.concatenate([np.full(off, 7.0), x.reshape(-1)]).astype(dt)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_cumsum_signed_zero(dt, monkeypatch, launches):
    """cumsum starts every running sum at -0, the identity of IEEE addition (+0 + -0 is +0): a slice led by
    -0s gives -0s as numpy's does, bit for bit with numpy on every route and both load paths (exact
    prefixes, see signed_zero_slices): one invocation per slice (aligned, offset, the CPU's small
    workgroups), a workgroup per slice (SCAN), the split (SPLIT 1, 2), adjacent slices as texels (COLS, its
    workgroups sized to the device),
    strided axes element by element; cumulative_prod's signs (+-1, +-0) on the same routes."""
    from fuelvk.kernels.registry import parallel_groups
    from fuelvk.ops.reduction import _CUMSUM_SPLIT_MIN, _CUMSUM_SPLIT_WG, _CUMSUM_WG, _cols_wg, cumulative_prod_along
    ctx = runtime.get()
    per = 16 // np.dtype(dt).itemsize
    few = _CUMSUM_SPLIT_WG * parallel_groups(ctx.device)
    few_route = (0, _CUMSUM_SPLIT_WG, 0) if ctx.device.device_type == "cpu" else (1, None, 0)
    n = 2 * _CUMSUM_SPLIT_MIN + 5
    walks, orig = [], ctx.launch
    peels = []
    monkeypatch.setattr(ctx, "launch", lambda v, *a, **k: (
        walks.append((k["SCAN"], k["WG"] if k["SCAN"] == 0 else None, k["SPLIT"])), peels.append(k["PEEL"]),
        orig(v, *a, **k))[2])
    # (rows, cols, off, axis, route: (SCAN, serial WG, SPLIT) of the launches)
    for rows, cols, off, axis, route in [
            (1, 1, 0, -1, {(0, _CUMSUM_WG, 0)}), (300, 40, 0, -1, {(0, _CUMSUM_WG, 0)}),
            (8, 37, 1, -1, {(0, _CUMSUM_WG, 0)}), (8, 37, 0, -1, {(0, _CUMSUM_WG, 0)}), (few, 1100, 1, -1, {few_route}),
            (4, 1200, 0, -1, {(1, None, 0)}), (4, 1103, 1, -1, {(1, None, 0)}), (4, 1103, 0, -1, {(1, None, 0)}),
            (4, n, 1, -1, {(0, _CUMSUM_SPLIT_WG, 1), (0, _CUMSUM_SPLIT_WG, 2)}),
            (4, n, 0, -1, {(0, _CUMSUM_SPLIT_WG, 1), (0, _CUMSUM_SPLIT_WG, 2)}),
            (16, 300, 0, 0, {(0, _cols_wg(ctx.device, 16 // per), 0)}), (64, 600, 0, 0, {(0, _cols_wg(ctx.device, 64 // per), 0)}), (7, 9, 0, 0, {(0, _CUMSUM_WG, 0)}),
            (3, 1200, 0, 0, {(1, None, 0)}), (3, n, 0, 0, {(0, _CUMSUM_SPLIT_WG, 1), (0, _CUMSUM_SPLIT_WG, 2)})]:
        # axis 0: the slices are the columns of a cols x rows array
        x = signed_zero_slices(dt, rows, cols, off)
        shape = (rows, cols) if axis == -1 else (cols, rows)
        if axis == 0:       # column r is slice r
            x = np.concatenate([x[:off], x[off:].reshape(rows, cols).T.reshape(-1)])
        ones = np.where(rng.random(x.shape) < 0.01, 0.0, 1.0) * np.where(rng.random(x.shape) < 0.5, -1.0, 1.0)
        ones[off:off + shape[1]] = -0.0 if axis == -1 else ones[off:off + shape[1]]   # a row of -0 products
        ones = ones.astype(dt)
        walks.clear()
        (cs, cp), _, _ = on_both_paths(monkeypatch, launches, lambda: (
            fv.cumsum(fv.asarray(x)[off:].reshape(shape), axis=axis),
            cumulative_prod_along(fv.asarray(ones)[off:].reshape(shape), axis)))
        assert set(walks) == route, (rows, cols, off, axis, walks)
        for got, want in ((cs, np.cumsum(x[off:].reshape(shape).astype(np.float64), axis)),
                          (cp, np.cumprod(ones[off:].reshape(shape).astype(np.float64), axis))):
            want = want.astype(dt)
            assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want)), (
                rows, cols, off, axis, np.argwhere(np.signbit(got) != np.signbit(want))[:5])
        assert np.signbit(cs).any()      # -0 results were there to get wrong
    # few slices side by side (COLS): workgroups enough to occupy the device where the invocations allow
    floor = getattr(ctx.device, "subgroup_size", 0) or _CUMSUM_SPLIT_WG
    assert -(-(64 // per) // _cols_wg(ctx.device, 64 // per)) >= min(parallel_groups(ctx.device), 64 // per // floor or 1)
    assert set(peels) == {0, 1}       # unit-stride slices offset from out's chunks, and not (PEEL)
    got = fv.cumsum(fv.asarray(np.array([-0.0], dt))).numpy()     # the plain case
    assert np.signbit(got).all() and np.signbit(np.cumsum(np.array([-0.0], dt))).all()


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
def test_cumsum_peel_same_bits(dt, monkeypatch):
    """PEEL (a walk's inner steps through whole-chunk loads and stores) takes the same steps as the general
    loop: forced off and on, the same bits on the serial walk, SCAN and the split, for slices of whole
    texels and not."""
    from fuelvk.ops.reduction import _CUMSUM_SPLIT_MIN
    ctx = runtime.get()
    force, orig = {}, ctx.launch
    monkeypatch.setattr(ctx, "launch", lambda v, *a, **k: orig(v, *a, **dict(k, **force)))
    per = 16 // np.dtype(dt).itemsize
    for rows, cols in [(300, 37), (300, 8 * per), (3, 1203), (3, 1200), (2, 2 * _CUMSUM_SPLIT_MIN + 5)]:
        x = rows_of(inputs(dt, rows, cols, 0, 1)[0], rows, cols, 0)
        got = {}
        for peel in (0, 1):
            force["PEEL"] = peel
            got[peel] = fv.cumsum(x, axis=-1).numpy()
        assert np.array_equal(got[0].view(np.uint8), got[1].view(np.uint8)), (rows, cols)
        close(got[1], np.cumsum(sl(x.numpy().reshape(-1), rows, cols, 0), -1), dt, scale=cols ** 0.5)
