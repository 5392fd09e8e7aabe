"""Mixture-of-experts building blocks (used by the FlashInfer-Bench moe solution, definitions/kinds.py).

fp8_block_matmul(x, w, scale): x @ W.T where W [N, K] is float8_e4m3fn with float32 block scales
[ceil(N / block), ceil(K / block)] (DeepSeek-V3's and FlashInfer's fp8 block-scale layout): each weight
element is dequantized (fp8 * its block's scale, in f32) inside the kernel as it is read; the weight is
never expanded.  W may be a view into a larger stack (one expert of [E, N, K]): only its own bytes are
bound, so a stack over one binding works expert by expert.
"""
from .. import dtypes as _dt
from .. import runtime
from ..array import zeros
from ..errors import DTypeError, FuelVKMemoryError, ShapeError
from ..kernels import kernel
from ..kernels.matmul import TEXEL_BYTES
from ..kernels.moe import FP8_MT, FP8_WG, K_LOOP
from ..runtime.loadpath import stub
from ._core import contiguous, device_args, k_per_launch, new_like, result, split_k, windowed

__all__ = []   # not (yet) a public op: the moe solution's kernel


def fp8_block_matmul(x, w, scale, block=128):
    """float32 [M, N] = x [M, K] (float32) @ dequant(w [N, K] float8_e4m3fn, scale).T, dequant being
    w * scale[n // block, k // block] per element (block: int, or (rows, cols))."""
    op = "fp8_block_matmul"
    (x, w, scale), numpy_out = device_args(op, x, w, scale)
    bn, bk = (block, block) if isinstance(block, int) else (int(block[0]), int(block[1]))
    if x.dtype != _dt.float32 or scale.dtype != _dt.float32 or w.dtype != _dt.float8_e4m3fn:
        raise DTypeError(f"{op}: needs x float32, w float8_e4m3fn, scale float32; got x {x.dtype}, "
                         f"w {w.dtype}, scale {scale.dtype}")
    if x.ndim != 2 or w.ndim != 2 or scale.ndim != 2 or x.shape[1] != w.shape[1] or bn <= 0 or bk <= 0:
        raise ShapeError(f"{op}: needs x [M, K], w [N, K], scale [N / block, K / block] with block > 0; got x "
                         f"{x.shape}, w {w.shape}, scale {scale.shape}, block ({bn}, {bk})")
    (m, k), n = x.shape, w.shape[0]
    want = (-(-n // bn), -(-k // bk))
    if scale.shape != want:
        raise ShapeError(f"{op}: scale of w {w.shape} in ({bn}, {bk}) blocks must be {want}, got {scale.shape}")
    if m * n == 0 or k == 0:   # an empty sum is zeros
        return result(zeros((m, n), _dt.float32), numpy_out)
    out = new_like((m, n), _dt.float32)
    bound = [windowed(contiguous(a)) for a in (x, w, scale)]
    for name, a, b in zip(("x", "w", "scale"), (x, w, scale), bound):
        if b is None:
            raise FuelVKMemoryError(f"{op}: {name} {a.shape} spans more bytes than one binding holds "
                                    f"(maxStorageBufferRange); pass fewer rows")
    x, w, scale = bound
    ctx = runtime.get()

    per = k_per_launch(K_LOOP, ctx.device.loop_budget, 16)
    words = all(v % 4 == 0 for v in (k, bk, x.offset, w.offset) + ((per,) if per else ()))
    limit = ctx.device.limits.maxTexelBufferElements * TEXEL_BYTES
    tex = (words and k % 16 == 0 and bk % 16 == 0 and w.offset % 16 == 0
           and ctx.device.texel_loads and x.buffer.size <= limit and w.buffer.size <= limit)
    views = {"x_t": x.buffer, "w_t": w.buffer} if tex else dict.fromkeys(("x_t", "w_t"), stub(ctx.pool))

    def run(k0, k1, dst):
        ctx.launch(kernel(op, "f32"), ctx.groups(-(-(-(-m // FP8_MT) * n) // FP8_WG)), out=dst, x=x, w=w, scale=scale,
                   **views, TEX=int(tex),
                   m=m, n=n, k=k, k0=k0, k1=k1, block_n=bn, block_k=bk, off_o=dst.offset, off_x=x.offset,
                   off_w=w.offset, off_s=scale.offset, x_row=k, w_row=k, s_row=want[1], aligned=int(words))
    res = split_k(op, out, k, per, run)
    return result(res, numpy_out)
