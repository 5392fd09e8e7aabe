"""Recurrent state updates (ops/recurrent.py) against float64 torch references written from the
FlashInfer-Bench Definitions' references (mamba_ssu_decode, gdn_decode / gdn_mtp / gdn_prefill):
f32 / f16 / bf16 activations, shared and skipped state slots, state pools, empty sequences, views,
loop-budget windows, and the typed errors."""
import math

import ml_dtypes
import numpy as np
import pytest
import torch

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import DTypeError, FuelVKIndexError, ShapeError, UnsupportedError

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
rng = np.random.default_rng(19)


def rand(shape, dt=F32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dt)


def t64(x):
    return torch.tensor(np.asarray(x, np.float64))


def softplus(x):
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))


def close(got, want, dt, mag=None):
    """got (device or host) against float64 want: the dtype's rounding of the output plus f32 error
    of sums scaled by the output's magnitude (terms cancel)."""
    got = (got.numpy() if isinstance(got, fv.Array) else got).astype(np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    mag = float(np.abs(want).max(initial=1.0)) if mag is None else mag
    rtol = {F32: 1e-5, F16: 2e-3, BF16: 1.6e-2}[np.dtype(dt)]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * mag * 0.1 + 1e-6)


@pytest.fixture
def budget(monkeypatch):
    """budget(n): Device.loop_budget = n for this test (forces the launch windows)."""
    dev = runtime.get().device
    dev.loop_budget   # probe first, so that the monkeypatch restores the real value
    return lambda n: monkeypatch.setattr(dev, "loop_budget", n)


# -- mamba ------------------------------------------------------------------------------------------------

def mamba_ref(state, x, dt, A, B, C, D, dt_bias, slots):
    """The mamba_ssu_decode reference in float64; a state of a half dtype is rounded where the
    reference stores it (new_state[slot] = s.to(state.dtype)), y taken from the unrounded s."""
    sdt = np.asarray(state).dtype
    st = t64(state)
    x, dt, A, B, C, D, dt_bias = (t64(a) for a in (x, dt, A, B, C, D, dt_bias))
    nb, nh, _ = x.shape
    ratio = nh // B.shape[1]
    dtf = softplus(dt + dt_bias)
    da = torch.exp(A[None] * dtf[..., None])
    be, ce = B.repeat_interleave(ratio, dim=1), C.repeat_interleave(ratio, dim=1)
    dbx = (dtf * x)[..., None] * be[:, :, None, :]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for b in range(nb):
        slot = int(slots[b]) if slots is not None else b
        if slot < 0:
            continue
        s = st[slot] * da[b] + dbx[b]
        st[slot] = t64(s.numpy().astype(sdt)) if sdt != F32 else s
        out[b] = (s * ce[b][:, None, :]).sum(-1) + x[b] * D
    return out.numpy(), st.numpy()


def mamba_inputs(nb, nh, hd, ns, ng, cache, dt=F32, sdt=F32):
    return dict(state=rand((cache, nh, hd, ns), sdt), x=rand((nb, nh, hd), dt), dt=rand((nb, nh, hd), dt),
                A=-np.exp(rand((nh, hd, ns))), B=rand((nb, ng, ns), dt), C=rand((nb, ng, ns), dt),
                D=rand((nh, hd), dt), dt_bias=rand((nh, hd), dt, 0.5))


@pytest.mark.parametrize("dt,sdt", [(F32, F32), (BF16, BF16), (F16, F32), (BF16, F32)])
def test_mamba_shared_and_skipped_slots(dt, sdt):
    """A slot two requests share (the later reads the earlier's write), a skipped request (-1:
    zeros), untouched cache rows; heads in groups of 4; the given state is left as it was."""
    ins = mamba_inputs(5, 8, 6, 16, 2, 7, dt, sdt)
    slots = np.array([3, -1, 0, 3, 6], np.int32)
    before = ins["state"].copy()
    dev = {k: fv.asarray(v) for k, v in ins.items()}
    y, s = fv.mamba_selective_state_update(**dev, state_batch_indices=slots)
    wy, ws = mamba_ref(**ins, slots=slots)
    assert y.dtype == dt and s.dtype == sdt and s.shape == ins["state"].shape
    close(y, wy, dt)
    close(s, ws, sdt if sdt != F32 else dt)
    assert (y.numpy()[1] == 0).all()
    np.testing.assert_array_equal(s.numpy()[[1, 2, 4, 5]].view(np.uint8), before[[1, 2, 4, 5]].view(np.uint8))
    np.testing.assert_array_equal(dev["state"].numpy().view(np.uint8), before.view(np.uint8))


