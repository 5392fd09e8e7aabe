"""synchronize(), memory_info() and device_info(): what the user can ask of the device."""
from . import runtime
from ._device import check_device
from .ops.matmul import available_routes
from .runtime import loadpath


def synchronize(device=None):
    """Submit recorded work and wait for the device to finish it (None: every open device)."""
    target = check_device("synchronize", device)
    for ctx in runtime.contexts() if target is None else [runtime.opened(target.index)]:
        if ctx is not None:
            ctx.stream.synchronize()


def memory_info(device=None):
    """Bytes fuelvk holds from the driver, bytes in live slots (arrays, plus slots of dropped arrays that
    queued work still pins until the next synchronize), and the peaks of both since the device started
    (device: a fuelvk.Device; None: the default one).
    """
    target = check_device("memory_info", device)
    ctx = runtime.opened(0 if target is None else target.index)
    if ctx is None:
        return {"held_bytes": 0, "in_use_bytes": 0, "peak_held_bytes": 0, "peak_in_use_bytes": 0}
    return ctx.memory_info()


def device_info(device=None):
    """A plain dict: device, driver, limits, enabled features and the routes they make available
    (device: a fuelvk.Device; None: the default one)."""
    target = check_device("device_info", device)
    ctx = runtime.get() if target is None else target.context()
    with runtime.running(ctx):      # the routes of this device
        routes = available_routes()
    d = ctx.device
    loads, stores = loadpath.texel_paths(ctx)   # FUELVK_TEXEL_LOADS when set, else the probe's choice
    lim = d.limits
    feats = sorted(d.features)
    return {
        "name": d.name, "index": d.index, "type": d.device_type, "driver": d.driver,
        "api_version": d.api_version, "subgroup_size": d.subgroup_size, "loop_budget": d.loop_budget,
        "loop_cap": d.loop_cap,
        "limits": {
            "maxStorageBufferRange": lim.maxStorageBufferRange,   # one binding; larger arrays are split
            "maxBufferSize": ctx.pool.max_buffer,                  # the largest array
            "maxComputeSharedMemorySize": lim.maxComputeSharedMemorySize,
            "maxComputeWorkGroupInvocations": lim.maxComputeWorkGroupInvocations,
            "maxComputeWorkGroupCount": list(ctx.max_groups),
            "maxPushConstantsSize": lim.maxPushConstantsSize,
            "timestampPeriod_ns": d.timestamp_period_ns,
        },
        # FUELVK_LIMITS: the profile and the values it tightened (None: the device's own limits)
        "limits_profile": {"name": d.limits_profile, "overrides": {
            k: list(v) if isinstance(v, tuple) else v for k, v in getattr(lim, "overrides", {}).items()}}
        if d.limits_profile else None,
        "memory": {"kind": "mapped" if ctx.pool.direct else "device-local + staging", "why": ctx.pool.memory_why,
                   "direct_mapped": ctx.pool.direct, "heaps_bytes": ctx.pool.heaps,
                   "huge_pages": _huge_pages(ctx)},
        "descriptors": {"path": d.descriptor_path[0], "why": d.descriptor_path[1]},
        # How kernels read memory: matvec / register-tile matmul through 16-byte rgba32ui texel views where
        # a view's runs are whole texels and its slot is within maxTexelBufferElements; the other
        # memory-bound kernels where the load-path probe (runtime/loadpath.py) measured texels faster
        # (issue 18), storage buffers otherwise and for unaligned views, tails and small launches.
        "load_path": {"matmul": "texel views (rgba32ui) where aligned, else storage buffers",
                      "other kernels": "memory-bound kernels (elementwise, casts, movement, row and reduction "
                                       "kernels, gather, quant, attention, im2col): "
                                       + ("texel-view loads where aligned" if loads else "storage buffers")
                                       + (f" ({loadpath.ENV}={int(loads)})" if loadpath.forced() else
                                          " (probed faster)")
                                       + ("; texel-view stores (f32 / f64)" if stores else ""),
                      "probe": d.load_probe,
                      "maxTexelBufferElements": lim.maxTexelBufferElements},
        # f16 <-> f32 in float16 kernels (shaders/common/half.glsl): the device's instructions or integer
        # arithmetic per direction, as the probe (runtime/halfconv.py) or FUELVK_HALF_NATIVE chose
        "half_conversions": {"widen": "native" if d.half_native & 1 else "integer",
                             "narrow": "native" if d.half_native & 2 else "integer", "probe": d.half_probe},
        "features": feats,
        "extensions": list(d.extensions),
        "cooperative_matrix_shapes": d.coop_matrix_shapes,
        "routes": {"matmul": routes},
        "validation": d.messenger is not None,
    }


def _huge_pages(ctx):
    """Whether a CPU device's memory got transparent huge pages (None elsewhere); known once the pool
    made a chunk, so make one (a pooled slot, cheap)."""
    if ctx.device.device_type == "cpu" and ctx.pool.huge_pages is None:
        ctx.pool.alloc(1, host=True)
    return ctx.pool.huge_pages
