"""matmul / matmul_route: every route and dtype combination against a float64 numpy reference.

Error bound per element: f32 accumulation of K products (K * 2^-24 * (|A| @ |B|), doubled for
slack) plus the output dtype's rounding (rtol/atol of the per-dtype table).
"""
import json
import math
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.kernels import FAMILIES
from fuelvk.kernels import matmul as matmul_kernels
from fuelvk.ops import matmul as matmul_ops
from fuelvk.ops.matmul import matmul, matmul_route
from oracles import tol

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
COMBO_DTYPES = {"f32_f32_f32": (F32, F32, F32), "f32_bf16_f32": (F32, BF16, F32), "f16_f16_f32": (F16, F16, F32),
                "f16_f16_f16": (F16, F16, F16), "bf16_bf16_f32": (BF16, BF16, F32),
                "bf16_bf16_bf16": (BF16, BF16, BF16)}
SIZES = (1, 2, 3, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 255, 256, 257)
LAVAPIPE_ROUTES = ("matvec", "register_tiled", "tiled", "small")
ROOT = Path(__file__).resolve().parents[1]


def _np(x):
    return x.numpy() if isinstance(x, fv.Array) else np.asarray(x)


def check(got, a, b, out_dt, n_rep=1):
    """Compare with float64 numpy; a, b are the operands exactly as the device saw them."""
    a64, b64 = _np(a).astype(np.float64), _np(b).astype(np.float64)
    if n_rep > 1:
        b64 = np.repeat(b64, n_rep, axis=-3)
    want, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
    got = _np(got)
    assert got.dtype == out_dt and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    k = a64.shape[-1]
    rtol, atol = tol(out_dt)
    lim = 2 * k * 2.0 ** -24 * bound + rtol * np.abs(want) + atol
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= lim), f"max err {err.max():.3e}, worst excess at {np.unravel_index(np.argmax(err - lim), err.shape)}"


def rand(shape, dt, rng):
    return rng.uniform(-1, 1, size=shape).astype(dt)


def cycle_shapes(route):
    """Every SIZES value appears as M, N and K at least once (matvec: M = 1)."""
    n = len(SIZES)
    return [(1 if route == "matvec" else SIZES[i], SIZES[(i + 5) % n], SIZES[(i + 11) % n]) for i in range(n)]


@pytest.mark.parametrize("route", LAVAPIPE_ROUTES)
def test_size_list_f32(route):
    rng = np.random.default_rng(1)
    for M, N, K in cycle_shapes(route):
        a, b = rand((M, K), F32, rng), rand((K, N), F32, rng)
        check(matmul(a, b, route=route), a, b, F32)


@pytest.mark.parametrize("route", LAVAPIPE_ROUTES)
@pytest.mark.parametrize("combo", [c for c in matmul_kernels.COMBOS if c != "f32_f32_f32"])
def test_combos(route, combo):
    rng = np.random.default_rng(2)
    adt, bdt, cdt = COMBO_DTYPES[combo]
    out = None if cdt == adt else cdt
    # N % 4 == 0 takes the 4-wide loads of B (register tile / matvec), N % 4 != 0 the scalar ones;
    # matvec with a transposed B walks K (4-wide when K % 4 == 0).
    shapes = [(1, 65, 33), (1, 300, 17)] if route == "matvec" else [(3, 17, 31), (40, 64, 21), (2, 257, 129)]
    for M, N, K in shapes:
        a, b = rand((M, K), adt, rng), rand((K, N), bdt, rng)
        assert matmul_route(a, b, out, route=route) == route
        check(matmul(a, b, out, route=route), a, b, cdt)
    if route == "matvec":
        for N, K in [(24, 36), (9, 35)]:
            a, w = rand((1, K), adt, rng), fv.asarray(rand((N, K), bdt, rng))
            check(matmul(a, w.T, out, route=route), a, w.T, cdt)


