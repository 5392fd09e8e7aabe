"""+-inf and NaN through every reduction, scan, norm and softmax (numpy / torch semantics).

Each case is a stack of rows, one per pattern (PATTERNS: a finite row, one +inf, one -inf, one NaN,
both infinities, same-sign values whose sum overflows, all -inf (a fully masked row); the order-free
ops also get alternating +-big, the norms values whose squares overflow), reduced along the last
axis and along axis 0 of the transposed stack (the norms, last-dim only, get the transposed stack as
a strided view instead). Lengths: 1, odd, more than one workgroup, more than the long-row split (the
~65,535-iteration loop budget on lavapipe, chunked reduce passes, cumsum's workgroup scan), and
once 1M (f32).

Oracle contract (fuelvk's): f16/bf16/f32 accumulate in f32, f64 in f64, and each result is rounded
once to the input dtype. The oracle computes the op in that accumulator dtype and rounds once --
numpy for sum/mean/max/min/argmax/argmin/cumsum; torch CPU for softmax (+ backward) and the norms,
whose forward formulas are written out in torch ops (_rms, _ln: see why there) and whose backward is
torch autograd of them -- i.e. torch's float32 opmath for f16/bf16. Finite fillers of the sums are
small integers, so every finite sum is exact in any order; overflow rows are same-sign, so they
overflow in every summation order. The non-finite pattern (NaN, +inf, -inf positions) must match
exactly; finite entries within the per-dtype tolerance table, atol scaled per row.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from oracles import FLOATS, TOL, TRANS_TOL

IDS = [str(d) for d in FLOATS]
INF, NAN = np.inf, np.nan
# "overflow" rows: BIG * U(0.9, 1), so any sum of two overflows (f16: once rounded to f16); the
# norms' "square_overflow" rows: BIG_SQ * U(0.9, 1), whose squares overflow the accumulator.
BIG = {np.dtype(np.float32): 3e38, np.dtype(np.float16): 6e4, np.dtype(ml_dtypes.bfloat16): 3e38,
       np.dtype(np.float64): 1e308}
BIG_SQ = {np.dtype(np.float32): 1e20, np.dtype(np.float16): 6e4, np.dtype(ml_dtypes.bfloat16): 1e20,
          np.dtype(np.float64): 1e160}
PATTERNS = ("finite", "posinf", "neginf", "nan", "both", "overflow", "all_neginf")
LENGTHS = (1, 7, 1000, 70001)
EPS = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # the oracles' inf - inf


def acc(dt):
    return np.float64 if np.dtype(dt) == np.float64 else np.float32


def stack(dt, n, patterns, filler, seed=0):
    """Rows (len(patterns), n) of dtype dt: filler values with each pattern's non-finite entries."""
    rng = np.random.default_rng(seed + n)
    u = rng.uniform(0.9, 1.0, n)
    big, big_sq = BIG[np.dtype(dt)] * u, BIG_SQ[np.dtype(dt)] * u
    rows = []
    for pat in patterns:
        r = (rng.integers(0, 4, n).astype(np.float64) if filler == "int" else rng.uniform(-2, 2, n)
             if filler == "signed" else rng.uniform(0.5, 1.0, n))
        p, q = n // 3, (2 * n) // 3
        if pat == "posinf":
            r[q] = INF
        elif pat == "neginf":
            r[p] = -INF
        elif pat == "nan":
            r[q] = NAN
        elif pat == "both":
            r[p], r[-1] = INF, -INF   # the same place when n == 1: -inf
        elif pat == "overflow":
            r[:] = big
        elif pat == "square_overflow":
            r[:] = big_sq
        elif pat == "all_neginf":
            r[:] = -INF
        elif pat == "spread":
            r[:] = big
            r[1::2] *= -1
        rows.append(r)
    return np.stack(rows).astype(dt)