def test_mamba_without_indices_numpy_in_numpy_out_and_views():
    """No slots (request b is slot b); numpy inputs give numpy outputs; strided views and offsets are taken."""
    ins = mamba_inputs(3, 4, 5, 8, 4, 3)
    y, s = fv.mamba_selective_state_update(**ins)
    assert isinstance(y, np.ndarray) and isinstance(s, np.ndarray)
    wy, ws = mamba_ref(**ins, slots=None)
    close(y, wy, F32)
    close(s, ws, F32)
    # x as a transposed view, B as a slice of a wider array, A with an offset
    xt = fv.asarray(np.ascontiguousarray(ins["x"].transpose(0, 2, 1))).transpose(0, 2, 1)
    wide = fv.asarray(np.concatenate([ins["B"], rand(ins["B"].shape)], axis=2))[:, :, :8]
    a_big = fv.asarray(np.concatenate([rand((1, 5, 8)), ins["A"]]))[1:]
    st_off = fv.asarray(np.concatenate([rand((1, 4, 5, 8)), ins["state"]]))[1:]   # contiguous, offset
    y2, s2 = fv.mamba_selective_state_update(**{**ins, "x": xt, "B": wide, "A": a_big, "state": st_off})
    np.testing.assert_array_equal(y2.numpy(), y)
    np.testing.assert_array_equal(s2.numpy(), s)


def test_mamba_in_loop_budget_windows(budget):
    """A budget of 2 requests a launch: 5 requests in 3 launches, the shared slot still in order
    (dstate 6: the element-by-element path, not the 4-wide one)."""
    ins = mamba_inputs(5, 2, 3, 6, 1, 4)
    slots = np.array([1, 1, -1, 1, 0], np.int32)
    want = mamba_ref(**ins, slots=slots)
    budget(16 + 2 * 8)
    y, s = fv.mamba_selective_state_update(**ins, state_batch_indices=slots)
    close(y, want[0], F32)
    close(s, want[1], F32)


def test_mamba_empty_batch():
    ins = mamba_inputs(0, 2, 3, 4, 1, 2)
    y, s = fv.mamba_selective_state_update(**ins, state_batch_indices=np.zeros(0, np.int32))
    assert y.shape == (0, 2, 3)
    np.testing.assert_array_equal(s, ins["state"])
    ins = mamba_inputs(2, 2, 3, 4, 1, 2)                      # every request skipped: zeros, state kept
    y, s = fv.mamba_selective_state_update(**ins, state_batch_indices=np.array([-1, -1], np.int32))
    assert (y == 0).all()
    np.testing.assert_array_equal(s, ins["state"])


def test_mamba_errors():
    ins = mamba_inputs(2, 4, 3, 8, 2, 3)
    f = fv.mamba_selective_state_update
    with pytest.raises(FuelVKIndexError, match="slot 3"):
        f(**ins, state_batch_indices=np.array([0, 3], np.int32))
    with pytest.raises(ShapeError, match="without state_batch_indices"):
        f(**ins)
    with pytest.raises(DTypeError, match="state_batch_indices"):
        f(**ins, state_batch_indices=np.array([0.0, 1.0]))
    with pytest.raises(ShapeError, match="C has shape"):
        f(**{**ins, "C": ins["C"][:, :1]}, state_batch_indices=np.array([0, 1], np.int32))
    with pytest.raises(ShapeError, match="multiple of the 3 groups"):
        f(**{**ins, "B": rand((2, 3, 8)), "C": rand((2, 3, 8))}, state_batch_indices=np.array([0, 1], np.int32))
    with pytest.raises(DTypeError, match="dt must have x's dtype"):
        f(**{**ins, "dt": ins["dt"].astype(F16)}, state_batch_indices=np.array([0, 1], np.int32))
    with pytest.raises(DTypeError, match="state must be float32 or x's dtype"):
        f(**{**ins, "state": ins["state"].astype(F16)}, state_batch_indices=np.array([0, 1], np.int32))
    with pytest.raises(DTypeError, match="x must be float32, float16 or bfloat16"):
        f(**{k: v.astype(np.float64) for k, v in ins.items()}, state_batch_indices=np.array([0, 1], np.int32))


# -- gated delta rule ------------------------------------------------------------------------------------