@pytest.mark.parametrize("route", LAVAPIPE_ROUTES)
def test_views_batches_offsets(route):
    """Transposed, offset, flipped and broadcast operands read in place; broadcast batch dims."""
    rng = np.random.default_rng(3)
    M = 1 if route == "matvec" else 19
    big_a = fv.asarray(rand((3, 40, 50), F32, rng))
    big_b = fv.asarray(rand((60, 70), F32, rng))
    a_t = big_a[1, 5:5 + 23, 3:3 + M].T                 # (M, 23): transposed, offset
    b_t = big_b[7:7 + 37, 2:2 + 23].T                   # (23, 37): transposed, offset
    check(matmul(a_t, b_t, route=route), a_t, b_t, F32)
    b_flip = big_b[10:33, ::-2].flip(0)                 # negative strides on both axes
    check(matmul(a_t, b_flip, route=route), a_t, b_flip, F32)
    big_c = fv.asarray(rand((30, 72), F32, rng))
    for col0 in (4, 1):                                 # rows 4-aligned (4-wide loads) or not (scalar)
        b_rows = big_c[3:3 + 23, col0:col0 + 36]
        check(matmul(a_t, b_rows, route=route), a_t, b_rows, F32)
    a_bat = fv.asarray(rand((2, 1, M, 9), F32, rng))     # batch (2, 1) x (3,) -> (2, 3)
    b_bat = fv.asarray(rand((3, 9, 21), F32, rng))
    check(matmul(a_bat, b_bat, route=route), a_bat, b_bat, F32)
    a_bc = fv.asarray(rand((1, 9), F32, rng)).broadcast_to((M, 9))   # stride-0 rows
    check(matmul(a_bc, b_bat, route=route), a_bc, b_bat, F32)
    # Six batch dims whose strides do not collapse: looped over on the host.
    a6 = fv.asarray(rand((2, 2, 2, 2, M, 5), F32, rng)).transpose(3, 1, 2, 0, 4, 5)
    b6 = fv.asarray(rand((2, 1, 2, 1, 5, 6), F32, rng))
    check(matmul(a6, b6, route=route), a6, b6, F32)


@pytest.mark.parametrize("route", ["register_tiled", "tiled", "small"])
def test_gqa_n_rep(route):
    rng = np.random.default_rng(4)
    q = rand((2, 8, 5, 16), BF16, rng)                   # 8 query heads
    k_t = fv.asarray(rand((2, 2, 21, 16), BF16, rng)).swapaxes(-1, -2)  # 2 kv heads, K^T view
    got = matmul(fv.asarray(q), k_t, F32, n_rep=4, route=route)
    assert got.shape == (2, 8, 5, 21)
    check(got, q, k_t, F32, n_rep=4)


def test_gqa_decode_matvec():
    rng = np.random.default_rng(5)
    q = rand((4, 1, 32), F32, rng)
    kt = rand((2, 32, 40), F32, rng)
    assert matmul_route(q, kt, n_rep=2) == "matvec"
    check(matmul(q, kt, n_rep=2), q, kt, F32, n_rep=2)


def test_one_d_and_numpy_semantics():
    rng = np.random.default_rng(6)
    v, m, bat = rand(7, F32, rng), rand((7, 5), F32, rng), rand((3, 4, 7), F32, rng)
    for a, b in [(v, m), (m.T.copy(), v), (v, v), (bat, v), (v[:4].copy(), rand((2, 4, 3), F32, rng))]:
        got, want = matmul(a, b), np.matmul(a.astype(np.float64), b.astype(np.float64))
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    arr = matmul(fv.asarray(m.T), fv.asarray(m))
    assert isinstance(arr, fv.Array) and arr.shape == (5, 5)


def test_zero_sizes():
    rng = np.random.default_rng(7)
    assert matmul(np.zeros((0, 4), F32), np.zeros((4, 3), F32)).shape == (0, 3)
    assert matmul(np.zeros((2, 4), F32), np.zeros((4, 0), F32)).shape == (2, 0)
    assert matmul(np.zeros((0, 2, 4), F32), np.zeros((4, 3), F32)).shape == (0, 2, 3)
    for dt in (F32, F16, BF16):
        got = matmul(np.zeros((3, 0), dt), np.zeros((0, 5), dt))
        assert got.dtype == dt and got.shape == (3, 5) and not np.any(got.astype(np.float32))
    a, b = rand((1, 3), F32, rng), rand((3, 1), F32, rng)
    check(matmul(a, b), a, b, F32)


def test_nan_stays_in_its_row_and_column():
    """Clamped out-of-range loads must never leak into stored outputs (tails of every tile)."""
    rng = np.random.default_rng(8)
    for route in LAVAPIPE_ROUTES:
        M = 1 if route == "matvec" else 37
        a, b = rand((M, 45), F32, rng), rand((45, 70), F32, rng)
        a[-1, -1], b[-1, -1] = np.nan, np.inf
        got = matmul(a, b, route=route)
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(want)), route
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-4)