def check(got, want, dt, table=TOL, scale=1.0):
    """Exact NaN/+inf/-inf positions; finite entries within the table (atol scaled by each row's
    largest finite magnitude, so an overflow row does not loosen the others)."""
    got = got.numpy() if isinstance(got, fv.Array) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    for name, f in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        bad = np.argwhere(f(g) != f(w))
        assert bad.size == 0, (f"{name} pattern differs at {len(bad)} places, first {bad[:4].tolist()}: "
                               f"got {[g[tuple(i)] for i in bad[:4]]} want {[w[tuple(i)] for i in bad[:4]]}")
    fin = np.isfinite(w)
    r, a = table[np.dtype(dt)]
    aw = np.where(fin, np.abs(w), 0.0)
    mag = np.maximum(1.0, aw.max(-1, keepdims=True) if w.ndim == 2 else aw)
    err = np.where(fin, np.abs(g - w), 0.0)
    bad = np.argwhere(err > r * 2 * scale * aw + a * 4 * scale * mag)
    assert bad.size == 0, (f"{len(bad)} finite values differ, first {bad[:4].tolist()}: "
                           f"got {[g[tuple(i)] for i in bad[:4]]} want {[w[tuple(i)] for i in bad[:4]]}")


def rounded(ref, dt):
    """An accumulator-dtype reference (numpy or torch) rounded once to dt."""
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    return ref.astype(dt)


# -- the ops ----------------------------------------------------------------------------------------
# Each op: (filler, extra patterns, tolerance table or None for exact, case). case(dev, rows, dt, axis,
# weight) returns ([fuelvk outputs], [oracle outputs]), both in the (rows, n) stack's layout; dev is
# the stack on the device (axis -1) or its transpose (axis 0).

def _t(r, grad=False):
    return torch.tensor(r, requires_grad=grad)


def _stack_layout(got, axis):
    got = got.numpy()
    return got.T if axis == 0 and got.ndim == 2 else got


def _numpy_op(fv_fn, np_fn, exact=False):
    """Reductions and cumsum against numpy in the accumulator dtype (exact: index results)."""
    def case(dev, rows, dt, axis, weight):
        want = np_fn(rows.astype(acc(dt)), axis=-1)
        return [_stack_layout(fv_fn(dev, axis=axis), axis)], [want if exact else rounded(want, dt)]
    return case


def _softmax(dev, rows, dt, axis, weight):
    want = torch.softmax(_t(rows.astype(acc(dt))), -1)
    return [_stack_layout(fv.softmax(dev, axis=axis), axis)], [rounded(want, dt)]


def _softmax_backward(dev, rows, dt, axis, weight):
    """grad = the pattern rows; y positive in [0.5, 1), so y * grad keeps grad's non-finite pattern."""
    y = np.random.default_rng(7).uniform(0.5, 1.0, rows.shape).astype(dt)
    yd = fv.asarray(np.ascontiguousarray(y.T)) if axis == 0 else fv.asarray(y)
    yt, gt = _t(y.astype(acc(dt))), _t(rows.astype(acc(dt)))
    want = torch._softmax_backward_data(gt, yt, -1, yt.dtype)
    return [_stack_layout(fv.softmax_backward(yd, dev, axis=axis), axis)], [rounded(want, dt)]


def _rms(x, w):
    """F.rms_norm's formula, with x * x: autograd of F.rms_norm's x.pow(2) forms 2 * x, which
    overflows for |x| > max / 2 and turns the (zero) gradient of an overflowing row into NaN."""
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS)
    return y if w is None else y * w


def _ln(x, w):
    """LayerNorm by its two-pass definition (fuelvk's contract). Not F.layer_norm: torch's CPU kernel
    takes the variance in one pass, E[x^2] - E[x]^2, so in f32 a finite row with |x| > 1.8e19 gives
    NaN there (inf - inf), where the two-pass result is finite."""
    d = x - x.mean(-1, keepdim=True)
    y = d * torch.rsqrt((d * d).mean(-1, keepdim=True) + EPS)
    return y if w is None else y * w


