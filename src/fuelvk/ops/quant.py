"""GGML quantization (fuelvk.quant): quantize / dequantize / qmatmul on packed block bytes, and a
GGUF loader that keeps quantized tensors packed on the device.

Blocks are plain uint8 arrays laid out exactly as in GGUF files (and as `gguf.quants.quantize`
returns them), so files, gguf-py and fuelvk exchange them without conversion. Quantize and
dequantize are bit-exact with gguf-py (its numpy float32 arithmetic, round-half-away-from-zero,
first-index argmax for Q4_0's signed max). Inputs whose block scale falls in float32's subnormal
range (max |x| < ~1.5e-36) or that hold inf/NaN are outside that promise: Vulkan lets devices
flush f32 denormals, and gguf's own result there is NaN-driven casts.

qmatmul(x, w) computes x @ W.T with W [N, K] in GGML's row-major weight layout (llama.cpp's
convention). Routes: "matvec" (the fused qmatvec, once per row of x) for M < DEQUANT_MIN_M[kind]; "dequant"
above (W dequantized to f32 in chunks of weight rows, then the f32 matmul: the decode is paid once
per weight element, not once per tile of rows, and the matmul's register tile is the fast kernel);
"tiled" (the fused tiled kernel, W never expanded) only when forced: it lost to the dequant route at
every M measured (q4_0 M=64 N=2048 K=4096: 8.8 s vs 0.17 s; q4_k M=4: 1.16 s vs 18 ms). Its cost is
not the decode but its shared-memory FMA loop (q4_0 M=16 N=1024 K=4096, process CPU: 564 ms; 550
without the decode, 60 with one of the 32 FMA steps per chunk): on CPU drivers shared memory is
per-lane scalar loads and barriers are coroutine switches, which the texel-reading register tile of
ops/matmul.py avoids.

Load path (issue 18): the kernels read the packed blocks as 16-byte texels of an rgba32ui view where
the device reads texels faster (runtime/loadpath.py's probe; FUELVK_TEXEL_LOADS forces either path),
from any even byte offset, and through 16-bit storage-buffer words otherwise (views over
maxTexelBufferElements too); both paths decode the same fetched bytes, so they give the same bits.
"""
import math
import operator
import struct

import numpy as np

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray, empty
from ..errors import DTypeError, FormatError, FuelVKError, ShapeError, UnsupportedError
from ..kernels import kernel
from ..kernels.quant import (BLOCK, DEQUANT_WG, K_LOOP, MATVEC_ROWS, QUANTIZE_WG, TEXEL_BYTES, TILE_M, TILE_N,
                             matvec_k_loop, matvec_wg)
from ..runtime import loadpath
from ._core import blockwise, contiguous, device_args, fits, k_per_launch, result, spans, split_k, windowed
from .movement import launch_write
from .movement_core import copy
from ._routes import forced_route

__all__ = ["qmatmul", "qmatmul_route"]  # quantize/dequantize stay module-level (fuelvk.quant.*): no clash with fuelvk.*

KINDS = tuple(BLOCK)
QUANTIZE_KINDS = ("q8_0", "q4_0")
ROUTES = ("matvec", "tiled", "dequant")
# Per kind, the M from which dequantize + f32 matmul beats one qmatvec per row of x: the crossover
# measured (process CPU time, N=1024 K=4096, best of 8, lavapipe) at M ~ 13-14 (q4_0, q4_k), ~ 9-10
# (q8_0), ~ 7 (q6_k, whose matvec decode costs most) since qmatvec's one-subgroup workgroups and q4_0 /
# q8_0 block pairs (it was 7 / 6 / 7 / 4 before); at the crossover the matvec is kept (its memory stays
# the packed blocks).
DEQUANT_MIN_M = {"q4_0": 13, "q8_0": 9, "q4_k": 13, "q6_k": 7}
# f32 bytes of W dequantized at once by the dequant route (chunks of whole weight rows).
DEQUANT_CHUNK_BYTES = 64 << 20
ENV = "FUELVK_QMATMUL_ROUTE"


