"""torch.ops.fuelvk.*: opcheck for every registered op, torch CPU as the oracle, gradcheck.

One table of cases: (op, inputs, torch reference, differentiable inputs). Inputs are tiny: opcheck
runs several checks per op (schema, fake tensor, autograd registration, aot_dispatch_dynamic).
"""
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF
from oracles import TOL, TRANS_TOL, assert_bits, assert_close

import fuelvk.torch as ft
from fuelvk.ops._opdef import Meta, opdefs

F = torch.ops.fuelvk
F32, F64 = torch.float32, torch.float64
OPDEFS = opdefs()


def rnd(*shape, dt=F32, lo=-2.0, hi=2.0, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return (torch.rand(shape, generator=g, dtype=F64) * (hi - lo) + lo).to(dt)


def ints(hi, *shape, seed=1):
    return torch.randint(0, hi, shape, generator=torch.Generator().manual_seed(seed))


@dataclass
class Case:
    op: str
    make: Callable           # dtype -> args tuple
    ref: Callable            # *args -> torch result (the oracle)
    grad: tuple = ()         # indices of differentiable args (empty: no autograd)
    grad_dtype: torch.dtype = F64   # gradcheck dtype (F32 where fuelvk has no f64 kernel)
    dtype: torch.dtype = F32  # dtype of the opcheck / oracle run
    tol: dict = field(default_factory=lambda: TOL)
    scale: float = 1.0
    bits: bool = False
    id: str = ""


def _within(*shape_lo_hi):
    *shape, lo, hi = shape_lo_hi
    return lambda dt: (rnd(*shape, dt=dt, lo=lo, hi=hi),)


def _any(*shape):
    return lambda dt: (rnd(*shape, dt=dt),)


def _rope_tables(seq, rot, dt):
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=F64) / rot))
    freqs = torch.outer(torch.arange(seq, dtype=F64), inv)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos().to(dt), emb.sin().to(dt)


def _rope_ref(x, cos, sin, interleaved=False, rotary_dim=None):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


