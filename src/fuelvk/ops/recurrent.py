"""Recurrent state updates: Mamba2's selective state update (FlashInfer's
flashinfer.mamba.selective_state_update) and the gated delta rule of gated delta-net (FlashInfer's
gated_delta_rule_decode / gated_delta_rule_mtp / chunk_gated_delta_rule), each one kernel
(shaders/recurrent.comp) that does the whole update and output in one dispatch.

The semantics are the FlashInfer-Bench Definitions' references (mamba_ssu_decode_*, gdn_decode_*,
gdn_mtp_*, gdn_prefill_*): float32 arithmetic, per-head parameters read as float32, the state float32
(mamba: float32 or the activations' dtype), outputs in the activations' dtype.  The ops are
functional: they return the new state and leave the given one as it was.

Integer index inputs (state slots, cu_seqlens) are read on the host: they are checked (a slot past
the cache, a sequence running backwards are typed errors, never a read out of bounds) and fix the
launches.  Long token windows (gdn prefill) are split into launches within Device.loop_budget, the
state carried between them in the output state; states over one binding (maxStorageBufferRange) run
in windows of slots (mamba) or sequences (gdn; with a state pool, runs of sequences whose slots fit
one binding window).
"""
import math

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray
from ..errors import DTypeError, FuelVKIndexError, FuelVKMemoryError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.recurrent import GDN_LOOP, LOOP_FIXED, MAMBA_LOOP, RECURRENT_WG
from ._core import binding_limit, contiguous, device_args, new_like, result, windowed

__all__ = ["mamba_selective_state_update", "gated_delta_rule_decode", "gated_delta_rule_prefill"]

_TAGS = {_dt.float32: "f32", _dt.float16: "f16", _dt.bfloat16: "bf16"}
_FLOATS = "float32, float16 or bfloat16"
MAX_HEAD_SIZE = 512     # a gdn state row is held in registers: K floats per invocation


def _tag(op, name, x):
    if x.dtype not in _TAGS:
        raise DTypeError(f"{op}: {name} must be {_FLOATS}, got {x.dtype}")
    return _TAGS[x.dtype]


def _same_dtype(op, ref_name, ref, **others):
    for n, x in others.items():
        if x.dtype != ref.dtype:
            raise DTypeError(f"{op}: {n} must have {ref_name}'s dtype {ref.dtype}, got {x.dtype}")


def _f32(op, name, x):
    """A per-head parameter as a contiguous float32 array (float16 / bfloat16 upcast exactly)."""
    _tag(op, name, x)
    return contiguous(x if x.dtype == _dt.float32 else x.astype(_dt.float32))


def _shape(op, name, x, want):
    if tuple(x.shape) != tuple(want):
        raise ShapeError(f"{op}: {name} has shape {tuple(x.shape)}, expected {tuple(want)}")


def _host_ints(op, name, x, length):
    a = x.numpy() if isinstance(x, Array) else np.asarray(x)
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise DTypeError(f"{op}: {name} must be a 1-d integer array, got dtype {a.dtype} shape {a.shape}")
    if a.shape[0] != length:
        raise ShapeError(f"{op}: {name} has {a.shape[0]} entries, {length} expected")
    return a.astype(np.int64)


def _per_launch(op, per_item, fixed):
    """Loop-budget window: items (requests / tokens) one launch may walk, each costing per_item."""
    budget = runtime.get().device.loop_budget
    if budget is None:
        return None
    n = (budget - fixed) // per_item
    if n < 1:
        raise UnsupportedError(f"{op}: one step needs {per_item + fixed} loop iterations, over this device's "
                               f"loop budget of {budget}")
    return n


# -- Mamba2 selective state update -------------------------------------------------------------------------

