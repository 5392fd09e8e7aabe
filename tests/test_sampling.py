"""top_k / top_p / top_k_top_p sampling from probabilities against a float64 numpy oracle.

The oracle is the FlashInfer-Bench Definitions' reference written out in float64: top-k keeps the
first k of a stable descending sort and renormalizes; top-p keeps the sorted prefix whose exclusive
cumulative sum is <= p; p <= 0 is the argmax.  Frequencies over 100,000 seeded draws per row must
lie within 1% (absolute) of the oracle's distribution and within 5 standard errors; a token the
oracle excludes must never be drawn; samplers with a known mistake must fail the same check.
"""
import numpy as np
import pytest

import fuelvk as fv
from fuelvk.errors import DTypeError, ShapeError

V = 12
DRAWS = 100_000       # per base row
BATCH = 100_000       # rows per call (the base rows repeated)


def _rows():
    rng = np.random.default_rng(7)
    a = rng.dirichlet(np.ones(V))
    ties = np.array([0.2, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.02, 0.01, 0.0])   # ties, a zero
    skew = np.array([0.3, 0.25, 0.2, 0.15, 0.1] + [0.0] * (V - 5))
    flat = np.full(V, 1.0 / V)
    return np.stack([a, ties, skew, flat]).astype(np.float32)


PROBS = _rows()
TOP_K = np.array([3, 2, 2, 0], np.int32)            # 0: no top-k filter
TOP_P = np.array([0.6, 0.45, 0.5, 0.3], np.float32)


def oracle(probs, top_k, top_p):
    """[B, V] float64 distributions the reference samples from (one-hot for greedy rows)."""
    out = []
    V = probs.shape[1]
    for row, k, p in zip(probs.astype(np.float64), top_k, top_p):
        order = np.argsort(-row, kind="stable")
        if 0 < k < V:
            kept = np.zeros(V)
            kept[order[:k]] = row[order[:k]]
            row = kept / kept.sum()
        if p <= 0:
            row = np.eye(V)[np.argmax(row)]
        elif p < 1:
            vals = row[order]
            excl = np.cumsum(vals) - vals
            kept = np.zeros(V)
            keep = order[excl <= p]
            kept[keep] = row[keep]
            row = kept / kept.sum()
        out.append(row / row.sum())
    return np.stack(out)


