"""paged_attention against float64 torch: random page tables, page sizes 1 / 16 / 64, ragged lengths,
partial last pages, empty requests, GQA, decode and causal prefill (bottom-right), f32 / f16 / bf16."""
import math

import ml_dtypes
import numpy as np
import pytest
import torch
from oracles import TOL

import fuelvk as fv
from fuelvk.errors import DTypeError, ShapeError

rng = np.random.default_rng(23)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def layout(kv_lens, ps, spare=3):
    """(kv_indptr, kv_indices, kv_last_page_len, num_pages) for requests of kv_lens tokens, pages
    drawn at random from a cache with `spare` pages no request uses."""
    counts = [-(-n // ps) for n in kv_lens]
    num_pages = sum(counts) + spare
    idx = rng.permutation(num_pages)[:sum(counts)].astype(np.int32)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    last = np.array([n - (c - 1) * ps if c else 0 for n, c in zip(kv_lens, counts)], np.int32)
    return ptr, idx, last, num_pages


def reference(q, kc, vc, ptr, idx, last, qo, scale, causal):
    """float64 (out, lse): each request's keys are its pages' rows in order, cut to its length."""
    q, kc, vc = (torch.tensor(np.asarray(x, np.float64)) for x in (q, kc, vc))
    hq, hkv, ps = q.shape[1], kc.shape[2], kc.shape[1]
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float64)
    for r in range(len(ptr) - 1):
        pages = torch.tensor(idx[ptr[r]:ptr[r + 1]].astype(np.int64))
        n_kv = (len(pages) - 1) * ps + int(last[r]) if len(pages) else 0
        q0, q1 = int(qo[r]), int(qo[r + 1])
        if n_kv == 0 or q1 == q0:
            continue
        k = kc[pages].reshape(-1, hkv, kc.shape[3])[:n_kv].repeat_interleave(hq // hkv, 1)
        v = vc[pages].reshape(-1, hkv, kc.shape[3])[:n_kv].repeat_interleave(hq // hkv, 1)
        s = torch.einsum("qhd,khd->hqk", q[q0:q1], k) * scale
        if causal:
            n_q = q1 - q0
            i, j = torch.arange(n_q)[:, None], torch.arange(n_kv)[None]
            s = s.masked_fill(j > i + n_kv - n_q, -math.inf)
        lse[q0:q1] = torch.logsumexp(s, -1).T
        out[q0:q1] = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v)
    return out.numpy(), lse.numpy()


def check(got, want, dt):
    rt, at = TOL[np.dtype(dt)]
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=rt * 8, atol=at * 8)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("ps", [1, 16, 64])
def test_decode(ps, dt):
    kv_lens = [37, 0, 5, 64, 1]       # an empty request (zeros, lse -inf), a partial last page
    ptr, idx, last, pages = layout(kv_lens, ps)
    hq, hkv, d = 8, 2, 64
    q = rng.standard_normal((len(kv_lens), hq, d)).astype(dt)
    kc, vc = (rng.standard_normal((pages, ps, hkv, d)).astype(dt) for _ in range(2))
    out, lse = fv.paged_attention(q, kc, vc, ptr, idx, last, return_lse=True)
    want, want_lse = reference(q, kc, vc, ptr, idx, last, np.arange(len(kv_lens) + 1), 1 / math.sqrt(d), True)
    assert out.dtype == dt and out.shape == q.shape and lse.dtype == np.float32
    check(out, want, dt)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ps", [1, 16, 64])
def test_causal_prefill(ps):
    """Ragged queries (one request without any), fewer queries than keys, device inputs."""
    kv_lens, q_lens = [70, 9, 0, 17], [5, 9, 0, 17]
    ptr, idx, last, pages = layout(kv_lens, ps)
    qo = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    hq, hkv, d = 4, 4, 32
    q = rng.standard_normal((qo[-1], hq, d)).astype(np.float32)
    kc, vc = (rng.standard_normal((pages, ps, hkv, d)).astype(np.float32) for _ in range(2))
    out, lse = fv.paged_attention(fv.asarray(q), fv.asarray(kc), fv.asarray(vc), fv.asarray(ptr), fv.asarray(idx),
                                  fv.asarray(last), fv.asarray(qo), scale=0.3, return_lse=True)
    assert isinstance(out, fv.Array)
    want, want_lse = reference(q, kc, vc, ptr, idx, last, qo, 0.3, True)
    check(out.numpy(), want, np.float32)
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=1e-5, atol=1e-4)
    plain = fv.paged_attention(q, kc, vc, ptr, idx, last, qo, causal=False, scale=0.3)
    check(plain, reference(q, kc, vc, ptr, idx, last, qo, 0.3, False)[0], np.float32)


