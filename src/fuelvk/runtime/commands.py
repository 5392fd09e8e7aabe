"""Command recording with batched submission and hazard-aware barriers.

Dispatches are recorded into one command buffer; the batch is submitted when the host needs data,
on synchronize(), past FLUSH_EVERY commands or once PIN_BYTES have been allocated since the last
submit (then without waiting, so the device keeps busy), and early, when the device has finished what
it was given: then it works while the host records the rest (a model's forward is recorded in about
the time the device takes to run it) instead of idling until the host waits. The early threshold
starts at EARLY_FIRST commands after a host wait and doubles with each early submit up to
EARLY_SUBMIT (the device starts after a few commands; a long run of work pays for few submits: one
costs ~40 us of CPU on lavapipe, recording + driver, about two tiny dispatches); the device is asked
whether it is idle every EARLY_CHECK commands past the threshold (a fence query costs ~4 us). The byte
limit bounds what an open batch
pins: it holds every buffer it touches until it retires, so temporaries dropped meanwhile cannot be
reused, and the pool would otherwise grow by all of them.
Every method runs under the device lock (recording, submission, fence waits and retirement).
A barrier is inserted only when a dispatch touches a buffer that an earlier dispatch since the
last barrier wrote (RAW/WAW), or writes one that an earlier dispatch read (WAR).
Binding a kernel's buffers takes one of two paths, picked once per stream: push descriptors
(VK_KHR_push_descriptor), or descriptor sets allocated from per-slot pools that are reset when the
slot's batch retired, written once per (pipeline, buffers) within a batch. Push descriptors are
taken wherever the extension is present, as measured (benches/bench_dispatch.py --breakdown, and
with FUELVK_NO_PUSH_DESCRIPTOR=1): on lavapipe Stream.dispatch records a tiny add in ~5.5 us with
them against ~9.6 us with sets (vkUpdateDescriptorSets for each new output; 4.8 against 8.6 us after
the single-pass dispatch, and a whole fv.add 9.8 against 15.4 us), the driver records either binding
in ~1 us, and executes a dispatch in the same ~24 us of CPU after either.
"""
import threading
import weakref
from collections import deque

from .. import config
from ..errors import DeviceError
from .vk import consts, ffi, lib, check

FLUSH_EVERY = 512
EARLY_FIRST = 4
EARLY_SUBMIT = 64
EARLY_CHECK = 4
PIN_BYTES = 256 << 20
MAX_IN_FLIGHT = 3
COMPUTE = consts.VK_PIPELINE_BIND_POINT_COMPUTE
STAGE_COMPUTE = consts.VK_SHADER_STAGE_COMPUTE_BIT
STAGES = consts.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | consts.VK_PIPELINE_STAGE_TRANSFER_BIT
# Capacity of one descriptor pool (a slot adds pools as its batch needs): sets, and descriptors per set
# of each type on average.
POOL_SETS = 256
POOL_PER_SET = {consts.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 8, consts.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER: 4,
                consts.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER: 4}
ACCESS = (consts.VK_ACCESS_SHADER_READ_BIT | consts.VK_ACCESS_SHADER_WRITE_BIT | consts.VK_ACCESS_TRANSFER_READ_BIT
          | consts.VK_ACCESS_TRANSFER_WRITE_BIT)