def test_route_picker_and_env(monkeypatch):
    f = np.zeros
    assert matmul_route(f((1, 64), F32), f((64, 32), F32)) == "matvec"
    assert matmul_route(f((64, 8), F32), f((8, 1), F32)) == "matvec"           # N == 1, transposed problem
    assert matmul_route(f((64, 8), F32), f((8, 1), BF16)) != "matvec"          # mixed: no transposed kernel
    assert matmul_route(f((5, 64), F32), f((64, 32), F32)) == "register_tiled"
    big = matmul_route(f((64, 64), F32), f((64, 64), F32))
    assert big == ("register_tiled" if fv.device_info()["type"] == "cpu" else "tiled")
    has_coop = "cooperative_matrix" in fv.device_info()["features"]
    assert (matmul_route(f((64, 64), F16), f((64, 64), F16)) == "coop") == has_coop   # coop where present
    monkeypatch.setenv("FUELVK_MATMUL_ROUTE", "small")
    assert matmul_route(f((5, 64), F32), f((64, 32), F32)) == "small"
    assert matmul_route(f((5, 64), F32), f((64, 32), F32), route="tiled") == "tiled"   # keyword wins
    monkeypatch.setenv("FUELVK_MATMUL_ROUTE", "auto")
    assert matmul_route(f((5, 64), F32), f((64, 32), F32)) == "register_tiled"
    assert fv.device_info()["routes"]["matmul"] == matmul_kernels.available_routes(fv.device_info()["features"])


def _specs(monkeypatch):
    """Specialization constants of every launch during the test, as dicts by their shader names."""
    ctx = runtime.get()
    seen, orig = [], ctx.launch

    def launch(v, groups, **args):
        names = ctx.pipelines.signature(v).spec_ids
        seen.append({n: x for n, x in args.items() if n in names})
        return orig(v, groups, **args)
    monkeypatch.setattr(ctx, "launch", launch)
    return seen


@pytest.mark.parametrize("combo", matmul_kernels.COMBOS)
def test_texel_load_paths(combo, monkeypatch):
    """matvec / register tile read A along K, B along N (its rows) or along K (x @ W.T) as 16-byte
    texels when every run is whole texels (unit stride; offset and the other strides multiples of the
    elements per texel), scalar loads otherwise; the register tile reads a transposed A along M
    (TEXA 2) when M is whole texels too. Each case checks the path its launch took and the
    result; K = 37 leaves a K % 8 tail, column counts leave partial column groups."""
    rng = np.random.default_rng(12)
    adt, bdt, cdt = COMBO_DTYPES[combo]
    out = None if cdt == adt else cdt
    pa, pb = 16 // adt.itemsize, 16 // bdt.itemsize        # elements per texel
    monkeypatch.setattr(matmul_ops, "share_a", lambda ctx, dtype: False)   # TEXA 3: test_shared_a_loads
    seen = _specs(monkeypatch)
    big_a = fv.asarray(rand((2, 9, 48), adt, rng))          # rows 48 apart: texel-aligned
    big_b = fv.asarray(rand((40, 5 * pb + 8), bdt, rng))
    big_w = fv.asarray(rand((3 * pb + 5, 48), bdt, rng))    # x @ W.T: W's rows run along K
    a, a_odd = big_a[0, :5, :37], big_a[0, :5, 1:38]        # aligned / offset by one element
    b_rows, b_odd = big_b[:37, :5 * pb], big_b[:37, 1:5 * pb - 2]
    w_t, w_odd = big_w[:, :37].T, big_w[:, 3:40].T
    cases = [(a, b_rows, (1, 1)), (a_odd, b_odd, (0, 0)), (a, w_t, (1, 2)), (a_odd, w_odd, (0, 0)),
             (a[:1], b_rows, (1, 1)), (a[:1], w_t, (1, 2)), (a_odd[:1], w_odd, (0, 0)),   # M = 1: matvec
             (big_a[:, :4, :37], b_rows, (1, 1)),                                       # batch stride 9 * 48
             (big_a[0, :5, :4 * pa].T, b_rows[:5], (2, 1)),       # A transposed (dY.T @ X): texels along M
             (big_a[0, :5, 1:4 * pa + 1].T, b_rows[:5], (0, 1)),  # ... offset by one element: scalar loads
             (big_a[0, :5, :4 * pa - 1].T, b_rows[:5], (0, 1))]   # ... M not whole texels: scalar loads
    for x, y, (ta, tb) in cases:
        seen.clear()
        route = "matvec" if x.shape[-2] == 1 else "register_tiled"   # auto may pick coop / tiled on GPUs
        check(matmul(x, y, out, route=route), x, y, cdt)
        assert [(s["TEXA"], s["TEXB"]) for s in seen] == [(ta, tb)], (x.shape, x.strides, y.strides, seen)