@pytest.mark.parametrize("scale", [-0.6, 0.0], ids=["negative", "zero"])
def test_any_finite_scale(scale):
    """torch's scale contract (any finite scale; the FlashInfer-Bench references compute with a negative
    sm_scale): decode and causal prefill against the float64 reference; non-finite scales are typed errors."""
    ptr, idx, last, pages = layout([40, 0, 7], 16)
    kc, vc = (rng.standard_normal((pages, 16, 2, 32)).astype(np.float32) for _ in range(2))
    for qo in (np.arange(4), np.array([0, 5, 5, 8])):
        q = rng.standard_normal((int(qo[-1]), 4, 32)).astype(np.float32)
        out, lse = fv.paged_attention(q, kc, vc, ptr, idx, last, None if len(q) == 3 else qo, scale=scale,
                                      return_lse=True)
        want_o, want_l = reference(q, kc, vc, ptr, idx, last, qo, scale, True)
        check(out, want_o, np.float32)
        np.testing.assert_allclose(lse, want_l, rtol=1e-5, atol=1e-4)
    for bad in (float("nan"), float("inf"), "x"):
        with pytest.raises(ShapeError, match="scale must be a finite number"):
            fv.paged_attention(q[:3], kc, vc, ptr, idx, last, scale=bad)


def test_page_table_matters_and_full_pages_by_default():
    ptr, idx, _, pages = layout([32, 16], 16)
    q = rng.standard_normal((2, 2, 16)).astype(np.float32)
    kc, vc = (rng.standard_normal((pages, 16, 2, 16)).astype(np.float32) for _ in range(2))
    full = np.array([16, 16], np.int32)
    got = fv.paged_attention(q, kc, vc, ptr, idx)
    np.testing.assert_array_equal(got, fv.paged_attention(q, kc, vc, ptr, idx, full))
    swapped = idx.copy()                  # a page of request 0 traded for request 1's
    swapped[[0, 2]] = swapped[[2, 0]]
    want = reference(q, kc, vc, ptr, swapped, full, np.arange(3), 0.25, True)[0]
    check(fv.paged_attention(q, kc, vc, ptr, swapped), want, np.float32)
    assert not np.allclose(got, want)


@pytest.mark.parametrize("ps", [1, 16])
def test_last_page_of_zero_tokens_is_dropped(ps):
    """kv_last_page_len 0 drops the request's last page, as the FlashInfer-Bench references read it
    (`k_cache[last_page, :0]`): a one-page request then has no key (zeros, lse -inf); decode and
    causal prefill against the float64 reference."""
    lens = [2 * ps + 3, ps, 3 * ps]
    ptr, idx, last, pages = layout(lens, ps)
    last = np.array([last[0], 0, 0], np.int32)           # request 1: its only page dropped; 2: its third
    kc, vc = (rng.standard_normal((pages, ps, 2, 16)).astype(np.float32) for _ in range(2))
    for qo in (np.arange(4), np.array([0, 3, 4, 6])):
        q = rng.standard_normal((int(qo[-1]), 4, 16)).astype(np.float32)
        out, lse = fv.paged_attention(q, kc, vc, ptr, idx, last, None if len(q) == 3 else qo, return_lse=True)
        want_o, want_l = reference(q, kc, vc, ptr, idx, last, qo, 0.25, True)
        check(out, want_o, np.float32)
        check(lse, want_l, np.float32)
        assert np.isneginf(lse[qo[1]:qo[2]]).all() and not np.isneginf(lse[qo[2]:]).any()


