"""Which f16 <-> f32 conversion the float16 kernels use (Device.half_native): probed once per driver.

shaders/common/half.glsl has two forms with the same bits: the device's own conversion
(unpackHalf2x16 / packHalf2x16, one instruction on GPUs) and integer arithmetic on the bits (~10
operations, exact on every driver; faster where the driver emulates the conversion: lavapipe). Every
kernel that includes it declares the HALF_NATIVE specialization constant, which the pipeline cache
sets from Device.half_native when a pipeline is created (runtime/pipelines.py).

The probe (shaders/half_probe.comp) first checks the native form bit for bit against the integer one
on every f16 pattern (widening) and on f32 values at, just below and just above every f16 rounding
boundary of both signs plus zeros, f32 subnormals, overflow, inf and NaNs (narrowing): a device that
flushes f16 subnormals, rounds another way or loses a NaN's sign is never given the native form. It
then times dependent f16 -> f32 -> f16 round trips in both forms; the native form is kept unless the
integer one takes at most INT_WINS of its time. The record is a property of the driver, never
inferred from its name, cached on disk like the load path (runtime/loadpath.py; FUELVK_PIPELINE_CACHE=0:
probed in every process). FUELVK_HALF_NATIVE=0/1 overrides it (read when a context first needs it).
"""
import numpy as np

from .. import config
from .pipelines import cached_probe

ENV = "FUELVK_HALF_NATIVE"
SPEC = "HALF_NATIVE"      # the specialization constant of common/half.glsl
VERSION = 1               # of the cached record
INT_WINS = 0.9            # the integer form is chosen when it takes <= 90% of the native form's time
TIMING_WORDS = 1 << 18    # words (two halves each) per timing
TIMING_REPS = 8           # round trips per word
REPEATS = 3
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


def probe(ctx):
    """{"exact": whether the native form gave the integer form's bits on every check input,
    "native_ms", "int_ms": the best of REPEATS device times of TIMING_REPS round trips over
    TIMING_WORDS words (0 / 0 when not exact: not timed)}."""
    from ..kernels import kernel
    v = kernel("half_probe", "u32")
    words, floats = check_inputs()
    n = len(words)
    pool = ctx.pool
    w_buf, f_buf = pool.alloc(4 * n), pool.alloc(8 * n)
    ctx.upload(w_buf, words)
    ctx.upload(f_buf, floats)
    outs = {}
    for native in (0, 1):
        wide, narrow = pool.alloc(8 * n), pool.alloc(4 * n)
        ctx.launch(v, ctx.groups(-(-n // WG)), words=w_buf, floats=f_buf, wide=wide, narrow=narrow,
                   n=n, reps=0, scale=1.0, shift=0.0, HALF_NATIVE=native)
        outs[native] = (ctx.download(wide, 0, 8 * n), ctx.download(narrow, 0, 4 * n))
    exact = outs[0] == outs[1]
    rec = {"exact": bool(exact), "native_ms": 0.0, "int_ms": 0.0}
    if not exact:
        return rec
    tw = np.random.default_rng(0).integers(0, 1 << 32, TIMING_WORDS, dtype=np.uint32)
    t_buf, t_out = pool.alloc(4 * TIMING_WORDS), pool.alloc(4 * TIMING_WORDS)
    ctx.upload(t_buf, tw)
    for name, native in (("int_ms", 0), ("native_ms", 1)):
        def run():
            ctx.launch(v, ctx.groups(-(-TIMING_WORDS // WG)), words=t_buf, floats=f_buf, wide=t_out,
                       narrow=t_out, n=TIMING_WORDS, reps=TIMING_REPS, scale=1.0, shift=0.0, HALF_NATIVE=native)
        rec[name] = _best(ctx, run)
    return rec


def _best(ctx, run):
    """The best of REPEATS device times of run(), after one untimed call (pipeline build, first touch)."""
    run()
    ctx.stream.synchronize()
    timer, best = ctx.timer(), None
    for _ in range(REPEATS):
        timer.start()
        run()
        ms, _ = timer.stop()
        best = ms if best is None else min(best, ms)
    return best


def decide(rec):
    """Whether kernels use the native conversion: it is exact here, and the integer form does not take
    at most INT_WINS of its time."""
    return rec["exact"] and not rec["int_ms"] <= INT_WINS * rec["native_ms"]


def resolve(ctx):
    """(native, record): FUELVK_HALF_NATIVE if set (record None), else the cached or freshly probed
    choice; record: the probe's result."""
    forced = config.get(ENV)
    if forced is not None:
        return bool(forced), None
    rec = cached_probe(ctx.device, "halfconv", VERSION, lambda: probe(ctx))
    return decide(rec), {k: v for k, v in rec.items() if k != "version"}
