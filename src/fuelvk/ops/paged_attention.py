"""Attention over a paged KV cache (FlashInfer's BatchDecode / BatchPrefillWithPagedKVCache, NHD layout).

The cache is [num_pages, page_size, Hkv, D] for k and v; request b owns the pages
kv_indices[kv_indptr[b]:kv_indptr[b+1]] in order, the last one filled to kv_last_page_len[b] (all
full when not given; 0 drops the last page, as the FlashInfer-Bench Definitions' references read it:
their `k_cache[last_page, :last_len]`, where FlashInfer's kernels require 1 .. page_size).  Decode: q [B, Hq, D], one query per request.  Prefill: q [total_q, Hq, D]
with qo_indptr [B + 1] (ragged queries).  GQA: Hq a multiple of Hkv.  Causal masks are bottom-right
aligned (query i of n sees the first kv_len - n + i + 1 keys), as FlashInfer's.

A composition, one request at a time: the request's pages are gathered (fuelvk.take) into
contiguous K / V, cut to its length, and run through scaled_dot_product_attention (f32 accumulation;
a request with at most 16 query rows per kv head takes its flash-decoding route: keys split over
workgroups, K / V through texel views where the device reads them faster).  The page table is read on the host (it fixes the launches).  A request with no
query contributes nothing; one with no key gives zeros and lse -inf.
"""

import numpy as np

from .. import dtypes as _dt
from ..array import Array, asarray
from ..errors import DTypeError, ShapeError
from ._core import device_args
from .attention import _options, scaled_dot_product_attention
from .indexing import take
from .movement import concatenate

__all__ = ["paged_attention"]

_FLOATS = (_dt.float32, _dt.float16, _dt.bfloat16)


def _host_ints(op, name, x, length=None):
    a = x.numpy() if isinstance(x, Array) else np.asarray(x)
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise DTypeError(f"{op}: {name} must be a 1-d integer array, got dtype {a.dtype} shape {a.shape}")
    if length is not None and a.shape[0] != length:
        raise ShapeError(f"{op}: {name} has {a.shape[0]} entries, {length} expected")
    return a.astype(np.int64)


def _indptr(op, name, x, total):
    a = _host_ints(op, name, x)
    if a.size == 0 or a[0] != 0 or (np.diff(a) < 0).any() or a[-1] != total:
        raise ShapeError(f"{op}: {name} must start at 0, never decrease and end at {total}; got {a.tolist()[:16]}")
    return a


def paged_attention(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len=None, qo_indptr=None, *,
                    causal=True, scale=None, return_lse=False):
    """softmax(scale q k^T) v per request over its pages; out like q (dtype of q), and lse [rows, Hq]
    float32 (natural log) with return_lse=True.  qo_indptr None: decode (q [B, Hq, D])."""
    op = "paged_attention"
    (q, kc, vc), numpy_out = device_args(op, q, k_cache, v_cache)
    if q.ndim != 3 or kc.ndim != 4 or vc.shape != kc.shape:
        raise ShapeError(f"{op}: q must be [rows, Hq, D] and k_cache / v_cache one shape [pages, page_size, Hkv, D]; "
                         f"got q{q.shape}, k_cache{kc.shape}, v_cache{vc.shape}")
    rows, hq, d = q.shape
    num_pages, ps, hkv, dk = kc.shape
    if dk != d or hkv == 0 or hq % hkv:
        raise ShapeError(f"{op}: head dims {d} / {dk} must match and Hq = {hq} be a multiple of Hkv = {hkv}")
    for name, x in (("q", q), ("k_cache", kc), ("v_cache", vc)):
        if x.dtype not in _FLOATS or x.dtype != q.dtype:
            raise DTypeError(f"{op}: {name} has dtype {x.dtype}; q, k_cache and v_cache must share one of "
                             f"{', '.join(map(str, _FLOATS))}")
    idx = _host_ints(op, "kv_indices", kv_indices)
    ptr = _indptr(op, "kv_indptr", kv_indptr, idx.size)
    b = ptr.size - 1
    qo = np.arange(b + 1) if qo_indptr is None else _indptr(op, "qo_indptr", qo_indptr, rows)
    if qo.size != b + 1 or qo[-1] != rows:
        raise ShapeError(f"{op}: {rows} query rows for {b} requests; decode needs one row per request, "
                         "prefill a qo_indptr of B + 1 entries ending at the row count")
    if ((idx < 0) | (idx >= num_pages)).any():
        raise ShapeError(f"{op}: kv_indices must lie in [0, {num_pages}); got {idx[(idx < 0) | (idx >= num_pages)][:8]}")
    counts = np.diff(ptr)
    last = np.full(b, ps) if kv_last_page_len is None else _host_ints(op, "kv_last_page_len", kv_last_page_len, b)
    if ((counts > 0) & ((last < 0) | (last > ps))).any():
        raise ShapeError(f"{op}: kv_last_page_len must lie in [0, {ps}] for a request with pages (0: the last page "
                         f"dropped); got {last.tolist()[:16]}")
    scale = _options(op, d, False, scale, None, None)[0]    # scaled_dot_product_attention's check: any finite
    idx_dev = asarray(idx.astype(np.int32))
    outs, lses = [], []
    for r in range(b):
        n_q = int(qo[r + 1] - qo[r])
        if n_q == 0:
            continue
        kv_len = int((counts[r] - 1) * ps + last[r]) if counts[r] else 0
        if kv_len == 0:
            outs.append(asarray(np.zeros((n_q, hq, d), q.dtype)))
            lses.append(asarray(np.full((n_q, hq), -np.inf, np.float32)))
            continue
        pages = idx_dev[int(ptr[r]):int(ptr[r + 1])]
        k, v = (take(c, pages, axis=0).reshape(int(counts[r]) * ps, hkv, d)[:kv_len] for c in (kc, vc))
        qb, kb, vb = (x[None].transpose(0, 2, 1, 3) for x in (q[int(qo[r]):int(qo[r + 1])], k, v))
        o, lse = scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=scale, return_lse=True,
                                              causal_alignment="bottom_right")
        outs.append(o[0].transpose(1, 0, 2))
        lses.append(lse[0].T)
    if not outs:
        out, lse = asarray(np.zeros((0, hq, d), q.dtype)), asarray(np.zeros((0, hq), np.float32))
    else:
        out, lse = concatenate(outs, axis=0), concatenate(lses, axis=0)
    if numpy_out:
        return (out.numpy(), lse.numpy()) if return_lse else out.numpy()
    return (out, lse) if return_lse else out


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare  # noqa: E402


def _paged_rule(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len=None, qo_indptr=None, *,
                causal=True, scale=None, return_lse=False):
    out = Meta(tuple(q.shape), q.dtype)
    return (out, Meta(tuple(q.shape[:2]), np.dtype(np.float32)) if return_lse else None)


declare(
    # torch: the lse is always returned (torch/_ops.py ALWAYS)
    OpDef("paged_attention", paged_attention, _paged_rule,
          export={"skip": "integer page-table inputs: FlashInfer-Bench's random ints span [-1024, 1024) and "
                          "would index out of range; the dataset's gqa_paged Definitions are served"},
          schema="(Tensor q, Tensor k_cache, Tensor v_cache, Tensor kv_indptr, Tensor kv_indices, "
                 "Tensor? kv_last_page_len=None, Tensor? qo_indptr=None, *, bool causal=True, float? scale=None) "
                 "-> (Tensor, Tensor)"),
)