def mamba_selective_state_update(state, x, dt, A, B, C, D, dt_bias, state_batch_indices=None):
    """Mamba2 selective state update (one decode token), as FlashInfer's selective_state_update with
    dt_softplus and dt_bias: state [cache, H, P, N] (float32 or x's dtype), x / dt [batch, H, P],
    A [H, P, N], B / C [batch, G, N] (H a multiple of G: head h reads group h // (H / G)), D / dt_bias
    [H, P]; x, dt, B, C one float dtype, A, D, dt_bias any float dtype (read as float32).
    Request b updates slot state_batch_indices[b] (default b; cache must then equal batch; -1 skips
    the request, whose output is zeros): s = state * exp(A dt') + dt' x B, dt' = softplus(dt +
    dt_bias); y = sum_n s C + x D.  Requests sharing a slot update it in order.
    Returns (output [batch, H, P] of x's dtype, new_state: a new array, the given state untouched)."""
    op = "mamba_selective_state_update"
    arrays, numpy_out = device_args(op, state, x, dt, A, B, C, D, dt_bias)
    state, x, dt, A, B, C, D, dt_bias = arrays
    tag = _tag(op, "x", x)
    _same_dtype(op, "x", x, dt=dt, B=B, C=C)
    if state.dtype not in (_dt.float32, x.dtype):
        raise DTypeError(f"{op}: state must be float32 or x's dtype {x.dtype}, got {state.dtype}")
    if x.ndim != 3 or state.ndim != 4 or B.ndim != 3:
        raise ShapeError(f"{op}: needs state [cache, H, P, N], x [batch, H, P], B [batch, G, N]; got state "
                         f"{state.shape}, x {x.shape}, B {B.shape}")
    nb, nh, hd = x.shape
    cache, ns = state.shape[0], state.shape[3]
    ng = B.shape[1]
    _shape(op, "state", state, (cache, nh, hd, ns))
    for name, arr, want in (("dt", dt, x.shape), ("A", A, (nh, hd, ns)), ("B", B, (nb, ng, ns)),
                            ("C", C, (nb, ng, ns)), ("D", D, (nh, hd)), ("dt_bias", dt_bias, (nh, hd))):
        _shape(op, name, arr, want)
    if ng == 0 or nh % ng:
        raise ShapeError(f"{op}: the {nh} heads must be a multiple of the {ng} groups of B / C")
    if state_batch_indices is None:
        if cache != nb:
            raise ShapeError(f"{op}: without state_batch_indices the state's {cache} slots must equal the "
                             f"batch of {nb} requests")
        slots = None
    else:
        slots = _host_ints(op, "state_batch_indices", state_batch_indices, nb)
        if slots.size and slots.max() >= cache:
            raise FuelVKIndexError(f"{op}: state_batch_indices holds slot {int(slots.max())}, past the "
                                   f"{cache} slots of the state (accepted: -1 to skip, 0 .. {cache - 1})")
    new_state = _fresh_copy(state)
    out = new_like((nb, nh, hd), x.dtype)
    if nb == 0 or nh * hd == 0:
        return _results((out, new_state), numpy_out)
    if ns == 0:
        raise ShapeError(f"{op}: dstate (the state's last dim) must be at least 1")
    x, dt, B, C = (contiguous(t) for t in (x, dt, B, C))
    A, D, dt_bias = (_f32(op, n, t) for n, t in (("A", A), ("D", D), ("dt_bias", dt_bias)))
    sl = asarray((slots if slots is not None else np.zeros(1)).astype(np.int32))
    ctx = runtime.get()
    per = _per_launch(op, MAMBA_LOOP[0] * ns + MAMBA_LOOP[1], LOOP_FIXED) or nb
    v = kernel("mamba_ssu", tag)
    used = np.unique(slots[slots >= 0]) if slots is not None else np.arange(nb)
    for w, (s0, s1) in enumerate(_slot_windows(op, new_state, used)):
        st = windowed(new_state[s0:s1])
        vec4 = int(all(n % 4 == 0 for n in (ns, st.offset, A.offset, B.offset, C.offset)))
        for b0 in range(0, nb, per):
            ctx.launch(v, ctx.groups(nh * -(-hd // RECURRENT_WG)), state=st, out=out, x=x, dt=dt, decay=A,
                       b_in=B, c_in=C, skip=D, dt_bias=dt_bias, slots=sl, STATE_F32=int(state.dtype == _dt.float32),
                       VEC4=vec4, n_heads=nh, head_dim=hd, dstate=ns, ratio=nh // ng, n_groups=ng, b0=b0,
                       b1=min(nb, b0 + per), has_slots=int(slots is not None), slot_lo=s0, slot_hi=s1,
                       zero_skipped=int(w == 0), off_state=st.offset, off_out=out.offset,
                       off_x=x.offset, off_dt=dt.offset, off_decay=A.offset, off_b=B.offset, off_c=C.offset,
                       off_skip=D.offset, off_dt_bias=dt_bias.offset, off_slots=sl.offset)
    return _results((out, new_state), numpy_out)


def _slot_windows(op, state, used):
    """[lo, hi) ranges of state slots, each within one binding, covering the sorted slots `used` (at
    least one range, so that skipped requests get their zero outputs)."""
    per_slot = max(1, state.nbytes // max(state.shape[0], 1))
    fit = binding_limit() // per_slot
    if fit < 1:
        raise FuelVKMemoryError(f"{op}: one state slot of {per_slot} bytes is larger than one binding "
                                f"(maxStorageBufferRange = {binding_limit()} bytes)")
    if len(used) == 0:
        return [(0, 0)]
    out, lo = [], int(used[0])
    for s in used:
        if s >= lo + fit:
            out.append((lo, lo + fit))
            lo = int(s)
    return out + [(lo, min(lo + fit, state.shape[0]))]


def _fresh_copy(x):
    """A contiguous copy of x: one transfer (vkCmdCopyBuffer, several times faster than a copy kernel on
    lavapipe) when x is contiguous, else fuelvk's copy."""
    if not x.is_contiguous or x.size == 0:
        return x.copy()
    out = new_like(tuple(x.shape), x.dtype)
    runtime.get().stream.copy(x.buffer, out.buffer, x.nbytes, x.offset * x.dtype.itemsize, 0)
    return out


def _results(outs, numpy_out):
    return tuple(None if o is None else result(o, numpy_out) for o in outs)


# -- gated delta rule ---------------------------------------------------------------------------------------

def _gdn(op, q, k, v, state, A_log, a, dt_bias, b, scale, cu, rows, update_state, numpy_out):
    """q / k [tokens, Hq / Hk, K], v [tokens, HV, V], a / b [tokens, HV] (device, checked), cu: host
    int64 sequence bounds [N + 1]; rows: host slots of the N sequences in state (None: row n)."""
    tag = _tag(op, "q", q)
    _same_dtype(op, "q", q, k=k, v=v, a=a, b=b)
    total, hq, kd = q.shape
    hk, hv, vd = k.shape[1], v.shape[1], v.shape[2]
    if k.shape[0] != total or v.shape[0] != total or k.shape[2] != kd:
        raise ShapeError(f"{op}: q, k, v must have the same tokens and q / k the same head size; got q {q.shape}, "
                         f"k {k.shape}, v {v.shape}")
    if min(hq, hk, hv) == 0 or hv % hq or hv % hk:
        raise ShapeError(f"{op}: the {hv} v heads must be a positive multiple of the {hq} q heads and the {hk} "
                         f"k heads")
    if not 1 <= kd <= MAX_HEAD_SIZE:
        raise UnsupportedError(f"{op}: head size {kd}; accepted 1 .. {MAX_HEAD_SIZE} (a state row is held "
                               f"in registers)")
    for name, arr in (("a", a), ("b", b)):
        _shape(op, name, arr, (total, hv))
    for name, arr in (("A_log", A_log), ("dt_bias", dt_bias)):
        _shape(op, name, arr, (hv,))
    n = len(cu) - 1
    pool = n if rows is None else state.shape[0]
    if state is not None:
        if state.dtype != _dt.float32:
            raise DTypeError(f"{op}: state must be float32, got {state.dtype}")
        _shape(op, "state", state, (pool, hv, vd, kd))
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(kd)
    out = new_like((total, hv, vd), q.dtype)
    if not update_state:
        new_state = new_like((n, hv, vd, kd), _dt.float32)   # the kernel's carry, not returned
    elif rows is not None:
        new_state = _fresh_copy(state)                              # the pool, its sequences' rows rewritten
    else:
        new_state = new_like((n, hv, vd, kd), _dt.float32)
    if n == 0 or vd == 0:
        return out, (new_state if update_state else None)
    q, k, v, a, b = (contiguous(t) for t in (q, k, v, a, b))
    A_log, dt_bias = _f32(op, "A_log", A_log), _f32(op, "dt_bias", dt_bias)
    st = contiguous(state) if state is not None else new_state   # (src 0: not read)
    cu_d = asarray(cu.astype(np.int32))
    per = _per_launch(op, GDN_LOOP[0] * kd + GDN_LOOP[1], 2 * kd + LOOP_FIXED)
    ctx = runtime.get()
    var = kernel("gated_delta_rule", tag)
    for n0, n1, lo, hi in _gdn_runs(op, n, rows, hv * vd * kd * 4, state.shape[0] if rows is not None else n):
        pool_out = rows is not None and update_state
        st_w = windowed(st[lo:hi] if rows is not None else st[n0:n1])
        new_w = windowed(new_state[lo:hi] if pool_out else new_state[n0:n1])
        rel = asarray(((rows[n0:n1] - lo) if rows is not None else np.zeros(1)).astype(np.int32))
        longest = int(np.max(np.diff(cu[n0:n1 + 1])))
        step = per or max(longest, 1)
        # (a zero-token q binds a one-element stub: new_like keeps at least one element)
        for t0 in range(0, max(longest, 1), step):
            src = 2 if t0 else (1 if state is not None else 0)
            ctx.launch(var, ctx.groups((n1 - n0) * hv * -(-vd // RECURRENT_WG)), out=out, q=q, k=k, v=v, a=a,
                       b=b, a_log=A_log, dt_bias=dt_bias, state_in=st_w, state_out=new_w, cu=cu_d, rows=rel,
                       K=kd, n_seq=n1 - n0, hq=hq, hk=hk, hv=hv, dv=vd, t0=t0, t1=t0 + step, src=src,
                       rows_in=int(rows is not None), rows_out=int(pool_out),
                       scale=float(scale), off_out=out.offset, off_q=q.offset, off_k=k.offset, off_v=v.offset,
                       off_a=a.offset, off_b=b.offset, off_a_log=A_log.offset, off_dt_bias=dt_bias.offset,
                       off_state_in=st_w.offset, off_state_out=new_w.offset, off_cu=cu_d.offset + n0,
                       off_rows=rel.offset)
    return out, (new_state if update_state else None)


def _gdn_runs(op, n, rows, per_state, slots):
    """(n0, n1, lo, hi) launches of the sequences n0 .. n1 - 1, each within one binding: sequences
    n0 .. n1 - 1 of the state and the carry, and with a pool (rows: host slot per sequence) slots
    lo .. hi - 1 holding every slot of the run (the launch reads rows - lo)."""
    fit = binding_limit() // per_state
    if fit < 1:
        raise FuelVKMemoryError(f"{op}: one sequence's state ({per_state} bytes) is larger than one binding "
                                f"(maxStorageBufferRange = {binding_limit()} bytes)")
    runs, n0 = [], 0
    while n0 < n:
        n1, lo, top = n0 + 1, (int(rows[n0]) if rows is not None else n0), (int(rows[n0]) if rows is not None else n0)
        while n1 < n and n1 - n0 < fit and (rows is None or max(top, rows[n1]) - min(lo, rows[n1]) < fit):
            if rows is not None:
                lo, top = min(lo, int(rows[n1])), max(top, int(rows[n1]))
            n1 += 1
        runs.append((n0, n1, lo, min(slots, lo + fit) if rows is not None else n1))
        n0 = n1
    return runs


def _gdn_operands(op, lead, q, k, v, a, b, A_log, dt_bias, state):
    """The gated delta-net operands on the device, their ranks checked: q / k / v [*lead, H, D], a / b
    [*lead, HV] (lead: "B, T" or "T"); the state uploaded when given."""
    (q, k, v, a, b, A_log, dt_bias), numpy_out = device_args(op, q, k, v, a, b, A_log, dt_bias)
    if state is not None:
        (state,), _ = device_args(op, state)
    r = len(lead.split(","))
    if q.ndim != r + 2 or k.ndim != r + 2 or v.ndim != r + 2 or a.ndim != r + 1 or b.ndim != r + 1:
        raise ShapeError(f"{op}: needs q / k / v [{lead}, H, D] and a / b [{lead}, HV]; got q {q.shape}, "
                         f"k {k.shape}, v {v.shape}, a {a.shape}, b {b.shape}")
    return q, k, v, a, b, A_log, dt_bias, state, numpy_out


def gated_delta_rule_decode(q, k, v, state, A_log, a, dt_bias, b, scale=None, state_indices=None, *,
                            update_state=True):
    """Gated delta-net decode (T = 1) or multi-token verification (T > 1), k-last state, as FlashInfer's
    gated_delta_rule_decode / gated_delta_rule_mtp: q / k [B, T, Hq / Hk, K], v [B, T, HV, V], a / b
    [B, T, HV] (one float dtype), A_log / dt_bias [HV] (read as float32), state [P, HV, V, K] float32
    or None (zeros; then P = B).  Batch b starts from state[state_indices[b]] (default b, P = B) and
    steps its T tokens: g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b), old = g s,
    old_v = k old, s = old + k (beta v + (1 - beta) old_v - old_v), out = scale q s (scale None or
    0: 1 / sqrt(K)).  Returns (output [B, T, HV, V] of q's dtype, new_state: the state with each
    batch's slot replaced by its final state, float32; None when update_state is False)."""
    op = "gated_delta_rule_decode"
    q, k, v, a, b, A_log, dt_bias, state, numpy_out = _gdn_operands(op, "B, T", q, k, v, a, b, A_log, dt_bias, state)
    nb, t = q.shape[:2]
    for name, arr in (("k", k), ("v", v), ("a", a), ("b", b)):
        if tuple(arr.shape[:2]) != (nb, t):
            raise ShapeError(f"{op}: {name} {arr.shape} must start with q's batch and tokens ({nb}, {t})")
    if t == 0:
        raise ShapeError(f"{op}: seq_len (q's dim 1) must be at least 1")
    rows = None
    if state_indices is not None:
        if state is None:
            raise ShapeError(f"{op}: state_indices index a state pool; state must be given with them")
        rows = _host_ints(op, "state_indices", state_indices, nb)
        if rows.size and (rows.min() < 0 or rows.max() >= state.shape[0]):
            raise FuelVKIndexError(f"{op}: state_indices must lie in 0 .. {state.shape[0] - 1} (the state "
                                   f"pool), got {int(rows.min())} .. {int(rows.max())}")
        if update_state and len(np.unique(rows)) != nb:
            raise ShapeError(f"{op}: state_indices name a slot twice; each batch must own its slot when the "
                             f"state is updated")
    cu = np.arange(nb + 1, dtype=np.int64) * t
    flat = [contiguous(x).reshape(nb * t, *x.shape[2:]) for x in (q, k, v, a, b)]
    out, new_state = _gdn(op, *flat[:3], state, A_log, flat[3], dt_bias, flat[4], scale, cu, rows,
                          update_state, numpy_out)
    return _results((out.reshape(nb, t, *out.shape[1:]), new_state), numpy_out)


def gated_delta_rule_prefill(q, k, v, state, A_log, a, dt_bias, b, scale=None, cu_seqlens=None):
    """Gated delta-net prefill over packed sequences (FlashInfer-Bench's gdn_prefill reference; FlashInfer's
    chunk_gated_delta_rule computes the same recurrence by chunks): q / k [T, Hq / Hk, K], v [T, HV, V],
    a / b [T, HV], sequence n the tokens cu_seqlens[n] .. cu_seqlens[n + 1] - 1 (default: one
    sequence of all T), state [N, HV, V, K] float32 or None (zeros).  Each sequence steps its tokens
    as gated_delta_rule_decode does.  Returns (output [T, HV, V] of q's dtype, new_state [N, HV, V, K]
    float32: each sequence's final state; an empty sequence's is zeros, as the reference leaves it)."""
    op = "gated_delta_rule_prefill"
    q, k, v, a, b, A_log, dt_bias, state, numpy_out = _gdn_operands(op, "T", q, k, v, a, b, A_log, dt_bias, state)
    total = q.shape[0]
    if cu_seqlens is None:
        cu = np.array([0, total], np.int64)
    else:
        c = cu_seqlens.numpy() if isinstance(cu_seqlens, Array) else np.asarray(cu_seqlens)
        cu = _host_ints(op, "cu_seqlens", c, c.shape[0] if c.ndim == 1 else -1)
        if cu.size == 0 or cu[0] != 0 or cu[-1] != total or (np.diff(cu) < 0).any():
            raise ShapeError(f"{op}: cu_seqlens must rise from 0 to the {total} tokens (non-decreasing), got "
                             f"{cu.tolist() if cu.size <= 16 else cu.shape}")
    out, new_state = _gdn(op, q, k, v, state, A_log, a, dt_bias, b, scale, cu, None, True, numpy_out)
    return _results((out, new_state), numpy_out)


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare  # noqa: E402

_F32 = np.dtype(np.float32)


def _mamba_rule(state, x, dt, A, B, C, D, dt_bias, state_batch_indices=None):
    return Meta(tuple(x.shape), x.dtype), Meta(tuple(state.shape), state.dtype)


def _decode_rule(q, k, v, state, A_log, a, dt_bias, b, scale=None, state_indices=None, *, update_state=True):
    rows = state.shape[0] if state is not None else q.shape[0]
    new = Meta((rows, v.shape[2], v.shape[3], q.shape[3]), _F32) if update_state else None
    return Meta(tuple(q.shape[:2]) + tuple(v.shape[2:]), q.dtype), new


def _prefill_rule(q, k, v, state, A_log, a, dt_bias, b, scale=None, cu_seqlens=None):
    n = state.shape[0] if state is not None else (cu_seqlens.shape[0] - 1 if cu_seqlens is not None else 1)
    return Meta((q.shape[0], v.shape[1], v.shape[2]), q.dtype), Meta((n, v.shape[1], v.shape[2], q.shape[2]), _F32)


# FlashInfer-Bench references (plain torch; the exporter upcasts floating inputs to float32 first).
_SOFTPLUS = '''
def _softplus(x):
    """torch's softplus (beta 1, threshold 20)."""
    return torch.where(x > 20.0, x, torch.log1p(torch.exp(x)))


def _gdn_step(s, q, k, v, g, beta, scale):
    """One token for every head: s [H, K, V], q / k [H, K], v [H, V], g / beta [H]."""
    old = g[:, None, None] * s
    old_v = torch.einsum("hk,hkv->hv", k, old)
    new_v = beta[:, None] * v + (1 - beta[:, None]) * old_v
    s = old - k[:, :, None] * old_v[:, None, :] + k[:, :, None] * new_v[:, None, :]
    return s, scale * torch.einsum("hk,hkv->hv", q, s)
'''
_MAMBA_REF = '''\
dt_f = _softplus(dt + dt_bias)
d_a = torch.exp(A[None] * dt_f[..., None])
ratio = x.shape[1] // B.shape[1]
b_exp, c_exp = B.repeat_interleave(ratio, dim=1), C.repeat_interleave(ratio, dim=1)
db_x = (dt_f * x)[..., None] * b_exp[:, :, None, :]
new_state = state.clone()
output = torch.zeros(x.shape, dtype=torch.float32)
for i in range(x.shape[0]):
    slot = i if state_batch_indices is None else int(state_batch_indices[i])
    if slot < 0:
        continue
    s = new_state[slot] * d_a[i] + db_x[i]
    new_state[slot] = s
    output[i] = (s * c_exp[i][:, None, :]).sum(-1) + x[i] * D'''
_GATES = '''\
g = torch.exp(-torch.exp(A_log) * _softplus(a + dt_bias))
beta = torch.sigmoid(b)
sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None or scale == 0.0 else scale
'''
_DECODE_REF = _GATES + '''\
hv, vd = v.shape[2], v.shape[3]
qe, ke = q.repeat_interleave(hv // q.shape[2], dim=2), k.repeat_interleave(hv // k.shape[2], dim=2)
new_state = state.clone()
output = torch.zeros(q.shape[:2] + (hv, vd), dtype=torch.float32)
for i in range(q.shape[0]):
    r = i if state_indices is None else int(state_indices[i])
    s = state[r].transpose(-1, -2)
    for t in range(q.shape[1]):
        s, output[i, t] = _gdn_step(s, qe[i, t], ke[i, t], v[i, t], g[i, t], beta[i, t], sc)
    new_state[r] = s.transpose(-1, -2)
if not update_state:
    new_state = None'''
_PREFILL_REF = _GATES + '''\
hv, vd = v.shape[1], v.shape[2]
cu = [0, q.shape[0]] if cu_seqlens is None else [int(c) for c in cu_seqlens]
qe, ke = q.repeat_interleave(hv // q.shape[1], dim=1), k.repeat_interleave(hv // k.shape[1], dim=1)
new_state = torch.zeros(len(cu) - 1, hv, vd, q.shape[-1], dtype=torch.float32)
output = torch.zeros(q.shape[0], hv, vd, dtype=torch.float32)
for n in range(len(cu) - 1):
    if cu[n + 1] <= cu[n]:
        continue   # an empty sequence: its final state stays zeros
    s = state[n].transpose(-1, -2)
    for t in range(cu[n], cu[n + 1]):
        s, output[t] = _gdn_step(s, qe[t], ke[t], v[t], g[t], beta[t], sc)
    new_state[n] = s.transpose(-1, -2)'''

declare(
    OpDef("mamba_selective_state_update", mamba_selective_state_update, _mamba_rule,
          reference=(_SOFTPLUS, _MAMBA_REF), export={"var_dims": ("R", "C_s")},
          schema="(Tensor state, Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor D, Tensor dt_bias, "
                 "Tensor? state_batch_indices=None) -> (Tensor, Tensor)"),
    OpDef("gated_delta_rule_decode", gated_delta_rule_decode, _decode_rule,
          reference=(_SOFTPLUS, _DECODE_REF), export={"var_dims": ("B", "P")},
          # (update_state=False, whose state output is None, is left to the Python op)
          schema="(Tensor q, Tensor k, Tensor v, Tensor? state, Tensor A_log, Tensor a, Tensor dt_bias, Tensor b, "
                 "float? scale=None, Tensor? state_indices=None) -> (Tensor, Tensor)"),
    OpDef("gated_delta_rule_prefill", gated_delta_rule_prefill, _prefill_rule,
          reference=(_SOFTPLUS, _PREFILL_REF), export={"var_dims": ("L",)},
          schema="(Tensor q, Tensor k, Tensor v, Tensor? state, Tensor A_log, Tensor a, Tensor dt_bias, Tensor b, "
                 "float? scale=None, Tensor? cu_seqlens=None) -> (Tensor, Tensor)"),
)
