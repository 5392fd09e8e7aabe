"""Differential audit of the array namespace against numpy / ml_dtypes (silent wrong answers).

Every input is also given as the views that take other kernel paths: a negative-step view, an
offset (unaligned) window, a transposed view and broadcast (stride-0) views. Exact ops are compared
bit for bit (signed zeros included; NaN as NaN), on both load paths (the `path` fixture). Sizes sit
on the kernels' boundaries (texel widths, subgroup and workgroup sizes, the row / split thresholds);
small integer-valued floats make any summation order exact, so reductions compare bit for bit too.
Documented differences from numpy are left out here and pinned where they are made (float
floor_divide's special cases: test_float_divmod; f8 saturation: test_casts; relu(-0) is -0 as torch).
"""
import itertools
import os

import ml_dtypes
import numpy as np
import pytest

import fuelvk as fv

BF16 = ml_dtypes.bfloat16
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float32, np.float16, BF16, np.float64]
# Each new (op, dtype, layout) is a pipeline (~0.5-1.5 s to create on a loaded lavapipe host): by default
# the layouts that take distinct kernel paths (contiguous, negative-step, broadcast, transposed);
# FUELVK_AUDIT_FULL=1 adds the offset window and the last-axis broadcast (the full audit).
FULL = os.environ.get("FUELVK_AUDIT_FULL") == "1"


