"""The load / store path of memory-bound kernels (Device.texel_loads / texel_stores): probed once
per driver.

A micro-probe times the same read-dominated copy (shaders/loadpath.comp in READ mode: each
invocation combines 16 texels of 16 bytes) through a storage buffer (uvec4 loads) and through an
rgba32ui storage texel view (imageLoad), with device timestamps. Texel loads win when they take at
most TEXEL_WINS of the storage-buffer time (lavapipe: ~16x faster, benches/bench_load_paths.py; GPUs
read both at about the same speed, and keep the storage-buffer path there). The result is a property
of the driver, never inferred from its name, and cached on disk next to the VkPipelineCache like the
loop budget (runtime/loopcap.py; FUELVK_PIPELINE_CACHE=0: probed in every process). Stores are
probed the same way with elementwise's LINEAR kernel writing through a storage buffer or an rgba32ui
view. FUELVK_TEXEL_LOADS=0/1 overrides both per call (tests force each path with it).
"""
import weakref

from .. import config
from .device import _UNPROBED
from .pipelines import best_device_ms, cached_probe

ENV = "FUELVK_TEXEL_LOADS"
TEXELS = 1 << 18          # 4 MiB read per timing: long enough to dwarf launch cost, short for a CPU driver
TEXEL_WINS = 0.8          # texel path chosen when it takes <= 80% of the storage-buffer time
REPEATS = 3
VERSION = 2               # of the cached record
TEXEL_BYTES = 16          # an rgba32ui texel
# A launch whose chunk moves fewer bytes per operand reads and writes through storage buffers (the
# kernel's storage-only twin, no views bound), unless FUELVK_TEXEL_LOADS forces a path: a view costs
# host time to bind (lavapipe executes a view-less twin no faster: measured equal), and below this
# size faster reads do not repay it (lavapipe, f32 add, process CPU per op, texel vs storage: 256
# elements 60.0 vs 59.6 us, 1024: 58.5 vs 61.5 us, 4096: 69 vs 89 us).
TEXEL_MIN_BYTES = 2048
_stubs = weakref.WeakKeyDictionary()


def probe(ctx):
    """{"ssbo_ms", "texel_ms"}: the best of REPEATS device times of each path over TEXELS texels."""
    from ..kernels import kernel
    from ..kernels.loadpaths import LOADPATH_RPT, LOADPATH_WG
    src = ctx.pool.alloc(TEXELS * 16)
    groups = -(-TEXELS // (LOADPATH_WG * LOADPATH_RPT))
    dst = ctx.pool.alloc(groups * LOADPATH_WG * 16)

    def run(tag):
        v = kernel("loadpath", tag)
        return lambda: ctx.launch(v, ctx.groups(groups), dst=dst, src=src, n=TEXELS, off=0, READ=1)
    times = best_device_ms(ctx, {"ssbo_ms": run("ssbo_u4"), "texel_ms": run("stb_rgba32")}, REPEATS)
    times.update(_probe_stores(ctx, src))
    return times


def _probe_stores(ctx, src):
    """{"ssbo_store_ms", "texel_store_ms"}: elementwise's f32 negative on TEXELS * 4 elements, its
    output stored through the storage buffer or the rgba32ui view (loads through texels both times)."""
    from ..kernels import kernel
    from ..kernels.elementwise import EPT, FLAGS, UNARY, WG
    v = kernel("unary", "f32")
    n = TEXELS * 4
    dst = ctx.pool.alloc(n * 4)
    groups = ctx.groups(-(-n // (4 * WG * EPT)))

    def run(texw):
        return lambda: ctx.launch(v, groups, out=dst, in_a=src, a_t=src, o_t=dst, n=n, rank=1,
                                  flags=FLAGS["a_contiguous"], off_o=0, off_a=0, off_b=0, s0=(0, 0), s1=(0, 0),
                                  shape=(n,), sa=(1,), sb=(), inner=0, magic=0, shift=1,
                                  OP=UNARY["negative"], LINEAR=1, TEX=1, TEXW=texw)
    return best_device_ms(ctx, {"ssbo_store_ms": run(0), "texel_store_ms": run(1)}, REPEATS)


def decide(rec):
    """(texel loads, texel stores): each where the texel path took <= TEXEL_WINS of the other's time."""
    return (rec["texel_ms"] <= TEXEL_WINS * rec["ssbo_ms"],
            rec["texel_store_ms"] <= TEXEL_WINS * rec["ssbo_store_ms"])


def resolve(ctx):
    """((texel loads, texel stores), record): the cached or freshly probed choice; record: the
    probe's timings."""
    rec = cached_probe(ctx.device, "loadpath", VERSION, lambda: probe(ctx))
    return decide(rec), {k: v for k, v in rec.items() if k != "version"}


def forced():
    """Whether FUELVK_TEXEL_LOADS is set (to a non-empty value): read per call, cheaply (config.is_set)."""
    return config.is_set(ENV)


def texel_paths(ctx):
    """(texel loads, texel stores) now: FUELVK_TEXEL_LOADS if set (both), else the probe's."""
    if config.is_set(ENV):                  # per call; parsed only when set (launch_strided's hot path)
        on = config.get(ENV)
        return on, on
    dev = ctx.device
    if dev._texel_loads is _UNPROBED:
        dev.texel_loads
    return dev._texel_loads, dev._texel_stores


def stub(pool):
    """A 16-byte buffer of pool's, bound to texel views a kernel does not read (a view binding must
    always be valid, also on the storage-buffer path)."""
    b = _stubs.get(pool)
    if b is None:
        b = _stubs[pool] = pool.alloc(TEXEL_BYTES)
    return b