def test_bad_page_tables_are_typed_errors():
    ptr, idx, last, pages = layout([5, 3], 4)
    q = np.zeros((2, 2, 8), np.float32)
    kc = np.zeros((pages, 4, 2, 8), np.float32)
    with pytest.raises(ShapeError, match="kv_indices must lie in"):
        fv.paged_attention(q, kc, kc, ptr, np.where(idx == idx[0], pages, idx).astype(np.int32), last)
    with pytest.raises(ShapeError, match="kv_indptr must start at 0"):
        fv.paged_attention(q, kc, kc, ptr[::-1].copy(), idx, last)
    with pytest.raises(ShapeError, match="kv_last_page_len must lie in"):
        fv.paged_attention(q, kc, kc, ptr, idx, np.array([5, 1], np.int32))
    with pytest.raises(ShapeError, match=r"kv_last_page_len must lie in \[0, 4\]"):
        fv.paged_attention(q, kc, kc, ptr, idx, np.array([-1, 1], np.int32))
    with pytest.raises(ShapeError, match="query rows"):
        fv.paged_attention(q[:1], kc, kc, ptr, idx, last)
    with pytest.raises(ShapeError, match="multiple of Hkv"):
        fv.paged_attention(np.zeros((2, 3, 8), np.float32), kc, kc, ptr, idx, last)
    with pytest.raises(DTypeError, match="share one of"):
        fv.paged_attention(q, kc.astype(np.float16), kc.astype(np.float16), ptr, idx, last)
    with pytest.raises(DTypeError, match="integer"):
        fv.paged_attention(q, kc, kc, ptr.astype(np.float32), idx, last)


@pytest.mark.parametrize("pack", [1 << 20, 1], ids=["packed", "one_per_request"])
def test_latent_segments_packing(monkeypatch, pack):
    """The FlashInfer-Bench MLA solution (definitions/kinds.py) packs requests into one masked call: the
    same answer as a float64 per-request reference whether every request shares one pack or each has
    its own; a request with more queries than keys has rows that see nothing (zeros, lse -inf), one with
    no key or no query contributes nothing."""
    from fuelvk.definitions import kinds
    monkeypatch.setattr(kinds, "LATENT_PACK_SCORES", pack)
    h, dc, dp, tokens = 2, 16, 8, 30
    segs = [(0, 3, np.array([4, 9, 1, 20, 7], np.int32)), (3, 5, np.array([2], np.int32)), (5, 5, np.array([3])),
            (5, 6, None), (6, 8, np.array([11, 12, 13], np.int32))]
    assert len(kinds._latent_packs(segs, h)) == (1 if pack > 1 else 3)
    qn, qp = rng.standard_normal((8, h, dc)).astype(np.float32), rng.standard_normal((8, h, dp)).astype(np.float32)
    ckv, kpe = rng.standard_normal((tokens, 1, dc)).astype(np.float32), rng.standard_normal((tokens, 1, dp)).astype(np.float32)
    defn = {"outputs": {"output": {"dtype": "float32"}, "lse": {}}, "reference": ""}
    inputs = {"q_nope": torch.from_numpy(qn), "q_pe": torch.from_numpy(qp), "ckv_cache": torch.from_numpy(ckv),
              "kpe_cache": torch.from_numpy(kpe), "sm_scale": -0.2}
    out, lse = kinds._latent_segments(defn, inputs, segs)()
    want_o, want_l = np.zeros((8, h, dc)), np.full((8, h), -np.inf)
    for q0, q1, ids in segs:
        if ids is None or q1 <= q0:
            continue
        s = (np.einsum("qhd,td->qht", qn[q0:q1].astype(np.float64), ckv[ids, 0])
             + np.einsum("qhd,td->qht", qp[q0:q1].astype(np.float64), kpe[ids, 0])) * -0.2
        n, m = q1 - q0, len(ids)
        s[np.broadcast_to((np.arange(m)[None, :] > np.arange(n)[:, None] + m - n)[:, None], s.shape)] = -np.inf
        for i in range(n):
            if np.isfinite(s[i]).any():
                t = torch.from_numpy(s[i])
                want_l[q0 + i] = torch.logsumexp(t, -1).numpy()
                want_o[q0 + i] = torch.softmax(t, -1).numpy() @ ckv[ids, 0].astype(np.float64)
    assert np.isneginf(want_l[3]).all() and np.array_equal(np.isneginf(lse), np.isneginf(want_l))
    np.testing.assert_allclose(out, want_o, rtol=1e-4, atol=1e-5)
    fin = np.isfinite(want_l)
    np.testing.assert_allclose(lse[fin], want_l[fin], rtol=1e-5, atol=1e-5)