def _rand(rng, shape, dt, special=True, small=False):
    """Random values; special: the dtype's edge values placed at random; small (floats): integers in
    [-3, 3] (any summation order exact) with a NaN and a -0."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
        if special and x.size:
            for v in [info.min, info.max, 0, 1, info.max // 2 + 1]:
                x.reshape(-1)[rng.integers(x.size)] = v
        return x
    if small:
        x = rng.integers(-3, 4, shape).astype(np.float64)
        if x.size > 2:
            x.reshape(-1)[rng.choice(x.size, 2, replace=False)] = [np.nan, -0.0]
        return x.astype(dt)
    x = rng.standard_normal(shape) * 3
    if special and x.size:
        for v in [np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -0.5, 1.5, 2.5, -2.5]:
            x.reshape(-1)[rng.integers(x.size)] = v
    return x.astype(dt)


def layouts(shape, dt, seed=0, special=True, small=False):
    """(label, numpy view, fuelvk view) of equal values, one per memory layout."""
    rng = np.random.default_rng(seed)
    out = []

    def gen(shape):
        return _rand(rng, shape, dt, special, small)
    x = gen(shape)
    out.append(("contig", x, fv.asarray(x)))
    if shape:
        big = gen(tuple(2 * s + 3 for s in shape))
        neg = tuple((slice(2 * s - 1, 0, -2) if s else slice(0, 0)) if i % 2 == 0 else slice(1, 1 + 2 * s, 2)
                    for i, s in enumerate(shape))
        win = tuple(slice(1, 1 + s) for s in shape)
        fbig = fv.asarray(big)
        out.append(("negstep", big[neg], fbig[neg]))
        if FULL:
            out.append(("offset", big[win], fbig[win]))
        if shape[0] > 1:
            row = gen((1,) + tuple(shape[1:]))
            out.append(("bcast0", np.broadcast_to(row, shape), fv.broadcast_to(fv.asarray(row), shape)))
    if len(shape) >= 2:
        t = gen(shape[::-1])
        out.append(("T", t.T, fv.asarray(t).T))
        col = gen(tuple(shape[:-1]) + (1,))
        if FULL:
            out.append(("bcast_last", np.broadcast_to(col, shape), fv.broadcast_to(fv.asarray(col), shape)))
    return out


def same(got, want, what=""):
    """Equal shape, dtype and bits (floats: NaN as NaN, -0 apart from +0)."""
    got = got.numpy() if isinstance(got, fv.Array) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind == "f" or want.dtype.name in ("bfloat16", "float8_e4m3fn"):
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~((g == w) & (np.signbit(g) == np.signbit(w)) | np.isnan(g) & np.isnan(w))
    elif want.dtype.kind == "c":
        bad = ~((got == want) | np.isnan(got) & np.isnan(want))
    else:
        bad = got != want
    assert not bad.any(), (what, np.argwhere(bad)[:4].tolist(), got[bad][:4], want[bad][:4])


# -- integers: wrap-around, division by zero, shifts past the width, min-int -----------------------
INT_BINARY = {"add": (fv.add, np.add), "subtract": (fv.subtract, np.subtract),
              "multiply": (fv.multiply, np.multiply), "floor_divide": (fv.floor_divide, np.floor_divide),
              "remainder": (fv.remainder, np.remainder), "maximum": (fv.maximum, np.maximum),
              "bitwise_xor": (fv.bitwise_xor, np.bitwise_xor), "less": (fv.less, np.less),
              "left_shift": (fv.bitwise_left_shift, np.left_shift),
              "right_shift": (fv.bitwise_right_shift, np.right_shift)}
INT_UNARY = {"negative": (fv.negative, np.negative), "abs": (fv.abs, np.abs), "sign": (fv.sign, np.sign),
             "square": (fv.square, np.square), "bitwise_invert": (fv.bitwise_invert, np.invert)}


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_ops_wrap_like_numpy(dt):
    """min int, max int, 0 and -1 placed in every operand; divisors include 0 (numpy: 0), shift counts
    run past the bit width (numpy: 0, or -1 for a negative value shifted right)."""
    bits = np.dtype(dt).itemsize * 8
    for i, ((la, a, fa), (lb, b, fb)) in enumerate(zip(layouts((5, 7), dt, 1), layouts((5, 7), dt, 2))):
        shifts = np.random.default_rng(i).integers(0, bits + 3, (5, 7)).astype(dt)
        for name, (f, g) in INT_BINARY.items():
            nb, fbb = (shifts, fv.asarray(shifts)) if "shift" in name else (b, fb)
            with np.errstate(all="ignore"):
                same(f(fa, fbb), g(a, nb), f"{name} {la}/{lb}")
        for name, (f, g) in INT_UNARY.items():
            same(f(fa), g(a), f"{name} {la}")


# -- floats: exact elementwise ops on NaN / inf / -0 / halves -----------------------------------------
FLOAT_EXACT_BINARY = {"maximum": (fv.maximum, np.maximum), "copysign": (fv.copysign, np.copysign),
                      "less_equal": (fv.less_equal, np.less_equal)}
FLOAT_EXACT_UNARY = {"negative": (fv.negative, np.negative), "round": (fv.round, np.round),
                     "signbit": (fv.signbit, np.signbit)}
if FULL:
    FLOAT_EXACT_BINARY.update(add=(fv.add, np.add), divide=(fv.divide, np.divide), minimum=(fv.minimum, np.minimum),
                              multiply=(fv.multiply, np.multiply), not_equal=(fv.not_equal, np.not_equal))
    FLOAT_EXACT_UNARY.update(abs=(fv.abs, np.abs), ceil=(fv.ceil, np.ceil), trunc=(fv.trunc, np.trunc),
                             floor=(fv.floor, np.floor), sqrt=(fv.sqrt, np.sqrt), isnan=(fv.isnan, np.isnan),
                             isfinite=(fv.isfinite, np.isfinite), square=(fv.square, np.square))


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_float_exact_ops_on_specials(dt):
    for (la, a, fa), (lb, b, fb) in zip(layouts((5, 7), dt, 3), layouts((5, 7), dt, 4)):
        for name, (f, g) in FLOAT_EXACT_BINARY.items():
            with np.errstate(all="ignore"):
                same(f(fa, fb), g(a, b), f"{name} {la}/{lb}")
        for name, (f, g) in FLOAT_EXACT_UNARY.items():
            with np.errstate(all="ignore"):
                same(f(fa), g(a), f"{name} {la}")
    z = np.array(-0.0, dt)                       # 0-d and 0-size operands
    same(fv.negative(fv.asarray(z)), np.negative(z))
    e = np.zeros((0, 3), dt)
    same(fv.add(fv.asarray(e), fv.asarray(e[:1] if e.shape[0] else e)), e + e)


# -- reductions: every axis combination, keepdims, every layout ------------------------------------
def _axes(nd):
    return [None, -1] + [c for r in range(1, nd + 1) for c in itertools.combinations(range(nd), r)]


@pytest.mark.parametrize("dt", [np.float32, BF16, np.int8, np.uint16, np.int64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_reductions_every_axis_and_layout(dt, path):
    """sum / prod / max / min / argmax / argmin / any / all over every axis tuple. Floats hold small
    integers (every summation order is exact); NaN and -0 are injected for the extrema."""
    for la, a, fa in layouts((3, 4, 5), dt, 6, small=True):
        assert fa.shape == a.shape
        for ax in _axes(3):
            for kd in (False, True):
                if dt == np.bool_:
                    same(fv.any(fa, axis=ax, keepdims=kd), np.any(a, axis=ax, keepdims=kd), f"any {la} {ax}")
                    same(fv.all(fa, axis=ax, keepdims=kd), np.all(a, axis=ax, keepdims=kd), f"all {la} {ax}")
                    same(fv.sum(fa, axis=ax, keepdims=kd), np.sum(a, axis=ax, keepdims=kd), f"sum {la} {ax}")
                    continue
                for name, f, g in [("max", fv.max, np.max), ("min", fv.min, np.min), ("sum", fv.sum, np.sum)]:
                    want = g(a, axis=ax, keepdims=kd)
                    if name == "sum" and np.dtype(dt).kind not in "iu":   # numpy's f32 rule: -0 + -0 sums to +0
                        want = np.sum(a.astype(np.float64), axis=ax, keepdims=kd).astype(dt)
                    same(f(fa, axis=ax, keepdims=kd), want, f"{name} {la} {ax} {kd}")
            for ax in [None] + list(range(3)):
                same(fv.argmax(fa, axis=ax), np.argmax(a, axis=ax), f"argmax {la} {ax}")
                same(fv.argmin(fa, axis=ax, keepdims=True), np.argmin(a, axis=ax, keepdims=True), f"argmin {la} {ax}")


BOUNDARY_SIZES = [1, 3, 4, 5, 7, 8, 9, 63, 64, 65, 127, 128, 129, 255, 256, 257, 4095, 4096, 4097, 8191, 8192,
                  8193, 16384, 16385]


@pytest.mark.parametrize("dt", [np.float32, BF16, np.int32], ids=lambda d: np.dtype(d).name)
def test_kernel_boundary_sizes(dt, path):
    """1-D and [rows, n] / [n, rows] at every size a kernel branches on, from an unaligned offset and
    through a negative-step view: elementwise, casts, sum / max / argmax / argmin, cumsum, sort."""
    rng = np.random.default_rng(7)
    for n in BOUNDARY_SIZES:
        big = rng.integers(-3, 4, 2 * n + 3).astype(dt)
        fbig = fv.asarray(big)
        for la, a, fa in [("off1", big[1:n + 1], fbig[1:n + 1]), ("neg", big[2 * n:0:-2], fbig[2 * n:0:-2])]:
            same(fv.add(fa, fa[::-1]), a + a[::-1], f"add {n} {la}")
            same(fv.astype(fa, np.int8), a.astype(np.int8), f"astype {n} {la}")
            same(fv.max(fa), np.max(a), f"max {n} {la}")
            same(fv.argmax(fa), np.argmax(a), f"argmax {n} {la}")
            same(fv.argmin(fa), np.argmin(a), f"argmin {n} {la}")
            if dt != BF16 or n <= 256:        # (bf16 sums of more elements round)
                s = np.sum(a)
                same(fv.sum(fa), s, f"sum {n} {la}")
            if dt == np.float32:
                same(fv.cumsum(fa), np.cumsum(a), f"cumsum {n} {la}")
            if n <= 4097:
                same(fv.argsort(fa, stable=True), np.argsort(a, kind="stable"), f"argsort {n} {la}")
        if n in (1, 9, 257, 4097, 8193, 16385):
            for rows in (2, 3):
                m = rng.integers(-3, 4, (rows, n)).astype(dt)
                for la, fm in [("rows", fv.asarray(m)), ("cols", fv.asarray(np.ascontiguousarray(m.T)).T)]:
                    for ax in (0, 1):
                        same(fv.argmax(fm, axis=ax), np.argmax(m, axis=ax), f"argmax {m.shape} {la} {ax}")
                        same(fv.max(fm, axis=ax), np.max(m, axis=ax), f"max {m.shape} {la} {ax}")
                        if dt != BF16:
                            same(fv.sum(fm, axis=ax), np.sum(m, axis=ax), f"sum {m.shape} {la} {ax}")
                        if dt == np.float32:
                            same(fv.cumsum(fm, axis=ax), np.cumsum(m, axis=ax), f"cumsum {m.shape} {la} {ax}")


# -- casts between every stored dtype ---------------------------------------------------------------
CAST_DTYPES = [np.float32, np.float16, BF16, ml_dtypes.float8_e4m3fn, np.float64, np.int8, np.uint8, np.int16,
               np.int32, np.uint32, np.int64, np.bool_]


@pytest.mark.parametrize("src", CAST_DTYPES, ids=lambda d: np.dtype(d).name)
def test_casts_every_pair_and_layout(src):
    """Round to nearest even at the halves, NaN / inf / -0 kept, integers wrap as numpy's astype;
    float -> int only where numpy defines it (finite, in range), -> f8 only within its range."""
    rng = np.random.default_rng(8)
    for dst in CAST_DTYPES:
        for la, a, fa in layouts((7, 9), src, 9):
            kind_s, kind_d = np.dtype(src).kind, np.dtype(dst).kind
            if kind_s not in "iub" and kind_d in "iu":
                with np.errstate(all="ignore"):
                    w = a.astype(np.float64)
                    info = np.iinfo(dst)
                    ok = np.isfinite(w) & (np.trunc(w) >= info.min) & (np.trunc(w) <= info.max)
                a = np.where(ok, a, np.zeros((), src))
                fa = fv.asarray(a)
            if dst == ml_dtypes.float8_e4m3fn:
                with np.errstate(all="ignore"):
                    a = np.where(np.abs(a.astype(np.float64)) > 464, np.zeros((), src), a)
                fa = fv.asarray(a)
            with np.errstate(all="ignore"):
                want = a.astype(dst)
            same(fv.astype(fa, dst), want, f"{np.dtype(src).name}->{np.dtype(dst).name} {la}")
    _ = rng


# -- movement, indexing, sorting ----------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, BF16, np.int8, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_movement_and_indexing_every_layout(dt, path):
    for shape in [(5, 7), (2, 129), (3, 4, 2)]:
        for la, a, fa in layouts(shape, dt, 10):
            for ax in range(-1, len(shape)):
                n = shape[ax]
                idx = np.random.default_rng(n).integers(-n, n, 5)
                same(fv.take(fa, fv.asarray(idx), axis=ax), np.take(a, idx, axis=ax), f"take {la} {ax}")
                ish = list(shape)
                ish[ax] = 3
                ti = np.random.default_rng(3).integers(0, n, ish)
                same(fv.take_along_axis(fa, fv.asarray(ti), axis=ax), np.take_along_axis(a, ti, axis=ax), "tal")
                same(fv.roll(fa, -2, axis=ax), np.roll(a, -2, axis=ax), f"roll {la} {ax}")
                same(fv.flip(fa, axis=ax), np.flip(a, axis=ax), f"flip {la} {ax}")
                same(fv.concat([fa, fa[::-1]], axis=ax), np.concatenate([a, a[::-1]], axis=ax), f"concat {la}")
                same(fv.stack([fa, fa], axis=ax), np.stack([a, a], axis=ax), f"stack {la} {ax}")
                same(fv.repeat(fa, 2, axis=ax), np.repeat(a, 2, axis=ax), f"repeat {la} {ax}")
                if dt != np.bool_:
                    same(fv.sort(fa, axis=ax, stable=True), np.sort(a, axis=ax, kind="stable"), f"sort {la}")
                    same(fv.argsort(fa, axis=ax, stable=True), np.argsort(a, axis=ax, kind="stable"), f"argsort {la}")
            pw = tuple((i % 2, (i + 1) % 3) for i in range(len(shape)))
            same(fv.pad(fa, pw), np.pad(a, pw), f"pad {la}")
            same(fv.tile(fa, (2, 1, 3)), np.tile(a, (2, 1, 3)), f"tile {la}")
            same(fv.reshape(fa, (-1,)), a.reshape(-1), f"reshape {la}")
            c = np.random.default_rng(11).integers(0, 2, shape).astype(bool)
            same(fv.where(fv.asarray(c), fa, fa[::-1]), np.where(c, a, a[::-1]), f"where {la}")
            same(fa[fv.asarray(c)], a[c], f"mask {la}")
            nz = np.nonzero(a)
            for g, w in zip(fv.nonzero(fa), nz):
                same(g, w.astype(np.int64), f"nonzero {la}")


@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_out_of_range_indices_raise(dt):
    a = fv.asarray(np.arange(30).astype(dt).reshape(6, 5))
    for key in [(6,), (-7,), (0, 5)]:
        with pytest.raises(fv.FuelVKIndexError):
            a[key]
    for bad in ([0, 6], [0, -7]):
        with pytest.raises(fv.FuelVKIndexError):
            fv.take(a, fv.asarray(np.array(bad)), axis=0).numpy()
    with pytest.raises((fv.FuelVKIndexError, fv.ShapeError)):
        a[fv.asarray(np.array([6]))].numpy()
    fv.synchronize()


def test_self_overlapping_assignments():
    """x[1:] = x[:-1], x[1:] += x[:-1] and x[...] = x.T read every source element before it is written
    (numpy's result, as if from a copy)."""
    rng = np.random.default_rng(12)
    for n in (5, 65, 4097):
        a = rng.integers(-50, 50, n).astype(np.float32)
        f = fv.asarray(a)
        f[1:] = f[:-1]
        w = a.copy()
        w[1:] = a[:-1]
        same(f, w)
        f = fv.asarray(a)
        v = f[:-1]
        v += f[1:]
        w = a.copy()
        w[:-1] += a[1:].copy()
        same(f, w)
    for m in (3, 17, 64):
        a = rng.integers(-50, 50, (m, m)).astype(np.int32)
        f = fv.asarray(a)
        f[...] = f.T
        same(f, a.T)


# -- complex truth values ---------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_complex_truth_values(dt):
    """A complex element is true when either part is nonzero (NaN included): any / all / logical_* /
    astype(bool) / comparisons with a Python scalar (these raised an untyped ValueError from an integer
    range check, or refused the cast); ordering a complex array is a DTypeError."""
    z = np.array([0j, complex(-0.0, -0.0), 1j, 2 + 0j, complex(np.nan, 0), complex(0, -1e-30)], dt)
    fz = fv.asarray(z)
    same(fv.astype(fz, fv.bool), z.astype(bool))
    same(fv.logical_not(fz), np.logical_not(z))
    same(fv.logical_or(fz[:2], fz[2:4]), np.logical_or(z[:2], z[2:4]))
    same(fv.logical_and(fz, fz[::-1]), np.logical_and(z, z[::-1]))
    same(fv.logical_xor(fz, fz[::-1]), np.logical_xor(z, z[::-1]))
    for part in (z[:2], z, z[2:]):
        same(fv.any(fv.asarray(part)), np.any(part))
        same(fv.all(fv.asarray(part)), np.all(part))
    zz = np.stack([z, z[::-1]])
    same(fv.any(fv.asarray(zz), axis=0), np.any(zz, axis=0))
    same(fv.all(fv.asarray(zz), axis=1, keepdims=True), np.all(zz, axis=1, keepdims=True))
    same(fv.count_nonzero(fz), np.asarray(np.count_nonzero(z), np.int64))
    same(fz == 2, z == 2)
    same(fv.not_equal(0, fz), z != 0)
    with pytest.raises(fv.DTypeError):
        fv.less(fz, 1)


def test_row_larger_than_a_tiny_binding_is_a_typed_error(device_limits):
    """A row split into binding-sized blocks of whole workgroup chunks: a binding smaller than one chunk
    (no conformant device has one) left zero columns per block (an untyped ValueError from range())."""
    device_limits(maxStorageBufferRange=4096)
    with pytest.raises(fv.FuelVKMemoryError, match="larger than one binding"):
        fv.sum(fv.asarray(np.ones(1000, np.int32))).numpy()


@pytest.mark.parametrize("name", ["log", "log2", "log10", "log1p", "asinh", "atanh", "acosh", "tanh"])
def test_f32_log_family_and_tanh_near_their_small_results(name):
    """float32 within 6 ulp of float64 numpy where results are small: log / log2 / log10 near 1 (the
    builtin log's error is absolute there: ~300-500 ulp at 0.9995), log1p / asinh / atanh / acosh near
    their zero (they inherited it: ~900-2300 ulp at 1e-4) and tanh near 0 (1 - e^-2x cancelled: ~3600 ulp
    at 1e-4); and over a wide random range."""
    rng = np.random.default_rng(13)
    small = np.array([1e-4, 3e-4, 1e-3, 6e-3, 0.03, 0.1, 0.2499, 0.25, 0.3, -1e-4, -0.01, 0.4], np.float32)
    x = np.concatenate([small, rng.uniform(-1, 1, 4000).astype(np.float32),
                        np.exp(rng.uniform(-20, 20, 4000)).astype(np.float32)])
    if name in ("log", "log2", "log10"):
        x = np.concatenate([1 + small[small > -0.5], np.float32(1) / (1 + np.abs(small)), np.abs(x)]).astype(np.float32)
    elif name == "acosh":
        x = (1 + np.abs(x)).astype(np.float32)
    np_name = {"asinh": "arcsinh", "atanh": "arctanh", "acosh": "arccosh"}.get(name, name)
    with np.errstate(all="ignore"):
        want = getattr(np, np_name)(x.astype(np.float64))
    got = getattr(fv, name)(fv.asarray(x)).numpy().astype(np.float64)
    ok = np.isfinite(want) & (np.abs(want) > 1e-37)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ulp = np.abs(got - want)[ok] / np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    assert ulp.max() <= 6, (name, ulp.max(), x[ok][ulp.argmax()])