@pytest.mark.parametrize("combo", ["f32_f32_f32", "f32_bf16_f32", "bf16_bf16_bf16", "f16_f16_f16"])
def test_shared_a_loads(combo, monkeypatch):
    """The register tile's A texels along K split between the 8 lanes and handed out (TEXA 3, where the
    rows a lane holds is a multiple of the rows one load covers: 4 f32 / 8 half) give the same bits as
    every lane loading them (TEXA 1): whole and clamped row tiles, a K % 8 tail, batched operands with
    an offset; without a forced choice the launch takes the device's probed one (share_a)."""
    ctx = runtime.get()
    if matmul_ops._sg8(ctx.device) == 0:
        pytest.skip("subgroups narrower than 8 lanes: the register tile never shares A")
    rng = np.random.default_rng(31)
    adt, bdt, cdt = COMBO_DTYPES[combo]
    out = None if cdt == adt else cdt
    pa = 16 // adt.itemsize
    seen = _specs(monkeypatch)
    big_a = fv.asarray(rand((2, 70, 48), adt, rng))
    cases = [(big_a[0, :64, :40], rand((40, 48), bdt, rng)),          # 64 rows, K = 40
             (big_a[0, 3:70, 8:45], rand((37, 20), bdt, rng)),        # 67 rows (clamped), K % 8 tail, offset
             (big_a[:, 5:38, pa:pa + 16], rand((2, 16, 36), bdt, rng))]   # batched
    for x, y in cases:
        got = {}
        for share in (False, True):
            monkeypatch.setattr(matmul_ops, "share_a", lambda ctx, dtype, share=share: share)
            seen.clear()
            got[share] = _np(matmul(x, y, out, route="register_tiled"))
            want = {3} if share and seen[0]["TM"] % pa == 0 else {1}
            assert {s["TEXA"] for s in seen} == want, (combo, x.shape, share, seen)
        check(got[True], x, y, cdt)
        np.testing.assert_array_equal(got[True], got[False])
    monkeypatch.undo()
    probed = matmul_ops.share_a(ctx, adt)
    seen = _specs(monkeypatch)
    matmul(cases[0][0], cases[0][1], out, route="register_tiled")
    assert seen[0]["TEXA"] == (3 if probed and seen[0]["TM"] % pa == 0 else 1), (probed, seen)


def test_share_probe():
    """The shared-A probe times both load forms for an f32 and a 16-bit A; share_a follows it."""
    ctx = runtime.get()
    rec = matmul_ops._probe_share(ctx)
    assert set(rec) == {f"{w}_{f}_ms" for w in ("f32", "half") for f in ("direct", "shared")}
    assert all(v > 0 for v in rec.values()), rec
    assert isinstance(matmul_ops.share_a(ctx, F32), bool) and isinstance(matmul_ops.share_a(ctx, BF16), bool)


def test_share_probe_once_across_threads(monkeypatch):
    """Threads starting their first matmuls together probe once (the choice is per device)."""
    ctx = runtime.get()
    calls, real = [], matmul_ops._probe_share
    monkeypatch.setattr(matmul_ops, "_share", matmul_ops.weakref.WeakKeyDictionary())
    monkeypatch.setattr(matmul_ops, "cached_probe", lambda dev, stem, version, probe: dict(probe(), version=version))
    monkeypatch.setattr(matmul_ops, "_probe_share", lambda c: calls.append(1) or real(c))
    barrier = threading.Barrier(4)

    def first():
        barrier.wait()
        return matmul_ops.share_a(ctx, F32)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: first(), range(4)))
    assert len(calls) == 1 and len(set(got)) == 1


