"""Which f16 <-> f32 conversions the float16 kernels use (Device.half_native): probed once per driver.

shaders/common/half.glsl has, per direction, the device's own conversion (unpackHalf2x16 /
packHalf2x16: one instruction on GPUs) and integer arithmetic on the bits (exact on every driver;
faster where the driver emulates the conversion). Every kernel that includes it declares the
HALF_NATIVE specialization constant (bit WIDEN: widen natively, bit NARROW: narrow natively), which
the pipeline cache sets from Device.half_native when a pipeline is created (runtime/pipelines.py).

The probe (shaders/half_probe.comp) first checks each native direction against the integer one: every
f16 pattern widened; f32 values at, just below and just above every f16 rounding boundary of both
signs, zeros, f32 subnormals, overflow, inf and NaNs narrowed. Every non-NaN must give the same bits
and every NaN a NaN (its payload is the device's: half.glsl), else that direction stays integer (a
device that flushes f16 subnormals or rounds another way). Then it times dependent f16 -> f32 -> f16
round trips under each choice of the exact directions; a native direction is given up only where the
integer form takes at most INT_WINS of its time (lavapipe: narrowing; widening natively is faster
there). The record is a property of the driver, never inferred from its name, cached on disk like the
load path (runtime/loadpath.py; FUELVK_PIPELINE_CACHE=0: probed in every process).
FUELVK_HALF_NATIVE=0/1 overrides it (integer / native both ways; read when a context first needs it).
"""
import numpy as np

from .. import config
from .pipelines import HALF_SPEC as SPEC  # noqa: F401 - the name of the spec constant set from the choice
from .pipelines import best_device_ms, cached_probe

ENV = "FUELVK_HALF_NATIVE"
WIDEN, NARROW = 1, 2      # SPEC's bits
VERSION = 2               # of the cached record
INT_WINS = 0.9            # a direction goes integer where that takes <= 90% of the native time
TIMING_WORDS = 1 << 15    # words (two halves each) per timing
TIMING_REPS = 8           # round trips per word
ROUNDS = 16               # interleaved timings per choice (the best counts)
WG = 64                   # half_probe.comp's local size