def _attn_ref(q, k, v, is_causal=False, scale=None, window=(-1, -1), alibi=None, softcap=None):
    """flash-attn's semantics (bottom-right aligned window / causal mask, ALiBi, softcap) in float64."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = (t.double().repeat_interleave(rep, 1) for t in (k, v))
    s = q.double() @ kk.mT * (scale if scale is not None else q.shape[-1] ** -0.5)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    sq, sk = q.shape[2], k.shape[2]
    rel = torch.arange(sk)[None, :] - torch.arange(sq)[:, None] - (sk - sq)   # j - i - (Sk - Sq)
    if alibi is not None:
        s = s - alibi.double()[None, :, None, None] * rel.abs()
    left, right = window
    right = 0 if is_causal else right
    hidden = ((rel < -left) if left >= 0 else torch.zeros_like(rel, dtype=torch.bool)) | (
        (rel > right) if right >= 0 else torch.zeros_like(rel, dtype=torch.bool))
    s = s.masked_fill(hidden, float("-inf"))
    return (torch.softmax(s, -1) @ vv).to(q.dtype), torch.logsumexp(s, -1).float()


def _vjp(f, n_in):
    """The oracle of a backward op: torch autograd of the forward f on the same inputs."""
    def ref(*args):
        ins = [a.detach().requires_grad_() for a in args[:n_in]]
        return torch.autograd.grad(f(*ins), ins, args[n_in])
    return ref


gguf = pytest.importorskip("gguf")
GQ = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}


def _gguf_quantize(x, kind):
    return torch.from_numpy(gguf.quants.quantize(x.numpy(), GQ[kind]))


def _gguf_dequantize(b, kind):
    return torch.from_numpy(gguf.quants.dequantize(b.numpy(), GQ[kind]).astype(np.float32))


_QRAW = _gguf_quantize(rnd(4, 64, seed=3), "q8_0")
_QDEQ = _gguf_dequantize(_QRAW, "q8_0")

# Oracles of the unary records (every record made with ops/_opdef.unary is a torch op): torch's function of
# the same name unless listed; inputs in [-2, 2), or DOMAIN's range.
UNARY_REF = {"negative": torch.neg, "silu": TF.silu, "gelu": lambda x: TF.gelu(x, approximate="tanh")}
UNARY = [r for r in OPDEFS.values() if (r.spec or {}).get("template") == "unary"]
DOMAIN = {**dict.fromkeys(("sqrt", "log", "reciprocal"), (0.5, 2.0)),
          **dict.fromkeys(("log1p", "log2", "log10", "atanh", "asin", "acos"), (0.25, 0.75)), "acosh": (1.25, 2.0)}
# Binary elementwise and comparison records (torch schema "(Tensor a, Tensor b) -> Tensor"): torch's function
# of the same name is the oracle, except where torch's name means something else.
BINARY_REF = {"equal": torch.eq, "silu_mul": lambda a, b: TF.silu(a) * b,
              "gelu_mul": lambda a, b: TF.gelu(a, approximate="tanh") * b}
BINARY = [r for r in OPDEFS.values() if r.schema == "(Tensor a, Tensor b) -> Tensor"
          and r.fn.__module__ in ("fuelvk.ops.elementwise", "fuelvk.ops.comparison")]
_F32 = Meta((1,), np.dtype(np.float32))
COMPARE = [r for r in BINARY if r.out(_F32, _F32).dtype == np.bool_]   # exact, bool out


def _ln_ref(x, eps, w=None, b=None):
    return TF.layer_norm(x, (x.shape[-1],), w, b, eps)


def _rms_ref(x, eps, w=None):
    return TF.rms_norm(x, (x.shape[-1],), w, eps)


CASES = [
    *[Case(r.name, _within(3, 5, *DOMAIN.get(r.name, (-2.0, 2.0))), UNARY_REF.get(r.name) or getattr(torch, r.name),
           (0,) if r.grad not in (None, "zero") else (), tol=TRANS_TOL,
           scale=4.0 if r.name in ("gelu", "silu", "sigmoid", "tanh") else 1.0) for r in UNARY],
    Case("heaviside", lambda dt: (rnd(3, 4, dt=dt), 0.5), lambda x, h: torch.heaviside(x, torch.tensor(h, dtype=x.dtype)),
         bits=True),
    Case("affine", lambda dt: (rnd(3, 4, dt=dt), 1.5, -0.25), lambda x, m, a: x * m + a, (0,)),
    Case("clip", lambda dt: (rnd(3, 4, dt=dt), -0.7, 0.9), torch.clamp, (0,), F32),
    Case("power", lambda dt: (rnd(3, 4, dt=dt, lo=0.5, hi=1.5), 3), torch.pow, (0,), F32, scale=4.0),
    *[Case(r.name, lambda dt: (rnd(3, 4, dt=dt, lo=0.5, hi=2.0, seed=1), rnd(4, dt=dt, lo=0.5, hi=2.0, seed=2)),
           BINARY_REF.get(r.name) or getattr(torch, r.name), (0, 1) if r.grad else ()) for r in BINARY
      if r not in COMPARE],
    *[Case(r.name, lambda dt: (rnd(3, 4, dt=dt, lo=-2, hi=2, seed=1).round(), rnd(4, dt=dt, lo=-2, hi=2, seed=2).round()),
           BINARY_REF.get(r.name) or getattr(torch, r.name), bits=True) for r in COMPARE],
    Case("astype", lambda dt: (rnd(3, 4, dt=dt, lo=-500, hi=500), torch.bfloat16), lambda x, d: x.to(d), bits=True,
         id="f32-bf16"),
    Case("astype", lambda dt: (rnd(3, 4, dt=dt, lo=-600, hi=600), torch.float8_e4m3fn), lambda x, d: x.to(d),
         bits=True, id="f32-f8e4m3fn"),
    Case("astype", lambda dt: (rnd(3, 4, dt=dt).to(torch.bfloat16), torch.float32), lambda x, d: x.to(d), bits=True,
         id="bf16-f32"),
    Case("astype", lambda dt: (rnd(3, 4, dt=dt), torch.float16), lambda x, d: x.to(d), bits=True, id="f32-f16"),
    Case("astype", lambda dt: (rnd(3, 4, dt=dt), torch.float64), lambda x, d: x.to(d), (0,), F32, bits=True,
         id="f32-f64"),
    Case("copy", _any(2, 3), torch.clone, (0,), bits=True),
    Case("flip", lambda dt: (rnd(2, 3, 4, dt=dt), [0, 2]), torch.flip, (0,), bits=True),
    Case("flip", lambda dt: (rnd(2, 3, dt=dt), None), lambda x, a: x.flip(list(range(x.dim()))), (0,), bits=True,
         id="all"),
    Case("roll", lambda dt: (rnd(3, 5, dt=dt), [2], [1]), torch.roll, (0,), bits=True),
    Case("triu", lambda dt: (rnd(4, 5, dt=dt), 1), torch.triu, (0,), bits=True),
    Case("tril", lambda dt: (rnd(2, 4, 4, dt=dt), -1), torch.tril, (0,), bits=True),
    Case("concatenate", lambda dt: ([rnd(2, 3, dt=dt, seed=1), rnd(2, 2, dt=dt, seed=2)], 1),
         lambda xs, a: torch.cat(xs, a), (0,), bits=True),
    Case("masked_fill", lambda dt: (rnd(3, 4, dt=dt), ints(2, 4).bool(), -3.5), torch.Tensor.masked_fill, (0,),
         bits=True),
    Case("pad", lambda dt: (rnd(2, 3, dt=dt), [1, 0, 2, 3], "constant", 1.5),
         lambda x, pw, m, v: TF.pad(x, (2, 3, 1, 0), value=v), (0,), bits=True),
    Case("pad", lambda dt: (rnd(2, 3, 5, dt=dt), [0, 0, 0, 0, 2, 1], "reflect", 0.0),
         lambda x, pw, m, v: TF.pad(x, (2, 1), mode="reflect"), (0,), bits=True, id="reflect"),
    Case("pad", lambda dt: (rnd(2, 3, 5, dt=dt), [0, 0, 0, 0, 1, 3], "edge", 0.0),
         lambda x, pw, m, v: TF.pad(x, (1, 3), mode="replicate"), (0,), bits=True, id="edge"),
    Case("pad_backward", lambda dt: (rnd(2, 3, 8, dt=dt), [0, 0, 0, 0, 2, 1], "reflect"),
         lambda g, pw, m: _vjp(lambda x: TF.pad(x, (2, 1), mode="reflect"), 1)(
             torch.zeros(2, 3, 5, dtype=g.dtype), g)[0], (0,)),
    Case("add_scaled", lambda dt: (rnd(3, 4, dt=dt, seed=1), rnd(4, dt=dt, seed=2), 0.5), lambda d, s, c: d + s * c,
         (0, 1), F32),
    Case("slice_write", lambda dt: (rnd(4, 5, dt=dt, seed=1), rnd(4, 2, dt=dt, seed=2), 1, 0, 4, 2),
         lambda d, v, dim, a, b, s: d.index_put((torch.arange(4)[:, None], torch.arange(a, b, s)[None, :]), v), (0, 1),
         bits=True),
    Case("scatter_add", lambda dt: (rnd(3, 4, dt=dt, seed=1), 0, ints(3, 3, 4), rnd(3, 4, dt=dt, seed=2)),
         torch.Tensor.scatter_add, (0, 3)),
    Case("scatter_add", lambda dt: (rnd(3, 4, dt=dt, seed=1), 1, ints(4, 2, 3), rnd(3, 4, dt=dt, seed=2)),
         torch.Tensor.scatter_add, (0, 3), id="partial-index"),
    Case("index_add", lambda dt: (rnd(5, 3, dt=dt, seed=1), 0, torch.tensor([4, 0, 4, 2]), rnd(4, 3, dt=dt, seed=2)),
         torch.Tensor.index_add, (0, 3)),
    Case("take", lambda dt: (rnd(6, 4, dt=dt), ints(6, 2, 3), 0), lambda x, i, a: x[i], (0,), bits=True,
         id="embedding"),
    Case("take", lambda dt: (rnd(3, 4, dt=dt), ints(12, 5), None), lambda x, i, a: x.flatten()[i], (0,), bits=True,
         id="flat"),
    Case("take_along_axis", lambda dt: (rnd(3, 5, dt=dt), ints(5, 3, 2), 1), torch.take_along_dim, (0,), bits=True),
    Case("sum", lambda dt: (rnd(3, 4, 5, dt=dt), [0, 2], False), lambda x, a, k: x.sum(a, keepdim=k), (0,),
         scale=4.0),
    Case("sum", lambda dt: (rnd(3, 4, dt=dt), None, False), lambda x, a, k: x.sum(), (0,), scale=4.0, id="all"),
    Case("mean", lambda dt: (rnd(3, 4, dt=dt), [1], True), lambda x, a, k: x.mean(a, keepdim=k), (0,), scale=4.0),
    Case("max", lambda dt: (rnd(3, 4, dt=dt), [1], False), lambda x, a, k: x.amax(a, keepdim=k), (0,), bits=True),
    Case("min", lambda dt: (rnd(3, 4, dt=dt), None, True), lambda x, a, k: x.amin((0, 1), keepdim=k), (0,),
         bits=True),
    Case("argmax", lambda dt: (rnd(3, 4, dt=dt), 1), torch.argmax, bits=True),
    Case("argmin", lambda dt: (rnd(3, 4, dt=dt), None), torch.argmin, bits=True),
    Case("cumsum", lambda dt: (rnd(3, 5, dt=dt), 1), torch.cumsum, (0,), scale=4.0),
    Case("cumsum", lambda dt: (rnd(2, 3, dt=dt), None), lambda x, a: x.flatten().cumsum(0), (0,), scale=4.0,
         id="flat"),
    Case("softmax", lambda dt: (rnd(3, 6, dt=dt), -1), torch.softmax, (0,), tol=TRANS_TOL, scale=4.0),
    Case("softmax_backward", lambda dt: (torch.softmax(rnd(3, 6, dt=dt), -1), rnd(3, 6, dt=dt, seed=2), -1),
         lambda y, g, a: y * (g - (y * g).sum(a, keepdim=True)), scale=4.0),
    Case("rms_norm", lambda dt: (rnd(3, 8, dt=dt), 1e-5, rnd(8, dt=dt, seed=3)), _rms_ref, (0, 2), scale=4.0),
    Case("rms_norm", lambda dt: (rnd(3, 8, dt=dt), 1e-5, None), _rms_ref, (0,), scale=4.0, id="noweight"),
    Case("layer_norm", lambda dt: (rnd(3, 8, dt=dt), 1e-5, rnd(8, dt=dt, seed=3), rnd(8, dt=dt, seed=4)), _ln_ref,
         (0, 2, 3), scale=8.0),
    Case("rms_norm_backward", lambda dt: (rnd(3, 8, dt=dt), rnd(3, 8, dt=dt, seed=2), 1e-5, rnd(8, dt=dt, seed=3)),
         lambda x, g, eps, w: _vjp(lambda x, w: _rms_ref(x, eps, w), 2)(x, w, g), scale=8.0),
    Case("layer_norm_backward", lambda dt: (rnd(3, 8, dt=dt), rnd(3, 8, dt=dt, seed=2), 1e-5, rnd(8, dt=dt, seed=3),
                                            rnd(8, dt=dt, seed=4)),
         lambda x, g, eps, w, b: _vjp(lambda x, w, b: _ln_ref(x, eps, w, b), 3)(x, w, b, g), scale=16.0),
    Case("matmul", lambda dt: (rnd(3, 5, dt=dt, seed=1), rnd(5, 4, dt=dt, seed=2)), torch.matmul, (0, 1), F32,
         scale=8.0),
    Case("matmul", lambda dt: (rnd(2, 3, 5, dt=dt, seed=1), rnd(5, 4, dt=dt, seed=2)), torch.matmul, (0, 1), F32,
         scale=8.0, id="batched"),
    Case("matmul", lambda dt: (rnd(5, dt=dt, seed=1), rnd(2, 5, 4, dt=dt, seed=2)), torch.matmul, (0, 1), F32,
         scale=8.0, id="vector-matrix"),
    Case("matmul", lambda dt: (rnd(3, 5, dt=dt, seed=1), rnd(5, dt=dt, seed=2)), torch.matmul, (0, 1), F32,
         scale=8.0, id="matrix-vector"),
    Case("matmul", lambda dt: (rnd(3, 5, dt=dt, seed=1), rnd(5, 4, dt=dt, seed=2).to(torch.bfloat16)),
         lambda a, b: a @ b.float(), scale=8.0, id="bf16-weight"),
    Case("qmatmul", lambda dt: (rnd(3, 64, dt=dt), _QRAW, "q8_0"), lambda x, w, k: x @ _QDEQ.T, (0,), F32,
         scale=64.0),
    *[Case("quantize", lambda dt, k=k: (rnd(3, 64, dt=dt), k), _gguf_quantize, bits=True, id=k) for k in GQ],
    *[Case("dequantize", lambda dt, k=k: (_gguf_quantize(rnd(3, 64), k), k), _gguf_dequantize, bits=True, id=k)
      for k in GQ],
    Case("conv2d", lambda dt: (rnd(1, 2, 5, 5, dt=dt, seed=1), rnd(3, 2, 3, 3, dt=dt, seed=2), rnd(3, dt=dt, seed=3),
                               [1, 1], [1, 1], [1, 1], 1), TF.conv2d, (0, 1, 2), F32, scale=16.0),
    Case("conv2d", lambda dt: (rnd(2, 2, 7, 6, dt=dt, seed=1), rnd(3, 2, 3, 2, dt=dt, seed=2), None,
                               [2, 3], [2, 1], [2, 1], 1), TF.conv2d, (0, 1), F32, scale=16.0, id="strided"),
    Case("conv2d", lambda dt: (rnd(2, 6, 6, dt=dt, seed=1), rnd(4, 1, 2, 2, dt=dt, seed=2), None,
                               [1, 1], [0, 0], [1, 1], 2), TF.conv2d, scale=16.0, id="grouped-unbatched"),
    Case("rope", lambda dt: (rnd(1, 2, 4, 8, dt=dt), *_rope_tables(4, 8, dt)), _rope_ref, (0,), scale=4.0),
    Case("scaled_dot_product_attention", lambda dt: (rnd(1, 2, 3, 8, dt=dt, seed=1), rnd(1, 1, 4, 8, dt=dt, seed=2),
                                                     rnd(1, 1, 4, 8, dt=dt, seed=3)),
         _attn_ref, (0, 1, 2), F32, scale=16.0, id="gqa"),
    Case("scaled_dot_product_attention", lambda dt: (rnd(1, 2, 4, 8, dt=dt, seed=1), rnd(1, 2, 4, 8, dt=dt, seed=2),
                                                     rnd(1, 2, 4, 8, dt=dt, seed=3), True),
         _attn_ref, (0, 1, 2), F32, scale=16.0, id="causal"),
    Case("scaled_dot_product_attention", lambda dt: (
        rnd(1, 2, 3, 8, dt=dt, seed=1), rnd(1, 1, 5, 8, dt=dt, seed=2), rnd(1, 1, 5, 8, dt=dt, seed=3), False, 0.4,
        [2, 1], torch.tensor([0.5, 0.25], dtype=dt), 3.0), _attn_ref, (0, 1, 2), F32, scale=16.0,
        id="window-alibi-softcap"),
]


def _attn_bwd_args(dt):
    q, k, v = rnd(1, 2, 3, 8, dt=dt, seed=1), rnd(1, 1, 4, 8, dt=dt, seed=2), rnd(1, 1, 4, 8, dt=dt, seed=3)
    o, lse = _attn_ref(q, k, v)
    return rnd(1, 2, 3, 8, dt=dt, seed=4), q, k, v, o, lse


CASES.append(Case("scaled_dot_product_attention_backward", _attn_bwd_args,
                  lambda do, q, k, v, o, lse: _vjp(lambda q, k, v: _attn_ref(q, k, v)[0], 3)(q, k, v, do), scale=64.0))

# Sampling: k = 1 / p <= 0 make the draw the first argmax (deterministic), whatever the seed.
def _PROBS(dt):  # noqa: N802 (a case maker, as the constants around it)
    return torch.softmax(rnd(4, 9, dt=dt) * 3, -1)


CASES += [Case("top_k_sampling_from_probs", lambda dt: (_PROBS(dt), torch.ones(4, dtype=torch.int32), 5),
               lambda p, k, s: p.argmax(-1), bits=True),
          Case("top_p_sampling_from_probs", lambda dt: (_PROBS(dt), torch.zeros(4), None),
               lambda p, t, s: p.argmax(-1), bits=True),
          Case("top_k_top_p_sampling_from_probs",
               lambda dt: (_PROBS(dt), torch.ones(4, dtype=torch.int32), torch.full((4,), 0.5), 1),
               lambda p, k, t, s: p.argmax(-1), bits=True)]


def _paged_args(dt):
    """Decode over pages of 4 tokens: request 0 owns pages 2, 0 (6 tokens), request 1 page 1 (3)."""
    q, kc, vc = rnd(2, 4, 8, dt=dt), rnd(3, 4, 2, 8, dt=dt, seed=2), rnd(3, 4, 2, 8, dt=dt, seed=3)
    return q, kc, vc, *(torch.tensor(x, dtype=torch.int32) for x in ([0, 2, 3], [2, 0, 1], [2, 3]))


def _paged_ref(q, kc, vc, ptr, idx, last):
    out, lse = [], []
    for r, pages in enumerate(([2, 0], [1])):
        n = (len(pages) - 1) * 4 + int(last[r])
        k, v = (c[pages].reshape(-1, 2, 8)[:n].repeat_interleave(2, 1) for c in (kc, vc))
        s = torch.einsum("hd,khd->hk", q[r].double(), k.double()) / 8 ** 0.5
        out.append(torch.einsum("hk,khd->hd", torch.softmax(s, -1), v.double()))
        lse.append(torch.logsumexp(s, -1))
    return torch.stack(out).to(q.dtype), torch.stack(lse).float()


CASES.append(Case("paged_attention", _paged_args, _paged_ref, scale=4.0))


def _mamba_args(dt):
    """Two requests over a cache of 3 slots (request 1 skipped: -1), 4 heads in 2 groups."""
    return (rnd(3, 4, 2, 4, dt=dt), rnd(2, 4, 2, dt=dt, seed=1), rnd(2, 4, 2, dt=dt, seed=2),
            -rnd(4, 2, 4, lo=0.5, hi=1.5, seed=3), rnd(2, 2, 4, dt=dt, seed=4), rnd(2, 2, 4, dt=dt, seed=5),
            rnd(4, 2, dt=dt, seed=6), rnd(4, 2, dt=dt, seed=7), torch.tensor([2, -1], dtype=torch.int32))


def _mamba_ref(state, x, dt, a, b, c, d, dt_bias, slots):
    st, out = state.double().clone(), torch.zeros(x.shape, dtype=F64)
    dtf = TF.softplus(dt.double() + dt_bias.double())
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            s = st[slot] * torch.exp(a.double() * dtf[i][..., None]) + (dtf[i] * x[i].double())[..., None] * \
                b[i].double().repeat_interleave(2, 0)[:, None, :]
            st[slot] = s
            out[i] = (s * c[i].double().repeat_interleave(2, 0)[:, None, :]).sum(-1) + x[i].double() * d.double()
    return out.to(x.dtype), st.to(state.dtype)


def _gdn_ref(q, k, v, state, a_log, a, dt_bias, b, scale, cu):
    """Packed tokens q / k [T, H, K], v [T, HV, V]; sequence n the tokens cu[n] .. cu[n + 1]."""
    hv = v.shape[1]
    g = torch.exp(-torch.exp(a_log.double()) * TF.softplus(a.double() + dt_bias.double()))
    beta = torch.sigmoid(b.double())
    qe, ke = (t.double().repeat_interleave(hv // t.shape[1], 1) for t in (q, k))
    out, fin = torch.zeros(v.shape, dtype=F64), torch.zeros(state.shape, dtype=F64)
    for n in range(len(cu) - 1):
        s = state[n].double().mT
        for t in range(cu[n], cu[n + 1]):
            old = g[t][:, None, None] * s
            old_v = torch.einsum("hk,hkv->hv", ke[t], old)
            new_v = beta[t][:, None] * v[t].double() + (1 - beta[t][:, None]) * old_v
            s = old + ke[t][:, :, None] * (new_v - old_v)[:, None, :]
            out[t] = scale * torch.einsum("hk,hkv->hv", qe[t], s)
        fin[n] = s.mT
    return out.to(q.dtype), fin.float()


def _gdn_args(dt, lead):
    """q / k [*lead, 1 head, 4], v [*lead, 2 heads, 3], a / b [*lead, 2]; state [rows, 2, 3, 4]."""
    rows = lead[0] if len(lead) == 2 else 2
    return (rnd(*lead, 1, 4, dt=dt), rnd(*lead, 1, 4, dt=dt, seed=1) / 2, rnd(*lead, 2, 3, dt=dt, seed=2),
            rnd(rows, 2, 3, 4, seed=3), rnd(2, seed=4) / 2, rnd(*lead, 2, dt=dt, seed=5), rnd(2, seed=6) / 2,
            rnd(*lead, 2, dt=dt, seed=7), 0.5)


def _gdn_decode_ref(q, k, v, state, a_log, a, dt_bias, b, scale):
    flat = (t.reshape(-1, *t.shape[2:]) for t in (q, k, v))
    o, s = _gdn_ref(*flat, state, a_log, a.reshape(-1, 2), dt_bias, b.reshape(-1, 2), scale, [0, 2, 4])
    return o.reshape(v.shape), s


CASES += [Case("mamba_selective_state_update", _mamba_args, _mamba_ref, scale=4.0),
          Case("gated_delta_rule_decode", lambda dt: _gdn_args(dt, (2, 2)), _gdn_decode_ref, scale=4.0),
          Case("gated_delta_rule_prefill", lambda dt: (*_gdn_args(dt, (5,)), torch.tensor([0, 3, 5])),
               lambda *a: _gdn_ref(*a[:9], a[9].tolist()), scale=4.0)]


IDS = [c.op + (f"-{c.id}" if c.id else "") for c in CASES]
MUTATING = {"add_assign_scaled", "slice_write_", "scatter_add_", "index_add_"}


def test_max_shares_the_gradient_of_ties_like_torch():
    x = torch.tensor([[1.0, 3.0, 3.0, 3.0], [2.0, 2.0, 0.0, -1.0]], requires_grad=True)
    xt = x.detach().clone().requires_grad_()
    g = torch.tensor([0.3, 1.5])
    (gx,) = torch.autograd.grad(F.max(x, [1], False), x, g)
    (want,) = torch.autograd.grad(xt.amax(1), xt, g)
    assert_close(gx.numpy(), want.numpy())


def test_every_op_has_a_case():
    assert set(ft.OPS) - MUTATING == {c.op for c in CASES}
    import fuelvk
    skipped = set(fuelvk.OPS) - set(ft.OPS)
    # the torch ops are the records with a torch schema (fuelvk/ops/_opdef.py); those without one:
    assert skipped == {r.name for r in OPDEFS.values() if r.schema is None}
    # numpy-only conveniences (setitem is slice_write_: a key is no tensor; ascontiguousarray is copy) and
    # array API functions with no gradient formula yet, listed so that a new op without one fails here.
    # fused_add_rmsnorm writes residual and returns the output (neither torch form of a mutating record).
    assert skipped == {"setitem", "ascontiguousarray", "fused_add_rmsnorm", "argsort", "atan2", "copysign", "hypot", "logaddexp",
                       "nextafter", "prod", "sort", "where"}, skipped


def _args(case, dt, requires_grad=False):
    args = list(case.make(dt))
    if requires_grad:
        for i in case.grad:
            if isinstance(args[i], list):
                args[i] = [a.requires_grad_() for a in args[i]]
            else:
                args[i] = args[i].requires_grad_()
    return tuple(args)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_opcheck(case):
    torch.library.opcheck(getattr(F, case.op).default, _args(case, case.dtype, requires_grad=bool(case.grad)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vs_torch(case):
    args = _args(case, case.dtype)
    got, want = _flat(getattr(F, case.op)(*args)), _flat(case.ref(*args))
    assert len(got) >= len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.is_contiguous()
        if case.bits:
            assert_bits(ft.to_numpy(g), ft.to_numpy(w))
        else:
            assert_close(ft.to_numpy(g), ft.to_numpy(w), table=case.tol, scale=case.scale)


GRAD_CASES = [c for c in CASES if c.grad]


@pytest.mark.filterwarnings("ignore:Input #.* is not a double precision")
@pytest.mark.parametrize("case", GRAD_CASES, ids=[i for c, i in zip(CASES, IDS) if c.grad])
def test_gradcheck(case):
    """float64 where fuelvk has f64 kernels; float32 (clip, power, add_scaled, matmul, qmatmul, attention:
    no f64 kernel) with eps 1e-3 and atol/rtol 1e-2 (a central difference in f32 has ~1e-4 relative error)."""
    args = list(_args(case, case.grad_dtype))
    diff = [i for i in case.grad]

    def f(*xs):
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return getattr(F, case.op)(*full)

    inputs = []
    for i in diff:
        inputs.extend(args[i] if isinstance(args[i], list) else [args[i]])
    if any(isinstance(args[i], list) for i in diff):   # concatenate: one list argument
        def f(*xs):
            return getattr(F, case.op)(list(xs), *args[1:])
    inputs = [x.detach().requires_grad_() for x in inputs]
    kw = {} if case.grad_dtype == F64 else {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}
    assert torch.autograd.gradcheck(f, inputs, **kw)


ATTN_MASKED = {"bool_mask": {"attn_mask": "bool"}, "additive_mask": {"attn_mask": "float"},
               "causal_sq_lt_sk": {"is_causal": True}}


@pytest.mark.parametrize("kind", sorted(ATTN_MASKED))
def test_attention_backward_math_route_matches_torch_autograd(kind):
    """fuelvk.scaled_dot_product_attention_backward where the fused kernels cannot go (an attn_mask, a
    top-left causal mask with Sq < Sk) takes the math route's backward: torch's autograd of its SDPA is the
    oracle, GQA (4 query heads on 2) and a fully masked query row (zero gradients) included."""
    import fuelvk as fv
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 4, 5, 8, generator=g, requires_grad=True)
    k, v = (torch.randn(2, 2, 7, 8, generator=g, requires_grad=True) for _ in range(2))
    do = torch.randn(2, 4, 5, 8, generator=g)
    kw = dict(ATTN_MASKED[kind])
    if kw.get("attn_mask") == "bool":
        m = torch.rand(5, 7, generator=g) > 0.4
        m[2] = False                                   # a query row that sees no key
        kw["attn_mask"] = m
    elif kw.get("attn_mask") == "float":
        kw["attn_mask"] = torch.randn(2, 1, 5, 7, generator=g)
    TF.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw).backward(do)
    fkw = {a: (b.numpy() if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    arrs = [fv.asarray(t.detach().numpy()) for t in (q, k, v)]
    o, lse = fv.scaled_dot_product_attention(*arrs, return_lse=True, **fkw)
    grads = fv.scaled_dot_product_attention_backward(fv.asarray(do.numpy()), *arrs, o, lse, **fkw)
    for got, want in zip(grads, (q.grad, k.grad, v.grad)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