@pytest.mark.parametrize("combo", ["f32_f32_f32", "f32_bf16_f32", "bf16_bf16_f32", "f16_f16_f32"])
def test_vec4_c_stores(combo, monkeypatch):
    """The register tile (and matvec's one-row tile) stores C a 4-column quad at a time (CV4) when
    N % 4 == 0 (f32, and f16 / bf16 packed into 8 bytes), and element by element otherwise. Same bits as the element stores
    (the launch forced to CV4 = 0), partial row / column tiles (quads past N are not stored), batched
    outputs, split-K partials; within the f32 accumulation bound."""
    rng = np.random.default_rng(21)
    adt, bdt, _ = COMBO_DTYPES[combo]
    ctx = runtime.get()
    seen, orig, force = [], ctx.launch, {}

    def launch(v, groups, **args):
        if "CV4" in args:
            seen.append(args["CV4"])
            args.update(force)
        return orig(v, groups, **args)
    monkeypatch.setattr(ctx, "launch", launch)
    big_b = fv.asarray(rand((37, 140), bdt, rng))
    cases = [(rand((37, 37), adt, rng), big_b[:, :36], F32, 1),      # 36 columns: a partial column tile
             (rand((3, 5, 37), adt, rng), big_b[:, 4:136], F32, 1),  # batched, 132 columns of an offset view
             (rand((1, 37), adt, rng), big_b[:, :132], F32, 1),      # M = 1: matvec's one-row tile
             (rand((19, 37), adt, rng), big_b[:, :35], F32, 0)]      # N % 4 != 0: element stores
    if adt == bdt != F32:   # a half-type C: quads packed into 8 bytes
        cases += [(rand((19, 37), adt, rng), big_b[:, :36], adt, 1),
                  (rand((2, 19, 37), adt, rng), big_b[:, 4:136], adt, 1),
                  (rand((19, 37), adt, rng), big_b[:, :35], adt, 0)]
    for x, y, cdt, cv4 in cases:
        route = "matvec" if x.shape[-2] == 1 else "register_tiled"
        force.clear()
        seen.clear()
        got = matmul(x, y, cdt, route=route)
        check(got, x, y, cdt)
        assert seen and set(seen) == {cv4}, (x.shape, y.shape, cdt, seen)
        force["CV4"] = 0
        np.testing.assert_array_equal(_np(matmul(x, y, cdt, route=route)), _np(got))
    # split-K: the float32 partials (one K span per batch entry of the launch) take quads too
    monkeypatch.setattr(matmul_kernels, "KSPLIT_MIN_K", 64)
    monkeypatch.setattr(matmul_kernels, "KSPLIT_MIN_WORK", 0)
    monkeypatch.setattr(matmul_kernels, "parallel_groups", lambda dev: 8)
    x, y = rand((5, 300), adt, rng), rand((300, 20), bdt, rng)
    force.clear()
    seen.clear()
    check(matmul(x, y, F32, route="register_tiled"), x, y, F32)
    assert seen and set(seen) == {1}


def test_register_tile_picker():
    """The tile picker's cost model (ops.matmul._reg_tile) at a fixed core count: large products keep
    the 32 x 8 tile; the tiny Llama's 64-row products take tiles that give every core a workgroup and
    cover N = 640 without padded columns; narrow N puts fewer lane groups along N; every tile respects
    min_rows, the accumulator budget and covers the product."""
    from fuelvk.ops.matmul import _reg_tile
    pick = lambda M, N, lc=4, **kw: _reg_tile(M, N, lc, groups=kw.pop("groups", 2), **kw)
    assert pick(1024, 1024) == (32, 2, 8) and pick(1024, 1024, 8) == (32, 1, 8)
    assert pick(64, 256) == (16, 2, 4)              # 2 workgroups of 32 x 256 (was 2 of 32 x 4 per lane)
    assert pick(64, 640) == (8, 2, 2)               # 10 of 32 x 128: no padded columns (was 512 + 512)
    assert pick(64, 32, batch=4)[2] == 1            # N = 32 f32: one lane group along N
    assert pick(1, 4096, matvec=True) == (1, 2, 8)
    for M, N, lc, batch, groups, min_rows in ((3, 300, 4, 1, 2, 1), (640, 256, 4, 1, 2, 4), (70, 256, 8, 1, 4, 8),
                                               (5, 192, 8, 3, 128, 1), (4096, 14336, 8, 1, 16, 1)):
        tm, tnv, gn = pick(M, N, lc, batch=batch, groups=groups, min_rows=min_rows)
        c = lc * tnv
        assert tm in matmul_kernels.REG_TM and gn in matmul_kernels.REG_GN and tm >= min_rows
        assert tm * c <= matmul_kernels.REG_MAX_ACC and c <= max(lc, matmul_kernels.REG_LANE_TARGET)
    assert pick(64, 256, groups=128)[0] < 16        # a GPU-sized target: more, smaller workgroups