def _norm(fn, ref, backward):
    """Norms (last dim only: axis 0 hands them the transposed stack as a strided view). Backward:
    dx, and dweight with a weight, against torch autograd of `ref` in the accumulator dtype."""
    def case(dev, rows, dt, axis, weight):
        x = dev.T if axis == 0 else dev
        a, n = acc(dt), rows.shape[-1]
        xt = _t(rows.astype(a), backward)
        if not backward:
            return [fn(x, eps=EPS).numpy()], [rounded(ref(xt, None), dt)]
        g = np.random.default_rng(11).uniform(-1, 1, rows.shape).astype(dt)
        wt = _t(np.ones(n, a), True) if weight else None
        ref(xt, wt).backward(_t(g.astype(a)))
        out = fn(x, fv.asarray(g), eps=EPS, weight=fv.asarray(np.ones(n, dt)) if weight else None)
        got = [o.numpy() for o in out if o is not None] if isinstance(out, tuple) else [out.numpy()]
        return got, [rounded(xt.grad, dt)] + ([rounded(wt.grad, dt)] if weight else [])
    return case


SPREAD, SQ = ("spread",), ("square_overflow",)
OPS = {
    "sum": ("int", (), TOL, _numpy_op(fv.sum, np.sum)),
    "mean": ("int", (), TOL, _numpy_op(fv.mean, np.mean)),
    "max": ("int", SPREAD, TOL, _numpy_op(fv.max, np.max)),
    "min": ("int", SPREAD, TOL, _numpy_op(fv.min, np.min)),
    "argmax": ("int", SPREAD, None, _numpy_op(fv.argmax, np.argmax, exact=True)),
    "argmin": ("int", SPREAD, None, _numpy_op(fv.argmin, np.argmin, exact=True)),
    "cumsum": ("int", (), TOL, _numpy_op(fv.cumsum, np.cumsum)),
    "softmax": ("signed", SPREAD, TRANS_TOL, _softmax),
    "softmax_backward": ("pos", (), TOL, _softmax_backward),
    "rms_norm": ("signed", SQ, TOL, _norm(fv.rms_norm, _rms, False)),
    "layer_norm": ("signed", SQ, TOL, _norm(fv.layer_norm, _ln, False)),
    "rms_norm_backward": ("signed", SQ, TOL, _norm(fv.rms_norm_backward, _rms, True)),
    "layer_norm_backward": ("signed", SQ, TOL, _norm(fv.layer_norm_backward, _ln, True)),
}


def run_case(op, dt, n, axis, patterns=None, weight=True):
    dt = np.dtype(dt)
    filler, extra, table, case = OPS[op]
    rows = stack(dt, n, patterns or PATTERNS + extra, filler)
    dev = fv.asarray(np.ascontiguousarray(rows.T) if axis == 0 else rows)
    got, want = case(dev, rows, dt, axis, weight)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if table is None:
            np.testing.assert_array_equal(g, w)
        else:
            check(g, w, dt, table, scale=1 if op in ("sum", "mean", "max", "min", "cumsum") else 2)


@pytest.mark.parametrize("axis", [-1, 0], ids=["last", "first"])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
@pytest.mark.parametrize("op", list(OPS))
def test_nonfinite(op, dt, n, axis):
    run_case(op, dt, n, axis)


@pytest.mark.parametrize("op", list(OPS))
def test_nonfinite_1m(op):
    """1M-element rows that the long-row paths (chunk partials, workgroup scans) must carry through."""
    # dx only: the weight-gradient pass over 1M columns takes ~30 s on lavapipe (70001 tests it).
    run_case(op, np.float32, 1 << 20, -1, patterns=("neginf", "both", "overflow"), weight=False)


def test_issue_examples():
    """The reports in issue 14, verbatim."""
    assert fv.sum(np.r_[np.float32(-np.inf), np.ones(255, np.float32)]) == -np.inf
    np.testing.assert_array_equal(fv.cumsum(np.float32([1, np.inf, 1])), [1, np.inf, np.inf])
    assert fv.sum(np.full(600, 3e38, np.float32)) == np.inf