class _DescriptorPools:
    """The descriptor sets of one slot's batch (devices without push descriptors): allocated from the
    current pool, a new pool added when it runs out; all reset at once when the batch has retired."""

    def __init__(self, device):
        self.dev = device.handle
        self.pools = []        # VkDescriptorPool, reused after reset
        self.caps = []         # capacity of each: {"sets": n, descriptor type: n}
        self.cur = -1          # index of the pool being allocated from
        self.left = None       # what pools[cur] has left
        self._ai = ffi.new("VkDescriptorSetAllocateInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorSetCount": 1})
        self._out = ffi.new("VkDescriptorSet*")

    def allocate(self, pipe):
        """A new descriptor set of pipe's set layout (contents unwritten)."""
        left = self.left
        if left is None or not left["sets"]:
            left = self._next(pipe)
        for t, n in pipe.counts:
            if left[t] < n:
                left = self._next(pipe)
                break
        left["sets"] -= 1
        for t, n in pipe.counts:
            left[t] -= n
        ai = self._ai
        ai.descriptorPool = self.pools[self.cur]
        ai.pSetLayouts = pipe.set_layout
        check(lib.vkAllocateDescriptorSets(self.dev, ai, self._out), "vkAllocateDescriptorSets")
        return self._out[0]

    def _next(self, pipe):
        """Move to the next pool (creating it, sized for at least `pipe`'s set)."""
        self.cur += 1
        if self.cur == len(self.pools):
            cap = {t: max(POOL_SETS * k, dict(pipe.counts).get(t, 0)) for t, k in POOL_PER_SET.items()}
            sizes = ffi.new("VkDescriptorPoolSize[]", [{"type": t, "descriptorCount": n} for t, n in cap.items()])
            info = ffi.new("VkDescriptorPoolCreateInfo*", {
                "sType": consts.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": POOL_SETS,
                "poolSizeCount": len(cap), "pPoolSizes": sizes})
            out = ffi.new("VkDescriptorPool*")
            check(lib.vkCreateDescriptorPool(self.dev, info, ffi.NULL, out), "vkCreateDescriptorPool")
            self.pools.append(out[0])
            self.caps.append(dict(cap, sets=POOL_SETS))
        self.left = dict(self.caps[self.cur])
        return self.left

    def reset(self):
        """Free every set (the batch that used them has retired)."""
        for pool in self.pools[:self.cur + 1]:
            check(lib.vkResetDescriptorPool(self.dev, pool, 0), "vkResetDescriptorPool")
        self.cur, self.left = -1, None

    def destroy(self):
        for pool in self.pools:
            lib.vkDestroyDescriptorPool(self.dev, pool, ffi.NULL)
        self.pools.clear()