# Tiles the picker can return that the other tests' shapes do not all reach here: (TM, TNV, GN).
FORCED_TILES = [(4, 1, 1), (8, 2, 2), (8, 1, 4), (16, 2, 4), (32, 2, 8), (16, 1, 8)]


@pytest.mark.parametrize("combo, tile", [(c, t) for c in ("f32_f32_f32", "bf16_bf16_bf16") for t in FORCED_TILES
                                         if t[1] == 1 or c.startswith("f32")])   # half types: one column group
def test_register_tile_forced_tiles(combo, tile, monkeypatch):
    """Each tile shape, forced, on M / N / K that leave partial row, column and K tiles, batched, with
    A along K (texels), A transposed (texels along M where TM allows), x @ W.T (B along K) and offset
    views (scalar loads); results within the f32-accumulation bound of numpy's. A along K is read shared
    between the lanes (TEXA 3) where the device's probe chose it (Mesa 25 lavapipe: every tile here)."""
    from fuelvk.ops import matmul as mm
    tm = tile[0]
    monkeypatch.setattr(mm, "_reg_tile", lambda *a, **k: tile)
    rng = np.random.default_rng(16)
    adt, bdt, cdt = COMBO_DTYPES[combo]
    out = None if cdt == adt else cdt
    seen = _specs(monkeypatch)
    big_a = fv.asarray(rand((2, 40, 72), adt, rng))
    big_w = fv.asarray(rand((150, 72), bdt, rng))
    b = rand((2, 37, 133), bdt, rng)
    cases = [(big_a[:, :37, :37], b),                          # A along K, K % 8 tail, N partial
             (big_a[0, :37, :40].T, b[0, :37, :91]),           # A transposed: 40 rows along M
             (big_a[0, 3:36, :37], big_w[:131, :37].T),        # x @ W.T
             (big_a[1, 1:30, 1:38], big_w[1:100, 2:39].T)]     # offset by one: scalar loads
    for x, y in cases:
        check(matmul(x, y, out, route="register_tiled"), x, y, cdt)
    assert {(s["TM"], s["TNV"], s["GN"]) for s in seen} == {tile}
    texa = {s["TEXA"] for s in seen}
    per = 16 // adt.itemsize   # A elements per texel: the rows TEXA 2 and a TEXA 3 load take
    along_k = 3 if mm.share_a(runtime.get(), adt) and tm % per == 0 else 1   # shared A: the device's probe
    assert {0, along_k} <= texa and (2 in texa) == (tm % per == 0), texa


@pytest.mark.parametrize("route", ["register_tiled", "tiled", "small"])
def test_split_k(route, monkeypatch):
    """Few workgroups and a long K: K spans side by side in one launch (an extra batch dim), float32
    partials summed in a fixed order and rounded once. Thresholds lowered so small inputs split; a
    remainder span, transposed / offset / batched operands, half types in and out; same bits on a
    repeat; no split once the launch has as many workgroups as the device runs at once."""
    monkeypatch.setattr(matmul_kernels, "KSPLIT_MIN_K", 64)
    monkeypatch.setattr(matmul_kernels, "KSPLIT_MIN_WORK", 0)
    monkeypatch.setattr(matmul_kernels, "parallel_groups", lambda dev: 8)
    rng = np.random.default_rng(17)
    big = fv.asarray(rand((2, 310, 48), F32, rng))
    w = fv.asarray(rand((21, 310), F32, rng))
    cases = [(rand((5, 300), F32, rng), rand((300, 17), F32, rng), None),   # register tile: spans 80, 80, 80 + 60
             (big[0, 3:303, :8].T, rand((300, 9), F32, rng), None),          # A transposed (dW = X.T @ dY)
             (big[1, 1:301, 5:11].T, w[:, 2:302].T, None),                  # offset views, x @ W.T
             (rand((3, 4, 256), F32, rng), rand((256, 12), F32, rng), None),  # batched
             (rand((4, 520), BF16, rng), rand((520, 24), BF16, rng), None),    # bf16 -> bf16, rounded once
             (rand((4, 520), F16, rng), rand((520, 24), F16, rng), F32)]
    seen = []
    orig = runtime.get().launch

    def launch(v, groups, **args):
        if "sa_k" in args:   # matmul launches, not the partials' sum
            seen.append((args["batch"], args["K"]))
        return orig(v, groups, **args)
    monkeypatch.setattr(runtime.get(), "launch", launch)
    for x, y, out in cases:
        seen.clear()
        cdt = np.dtype(out) if out is not None else _np(x).dtype
        got = matmul(x, y, out, route=route)
        check(got, x, y, cdt)
        K, nb = _np(x).shape[-1], math.prod(_np(got).shape[:-2])
        assert all(k < K for _, k in seen) and sum(b * k for b, k in seen) == K * nb, (x.shape, seen)
        np.testing.assert_array_equal(_np(matmul(x, y, out, route=route)), _np(got))
    x3, y3 = rand((2, 2, 2, 3, 300), F32, rng), rand((300, 5), F32, rng)   # 3 batch dims: no room for spans
    monkeypatch.setattr(matmul_kernels, "parallel_groups", lambda dev: 64)
    seen.clear()
    check(matmul(x3, y3, route=route), x3, y3, F32)
    assert [k for _, k in seen] == [300]
    monkeypatch.setattr(matmul_kernels, "parallel_groups", lambda dev: 1)
    seen.clear()
    x, y = cases[0][:2]
    check(matmul(x, y, route=route), x, y, F32)
    assert seen == [(1, 300)]