def check_inputs():
    """(words, floats): every f16 pattern, two to a u32 word; and f32 bit patterns for narrowing, two to a
    word's worth: each finite f16 magnitude, the midpoints to the next one and their f32 neighbours,
    alternately negated, then zeros, f32 subnormals, values around the overflow point, inf and NaNs."""
    words = np.arange(1 << 16, dtype=np.uint32)
    words = words[0::2] | (words[1::2] << 16)
    lo = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    hi = np.arange(1, 0x7C01, dtype=np.uint16).view(np.float16).astype(np.float32)   # 0x7C00: inf
    hi[-1] = 65520.0                                                                  # 65504's upper midpoint
    mid = ((lo.astype(np.float64) + hi) / 2).astype(np.float32)                       # exact in f32
    mb = mid.view(np.uint32)
    vals = np.concatenate([lo.view(np.uint32), mb, mb - 1, mb + 1])
    vals[1::2] |= 0x80000000
    special = np.array([0x0, 0x80000000, 0x1, 0x80000001, 0x7FFFFF, 0x807FFFFF, 0x00400000, 0x33000000,
                        0x33000001, 0x32FFFFFF, 0xB3000000, 0x477FF000, 0x477FEFFF, 0x477FF001, 0x47800000,
                        0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFF800001, 0x7FC00000,
                        0xFFC00000, 0x7F802000, 0x7FFFE000, 0x7FBFFFFF, 0xFFFFFFFF, 0x7F801FFF], np.uint32)
    floats = np.concatenate([vals, special])
    floats = np.concatenate([floats, np.zeros(len(floats) % 2, np.uint32)])
    n = max(len(words), len(floats) // 2)
    words = np.resize(words, n)
    floats = np.resize(floats, 2 * n)
    return words, floats


def f16_nan(h):
    return (h & 0x7FFF) > 0x7C00


def f32_nan(u):
    return (u & 0x7FFFFFFF) > 0x7F800000


def same(native, ref, is_nan):
    """Whether native gives ref's bits on every non-NaN of ref and a NaN wherever ref has one."""
    n = is_nan(ref)
    return bool(np.array_equal(native[~n], ref[~n]) and np.all(is_nan(native[n])))


def run_check(ctx, words, floats, mask):
    """(wide, narrow) of half_probe.comp's check mode under HALF_NATIVE = mask: wide, the f32 bits of
    the halves of `words`; narrow, the f16 bits of `floats`, one per element."""
    from ..kernels import kernel
    n = len(words)
    pool = ctx.pool
    w_buf, f_buf, wide, narrow = pool.alloc(4 * n), pool.alloc(8 * n), pool.alloc(8 * n), pool.alloc(4 * n)
    ctx.upload(w_buf, np.ascontiguousarray(words, np.uint32))
    ctx.upload(f_buf, np.ascontiguousarray(floats, np.uint32))
    ctx.launch(kernel("half_probe", "u32"), ctx.groups(-(-n // WG)), words=w_buf, floats=f_buf, wide=wide,
               narrow=narrow, n=n, reps=0, scale=1.0, shift=0.0, HALF_NATIVE=mask)
    wide = np.frombuffer(ctx.download(wide, 0, 8 * n), np.uint32)
    narrow = np.frombuffer(ctx.download(narrow, 0, 4 * n), np.uint32)
    return wide, np.stack([narrow & 0xFFFF, narrow >> 16], axis=1).reshape(-1)


def probe(ctx):
    """{"widen_exact", "narrow_exact": whether each native direction matched the integer one (same()),
    "ms": {mask: the best of ROUNDS device times of TIMING_REPS round trips over TIMING_WORDS words}
    for every mask of exact native directions (0: integer both ways)}."""
    from ..kernels import kernel
    words, floats = check_inputs()
    ref_w, ref_n = run_check(ctx, words, floats, 0)
    nat_w, nat_n = run_check(ctx, words, floats, WIDEN | NARROW)
    rec = {"widen_exact": same(nat_w, ref_w, f32_nan), "narrow_exact": same(nat_n, ref_n, f16_nan)}
    exact = (WIDEN if rec["widen_exact"] else 0) | (NARROW if rec["narrow_exact"] else 0)
    v = kernel("half_probe", "u32")
    tw = np.random.default_rng(0).integers(0, 1 << 32, TIMING_WORDS, dtype=np.uint32)
    t_buf, t_out = ctx.pool.alloc(4 * TIMING_WORDS), ctx.pool.alloc(4 * TIMING_WORDS)
    ctx.upload(t_buf, tw)
    masks = [m for m in range(4) if m & exact == m]

    def run(mask):
        return lambda: ctx.launch(v, ctx.groups(-(-TIMING_WORDS // WG)), words=t_buf, floats=t_buf, wide=t_out,
                                  narrow=t_out, n=TIMING_WORDS, reps=TIMING_REPS, scale=1.0, shift=0.0,
                                  HALF_NATIVE=mask)
    best = best_device_ms(ctx, {mask: run(mask) for mask in masks}, ROUNDS)
    rec["ms"] = {str(m): best[m] for m in masks}
    return rec


def decide(rec):
    """HALF_NATIVE: the exact native directions, less each (narrowing first) whose integer form takes
    at most INT_WINS of the time with it native."""
    ms = rec["ms"]
    mask = (WIDEN if rec["widen_exact"] else 0) | (NARROW if rec["narrow_exact"] else 0)
    for bit in (NARROW, WIDEN):
        if mask & bit and ms[str(mask & ~bit)] <= INT_WINS * ms[str(mask)]:
            mask &= ~bit
    return mask


def resolve(ctx):
    """(HALF_NATIVE, record): FUELVK_HALF_NATIVE if set (both directions; record None), else the cached
    or freshly probed choice; record: the probe's result."""
    forced = config.get(ENV)
    if forced is not None:
        return (WIDEN | NARROW) if forced else 0, None
    rec = cached_probe(ctx.device, "halfconv", VERSION, lambda: probe(ctx))
    return decide(rec), {k: v for k, v in rec.items() if k != "version"}