def gdn_ref(q, k, v, state, A_log, a, dt_bias, b, scale, cu, rows=None):
    """The gdn references (k-last) in float64 over packed tokens: q / k [T, H, K], v [T, HV, V], a / b
    [T, HV]; sequence n the tokens cu[n] .. cu[n+1] from state row rows[n] (default n); an empty
    sequence's final state is zeros (gdn_prefill's reference).  Returns (out [T, HV, V], final
    states [N, HV, V, K])."""
    q, k, v, a, b, A_log, dt_bias = (t64(x) for x in (q, k, v, a, b, A_log, dt_bias))
    hv, vd, kd = v.shape[1], v.shape[2], q.shape[2]
    scale = 1 / math.sqrt(kd) if not scale else scale
    g = torch.exp(-torch.exp(A_log) * softplus(a + dt_bias))
    beta = torch.sigmoid(b)
    qe, ke = q.repeat_interleave(hv // q.shape[1], dim=1), k.repeat_interleave(hv // k.shape[1], dim=1)
    n = len(cu) - 1
    out = torch.zeros(v.shape, dtype=torch.float64)
    final = torch.zeros((n, hv, vd, kd), dtype=torch.float64)
    for i in range(n):
        if cu[i + 1] == cu[i]:
            continue
        r = i if rows is None else int(rows[i])
        s = t64(state[r]).transpose(-1, -2).clone() if state is not None else torch.zeros(hv, kd, vd, dtype=torch.float64)
        for t in range(cu[i], cu[i + 1]):
            old = g[t][:, None, None] * s
            old_v = torch.einsum("hk,hkv->hv", ke[t], old)
            new_v = beta[t][:, None] * v[t] + (1 - beta[t][:, None]) * old_v
            s = old - ke[t][:, :, None] * old_v[:, None, :] + ke[t][:, :, None] * new_v[:, None, :]
            out[t] = scale * torch.einsum("hk,hkv->hv", qe[t], s)
        final[i] = s.transpose(-1, -2)
    return out.numpy(), final.numpy()


def gdn_inputs(total, hq, hk, hv, kd, vd, dt=F32):
    """k scaled to unit-ish norm (as models l2-normalize it): the recurrence stays bounded."""
    return dict(q=rand((total, hq, kd), dt), k=rand((total, hk, kd), dt, 1 / math.sqrt(kd)),
                v=rand((total, hv, vd), dt), A_log=rand(hv, F32, 0.5), a=rand((total, hv), dt),
                dt_bias=rand(hv, F32, 0.5), b=rand((total, hv), dt))


@pytest.mark.parametrize("dt", [F32, F16, BF16])
def test_gdn_prefill_ragged_with_an_empty_sequence(dt):
    """Three sequences (the middle one empty: its final state is zeros), GVA (2 v heads a q head,
    4 a k head), V != K; a given initial state."""
    cu = np.array([0, 4, 4, 7])
    ins = gdn_inputs(7, 2, 1, 4, 8, 6, dt)
    state = rand((3, 4, 6, 8))
    out, s = fv.gated_delta_rule_prefill(**ins, state=state, scale=0.3, cu_seqlens=fv.asarray(cu))
    wo, ws = gdn_ref(**ins, state=state, scale=0.3, cu=cu)
    assert out.dtype == dt and s.dtype == F32
    close(out, wo, dt)
    close(s, ws, dt)
    assert (s[1] == 0).all()


def test_gdn_prefill_defaults_and_loop_budget_windows(budget):
    """cu_seqlens None (one sequence), state None (zeros), scale None (1 / sqrt(K)); then a budget of
    2 tokens a launch: sequences of 5, 1 and 0 tokens in 3 launches, the state carried."""
    ins = gdn_inputs(6, 1, 1, 2, 4, 3)
    out, s = fv.gated_delta_rule_prefill(**ins, state=None)
    wo, ws = gdn_ref(**ins, state=None, scale=None, cu=[0, 6])
    close(out, wo, F32)
    close(s, ws, F32)
    cu = np.array([0, 5, 6, 6], np.int64)
    state = rand((3, 2, 3, 4))
    wo, ws = gdn_ref(**ins, state=state, scale=None, cu=cu)
    budget(2 * 4 + 16 + 2 * (2 * 4 + 4))
    out, s = fv.gated_delta_rule_prefill(**ins, state=state, cu_seqlens=cu)
    close(out, wo, F32)
    close(s, ws, F32)


@pytest.mark.parametrize("dt", [F32, BF16])
def test_gdn_decode_one_token(dt):
    """gdn_decode: [B, 1, H, K] with its own state per batch; the given state untouched."""
    nb = 3
    ins = gdn_inputs(nb, 2, 2, 4, 16, 16, dt)
    state = rand((nb, 4, 16, 16))
    dev = {n: fv.asarray(x[:, None]) if x.ndim > 1 else fv.asarray(x) for n, x in ins.items()}
    out, s = fv.gated_delta_rule_decode(**dev, state=fv.asarray(state))
    wo, ws = gdn_ref(**ins, state=state, scale=None, cu=np.arange(nb + 1))
    assert out.shape == (nb, 1, 4, 16)
    close(out.numpy()[:, 0], wo, dt)
    close(s, ws, dt)


def test_gdn_mtp_state_pool():
    """gdn_mtp: B = 2 batches of T = 3 tokens from slots 3 and 0 of a pool of 4; the other slots
    keep their state; update_state=False returns no state (the mtp Definition's final_state is the
    unchanged pool)."""
    nb, t = 2, 3
    ins = gdn_inputs(nb * t, 1, 1, 2, 8, 4)
    pool = rand((4, 2, 4, 8))
    rows = np.array([3, 0], np.int32)
    shaped = {n: x.reshape(nb, t, *x.shape[1:]) if x.ndim > 1 else x for n, x in ins.items()}
    out, s = fv.gated_delta_rule_decode(**shaped, state=pool, scale=0.5, state_indices=rows)
    wo, ws = gdn_ref(**ins, state=pool, scale=0.5, cu=np.arange(nb + 1) * t, rows=rows)
    close(out.reshape(nb * t, 2, 4), wo, F32)
    close(s[rows], ws, F32)
    np.testing.assert_array_equal(s[[1, 2]], pool[[1, 2]])
    out2, none = fv.gated_delta_rule_decode(**shaped, state=pool, scale=0.5, state_indices=rows, update_state=False)
    assert none is None
    np.testing.assert_array_equal(out2, out)


def test_gdn_errors():
    ins = gdn_inputs(4, 2, 2, 4, 8, 8)
    f = fv.gated_delta_rule_prefill
    with pytest.raises(ShapeError, match="cu_seqlens must rise"):
        f(**ins, state=None, cu_seqlens=np.array([0, 3, 2, 4]))
    with pytest.raises(ShapeError, match="cu_seqlens must rise"):
        f(**ins, state=None, cu_seqlens=np.array([0, 3]))
    with pytest.raises(DTypeError, match="cu_seqlens"):
        f(**ins, state=None, cu_seqlens=np.array([0.0, 4.0]))
    with pytest.raises(ShapeError, match="state has shape"):
        f(**ins, state=rand((2, 4, 8, 8)))
    with pytest.raises(DTypeError, match="state must be float32"):
        f(**ins, state=rand((1, 4, 8, 8), F16))
    with pytest.raises(DTypeError, match="k must have q's dtype"):
        f(**{**ins, "k": ins["k"].astype(BF16)}, state=None)
    with pytest.raises(ShapeError, match="multiple of the 3 q heads"):
        f(**{**ins, "q": rand((4, 3, 8))}, state=None)
    with pytest.raises(UnsupportedError, match="head size 513"):
        f(**{**ins, "q": rand((4, 2, 513)), "k": rand((4, 2, 513))}, state=None)
    d = {n: x.reshape(2, 2, *x.shape[1:]) if x.ndim > 1 else x for n, x in ins.items()}
    g = fv.gated_delta_rule_decode
    with pytest.raises(FuelVKIndexError, match="state_indices must lie in 0 .. 2"):
        g(**d, state=rand((3, 4, 8, 8)), state_indices=np.array([0, 3]))
    with pytest.raises(ShapeError, match="slot twice"):
        g(**d, state=rand((3, 4, 8, 8)), state_indices=np.array([1, 1]))
    with pytest.raises(ShapeError, match="state must be given"):
        g(**d, state=None, state_indices=np.array([0, 1]))
    with pytest.raises(ShapeError, match="must start with q's batch"):
        g(**{**d, "v": d["v"][:1]}, state=None)


def test_gdn_mtp_kind_solution():
    """definitions/kinds.solve_gdn_mtp (the gdn_mtp Definitions: initial_state pool, indices, T > 1):
    the outputs of the reference; final_state the pool unchanged, as the reference returns it."""
    from fuelvk.definitions.kinds import solve_gdn_mtp
    nb, t = 2, 3
    ins = gdn_inputs(nb * t, 1, 1, 2, 8, 8, BF16)
    pool = rand((3, 2, 8, 8))
    rows = np.array([2, 0], np.int32)
    inputs = {n: torch.tensor(x.astype(np.float32)).to(torch.bfloat16).reshape(nb, t, *x.shape[1:])
              if x.ndim > 1 else torch.tensor(x) for n, x in ins.items()}
    inputs.update(initial_state=torch.tensor(pool), initial_state_indices=torch.tensor(rows), scale=0.0)
    out, final = solve_gdn_mtp(None, inputs)()
    wo, _ = gdn_ref(**ins, state=pool, scale=None, cu=np.arange(nb + 1) * t, rows=rows)
    close(out.reshape(nb * t, 2, 8), wo, BF16)
    np.testing.assert_array_equal(final, pool)


def test_mamba_cache_over_one_binding_runs_in_slot_windows(device_limits):
    """A state cache larger than one binding (here 4 KiB, one slot each) is updated window by window
    of slots, the shared slot still in request order and the skipped request zero; a slot larger
    than one binding is FuelVKMemoryError."""
    from fuelvk.errors import FuelVKMemoryError
    ins = mamba_inputs(5, 4, 8, 32, 2, 4)                     # 4 slots of 4 KiB
    slots = np.array([3, -1, 0, 3, 2], np.int32)
    want = mamba_ref(**ins, slots=slots)
    device_limits(maxStorageBufferRange=4096)
    y, s = fv.mamba_selective_state_update(**ins, state_batch_indices=slots)
    close(y, want[0], F32)
    close(s, want[1], F32)
    np.testing.assert_array_equal(s[1], ins["state"][1])
    big = mamba_inputs(1, 2, 8, 128, 1, 1)                    # one slot of 8 KiB
    with pytest.raises(FuelVKMemoryError, match="one state slot"):
        fv.mamba_selective_state_update(**big)


def test_gdn_states_over_one_binding_run_in_sequence_windows(device_limits):
    """States larger than one binding (here 4 KiB: one sequence's state each) run window by window of
    sequences, token windows inside each; a sequence's state over one binding is FuelVKMemoryError."""
    from fuelvk.errors import FuelVKMemoryError
    cu = np.array([0, 2, 2, 5])
    g = gdn_inputs(5, 1, 1, 2, 16, 32)                        # a state row set of 4 KiB per sequence
    state = rand((3, 2, 32, 16))
    want = gdn_ref(**g, state=state, scale=None, cu=cu)
    device_limits(maxStorageBufferRange=4096)
    out, s = fv.gated_delta_rule_prefill(**g, state=state, cu_seqlens=cu)
    close(out, want[0], F32)
    close(s, want[1], F32)
    big = gdn_inputs(1, 1, 1, 2, 32, 32)                      # 8 KiB for one sequence
    with pytest.raises(FuelVKMemoryError, match="one sequence's state"):
        fv.gated_delta_rule_prefill(**big, state=None)


def test_gdn_state_pool_over_one_binding_runs_in_slot_windows(device_limits, budget):
    """A gdn_mtp state pool larger than one binding (here 8 slots of 2 KiB, 4 KiB bindings: two slots
    a window) runs as launches over runs of sequences whose slots fit one window, token windows
    (a tiny loop budget) inside each: the slots far apart, adjacent, the last; the slots not named
    keep their state, update_state=False gives the same outputs; one slot over a binding is
    FuelVKMemoryError."""
    from fuelvk.errors import FuelVKMemoryError
    nb, t = 4, 3
    ins = gdn_inputs(nb * t, 1, 1, 2, 8, 32)                  # a state slot of 2 * 32 * 8 * 4 = 2 KiB
    pool = rand((8, 2, 32, 8))
    rows = np.array([7, 0, 1, 5], np.int32)
    shaped = {n: x.reshape(nb, t, *x.shape[1:]) if x.ndim > 1 else x for n, x in ins.items()}
    wo, ws = gdn_ref(**ins, state=pool, scale=0.5, cu=np.arange(nb + 1) * t, rows=rows)
    device_limits(maxStorageBufferRange=4096)
    budget(2 * 8 * 2 + 4 * 2 + 2 * 8 + 16)                   # two tokens a launch
    out, s = fv.gated_delta_rule_decode(**shaped, state=pool, scale=0.5, state_indices=rows)
    close(out.reshape(nb * t, 2, 32), wo, F32)
    close(s[rows], ws, F32)
    np.testing.assert_array_equal(s[[2, 3, 4, 6]], pool[[2, 3, 4, 6]])
    out2, none = fv.gated_delta_rule_decode(**shaped, state=pool, scale=0.5, state_indices=rows, update_state=False)
    assert none is None
    np.testing.assert_array_equal(out2, out)
    big = rand((2, 2, 64, 8))                                 # 4 KiB + 1 slot: 4 KiB each, over 4 KiB - 4
    device_limits(maxStorageBufferRange=4092)
    with pytest.raises(FuelVKMemoryError, match="one sequence's state"):
        fv.gated_delta_rule_decode(**{**shaped, "v": rand((nb, t, 2, 64))}, state=big, scale=0.5,
                                   state_indices=np.array([1, 0, 1, 0], np.int32), update_state=False)
