"""The load path memory-bound kernels read through (Device.texel_loads): probed once per driver.

A micro-probe times the same read-dominated copy (shaders/loadpath.comp in READ mode: each
invocation combines 16 texels of 16 bytes) through a storage buffer (uvec4 loads) and through an
rgba32ui storage texel view (imageLoad), with device timestamps. Texel loads win when they take at
most TEXEL_WINS of the storage-buffer time (lavapipe: ~16x faster, benches/bench_load_paths.py; GPUs
read both at about the same speed, and keep the storage-buffer path there). The result is a property
of the driver, never inferred from its name, and cached on disk next to the VkPipelineCache like the
loop budget (runtime/loopcap.py; FUELVK_PIPELINE_CACHE=0: probed in every process).
FUELVK_TEXEL_LOADS=0/1 overrides it per call (tests force each path with it).
"""
import json
import weakref

from .. import config
from .pipelines import disk_cache_path

ENV = "FUELVK_TEXEL_LOADS"
TEXELS = 1 << 18          # 4 MiB read per timing: long enough to dwarf launch cost, short for a CPU driver
TEXEL_WINS = 0.8          # texel path chosen when it takes <= 80% of the storage-buffer time
REPEATS = 3
VERSION = 1               # of the cached record
TEXEL_BYTES = 16          # an rgba32ui texel
_stubs = weakref.WeakKeyDictionary()


def probe(ctx):
    """{"ssbo_ms", "texel_ms"}: the best of REPEATS device times of each path over TEXELS texels."""
    from ..kernels import kernel
    from ..kernels.loadpaths import LOADPATH_RPT, LOADPATH_WG
    src = ctx.pool.alloc(TEXELS * 16)
    groups = -(-TEXELS // (LOADPATH_WG * LOADPATH_RPT))
    dst = ctx.pool.alloc(groups * LOADPATH_WG * 16)
    times = {}
    for name, tag in (("ssbo_ms", "ssbo_u4"), ("texel_ms", "stb_rgba32")):
        v = kernel("loadpath", tag)

        def run():
            ctx.launch(v, ctx.groups(groups), dst=dst, src=src, n=TEXELS, off=0, READ=1)
        run()                                    # pipeline build and first touch outside the timing
        ctx.stream.synchronize()
        timer, best = ctx.timer(), None
        for _ in range(REPEATS):
            timer.start()
            run()
            ms, _ = timer.stop()
            best = ms if best is None else min(best, ms)
        times[name] = best
    return times


def decide(rec):
    return rec["texel_ms"] <= TEXEL_WINS * rec["ssbo_ms"]


def resolve(ctx):
    """(texel_loads, record): the cached or freshly probed choice; record {"ssbo_ms", "texel_ms"}."""
    path = disk_cache_path(ctx.device, "loadpath")
    path = None if path is None else path.with_suffix(".json")
    rec = None
    if path is not None:
        try:
            rec = json.loads(path.read_text())
            if rec.get("version") != VERSION:
                rec = None
        except (OSError, ValueError, AttributeError):
            rec = None
    if rec is None:
        rec = dict(probe(ctx), version=VERSION)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(rec))
            except OSError:
                pass
    return decide(rec), {"ssbo_ms": rec["ssbo_ms"], "texel_ms": rec["texel_ms"]}


def texel_loads(ctx):
    """Whether kernels read through texel views now: FUELVK_TEXEL_LOADS if set, else the probe's."""
    if config.is_set(ENV):
        return config.get(ENV)
    return ctx.device.texel_loads


def stub(pool):
    """A 16-byte buffer of pool's, bound to texel views a kernel does not read (a view binding must
    always be valid, also on the storage-buffer path)."""
    b = _stubs.get(pool)
    if b is None:
        b = _stubs[pool] = pool.alloc(TEXEL_BYTES)
    return b