def test_texel_limit_falls_back_to_scalar_loads(monkeypatch, device_limits):
    """Operands whose slot is over maxTexelBufferElements bind a stub texel view and take scalar loads."""
    rng = np.random.default_rng(13)
    a, b = fv.asarray(rand((3, 1000), F32, rng)), fv.asarray(rand((1000, 8), F32, rng))   # 750 / 500 texels
    device_limits(maxTexelBufferElements=100)
    seen = _specs(monkeypatch)
    for x in (a, a[:1]):
        check(matmul(x, b), x, b, F32)
    assert [(s["TEXA"], s["TEXB"]) for s in seen] == [(0, 0), (0, 0)]


def test_coop_gating_and_fallback():
    info = fv.device_info()
    a = np.ones((64, 64), F16)
    if "cooperative_matrix" in info["features"]:
        pytest.skip("device has cooperative matrix: covered by test_coop_on_device")
    assert "coop" not in info["routes"]["matmul"]
    with pytest.raises(fv.UnsupportedError, match="cooperative_matrix"):
        matmul(a, a, route="coop")
    with pytest.raises(fv.UnsupportedError, match="cooperative_matrix"):
        runtime.get().pipelines.get(FAMILIES["matmul_coop"].variants["f16_f16_f32"])
    got = matmul(a, a)                                   # the fallback route still answers
    assert got.dtype == F16 and np.all(got == 64)


def test_coop_spirv_declares_cooperative_matrix():
    manifest = json.loads((ROOT / "spv" / "manifest.json").read_text())["variants"]
    val = shutil.which("spirv-val")
    for tag, v in FAMILIES["matmul_coop"].variants.items():
        assert "cooperative_matrix" in v.features
        code = (ROOT / "spv" / manifest[v.id]["spv"]).read_bytes()
        words = np.frombuffer(code, "<u4")
        # OpCapability (opcode 17, 2 words) CooperativeMatrixKHR = 6022
        caps = {int(words[i + 1]) for i in range(5, len(words) - 1) if words[i] == (2 << 16 | 17)}
        assert 6022 in caps, f"{v.id} does not declare CooperativeMatrixKHR"
        if val:
            r = subprocess.run([val, "--target-env", "vulkan1.3", str(ROOT / "spv" / manifest[v.id]["spv"])],
                               capture_output=True, text=True)
            if "Invalid capability operand: 6022" in r.stderr:
                continue  # this spirv-val predates SPV_KHR_cooperative_matrix
            assert r.returncode == 0, r.stderr


@pytest.mark.skipif("cooperative_matrix" not in fv.device_info()["features"], reason="no VK_KHR_cooperative_matrix")
@pytest.mark.parametrize("combo", matmul_kernels.COOP_COMBOS)
def test_coop_on_device(combo):
    rng = np.random.default_rng(9)
    adt, bdt, cdt = COMBO_DTYPES[combo]
    for M, N, K in [(16, 16, 16), (64, 128, 48), (80, 16, 272)]:
        a, b = rand((M, K), adt, rng), rand((K, N), bdt, rng)
        got = matmul(a, b, None if cdt == adt else cdt, route="coop")
        a16, b16 = a.astype(np.float32).astype(F16), b.astype(np.float32).astype(F16)   # inputs pass through f16
        check(got, a16, b16, cdt)