def frequencies(sample, draws=DRAWS, seed=0):
    """Draw frequencies [B, V] of sample(probs, top_k, top_p, seed) over `draws` per base row."""
    b = len(PROBS)
    rep = min(BATCH // b, draws)
    big = [np.tile(a, (rep,) + (1,) * (a.ndim - 1)) for a in (PROBS, TOP_K, TOP_P)]
    counts = np.zeros((b, V))
    for call in range(draws // rep):
        s = sample(*big, seed=seed * 1000 + call)
        assert s.dtype == np.int64 and s.shape == (rep * b,)
        np.add.at(counts, (np.arange(rep * b) % b, s), 1)
    return counts / (draws // rep * rep)


def misfit(freq, want, draws=DRAWS):
    """Why freq does not fit want (None: it does): a token drawn the oracle excludes, an error over
    1% absolute or over 5 standard errors."""
    if ((want == 0) & (freq > 0)).any():
        r, t = np.argwhere((want == 0) & (freq > 0))[0]
        return f"row {r}: token {t} drawn (frequency {freq[r, t]:.4f}) but excluded"
    err = np.abs(freq - want)
    se = np.sqrt(want * (1 - want) / draws)
    if (err > 0.01).any() or (err > 5 * se + 1e-12).any():
        r, t = np.unravel_index(np.argmax(err - 5 * se), err.shape)
        return f"row {r}: token {t} frequency {freq[r, t]:.4f}, expected {want[r, t]:.4f}"
    return None


METHODS = {
    "top_k": (lambda p, k, tp, seed: fv.top_k_sampling_from_probs(p, k, seed=seed), (TOP_K, np.ones(4))),
    "top_p": (lambda p, k, tp, seed: fv.top_p_sampling_from_probs(p, tp, seed=seed), (np.zeros(4), TOP_P)),
    "top_k_top_p": (lambda p, k, tp, seed: fv.top_k_top_p_sampling_from_probs(p, k, tp, seed=seed),
                    (TOP_K, TOP_P)),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_frequencies_match_the_reference_at_the_1_percent_level(method):
    sample, (k, p) = METHODS[method]
    assert misfit(frequencies(sample), oracle(PROBS, k, p)) is None


def test_wrong_samplers_are_caught():
    """top_k_top_p without its top-p, with k + 1, and with top-p taken on the probs before the top-k
    renormalization: each fails the check that the right one passes."""
    want = oracle(PROBS, TOP_K, TOP_P)

    nucleus = oracle(PROBS, np.zeros(4), TOP_P) > 0        # top-p on the original probs

    def p_before_renorm(p, k, tp, seed):
        cut = np.where(np.tile(nucleus, (len(p) // 4, 1)), p, 0).astype(np.float32)
        return fv.top_k_sampling_from_probs(cut, k, seed=seed)
    wrong = {"no top-p": lambda p, k, tp, seed: fv.top_k_sampling_from_probs(p, k, seed=seed),
             "k + 1": lambda p, k, tp, seed: fv.top_k_top_p_sampling_from_probs(p, k + 1, tp, seed=seed),
             "top-p before renormalizing": p_before_renorm}
    for name, sample in wrong.items():
        assert misfit(frequencies(sample, draws=20_000), want, draws=20_000) is not None, name


def test_num_samples_draw_many_tokens_a_row_from_one_search():
    """num_samples = n: n independent draws a row (one cut search; each draw a lane, sub-block and
    token search) at the 1% level, on the invocation-per-row path (V = 12) and the workgroup-per-row
    one (1000 tokens, a greedy row: every draw its argmax); the first column of n = 1 is the single draw."""
    rng = np.random.default_rng(11)
    wide = rng.dirichlet(np.full(1000, 0.5), size=4).astype(np.float32)
    for probs, k, p in ((PROBS, TOP_K, TOP_P),
                        (wide, np.array([0, 40, 7, 0], np.int32), np.array([0.5, 0.9, 1.0, 0.0], np.float32))):
        s = fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=2, num_samples=DRAWS)
        assert s.dtype == np.int64 and s.shape == (4, DRAWS)
        freq = np.stack([np.bincount(r, minlength=probs.shape[1]) for r in s]) / DRAWS
        assert misfit(freq, oracle(probs, k, p)) is None
        one = fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=5, num_samples=1)
        assert one.shape == (4, 1) and (one[:, 0] == fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=5)).all()
    with pytest.raises(ShapeError, match="num_samples must be >= 1"):
        fv.top_k_sampling_from_probs(PROBS, 2, num_samples=0)
    with pytest.raises(DTypeError, match="num_samples must be an int"):
        fv.top_k_sampling_from_probs(PROBS, 2, num_samples=2.0)


def test_seeded_draws_repeat_and_seeds_differ():
    probs = np.tile(PROBS[:1], (64, 1))
    a = fv.top_p_sampling_from_probs(probs, 0.9, seed=3)
    assert (a == fv.top_p_sampling_from_probs(probs, 0.9, seed=3)).all()
    assert (a != fv.top_p_sampling_from_probs(probs, 0.9, seed=4)).any()
    assert (a != fv.top_p_sampling_from_probs(probs, 0.9)).any()      # unseeded: fresh draws


def test_greedy_single_token_and_device_arrays():
    """p <= 0 is the first argmax (ties: the lowest index), k = 1 and a tiny p keep one token; device
    inputs give a device int64 result."""
    probs = PROBS.copy()
    out = fv.top_k_top_p_sampling_from_probs(fv.asarray(probs), fv.asarray(np.array([0, 1, 0, 0], np.int32)),
                                             fv.asarray(np.array([0.0, 1.0, 1e-9, -1.0], np.float32)), seed=1)
    assert isinstance(out, fv.Array) and out.dtype == np.int64
    assert out.numpy().tolist() == [int(np.argmax(probs[0])), 0, 0, 0]


def test_rows_outside_the_unit_interval_take_the_unfused_counts():
    """The cut searches count with ceil(x - t), exact for x in [0, 1] and t < 1; a one-hot top-k row
    (its maximum 1.0 is probed) and an unnormalized top-p row (values over 1) take the heaviside
    passes instead: the one-hot row always gives its token, the top-p row keeps only its largest
    (sorted cdf 2, 3, 4: the reference removes all but the first for p = 0.5)."""
    hot = np.zeros(V, np.float32)
    hot[5] = 1.0
    big = np.zeros(V, np.float32)
    big[[2, 7, 9]] = [1.0, 2.0, 1.0]
    for seed in range(3):
        a = fv.top_k_sampling_from_probs(np.stack([hot, PROBS[0]]), np.array([2, 3], np.int32), seed=seed)
        assert a[0] == 5 and a[1] in np.argsort(-PROBS[0], kind="stable")[:3]
        b = fv.top_p_sampling_from_probs(np.stack([big, PROBS[0]]), np.array([0.5, 1e-9], np.float32), seed=seed)
        assert b.tolist() == [7, int(np.argmax(PROBS[0]))]


def test_full_vocabulary():
    """Llama 3's vocabulary (128,256 tokens, padded to 2^17 in the sort): samples stay in the top 50."""
    rng = np.random.default_rng(11)
    logits = rng.standard_normal((2, 128256)) * 3
    probs = (np.exp(logits - logits.max(1, keepdims=True)))
    probs = (probs / probs.sum(1, keepdims=True)).astype(np.float32)
    top = np.argsort(-probs, axis=1, kind="stable")[:, :50]
    for seed in range(3):
        s = fv.top_k_top_p_sampling_from_probs(probs, 50, 0.95, seed=seed)
        assert all(s[i] in top[i] for i in range(2))


def test_loop_budget_and_binding_windows(monkeypatch, device_limits):
    """The passes of a row run as several launches within a small loop budget (the row state kept on
    the device between them) and the rows in windows of one binding, both on the per-row-workgroup
    path (vocab > 256) and the invocation-per-row path: the same draws as one launch; a budget
    below one pass is UnsupportedError, a row over one binding FuelVKMemoryError."""
    from fuelvk import runtime
    from fuelvk.errors import FuelVKMemoryError, UnsupportedError
    from fuelvk.ops import sampling
    rng = np.random.default_rng(5)
    dev = runtime.get().device
    real_budget = dev.loop_budget                         # probed before the monkeypatch
    for v in (V, 1000):
        device_limits()
        monkeypatch.setattr(dev, "loop_budget", real_budget)
        probs = rng.dirichlet(np.full(v, 0.3), size=40).astype(np.float32)
        k = np.tile(np.array([3, 0, 7, 1, 0, 40, 2, 5], np.int32), 5)
        p = np.tile(np.array([0.6, 0.5, 1.0, 0.9, 0.0, 0.8, 0.3, 0.95], np.float32), 5)
        want = fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=9)
        n = 20 if v == V else 1500                        # over two DRAW launches (9 and 640 draws each)
        want_n = fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=9, num_samples=n)
        launches = []
        real = runtime.get().launch
        def spy(*a, launches=launches, real=real, **kw):
            launches.append(kw["passes"])
            return real(*a, **kw)
        monkeypatch.setattr(runtime.get(), "launch", spy)
        lanes = sampling._lanes(v)[1]
        one_pass = sampling.PASS_LOOP[0] * -(-v // lanes) + sampling.PASS_LOOP[1]
        monkeypatch.setattr(dev, "loop_budget", 2 * one_pass)
        device_limits(maxStorageBufferRange=v * 4 * 4 + 512)     # four rows a window (ends aligned out)
        got = fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=9)
        np.testing.assert_array_equal(got, want)
        assert launches == 10 * ([2] * -(-sampling.CUT_PASSES // 2) + [1]), launches
        # n draws a row: several DRAW passes (one a launch), the same draws as one launch
        del launches[:]
        np.testing.assert_array_equal(fv.top_k_top_p_sampling_from_probs(probs, k, p, seed=9, num_samples=n),
                                      want_n)
        plan = sampling._pass_plan("t", v, lanes, n)
        windows = 40          # one row a window: n int64 draws fill the binding
        assert n > plan[-1][1] * 2 and launches == windows * [passes for passes, _ in plan], launches
        monkeypatch.setattr(runtime.get(), "launch", real)
        monkeypatch.setattr(dev, "loop_budget", one_pass - 1)
        with pytest.raises(UnsupportedError, match="loop budget"):
            fv.top_k_sampling_from_probs(probs, 2)
        monkeypatch.setattr(dev, "loop_budget", None)
        device_limits(maxStorageBufferRange=v * 4 - 4)
        with pytest.raises(FuelVKMemoryError, match="one row"):
            fv.top_k_sampling_from_probs(probs, 2)


def test_empty_batch_and_bad_inputs():
    assert fv.top_k_sampling_from_probs(np.zeros((0, 5), np.float32), 2).shape == (0,)
    with pytest.raises(DTypeError, match="float32"):
        fv.top_k_sampling_from_probs(PROBS.astype(np.float64), 2)
    with pytest.raises(ShapeError, match=r"\[batch, vocab\]"):
        fv.top_k_sampling_from_probs(PROBS[0], 2)
    with pytest.raises(ShapeError, match="top_k has shape"):
        fv.top_k_sampling_from_probs(PROBS, np.array([1, 2]))
    with pytest.raises(DTypeError, match="top_k must be an integer"):
        fv.top_k_sampling_from_probs(PROBS, 2.5)