class QuantTensor:
    """Packed GGML blocks on the device: `data` (uint8 Array of the raw block bytes), `kind`, and
    the logical `shape` (numpy order; the last dim is the row length K)."""
    __slots__ = ("data", "kind", "shape")

    def __init__(self, data, kind, shape):
        self.data, self.kind, self.shape = data, kind, tuple(int(n) for n in shape)

    @property
    def nbytes(self):
        return self.data.nbytes

    @property
    def dtype(self):
        return self.kind

    def dequantize(self):
        return dequantize(self)

    def __repr__(self):
        return f"QuantTensor(kind={self.kind}, shape={self.shape}, nbytes={self.nbytes})"


def _kind(op, kind):
    """Normalize a kind ('q4_0', 'Q4_K', gguf's GGMLQuantizationType) or raise a typed error."""
    name = getattr(kind, "name", kind)
    if not isinstance(name, str):
        raise DTypeError(f"{op}: quant kind must be a string such as 'q4_0', got {kind!r}; accepted: {KINDS}")
    k = name.lower()
    if k == "q4_k_m":
        k = "q4_k"
    if k in BLOCK:
        return k
    try:
        from gguf import GGMLQuantizationType
        known = k.upper() in GGMLQuantizationType.__members__
    except ImportError:  # pragma: no cover - gguf is a test dependency
        known = False
    if known:
        raise UnsupportedError(f"{op}: GGML kind {name!r} is not implemented by fuelvk; accepted: {KINDS}")
    raise DTypeError(f"{op}: unknown quant kind {kind!r}; accepted: {KINDS}")


