"""The Vulkan runtime: one Context (device, memory pool, command stream, pipelines) per device.

Devices: `fuelvk.devices()` lists them (FUELVK_DEVICES; by default the one FUELVK_DEVICE picks), each
with its own Context (its own VkInstance and VkDevice, so one physical device may carry several
logical ones), opened on first use. Device 0's context is the default one. `get()` returns the
context ops run on: the default one, or, once a second device has been opened, the one the calling
thread runs on now (`running(ctx)`, set by fuelvk._device.on_device around every public op from its
inputs' device). Until then `get()` costs what it did with one device.

This package is the only code that imports `vulkan`. Everything above it talks in registry Variants,
Buffers and packed Params.

Threads: one re-entrant lock per device (`device.lock`) guards command recording, submission, fence
waits and retirement (Stream), allocation and trimming (MemoryPool) and pipeline/texel-view creation.
One lock, not per-thread streams: all threads record into the one in-order stream, so the hazard
tracking that orders dispatches also orders them across threads, and an array made in one thread is
safe to use in another. cffi releases the GIL inside Vulkan calls, so without it two threads could
record into one command buffer or wait on a fence the other just reset. Buffer.__del__ (run by the
garbage collector in any thread) never takes the lock; see memory.py.
"""
import atexit

import threading
import time

import numpy as np

from .. import config
from ..errors import DeviceError, FuelVKMemoryError
from .device import Device
from .memory import MemoryPool
from .commands import Stream
from .pipelines import PipelineCache
from . import halfconv, loadpath, loopcap
from .vk import check, consts, ffi, lib

_ctx = None          # device 0's (the default) context
_others = {}         # index -> context of the other devices fuelvk.devices() lists, opened on first use
_lock = threading.Lock()
_tls = threading.local()   # .ctx: the context the calling thread's op runs on (None: the default)
many = False         # whether a second device's context was ever opened (then get() reads _tls)
STAGING_BYTES = 32 << 20   # largest staging slot of one transfer step (device-local arrays)