class _Slot:
    """A command pool + buffer + fence (+ descriptor pools on the descriptor-set path), reused
    round-robin."""

    def __init__(self, device, sets):
        dev = device.handle
        info = ffi.new("VkCommandPoolCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                                    "queueFamilyIndex": device.queue_family,
                                                    "flags": consts.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT})
        p = ffi.new("VkCommandPool*")
        check(lib.vkCreateCommandPool(dev, info, ffi.NULL, p), "vkCreateCommandPool")
        self.pool = p[0]
        ai = ffi.new("VkCommandBufferAllocateInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self.pool,
            "level": consts.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        cb = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(dev, ai, cb), "vkAllocateCommandBuffers")
        self.cb = cb[0]
        fi = ffi.new("VkFenceCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        f = ffi.new("VkFence*")
        check(lib.vkCreateFence(dev, fi, ffi.NULL, f), "vkCreateFence")
        self.fence = f[0]
        self.fence_ptr = f
        self.resources = []
        self.descriptors = _DescriptorPools(device) if sets else None

    def destroy(self, dev):
        if self.descriptors is not None:
            self.descriptors.destroy()
        lib.vkDestroyFence(dev, self.fence, ffi.NULL)
        lib.vkDestroyCommandPool(dev, self.pool, ffi.NULL)


class Stream:
    # Whether dispatch() checks that every buffer is this stream's pool's: set by the runtime once a
    # second device was opened (with one device there is nothing else a buffer could belong to).
    check_pools = False

    def __init__(self, device, pool):
        self.device = device
        self.pool = pool
        self.lock = device.lock
        self.destroyed = False
        self.timeout_ns = int(config.get("FUELVK_TIMEOUT_S") * 1e9)
        self.push_descriptor = device.push_descriptor
        sets = self.push_descriptor is None
        self.free = [_Slot(device, sets) for _ in range(MAX_IN_FLIGHT)]
        self.in_flight = deque()
        self.cur = None
        self.cb = None
        self.count = 0
        self.early = EARLY_FIRST   # commands in the open batch before an idle device gets them (see above)
        self.dispatches = 0  # total recorded, for tests/benchmarks
        self.checks = []     # deferred device-side checks (defer_check): (weakref to thread, check), run by the next synchronize
        # thread -> a check it deferred that failed in another thread's synchronize. Keyed by the Thread
        # object, weakly: an entry dies with its thread object, and a later thread that reuses the dead
        # one's id (threading.get_ident) is another key, so it never receives a failure it did not make.
        self.failures = weakref.WeakKeyDictionary()
        self.barriers = 0
        self.bound = None
        self.pushed = self.pushed_by = None
        self.written, self.read = set(), set()
        self._begin_info = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": consts.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT})
        self._barrier = ffi.new("VkMemoryBarrier*", {"sType": consts.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                     "srcAccessMask": ACCESS, "dstAccessMask": ACCESS})
        self._host_barrier = ffi.new("VkMemoryBarrier*", {
            "sType": consts.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": ACCESS,
            "dstAccessMask": consts.VK_ACCESS_HOST_READ_BIT | consts.VK_ACCESS_HOST_WRITE_BIT})
        self._copy = ffi.new("VkBufferCopy*")
        self._submit_cbs = ffi.new("VkCommandBuffer[1]")
        self._submit = ffi.new("VkSubmitInfo*", {"sType": consts.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                                 "commandBufferCount": 1, "pCommandBuffers": self._submit_cbs})
        self.sets = {}    # descriptor-set path: (pipeline, bindings) -> VkDescriptorSet written this batch
        self._set_arr = ffi.new("VkDescriptorSet[1]")

    # -- recording --------------------------------------------------------------------------------
    def _begin(self):
        if self.destroyed:
            raise DeviceError("the fuelvk device was closed; create new arrays")
        if not self.free:
            self._retire(wait=True, upto=1)
        slot = self.free.pop()
        check(lib.vkResetCommandPool(self.device.handle, slot.pool, 0), "vkResetCommandPool")
        if slot.descriptors is not None:
            slot.descriptors.reset()
            self.sets.clear()
        check(lib.vkBeginCommandBuffer(slot.cb, self._begin_info), "vkBeginCommandBuffer")
        self.cur, self.cb, self.count, self.bound = slot, slot.cb, 0, None
        self.pushed = self.pushed_by = None   # push constants last recorded into this command buffer
        if not self.in_flight:
            # Every earlier batch finished (fence waited): nothing is unsynchronized. With batches still
            # in flight, their accesses since the last barrier stay tracked: a barrier here orders
            # against earlier submissions too, and the queue may overlap consecutive batches.
            self.written.clear()
            self.read.clear()

    def _hazard(self, buffers, writes):
        """Record a barrier if this command conflicts with unsynchronized earlier ones."""
        written, read = self.written, self.read
        for b, w in zip(buffers, writes):
            h = b.key
            if h in written or (w and h in read):
                self._full_barrier()
                break
        for b, w in zip(buffers, writes):
            (written if w else read).add(b.key)

    def _full_barrier(self):
        lib.vkCmdPipelineBarrier(self.cb, STAGES, STAGES, 0, 1, self._barrier, 0, ffi.NULL, 0, ffi.NULL)
        self.barriers += 1
        self.written.clear()
        self.read.clear()

    def dispatch(self, pipe, groups, buffers, writes, push):
        """Record one dispatch of `pipe` binding `buffers` (writes[i] true for outputs).

        The hot path of every op: hazard check, descriptor bytes, and the flush test are inlined, and no
        cffi object is created (the descriptor structs are the pipeline's, filled by one byte copy). One
        pass over the buffers gathers their packed descriptors and tests for a hazard; the lock is taken
        with acquire / release (a `with` block costs twice as much)."""
        if self.check_pools:
            pool = self.pool
            for b in buffers:
                if b.pool is not pool:
                    self._foreign(f"kernel {pipe.variant.id}", buffers)
        lock = self.lock
        lock.acquire()
        try:
            cur = self.cur
            if cur is None:
                self._begin()
                cur = self.cur
            written, read = self.written, self.read
            descriptors = b""
            hazard = False
            for b, w in zip(buffers, writes):
                h = b.key
                descriptors += b.descriptor
                if h in written or w and h in read:
                    hazard = True
            if hazard:
                self._full_barrier()
            for b, w in zip(buffers, writes):
                if w:
                    written.add(b.key)
                else:
                    read.add(b.key)
            cb = self.cb
            if self.bound is not pipe:
                lib.vkCmdBindPipeline(cb, COMPUTE, pipe.handle)
                self.bound = pipe
            push_descriptor = self.push_descriptor
            if push_descriptor is not None:
                pipe.infos_bytes[:] = descriptors      # a binding-count mismatch raises here
                if pipe.texel:
                    self._views(pipe, buffers)
                push_descriptor(cb, COMPUTE, pipe.layout, 0, pipe.n_bindings, pipe.writes)
            else:
                self._bind_set(cb, pipe, buffers, descriptors)
            if push and (pipe is not self.pushed_by or push != self.pushed):
                # Push constants stay set in the command buffer: a repeat of the last pipeline's values
                # (the same op over new arrays) needs no new call. Each pipeline has its own layout.
                lib.vkCmdPushConstants(cb, pipe.layout, STAGE_COMPUTE, 0, len(push), push)
                self.pushed, self.pushed_by = push, pipe
            lib.vkCmdDispatch(cb, *groups)
            self.dispatches += 1
            cur.resources.append(buffers)
            self.count = count = self.count + 1
            if count >= FLUSH_EVERY or self.pool.fresh >= PIN_BYTES:
                self.flush()
            elif count >= self.early and count % EARLY_CHECK == 0 and self._device_idle():
                self.early = min(2 * self.early, EARLY_SUBMIT)
                self.flush()
        finally:
            lock.release()

    @staticmethod
    def _views(pipe, buffers):
        """Aim pipe's texel-buffer descriptors at views of their bound slots."""
        for i, fmt, kind, what in pipe.texel:
            b = buffers[i]
            pipe.views[i] = b.pool.texel_view(b, fmt, kind, what)

    def _bind_set(self, cb, pipe, buffers, descriptors):
        """Bind a descriptor set holding `buffers` (their packed descriptors joined), written once per
        batch for each (pipeline, bindings): split launches over the same arrays reuse it. (With push
        descriptors, dispatch() pushes the pipeline's write structs after one copy of the buffers'
        packed descriptors into them.)"""
        key = (pipe, descriptors)
        ds = self.sets.get(key)
        if ds is None:
            pipe.infos_bytes[:] = descriptors     # a binding-count mismatch raises here
            if pipe.texel:
                self._views(pipe, buffers)
            ds = self.cur.descriptors.allocate(pipe)
            for w in pipe.writes_list:
                w.dstSet = ds
            lib.vkUpdateDescriptorSets(self.device.handle, pipe.n_bindings, pipe.writes, 0, ffi.NULL)
            self.sets[key] = ds
        arr = self._set_arr
        arr[0] = ds
        lib.vkCmdBindDescriptorSets(cb, COMPUTE, pipe.layout, 0, 1, arr, 0, ffi.NULL)

    def _device_idle(self):
        """Every submitted batch has finished (its fence is signaled)."""
        return not self.in_flight or lib.vkGetFenceStatus(self.device.handle, self.in_flight[-1].fence) == \
            consts.VK_SUCCESS

    def _recorded(self, buffers):
        """Keep the command's buffers alive until its batch retires; submit past the batch limits."""
        self.cur.resources.append(buffers)
        self.count += 1
        if self.count >= FLUSH_EVERY or self.pool.fresh >= PIN_BYTES:
            self.flush()

    def _foreign(self, what, buffers):
        """The DeviceError of work on this stream binding a buffer of another device (or a closed one)."""
        b = next(b for b in buffers if b.pool is not self.pool)
        if b.pool is None or b.pool.closed:
            raise DeviceError(f"{what}: an operand belongs to a closed fuelvk device; create it again")
        where = lambda p: getattr(getattr(p, "context", None), "index", "?")   # noqa: E731
        raise DeviceError(f"{what}: an operand lives on another fuelvk device ({where(b.pool)}) than the work, which "
                          f"runs on device {where(self.pool)} ({self.device.name}); move it with x.to_device(...)")

    def copy(self, src, dst, nbytes, src_offset=0, dst_offset=0):
        """vkCmdCopyBuffer (staging transfers, benchmarks' copy roof)."""
        if nbytes == 0:
            return
        if src.pool is not self.pool or dst.pool is not self.pool:
            self._foreign("vkCmdCopyBuffer", (src, dst))
        with self.lock:
            if self.cur is None:
                self._begin()
            self._hazard((src, dst), (False, True))
            c = self._copy
            c.srcOffset, c.dstOffset, c.size = src.offset + src_offset, dst.offset + dst_offset, nbytes
            lib.vkCmdCopyBuffer(self.cb, src.handle, dst.handle, 1, c)
            self._recorded((src, dst))

    def fill(self, dst, nbytes, value=0, dst_offset=0):
        """vkCmdFillBuffer with a 32-bit pattern (offset and size in multiples of 4 bytes)."""
        if nbytes == 0:
            return
        if dst.pool is not self.pool:
            self._foreign("vkCmdFillBuffer", (dst,))
        with self.lock:
            if self.cur is None:
                self._begin()
            self._hazard((dst,), (True,))
            lib.vkCmdFillBuffer(self.cb, dst.handle, dst.offset + dst_offset, nbytes, value & 0xFFFFFFFF)
            self._recorded((dst,))

    def timestamp(self, query_pool, index):
        with self.lock:
            if self.cur is None:
                self._begin()
            lib.vkCmdResetQueryPool(self.cb, query_pool, index, 1)
            lib.vkCmdWriteTimestamp(self.cb, consts.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool, index)

    # -- submission -------------------------------------------------------------------------------
    def flush(self, wait=False):
        """Submit the open batch; wait=True also waits for every batch in flight (then the pool may
        give idle memory back)."""
        with self.lock:
            if self.cur is not None:
                slot = self.cur
                lib.vkCmdPipelineBarrier(self.cb, STAGES, consts.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, self._host_barrier,
                                         0, ffi.NULL, 0, ffi.NULL)
                check(lib.vkEndCommandBuffer(slot.cb), "vkEndCommandBuffer")
                self._submit_cbs[0] = slot.cb
                self.cur = self.cb = None
                self.pool.fresh = 0
                res = lib.vkQueueSubmit(self.device.queue, 1, self._submit, slot.fence)
                if res != consts.VK_SUCCESS:
                    slot.resources.clear()
                    self.free.append(slot)
                    check(res, "vkQueueSubmit")
                self.in_flight.append(slot)
            if wait:
                self._retire(wait=True)
                self.early = EARLY_FIRST
                self.pool.synchronized()
            else:
                self._retire(wait=False)   # unpin what already finished

    def _retire(self, wait, upto=None):
        dev = self.device.handle
        n = 0
        while self.in_flight and (upto is None or n < upto):
            slot = self.in_flight[0]
            if wait:
                res = lib.vkWaitForFences(dev, 1, slot.fence_ptr, 1, self.timeout_ns)
                if res == consts.VK_TIMEOUT:
                    raise DeviceError(f"device did not finish a batch within {self.timeout_ns / 1e9:.0f} s "
                                      "(FUELVK_TIMEOUT_S)")
                check(res, "vkWaitForFences")
            elif lib.vkGetFenceStatus(dev, slot.fence) != consts.VK_SUCCESS:
                break
            check(lib.vkResetFences(dev, 1, slot.fence_ptr), "vkResetFences")
            slot.resources.clear()
            self.in_flight.popleft()
            self.free.append(slot)
            n += 1

    def defer_check(self, check):
        """Run check() (no arguments; it raises when what the device found is wrong; it only reads, so
        running it again raises again) right after the next synchronize: every host read of device memory
        goes through synchronize, so a failed check surfaces before any result recorded after it reaches
        the host (device-side asserts without a host wait). The stream is shared by every thread: a check
        that fails in another thread's synchronize is raised there and kept for the thread that deferred
        it, whose next synchronize runs it again (so neither thread reads the guarded results silently)."""
        with self.lock:   # the thread weakly: kept failures must die with their thread
            self.checks.append((weakref.ref(threading.current_thread()), check))

    def synchronize(self):
        self.flush(wait=True)
        if self.checks or self.failures:
            me = threading.current_thread()
            with self.lock:
                checks, self.checks = self.checks, []
                owed = self.failures.pop(me, None)
            if owed is not None:
                checks.insert(0, (None, owed))
            failed = None
            for owner, check in checks:   # each runs once; the first failure is the error raised
                try:
                    check()
                except Exception as e:   # noqa: BLE001 - re-raised below
                    failed = failed or e
                    self._keep_failure(owner, me, check)
            if failed is not None:
                raise failed

    def _keep_failure(self, owner, me, check):
        """Keep a failed check for the thread (weakref owner) that deferred it, unless that is this thread
        (raising it now) or a finished one (it reads nothing more). The check, not its error: an error's
        traceback holds frames (and their threads) alive, the entry must die with its thread object."""
        thread = owner() if owner is not None else None
        if thread is not None and thread is not me and thread.is_alive():
            with self.lock:
                self.failures.setdefault(thread, check)

    def destroy(self):
        with self.lock:
            if self.destroyed:
                return
            self.checks.clear()   # closing: nothing will read the results they guard
            self.failures.clear()
            self.flush(wait=True)
            self.destroyed = True
            for slot in self.free:
                slot.destroy(self.device.handle)
            self.free.clear()