def _logical_shape(op, kind, shape, byte_shape):
    qk, bs = BLOCK[kind]
    if shape is None:
        if not byte_shape or byte_shape[-1] % bs:
            raise ShapeError(f"{op}: {kind} blocks are {bs} bytes; a block array of shape {tuple(byte_shape)} "
                             "is not whole blocks per row (pass shape=)")
        return tuple(byte_shape[:-1]) + (byte_shape[-1] // bs * qk,)
    try:
        shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(map(operator.index, shape))
    except TypeError:
        raise ShapeError(f"{op}: shape must be a tuple of ints, got {shape!r}") from None
    if not shape or any(n < 0 for n in shape):
        raise ShapeError(f"{op}: shape {shape} must have at least one non-negative dim")
    return shape


def _check_rows(op, kind, shape):
    qk, _ = BLOCK[kind]
    if shape[-1] % qk:
        raise ShapeError(f"{op}: the row length K={shape[-1]} of shape {shape} is not a multiple of the "
                         f"{kind} block size {qk}")


def _blocks(op, blocks, kind, shape):
    """(uint8 Array of whole blocks with an even byte offset, kind, logical shape, numpy_out)."""
    if isinstance(blocks, QuantTensor):
        k = _kind(op, kind) if kind is not None else _kind(op, blocks.kind)
        if k != _kind(op, blocks.kind):
            raise DTypeError(f"{op}: kind {kind!r} given for a {blocks.kind} QuantTensor")
        if shape is not None and tuple(shape) != blocks.shape:
            raise ShapeError(f"{op}: shape {tuple(shape)} given for a QuantTensor of shape {blocks.shape}")
        data, numpy_out, shape = blocks.data, False, blocks.shape
    else:
        if kind is None:
            raise DTypeError(f"{op}: raw block bytes need kind=; accepted: {KINDS}")
        k = _kind(op, kind)
        (data,), numpy_out = device_args(op, blocks)
        shape = _logical_shape(op, k, shape, data.shape)
    if data.dtype != _dt.uint8:
        raise DTypeError(f"{op}: block bytes must be uint8, got {data.dtype}")
    _check_rows(op, k, shape)
    qk, bs = BLOCK[k]
    want = math.prod(shape) // qk * bs
    if data.size != want:
        raise ShapeError(f"{op}: {k} blocks of logical shape {shape} take {want} bytes "
                         f"({math.prod(shape) // qk} blocks x {bs} B), got {data.size} bytes")
    data = contiguous(data)
    if data.offset % 2:  # blocks are read as 16-bit words
        data = copy(data)
    return data.reshape(-1), k, shape, numpy_out


def _view(ctx, arr, store=False, anywhere=False):
    """(buffer for a texel-view binding, whether the kernel may use it): arr's own slot where the
    device reads (store: writes) faster through texel views (loadpath.texel_paths: the probe, or
    FUELVK_TEXEL_LOADS), arr starts on a texel (unless `anywhere`: the kernel reads from any even
    byte) and its slot is whole texels within maxTexelBufferElements; else the 16-byte stub (the
    kernel then takes storage-buffer access)."""
    buf = arr.buffer
    if (loadpath.texel_paths(ctx)[1 if store else 0]
            and (anywhere or arr.offset * arr.dtype.itemsize % TEXEL_BYTES == 0)
            and buf.size % TEXEL_BYTES == 0 and buf.size // TEXEL_BYTES <= ctx.device.limits.maxTexelBufferElements):
        return buf, True
    return loadpath.stub(ctx.pool), False


def _block_texels(ctx, kind, blocks):
    """(q_t binding, TEX bits 0 and 2): the blocks through their view (a block at any even byte is
    read from the texels it touches); bit 2 where every fetch starts on a texel (q4_k blocks, 144
    bytes, from a texel boundary: its header and 32-byte nibble runs are whole texels)."""
    qb, q_on = _view(ctx, blocks, anywhere=True)
    return qb, int(q_on) | (4 if q_on and kind == "q4_k" and blocks.offset % TEXEL_BYTES == 0 else 0)


def _texels(ctx, kind, blocks, other, other_name, store=False):
    """({"q_t": .., other_name: ..} view bindings, TEX bits): the blocks' (_block_texels), and bit 1:
    x / the output through its view."""
    (qb, qtex), (ob, o_on) = _block_texels(ctx, kind, blocks), _view(ctx, other, store)
    return {"q_t": qb, other_name: ob}, qtex | 2 * int(o_on)


def quantize(x, kind="q8_0"):
    """float32 [..., K] -> uint8 blocks [..., K / 32 * bytes_per_block], bit-exact with gguf.quants.quantize.

    numpy inputs of other float dtypes are converted to float32 on the host first (as gguf does).
    """
    op = "quantize"
    k = _kind(op, kind)
    if k not in QUANTIZE_KINDS:
        raise UnsupportedError(f"{op}: quantizing to {k} is not implemented; accepted: {QUANTIZE_KINDS}")
    if not isinstance(x, Array):
        x = np.asarray(x)
        if x.dtype.kind not in "fiu" and x.dtype != _dt.bfloat16:
            raise DTypeError(f"{op}: expected a float array, got {x.dtype}")
        x = x.astype(np.float32)
    (x,), numpy_out = device_args(op, x)
    if x.dtype != _dt.float32:
        raise DTypeError(f"{op}: kernel quantize.{k} takes float32, got {x.dtype}")
    if x.ndim == 0:
        raise ShapeError(f"{op}: a 0-d array has no rows to quantize")
    _check_rows(op, k, x.shape)
    qk, bs = BLOCK[k]
    out = empty(x.shape[:-1] + (x.shape[-1] // qk * bs,), _dt.uint8)
    n_blocks = x.size // qk
    if n_blocks and not fits(x, out):    # larger than one binding: runs of whole blocks through windows
        blockwise(op, lambda xb: quantize(xb, k), [contiguous(x).reshape(n_blocks, qk)],
                  out.reshape(n_blocks, bs), axes=1)
    elif n_blocks:
        x = contiguous(x)
        ctx = runtime.get()
        ctx.launch(kernel("quantize", k), ctx.groups(-(-n_blocks // QUANTIZE_WG)), qout=out, xin=x,
                   n_elements=x.size, n_blocks=n_blocks, off_x=x.offset, off_q=out.offset // 2)
    return result(out, numpy_out)


def dequantize(blocks, kind=None, shape=None):
    """Packed blocks (uint8 array or QuantTensor) -> float32 of the logical shape, bit-exact with gguf.

    Without shape=, the shape follows gguf's rule: the last dim of the byte array holds whole blocks.
    """
    data, k, shape, numpy_out = _blocks("dequantize", blocks, kind, shape)
    out = empty(shape, _dt.float32)
    n = out.size
    qk, bs = BLOCK[k]
    if n and not fits(data, out):        # larger than one binding: runs of whole blocks through windows
        blockwise("dequantize", lambda db: dequantize(db, k, (db.shape[0], qk)),
                  [data.reshape(n // qk, bs)], out.reshape(n // qk, qk), axes=1)
    elif n:
        ctx = runtime.get()
        views, tex = _texels(ctx, k, data, out, "o_t", store=True)
        ctx.launch(kernel("dequant", k), ctx.groups(-(-n // (32 * DEQUANT_WG))), out=out, qin=data, **views,
                   n_blocks=n // BLOCK[k][0], out_elements=n, off_q=data.offset // 2, off_o=out.offset, TEX=tex)
    return result(out, numpy_out)


def _route(op, m, kind, route):
    """matvec for M < DEQUANT_MIN_M[kind] rows of x, dequant from there, unless route= or ENV forces one."""
    return forced_route(op, route, ENV, ROUTES) or _picked(m, kind)


def _picked(m, kind):
    return "matvec" if m < DEQUANT_MIN_M[kind] else "dequant"


def qmatmul_route(x, shape, *, kind=None, route=None):
    """The route ("matvec", "dequant" or "tiled") qmatmul(x, w, ...) takes for x (an array or its shape) and the
    weight (a QuantTensor, or its logical shape (N, K) with kind=), honouring route= and
    FUELVK_QMATMUL_ROUTE; nothing is uploaded or launched."""
    op = "qmatmul_route"
    xs = x.shape if isinstance(x, Array) else tuple(x) if isinstance(x, (tuple, list)) else np.shape(x)
    ws = shape.shape if isinstance(shape, QuantTensor) else tuple(shape)
    if len(ws) != 2:
        raise ShapeError(f"{op}: the weight shape must be (N, K), got {ws}")
    if not xs or xs[-1] != ws[1]:
        raise ShapeError(f"{op}: x of shape {tuple(xs)} does not match the weight shape (N, K) = {ws}")
    forced = forced_route(op, route, ENV, ROUTES)
    if forced:
        return forced
    if isinstance(shape, QuantTensor):
        kind = shape.kind
    elif kind is None:
        raise DTypeError(f"{op}: the route depends on the block kind: pass kind= with a weight shape; accepted: {KINDS}")
    return _picked(math.prod(xs[:-1]), _kind(op, kind))


def qmatmul(x, w_blocks, kind=None, shape=None, route=None):
    """x [..., K] float32 @ W.T for W [N, K] given as GGML blocks (uint8 bytes or a QuantTensor).

    M (= prod of x's leading dims) < DEQUANT_MIN_M[kind] runs the fused qmatvec per row, larger M the
    dequant route (module docstring); route="matvec"/"dequant"/"tiled" (or FUELVK_QMATMUL_ROUTE)
    forces one. Returns float32 [..., N].
    """
    op = "qmatmul"
    (xa,), x_numpy = device_args(op, x)
    w, k, wshape, w_numpy = _blocks(op, w_blocks, kind, shape)
    if len(wshape) != 2:
        raise ShapeError(f"{op}: the weight shape must be (N, K), got {wshape}")
    n, kk = wshape
    if xa.dtype != _dt.float32:
        raise DTypeError(f"{op}: x must be float32 (kernels qmatvec.{k} / qmatmul_tiled.{k}), got {xa.dtype}")
    if xa.ndim == 0 or xa.shape[-1] != kk:
        raise ShapeError(f"{op}: x of shape {xa.shape} does not match the weight shape (N, K) = {wshape}")
    lead = xa.shape[:-1]
    m = math.prod(lead)
    picked = _route(op, m, k, route)
    qk, bs = BLOCK[k]
    bpr = kk // qk
    if picked == "dequant" and m and n and kk:   # the product is the result: no output allocated here
        r = _qmatmul_dequant(contiguous(xa).reshape(m, kk), w.reshape(n, bpr * bs), k, kk)
        return result(r.reshape(lead + (n,)), x_numpy and w_numpy)
    out = empty(lead + (n,), _dt.float32)
    if m == 0 or n == 0:
        return result(out, x_numpy and w_numpy)
    if kk == 0:
        runtime.get().stream.fill(out.buffer, out.nbytes)
        return result(out, x_numpy and w_numpy)
    xa = contiguous(xa)
    if not fits(xa, w, out):
        _qmatmul_blocks(xa.reshape(m, kk), w.reshape(n, bpr * bs), k, kk, out.reshape(m, n), route)
        return result(out, x_numpy and w_numpy)
    ctx = runtime.get()
    woff = w.offset // 2
    if picked == "matvec" and xa.offset % 4:  # the matvec reads x as vec4
        xa = copy(xa)

    def run(k0, k1, dst):   # the K span k0..k1 (whole blocks): x columns k0.., W blocks k0 / qk..
        wk = woff + k0 // qk * bs // 2
        if picked == "matvec":
            groups = ctx.groups(-(-n // MATVEC_ROWS))
            v = kernel("qmatvec", k)
            views, tex = _texels(ctx, k, w, xa, "x_t")   # x's chunks start on texels: off_x % 4 == 0
            pairs = int(_pairs(k, bpr, wk, (k1 - k0) // qk))
            for i in range(m):
                ctx.launch(v, groups, out=dst, qin=w, xin=xa, **views, n=n, k=k1 - k0, blocks_per_row=bpr,
                           off_x=xa.offset + i * kk + k0, off_w=wk, off_o=dst.offset + i * n, TEX=tex, PAIRS=pairs,
                           WG=wg)
        else:
            groups = ctx.groups(-(-m // TILE_M) * -(-n // TILE_N))
            qt, tex = _block_texels(ctx, k, w)
            ctx.launch(kernel("qmatmul_tiled", k), groups, out=dst, qin=w, xin=xa, q_t=qt, m=m, n=n, k=k1 - k0,
                       blocks_per_row=bpr, ldx=kk, off_x=xa.offset + k0, off_w=wk, off_o=dst.offset, TEX=tex)

    wg = matvec_wg(ctx.device)
    k_loop = matvec_k_loop(wg) if picked == "matvec" else K_LOOP[picked]
    out = split_k(op, out, kk, k_per_launch(k_loop, ctx.device.loop_budget, qk), run)
    return result(out, x_numpy and w_numpy)


def _pairs(kind, bpr, off_w, span_blocks):
    """Whether qmatvec takes q4_0 / q8_0 blocks two at a time (its PAIRS path): every row's blocks and
    the K span start on a 4-byte word (off_w and the row length in 16-bit words even) and the span is
    whole pairs. Else one block a lane step, realigned from any even byte."""
    return kind in ("q4_0", "q8_0") and bpr % 2 == 0 and off_w % 2 == 0 and span_blocks % 2 == 0


def _qmatmul_dequant(x2, w2, k, kk):
    """The dequant route: x @ W.T with W dequantized to f32 in chunks of DEQUANT_CHUNK_BYTES of weight
    rows, each chunk's product written into its columns of the result (one chunk: the product itself
    is the result). Returns the [M, N] result."""
    from .matmul import matmul
    n = w2.shape[0]
    rows = max(1, DEQUANT_CHUNK_BYTES // (4 * kk))
    if rows >= n:
        return matmul(x2, dequantize(w2, k, (n, kk)).T)
    o2 = empty((x2.shape[0], n), _dt.float32)
    for n0 in range(0, n, rows):
        n1 = min(n, n0 + rows)
        launch_write(kernel("write_slice", "b4"), o2[:, n0:n1], matmul(x2, dequantize(w2[n0:n1], k, (n1 - n0, kk)).T))
    return o2


def _qmatmul_blocks(x2, w2, k, kk, o2, route):
    """qmatmul where x, the weight blocks or the result are larger than one binding: blocks of weight
    rows (N) and of x rows (M) through windows, each result block written into out's block."""
    fit = lambda v: windowed(v) is not None   # noqa: E731
    m, n = o2.shape
    n_spans = spans("qmatmul", "weight row", n, lambda n0, n1: fit(w2[n0:n1]) and fit(o2[0:1, n0:n1]))
    m_spans = spans("qmatmul", "row of x", m, lambda m0, m1: fit(x2[m0:m1])
                    and all(fit(o2[m0:m1, n0:n1]) for n0, n1 in n_spans))
    for m0, m1 in m_spans:
        xw = windowed(x2[m0:m1])
        for n0, n1 in n_spans:
            r = qmatmul(xw, windowed(w2[n0:n1]), kind=k, shape=(n1 - n0, kk), route=route)
            launch_write(kernel("write_slice", "b4"), windowed(o2[m0:m1, n0:n1]), r)


# -- GGUF files ---------------------------------------------------------------------------------
def _gguf_array(t, shape):
    from gguf import GGMLQuantizationType as Q
    data = np.asarray(t.data)
    if t.tensor_type == Q.BF16:
        data = data.view(np.uint8).view(_dt.bfloat16)
    return asarray(np.ascontiguousarray(data).reshape(shape))


def load_gguf(path):
    """{name: QuantTensor | Array} of a GGUF file (gguf-py's GGUFReader).

    Quantized tensors go to the device as their raw block bytes (no conversion, no dequantize);
    kinds fuelvk has no kernel for (e.g. q5_k) load too, and raise UnsupportedError when used.
    Float and integer tensors become Arrays. Shapes are numpy order (GGUF stores ne0 first).
    """
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader
    plain = {Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64}
    out = {}
    try:   # gguf-py reports a bad file as whatever its parser meets first
        for t in GGUFReader(path).tensors:
            shape = tuple(int(n) for n in reversed(t.shape.tolist()))
            if t.tensor_type in plain:
                out[t.name] = _gguf_array(t, shape)
            else:
                raw = np.ascontiguousarray(np.asarray(t.data).view(np.uint8).reshape(-1))
                out[t.name] = QuantTensor(asarray(raw), t.tensor_type.name.lower(), shape)
    except (ValueError, KeyError, IndexError, TypeError, struct.error, EOFError) as e:
        if isinstance(e, FuelVKError):
            raise
        raise FormatError(f"load_gguf: {path} is not a readable GGUF file ({type(e).__name__}: {e})") from e
    return out


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import Meta, OpDef, declare


def _block_kind(kind, blocks):
    """The block kind a call names (a QuantTensor carries its own)."""
    return kind if kind is not None else blocks.kind


def _quantize_rule(x, kind="q8_0"):
    """GGML blocks travel as uint8 [rows, bytes per row] (gguf's layout)."""
    return Meta(tuple(x.shape[:-1]) + (x.shape[-1] // BLOCK[kind][0] * BLOCK[kind][1],), np.dtype(np.uint8))


def _dequantize_rule(blocks, kind=None, shape=None):
    values, nbytes = BLOCK[_block_kind(kind, blocks)]
    out = tuple(shape) if shape is not None else tuple(blocks.shape[:-1]) + (blocks.shape[-1] // nbytes * values,)
    return Meta(out, np.dtype(np.float32))


def _qmatmul_rule(x, w_blocks, kind=None, shape=None, route=None):
    return Meta(tuple(x.shape[:-1]) + (w_blocks.shape[0],), np.dtype(np.float32))


def call_route(x, w_blocks, kind=None, shape=None, route=None):
    """qmatmul_route for a qmatmul call's own arguments (the record's route resolver: the bench reports it)."""
    if isinstance(w_blocks, QuantTensor):
        return qmatmul_route(x, w_blocks, route=route)
    k = _kind("qmatmul", kind)
    return qmatmul_route(x, _logical_shape("qmatmul", k, shape, w_blocks.shape), kind=k, route=route)


# torch ops take kind as a str and the blocks as uint8 tensors; the last dim of the values is bytes / block
# bytes * block values (fuelvk.quant's rule).
_UINT8 = {"skip": "GGUF blocks are uint8 byte streams: no FlashInfer-Bench dtype (uint8) describes them"}
declare(
    OpDef("quant.quantize", quantize, _quantize_rule, schema="(Tensor x, str kind='q8_0') -> Tensor", export=_UINT8),
    OpDef("quant.dequantize", dequantize, _dequantize_rule, schema="(Tensor blocks, str kind) -> Tensor",
          export=_UINT8),
    OpDef("quant.qmatmul", qmatmul, _qmatmul_rule, grad="qmatmul", route="call_route",
          schema="(Tensor x, Tensor w_blocks, str kind) -> Tensor", export=_UINT8),
)