class Context:
    def __init__(self, selector=None, validation=None, index=0):
        config.check("at context creation")   # a bad FUELVK_* value raises before any Vulkan object exists
        self.index = index   # its position in fuelvk.devices()
        self.device = Device(selector, validation)
        self.lock = self.device.lock
        self.pool = MemoryPool(self.device)
        self.pool.context = self   # an array's context: array.buffer.pool.context
        self.stream = Stream(self.device, self.pool)
        self.pool.synchronize = self.stream.synchronize   # on allocation failure: wait, trim, retry
        self.pipelines = PipelineCache(self.device)
        self.device._budget_source = lambda: loopcap.resolve(self)   # probed on first use of loop_budget
        self.device._texel_source = lambda: loadpath.resolve(self)   # probed on first use of texel_loads
        self.device._half_source = lambda: halfconv.resolve(self)    # probed on first use of half_native
        lim = self.device.limits
        self.max_groups = (lim.maxComputeWorkGroupCount[0], lim.maxComputeWorkGroupCount[1],
                           lim.maxComputeWorkGroupCount[2])
        self.staging_bytes = min(STAGING_BYTES, self.pool.max_buffer & ~255)
        self.plans = {}   # launch plans of ops/_core.launch_strided, keyed by geometry
        self._limits = self._binding_limit = None   # launch(): maxStorageBufferRange of device.limits
        self.closed = False

    def groups(self, n):
        """A grid of n workgroups split over x/y/z to respect maxComputeWorkGroupCount."""
        mx = self.max_groups[0]
        if n <= mx:
            return (max(n, 1), 1, 1)
        y = -(-n // mx)
        if y <= self.max_groups[1]:
            return (mx, y, 1)
        z = -(-y // self.max_groups[1])
        return (mx, self.max_groups[1], z)

    def launch(self, variant, groups, /, **args):
        """Record one dispatch of `variant` over `groups` workgroups, its arguments by the names its shader
        gives them: bindings (Buffers or Arrays), Params fields, specialization constants
        (kernels/signature.py; anything missing, unknown or mistyped is a LaunchError). A buffer larger
        than one binding (an op with no split path for it) is a typed error here, never a binding past
        maxStorageBufferRange. Nothing is positional: a swapped pair of fields cannot pass unnoticed."""
        pipelines = self.pipelines
        sig = pipelines._signatures.get(variant._id)
        if sig is None:
            sig = pipelines.signature(variant)
        buffers, writes, push, spec = sig.bind(args)
        limits = self.device.limits
        if limits is not self._limits:   # read once per limits object (tests swap in overrides)
            self._limits, self._binding_limit = limits, limits.maxStorageBufferRange
        limit = self._binding_limit
        for b in buffers:
            if b.size > limit:
                raise FuelVKMemoryError(
                    f"kernel {variant.id}: an operand of {b.size} bytes is larger than one binding on "
                    f"{self.device.name} (maxStorageBufferRange = {limit} bytes) and this op has no split "
                    "path for it; split the tensor")
        pipe = pipelines.pipelines.get((variant._id, spec))
        if pipe is None:
            pipe = pipelines.get(variant, spec)
        self.stream.dispatch(pipe, groups, buffers, writes, push)

    def upload(self, buffer, host, offset=0):
        """Write a contiguous numpy array into buffer at byte offset: a copy into mapped memory, or
        (device-local arrays) through staging slots of at most STAGING_BYTES each, recorded as copies
        on the stream; the slots go back to the pool when their batch retires."""
        src = host.reshape(-1).view(np.uint8)  # memoryview cannot take ml_dtypes
        if buffer.mapped is not None:
            ffi.memmove(buffer.mapped + offset, ffi.from_buffer(src), len(src))
            return
        data = ffi.from_buffer(src)
        for lo in range(0, len(src), self.staging_bytes):
            n = min(self.staging_bytes, len(src) - lo)
            staging = self.pool.alloc(n, host=True)
            ffi.memmove(staging.mapped, data + lo, n)
            self.stream.copy(staging, buffer, n, 0, offset + lo)

    def download(self, buffer, offset, nbytes):
        """The bytes of buffer[offset:offset+nbytes] after all pending device work (device-local
        arrays: copied through one staging slot of at most STAGING_BYTES at a time)."""
        if buffer.mapped is not None:
            self.stream.synchronize()
            return ffi.buffer(buffer.mapped + offset, nbytes)[:]
        out = None if nbytes <= self.staging_bytes else bytearray(nbytes)
        for lo in range(0, nbytes, self.staging_bytes):
            n = min(self.staging_bytes, nbytes - lo)
            staging = self.pool.alloc(n, host=True)
            self.stream.copy(buffer, staging, n, offset + lo, 0)
            self.stream.synchronize()
            if out is None:
                return ffi.buffer(staging.mapped, n)[:]
            out[lo:lo + n] = ffi.buffer(staging.mapped, n)
        return out if out is not None else b""

    def memory_info(self):
        return self.pool.info()

    def timer(self):
        return Timer(self)

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.stream.destroy()
                self.pipelines.destroy()
                self.pool.close()
            finally:
                self.device.destroy()


class Timer:
    """Device time between start() and stop(), from timestamp queries (wall clock where absent)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.device_timestamps = ctx.device.timestamp_bits > 0 and ctx.device.limits.timestampComputeAndGraphics
        info = ffi.new("VkQueryPoolCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                  "queryType": consts.VK_QUERY_TYPE_TIMESTAMP, "queryCount": 2})
        out = ffi.new("VkQueryPool*")
        check(lib.vkCreateQueryPool(ctx.device.handle, info, ffi.NULL, out), "vkCreateQueryPool")
        self.pool = out[0]
        self._wall = None

    def start(self):
        if self.device_timestamps:
            self.ctx.stream.timestamp(self.pool, 0)
        self._wall = time.perf_counter()

    def stop(self):
        """Wait for the work since start(); return (device_ms, wall_ms)."""
        if self.device_timestamps:
            self.ctx.stream.timestamp(self.pool, 1)
        self.ctx.stream.synchronize()
        wall = (time.perf_counter() - self._wall) * 1e3
        if not self.device_timestamps:
            return wall, wall
        data = ffi.new("uint64_t[2]")
        res = lib.vkGetQueryPoolResults(self.ctx.device.handle, self.pool, 0, 2, 16, data, 8,
                                              consts.VK_QUERY_RESULT_64_BIT | consts.VK_QUERY_RESULT_WAIT_BIT)
        if res != consts.VK_SUCCESS:
            return wall, wall
        mask = (1 << self.ctx.device.timestamp_bits) - 1 if self.ctx.device.timestamp_bits < 64 else ~0
        ticks = (data[1] - data[0]) & mask
        return ticks * self.ctx.device.timestamp_period_ns / 1e6, wall

    def __del__(self):
        ctx = getattr(self, "ctx", None)
        if ctx is not None and not ctx.closed:
            lib.vkDestroyQueryPool(ctx.device.handle, self.pool, ffi.NULL)


def get():
    """The context ops run on now: the calling thread's op's device (once a second device was opened),
    else the default one, created on first use."""
    if many:
        ctx = getattr(_tls, "ctx", None)
        if ctx is not None:
            return ctx
    ctx = _ctx
    if ctx is None or ctx.closed:
        ctx = context(0)
    return ctx


def selectors():
    """One device selector per device fuelvk.devices() lists (FUELVK_DEVICES, else [FUELVK_DEVICE])."""
    many_sel, one = config.get("FUELVK_DEVICES"), config.get("FUELVK_DEVICE")
    if many_sel is None:
        return [one]
    if one is not None and one != many_sel[0]:
        raise DeviceError(f"FUELVK_DEVICE={one!r} and FUELVK_DEVICES={','.join(many_sel)!r} disagree on the "
                          "default device (FUELVK_DEVICES' first entry); set one of them")
    return list(many_sel)


def context(index):
    """The context of device `index` of fuelvk.devices(), opened on first use (and again after close)."""
    global _ctx, many
    ctx = _ctx if index == 0 else _others.get(index)
    if ctx is not None and not ctx.closed:
        return ctx
    with _lock:
        ctx = _ctx if index == 0 else _others.get(index)
        if ctx is None or ctx.closed:
            sel = selectors()
            if not 0 <= index < len(sel):
                raise DeviceError(f"fuelvk device {index} does not exist: fuelvk.devices() lists {len(sel)} "
                                  "(FUELVK_DEVICES sets them)")
            ctx = Context(sel[index], index=index)
            if index == 0:
                _ctx = ctx
            else:
                _others[index] = ctx
                many = Stream.check_pools = True
    return ctx


class running:
    """`with running(ctx):` ops in this thread run on ctx (get() returns it); nests, restores on exit."""
    __slots__ = ("ctx", "prev")

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.prev = getattr(_tls, "ctx", None)
        _tls.ctx = self.ctx
        return self.ctx

    def __exit__(self, *exc):
        _tls.ctx = self.prev


def opened(index):
    """The live context of device `index`, or None (never opens one)."""
    ctx = _ctx if index == 0 else _others.get(index)
    return ctx if ctx is not None and not ctx.closed else None


def current():
    """The live default context or None (never creates one)."""
    return _ctx if _ctx is not None and not _ctx.closed else None


def contexts():
    """Every live context, the default one first."""
    with _lock:
        out = [_ctx] + [_others[i] for i in sorted(_others)]
    return [c for c in out if c is not None and not c.closed]


def close(index=None):
    """Wait for the device(s), free everything; arrays created on them before become unusable (their
    ops raise DeviceError). index: one device of fuelvk.devices(); None: all of them."""
    with _lock:
        ctxs = [_ctx, *_others.values()] if index is None else [_ctx if index == 0 else _others.get(index)]
    for ctx in ctxs:
        if ctx is not None:
            ctx.close()
    global many
    with _lock:   # every other device closed: ops skip the device lookup again (their arrays raise anyway;
        # the stream keeps checking buffers, so an op still running on a just-closed device in another
        # thread gets a DeviceError, not a dispatch of its buffers on the default device)
        many = any(not c.closed for c in _others.values())


def check_alive(buffer, what="array"):
    pool = buffer.pool
    if pool is None or pool.closed:
        raise DeviceError(f"this {what} belongs to a closed fuelvk device; create it again")



atexit.register(close)