def test_errors():
    z = np.zeros
    with pytest.raises(fv.DTypeError, match="accepted"):
        matmul(z((2, 3), F16), z((3, 2), F32))
    with pytest.raises(fv.DTypeError, match="float64"):
        matmul(z((2, 3)), z((3, 2)))
    with pytest.raises(fv.DTypeError):
        matmul(z((2, 3), F32), z((3, 2), F32), out_dtype=F16)
    with pytest.raises(fv.ShapeError, match="K=3.*K=4"):
        matmul(z((2, 3), F32), z((4, 2), F32))
    with pytest.raises(fv.ShapeError, match="at least 1 dim"):
        matmul(np.float32(1), z((3,), F32))
    with pytest.raises(fv.ShapeError, match="broadcast"):
        matmul(z((2, 2, 3), F32), z((3, 3, 2), F32))
    with pytest.raises(fv.ShapeError, match="n_rep"):
        matmul(z((2, 6, 2, 3), F32), z((2, 4, 3, 2), F32), n_rep=2)
    with pytest.raises(fv.ShapeError, match="matvec"):
        matmul(z((2, 3), F32), z((3, 2), F32), route="matvec")
    with pytest.raises(fv.UnsupportedError, match="unknown route"):
        matmul(z((2, 3), F32), z((3, 2), F32), route="fast")


def test_result_over_binding_limit_is_split(device_limits):
    """A result bigger than maxStorageBufferRange is computed in row/column blocks (tests/test_big_arrays.py
    covers the split paths; this is the broadcast-operand case that used to be refused)."""
    device_limits(maxStorageBufferRange=1 << 16)
    n = 200
    a = fv.asarray(np.ones((1, 8), F32)).broadcast_to((n, 8))
    b = fv.asarray(np.ones((8, 1), F32)).broadcast_to((8, n))
    assert np.array_equal(matmul(a, b).numpy(), np.full((n, n), 8, F32))


def test_operand_over_buffer_limit_is_a_typed_error():
    """An operand bigger than the largest buffer is refused when it is uploaded (numpy zeros: the host
    pages are never touched, so nothing big is allocated)."""
    limit = runtime.get().pool.max_buffer
    a, b = np.zeros((1, limit // 4 + 4), F32), np.zeros((limit // 4 + 4, 1), F32)
    with pytest.raises(fv.FuelVKMemoryError, match="maxBufferSize"):
        matmul(a, b)


def test_realistic_size():
    rng = np.random.default_rng(10)
    a, b = rand((192, 384), F32, rng), rand((384, 320), F32, rng)
    check(matmul(a, b), a, b, F32)
    w = rand((320, 384), BF16, rng)
    x = rand((1, 384), F32, rng)
    wt = fv.asarray(w).T                                  # x @ W^T, the decode hot path
    check(matmul(x, wt), x, wt, F32)


@pytest.mark.parametrize("op, env, accepted, pick", [
    ("matmul", "FUELVK_MATMUL_ROUTE", "matvec, register_tiled, tiled, small, coop, auto",
     lambda route: fv.matmul_route(np.zeros((2, 3), F32), np.zeros((3, 2), F32), route=route)),
    ("attention_route", "FUELVK_ATTENTION_ROUTE", "single, tiled, decode, auto",
     lambda route: fv.attention_route((1, 2, 3, 32), (1, 2, 5, 32), route=route)),
    ("qmatmul_route", "FUELVK_QMATMUL_ROUTE", "matvec, tiled, dequant, auto",
     lambda route: fv.qmatmul_route((2, 64), (4, 64), kind="q4_0", route=route)),
])
def test_unknown_route_is_one_typed_error(op, env, accepted, pick, monkeypatch):
    """matmul, attention and qmatmul resolve a forced route the same way (ops/_routes.py): an unknown
    name from route= or the environment is an UnsupportedError naming the op, the name, its source and
    the accepted routes; "auto" (any case) and "" leave the choice to the picker."""
    with pytest.raises(fv.UnsupportedError, match=rf"^{op}: unknown route 'fast' \(from route=\); accepted: "
                                                  rf"{accepted}$"):
        pick("fast")
    monkeypatch.setenv(env, "Fast")
    with pytest.raises(fv.UnsupportedError, match=rf"^{op}: unknown route 'fast' \(from {env}\)"):
        pick(None)
    auto = pick("auto")
    assert pick("AUTO") == pick("") == auto
    monkeypatch.setenv(env, "auto")
    assert pick(None) == auto
