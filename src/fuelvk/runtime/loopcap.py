"""The per-invocation loop budget (Device.loop_budget): probed once per driver, cached on disk.

Mesa 22.x lavapipe silently stops every loop once one invocation has run 65,535 loop iterations,
summed over all its loops (LP_MAX_TGSI_LOOP_ITERATIONS); a kernel walking a long input dimension
serially then returns a wrong answer without an error. Kernels whose per-invocation trip count
grows with an input are therefore split on the host so that none exceeds Device.loop_budget
(None: no cap, nothing is split). The cap is measured by shaders/loop_probe.comp, never inferred
from a device name, and stored next to the VkPipelineCache (keyed by device UUID + driver version;
FUELVK_PIPELINE_CACHE=0: no disk read or write). FUELVK_LOOP_BUDGET=<n> (or "none") overrides the
budget, e.g. to force every split path in the tests.
"""

import numpy as np

from .. import config
from ..errors import DeviceError
from .pipelines import cached_probe

ENV = "FUELVK_LOOP_BUDGET"
PROBE_N = 1 << 22   # iterations asked of the probe; a driver that runs them all has no cap that matters
VERSION = 1                # of the cached record


def budget_of(cap):
    """The budget kernels plan with: the sum of loop iterations one invocation may run. 90% of the
    cap, leaving room for the short fixed loops (prologues, epilogues, reductions) the kernels'
    trip-count formulas leave out. None when there is no cap."""
    return None if cap is None else cap * 9 // 10


def probe(ctx):
    """{"cap": loop iterations one invocation ran before the driver stopped it (None: all PROBE_N
    ran), "scope": "invocation" when the cap counts the sum over an invocation's loops, "loop" when
    each loop alone, None without a cap}. One single-invocation dispatch per question."""
    from ..kernels import kernel
    v = kernel("loop_probe", "u32")
    buf = ctx.pool.alloc(16)

    def run(first, n):
        ctx.upload(buf, np.array([0, 0, 1, 0], np.uint32))
        ctx.launch(v, (1, 1, 1), counts=buf, first=first, n=n)
        return tuple(np.frombuffer(ctx.download(buf, 0, 8), np.uint32).tolist())

    _, ran = run(0, PROBE_N)
    if ran >= PROBE_N:
        return {"cap": None, "scope": None}
    if ran == 0:
        raise DeviceError(f"{ctx.device.name}: the loop probe ran no iteration; loops fail on this driver")
    # A first loop of half the cap: if the second then stops at the remainder, the cap is a sum.
    first = ran // 2
    a, b = run(first, PROBE_N)
    return {"cap": ran, "scope": "invocation" if a == first and b < ran else "loop"}


def _override():
    return config.is_set(ENV), config.get(ENV)


def resolve(ctx):
    """(budget, record) for ctx's device: FUELVK_LOOP_BUDGET if set, else the cached or freshly
    probed cap. `record` is the probe result ({"cap", "scope"}) or None when overridden."""
    forced, value = _override()
    if forced:
        return value, None
    rec = cached_probe(ctx.device, "loopcap", VERSION, lambda: probe(ctx))
    return budget_of(rec["cap"]), {"cap": rec["cap"], "scope": rec["scope"]}
