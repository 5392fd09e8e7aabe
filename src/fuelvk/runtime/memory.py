"""Device memory: a caching allocator that sub-allocates size-classed slots from large chunks.

Allocating is Python bookkeeping (no Vulkan call) once a chunk of the size class exists, which is
what makes a tiny op cheap. A Buffer is a (chunk VkBuffer, byte offset, size) slot. Batches in flight
hold references to every buffer they touch, so a slot is never reused while the device may still
access it; when the last reference goes away (in any thread, possibly inside the garbage collector
while this thread is in the middle of a pool call), Buffer.__del__ only appends the slot to
`pool.dead` (a deque append is atomic); the pool takes dead slots back under the device lock.
Memory is given back to the driver when idle bytes pass a high-water mark (keep_idle, from
FUELVK_POOL_KEEP_MB, over what was idle after the last trim), checked after every full synchronize and before creating a chunk, and
on allocation failure (after waiting for queued work). Texel-buffer bindings read a slot through a
VkBufferView, cached on its chunk per (format, slot).

Arrays may be larger than one binding (maxStorageBufferRange), up to maxBufferSize (Vulkan 1.3 /
VK_KHR_maintenance4; else the largest heap). Such a slot is never bound whole: ops bind a Window
(`Buffer.window`): a byte range of the slot, aligned to 256 B (>= every device's storage / texel
offset alignment), no larger than one binding, with the slot's hazard key (barriers see the whole
array) and a reference to the slot (queued work that binds the window keeps the slot alive).
"""
import ctypes
import functools
import itertools
import re
import struct
import sys
from collections import deque

from .. import config
from ..errors import DeviceError, FuelVKMemoryError, UnsupportedError
from .vk import consts, ffi, lib, check

USAGE = (consts.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | consts.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
         | consts.VK_BUFFER_USAGE_TRANSFER_DST_BIT | consts.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT
         | consts.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT)
HUGE, MADV_HUGEPAGE = 2 << 20, 14
TEXEL_FEATURE = {"uniform_texel_buffer": consts.VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT,
                 "storage_texel_buffer": consts.VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT}


def texel_bytes(fmt):
    """Bytes per texel of a plain VkFormat name ("R32G32B32A32_UINT" -> 16)."""
    return sum(int(b) for b in re.findall(r"[RGBA](\d+)", fmt.split("_")[0])) // 8
HOST = consts.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | consts.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
LOCAL = consts.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
CACHED = consts.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
VISIBLE = consts.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
MIN_BYTES = 256          # also the slot alignment: >= every device's minStorageBufferOffsetAlignment
CHUNK_BYTES = 8 << 20    # slots up to this size share chunks; larger sizes get a chunk each


@functools.lru_cache(maxsize=4096)   # every allocation asks; the sizes in use repeat
def size_class(nbytes):
    """Round up to 256 B, then to the next of 4 steps per power of two (<= 25% waste)."""
    n = max(int(nbytes), MIN_BYTES)
    if n <= 1024:
        return (n + 255) & ~255
    top = 1 << (n.bit_length() - 1)
    step = top >> 2
    return (n + step - 1) // step * step


# A VkDescriptorBufferInfo (VkBuffer handle, offset, range) as bytes: each slot packs its own once, so
# binding it is a byte copy into the pipeline's descriptor structs (commands.py), not cffi field writes.
DESCRIPTOR = struct.Struct("=QQQ")   # native order, no padding: the C struct on 64- and 32-bit hosts
_serials = itertools.count(1)
KEY_SHIFT = 48           # hazard key = chunk serial << KEY_SHIFT | byte offset (offsets stay below 2**48)


class Chunk:
    """One VkBuffer + VkDeviceMemory carved into equal slots."""
    __slots__ = ("handle", "memory", "mapped", "size", "slot", "n_free", "views", "handle_int", "serial")

    def __init__(self, handle, memory, mapped, size, slot):
        self.handle, self.memory, self.mapped, self.size, self.slot = handle, memory, mapped, size, slot
        self.n_free = 0
        self.views = {}    # (format name, offset, range) -> VkBufferView
        self.handle_int = int(ffi.cast("uint64_t", handle))
        self.serial = next(_serials)


def slot_of(chunk, offset, size, host):
    """A slot's record, made once per slot and kept on the pool's free list while unused: (chunk, offset,
    size, host, hazard key, packed descriptor). A Buffer takes its fields from it and gives it back to
    pool.dead when it dies, so neither allocating nor freeing packs or builds anything."""
    return (chunk, offset, size, host, chunk.serial << KEY_SHIFT | offset,
            DESCRIPTOR.pack(chunk.handle_int, offset, size))


class Buffer:
    __slots__ = ("pool", "chunk", "handle", "offset", "size", "key", "host", "descriptor", "slot", "__weakref__")

    def __init__(self, pool, slot):
        # key: the hazard tracking identity (an int: cheap to hash)
        self.chunk, self.offset, self.size, self.host, self.key, self.descriptor = slot
        self.pool, self.handle, self.slot = pool, slot[0].handle, slot

    @property
    def mapped(self):
        """char* to this slot in mapped memory, or None for device-local memory."""
        m = self.chunk.mapped
        return None if m is None else m + self.offset

    def window(self, start, end):
        """A Window binding bytes [start, end) of this slot (start aligned down, end up, to 256 B)."""
        start &= ~(MIN_BYTES - 1)
        end = min(-(-end // MIN_BYTES) * MIN_BYTES, self.size)
        return Window(self, start, end - start)

    def __del__(self):
        pool = self.pool
        if pool is not None and not pool.closed:
            pool.dead.append(self.slot)


class Window:
    """A sub-range of a Buffer's slot, bound in its place (same Buffer interface for dispatch, texel
    views and hazard tracking: .handle/.offset/.size/.key/.pool/.chunk/.mapped)."""
    __slots__ = ("parent", "pool", "chunk", "handle", "offset", "size", "key", "host", "start", "descriptor")

    def __init__(self, parent, start, size):
        self.parent, self.pool, self.chunk, self.handle = parent, parent.pool, parent.chunk, parent.handle
        self.start, self.offset, self.size = start, parent.offset + start, size
        self.key, self.host = parent.key, parent.host
        self.descriptor = DESCRIPTOR.pack(self.chunk.handle_int, self.offset, size)

    @property
    def mapped(self):
        m = self.chunk.mapped
        return None if m is None else m + self.offset

    def window(self, start, end):
        return self.parent.window(self.start + start, self.start + end)


@functools.lru_cache(maxsize=None)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _huge_pages(addr, size, check=False):
    """Ask Linux for transparent huge pages on a CPU device's memory (madvise(MADV_HUGEPAGE), before
    first touch). Why: kernels that stride through big arrays (a matvec walking B's rows) miss the TLB
    on every 4 KiB page otherwise; advisory only, ignored where unsupported. With check: whether it
    took effect (the mapping is THP-eligible), or None when nothing was advised. Drivers that map
    memory as shared memfd (Mesa >= 25 lavapipe) get no huge pages from this: False there."""
    lo, hi = -(-addr // HUGE) * HUGE, (addr + size) // HUGE * HUGE
    if sys.platform != "linux" or hi <= lo:
        return None
    _libc().madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_HUGEPAGE)
    return smaps_entry(lo).get("THPeligible") == "1" if check else None


def smaps_entry(addr):
    """The /proc/self/smaps fields of the mapping holding addr ({} if none): "Size", "THPeligible",
    "VmFlags" ("sh" among them for a shared mapping), ... as strings; "name" is the mapped file."""
    fields, hit = {}, False
    try:
        with open("/proc/self/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    for line in lines:
        head, _, rest = line.partition(" ")
        if "-" in head and not head.endswith(":"):
            if hit:
                break
            lo, hi = (int(x, 16) for x in head.split("-"))
            hit = lo <= addr < hi
            if hit:
                fields["name"] = rest.split(None, 4)[4] if len(rest.split(None, 4)) > 4 else ""
        elif hit:
            fields[head.rstrip(":")] = rest.strip().split(" kB")[0] if head != "VmFlags:" else rest.strip()
    return fields


def _heap_trim():
    """A CPU device's memory is the process heap (lavapipe mallocs it): freed chunks below glibc's
    dynamic mmap threshold (up to 32 MiB) stay resident until malloc_trim returns their pages."""
    if sys.platform == "linux":
        try:
            _libc().malloc_trim(0)
        except AttributeError:   # not glibc
            pass


def memory_mode(device_type):
    """(direct, why): whether arrays live in mapped memory, from FUELVK_MEMORY (auto | mapped |
    device-local). auto: mapped on CPU and integrated devices, which read host-visible memory at full
    speed; device-local + staging copies on discrete GPUs. device-local forces the discrete-GPU path
    anywhere (so it runs in CI on lavapipe), mapped the other."""
    mode = config.get("FUELVK_MEMORY")
    if mode == "auto":
        return device_type != "discrete", f"auto ({device_type} device)"
    return mode == "mapped", f"forced (FUELVK_MEMORY={mode})"


def pick_memory_type(types, bits, host, direct):
    """Index into `types` ([(propertyFlags, heap)]) of the memory for a chunk whose buffer accepts the
    types in `bits`. Mapped array memory (host and direct) prefers DEVICE_LOCAL (an integrated GPU's
    shared memory); staging (host, not direct) prefers HOST_CACHED system memory (fast readback, and it
    leaves a discrete GPU's small host-visible VRAM window alone); device-local arrays prefer
    DEVICE_LOCAL memory the host cannot map (VRAM), then any DEVICE_LOCAL type, then any."""
    best, best_score = None, -1
    for i, (f, _) in enumerate(types):
        if not bits & (1 << i) or host and (f & HOST) != HOST:
            continue
        if host:
            score = bool(f & LOCAL) if direct else 2 * bool(f & CACHED) + (not f & LOCAL)
        else:
            score = 2 * bool(f & LOCAL) + (not f & VISIBLE)
        if score > best_score:
            best, best_score = i, score
    return best


class MemoryPool:
    def __init__(self, device):
        self.device = device
        self.lock = device.lock
        self.closed = False
        self.free = {}            # (size class, host) -> [slot record (slot_of), or (chunk, offset) if unused]
        self.dead = deque()       # slot records of dead Buffers, not yet on `free`
        self.chunks = []
        self.in_use = self.peak_in_use = self.peak_held = 0
        self.fresh = 0            # bytes handed out since the stream's last submit (it flushes past a limit)
        # Idle bytes (held but in no live slot) the pool may keep cached beyond what stayed idle after
        # its last trim; past that, idle chunks go back to the driver.
        self.keep_idle = int(config.get("FUELVK_POOL_KEEP_MB") * (1 << 20))
        self.high_water = self.keep_idle
        self.synchronize = None   # set by the Context: waits for queued work (which pins dead slots)
        props = ffi.new("VkPhysicalDeviceMemoryProperties*")
        lib.vkGetPhysicalDeviceMemoryProperties(device.physical, props)
        self._types = [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                       for i in range(props.memoryTypeCount)]
        self.heaps = [props.memoryHeaps[i].size for i in range(props.memoryHeapCount)]
        # Arrays live in mapped memory (direct) or device-local memory + staging copies: memory_mode().
        self.direct, self.memory_why = memory_mode(device.device_type)
        self.allocated = 0
        self._format_ok = {}
        # CPU devices: whether madvise(MADV_HUGEPAGE) took effect on the driver's mapped memory (checked
        # on the first chunk; the driver maps all its memory the same way); None until then / elsewhere.
        self.huge_pages = None
        self.max_buffer = self._max_buffer_size()

    def _max_buffer_size(self):
        """The largest VkBuffer: maxBufferSize (Vulkan 1.3 / VK_KHR_maintenance4), else the largest heap."""
        heap = max(self.heaps)
        dev = self.device
        if dev._props.apiVersion >= consts.VK_MAKE_VERSION(1, 3, 0) or "VK_KHR_maintenance4" in dev.available_extensions:
            m4 = ffi.new("VkPhysicalDeviceMaintenance4Properties*",
                         {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES})
            p2 = ffi.new("VkPhysicalDeviceProperties2*",
                         {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": m4})
            lib.vkGetPhysicalDeviceProperties2(dev.physical, p2)
            if m4.maxBufferSize:
                return min(int(m4.maxBufferSize), heap)
        return heap

    def texel_view(self, buf, fmt, kind, what):
        """The VkBufferView of `buf` (a slot or a Window of one) as `fmt` for a `kind` binding (cached on
        its chunk per (format, offset, size))."""
        key = (fmt, buf.offset, buf.size)
        view = buf.chunk.views.get(key)
        if view is not None:
            return view
        with self.lock:
            return self._new_view(buf, key, fmt, kind, what)

    def _new_view(self, buf, key, fmt, kind, what):
        view = buf.chunk.views.get(key)
        if view is not None:
            return view
        ok = self._format_ok.get((fmt, kind))
        if ok is None:
            props = ffi.new("VkFormatProperties*")
            lib.vkGetPhysicalDeviceFormatProperties(self.device.physical, getattr(consts, "VK_FORMAT_" + fmt), props)
            ok = self._format_ok[(fmt, kind)] = bool(props.bufferFeatures & TEXEL_FEATURE[kind])
        if not ok:
            raise UnsupportedError(f"{what}: {self.device.name} cannot read format {fmt} as a {kind}")
        tb = texel_bytes(fmt)
        elements = buf.size // tb
        limit = self.device.limits.maxTexelBufferElements
        if elements > limit:
            raise UnsupportedError(f"{what}: a {buf.size}-byte array is {elements} {fmt} texels, over this "
                                   f"device's maxTexelBufferElements = {limit}; split the tensor")
        info = ffi.new("VkBufferViewCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                                   "buffer": buf.chunk.handle,
                                                   "format": getattr(consts, "VK_FORMAT_" + fmt),
                                                   "offset": buf.offset, "range": elements * tb})
        out = ffi.new("VkBufferView*")
        check(lib.vkCreateBufferView(self.device.handle, info, ffi.NULL, out), f"vkCreateBufferView({what})")
        view = buf.chunk.views[key] = out[0]
        return view

    def _memory_type(self, bits, host):
        i = pick_memory_type(self._types, bits, host, self.direct)
        if i is None:
            raise FuelVKMemoryError(f"no {'host-visible coherent ' if host else ''}memory type among "
                                    f"{bits:#x} for a buffer on {self.device.name}")
        return i

    def alloc(self, nbytes, host=None):
        """A buffer slot of at least nbytes; host=True forces mapped memory (staging)."""
        host = self.direct if host is None else host
        if nbytes > self.max_buffer:
            raise FuelVKMemoryError(
                f"an array of {nbytes} bytes exceeds the largest buffer on {self.device.name} "
                f"(maxBufferSize / largest heap = {self.max_buffer} bytes); split the tensor")
        size = size_class(nbytes)
        if size > self.max_buffer:
            size = max(self.max_buffer & ~255, nbytes)
        lock = self.lock
        lock.acquire()          # (acquire / release: a `with` block costs twice as much per tiny op)
        try:
            if self.closed:
                raise DeviceError("the fuelvk device was closed; create new arrays")
            if self.dead:
                self._reclaim()
            free = self.free.get((size, host))
            if not free:
                self._grow(size, host)
                free = self.free[(size, host)]
            slot = free.pop()
            if len(slot) == 2:      # never used: (chunk, offset)
                slot = slot_of(slot[0], slot[1], size, host)
            slot[0].n_free -= 1
            in_use = self.in_use = self.in_use + size
            self.fresh += size
            if in_use > self.peak_in_use:
                self.peak_in_use = in_use
            return Buffer(self, slot)
        finally:
            lock.release()

    def _reclaim(self):
        """Put the slots of dead Buffers back on their free lists (under the lock)."""
        dead, free = self.dead, self.free
        freed = 0
        while dead:
            slot = dead.popleft()
            slot[0].n_free += 1
            size = slot[2]
            freed += size
            key = (size, slot[3])
            items = free.get(key)
            if items is None:
                items = free[key] = []
            items.append(slot)
        self.in_use -= freed

    def _grow(self, size, host):
        if self.allocated - self.in_use > self.high_water:
            self.trim()
        n_slots = max(1, CHUNK_BYTES // size) if size <= CHUNK_BYTES else 1
        try:
            chunk = self._create(size * n_slots, host, size)
        except FuelVKMemoryError:
            # Batches in flight (or still open) may pin dead slots: wait for them, give every idle
            # chunk back, then retry with a single slot.
            if self.synchronize is not None:
                self.synchronize()
            self.trim()
            try:
                chunk = self._create(size, host, size)
            except FuelVKMemoryError as e:
                raise FuelVKMemoryError(f"out of device memory allocating {size} bytes ({self.allocated} bytes "
                                        f"held by fuelvk, {self.in_use} in live arrays): {e}") from None
        n_slots = chunk.size // size
        chunk.n_free = n_slots
        # a slot's record is made on its first use (a chunk of small slots has thousands)
        self.free.setdefault((size, host), []).extend((chunk, i * size) for i in reversed(range(n_slots)))

    def _create(self, size, host, slot):
        dev = self.device.handle
        info = ffi.new("VkBufferCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                               "usage": USAGE, "sharingMode": consts.VK_SHARING_MODE_EXCLUSIVE})
        h = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(dev, info, ffi.NULL, h), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(dev, h[0], req)
        ai = ffi.new("VkMemoryAllocateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                               "allocationSize": req.size,
                                               "memoryTypeIndex": self._memory_type(req.memoryTypeBits, host)})
        m = ffi.new("VkDeviceMemory*")
        res = lib.vkAllocateMemory(dev, ai, ffi.NULL, m)
        if res != consts.VK_SUCCESS:
            lib.vkDestroyBuffer(dev, h[0], ffi.NULL)
            check(res, f"vkAllocateMemory({req.size} bytes)")
        check(lib.vkBindBufferMemory(dev, h[0], m[0], 0), "vkBindBufferMemory")
        mapped = None
        if host:
            p = ffi.new("void**")
            check(lib.vkMapMemory(dev, m[0], 0, size, 0, p), "vkMapMemory")
            mapped = ffi.cast("char*", p[0])
            if self.device.device_type == "cpu":
                took = _huge_pages(int(ffi.cast("uintptr_t", mapped)), size, check=self.huge_pages is None)
                if took is not None:
                    self.huge_pages = took
        self.allocated += size
        self.peak_held = max(self.peak_held, self.allocated)
        chunk = Chunk(h[0], m[0], mapped, size, slot)
        self.chunks.append(chunk)
        return chunk

    def _destroy(self, chunk):
        dev = self.device.handle
        for view in chunk.views.values():
            lib.vkDestroyBufferView(dev, view, ffi.NULL)
        chunk.views.clear()
        lib.vkDestroyBuffer(dev, chunk.handle, ffi.NULL)
        lib.vkFreeMemory(dev, chunk.memory, ffi.NULL)
        self.allocated -= chunk.size

    def synchronized(self):
        """After the stream finished all queued work: take dead slots back; past the high-water mark,
        give idle chunks to the driver."""
        with self.lock:
            self._reclaim()
            if self.allocated - self.in_use > self.high_water:
                self.trim()

    def trim(self):
        """Give every chunk with no live slot back to the driver (slots pinned by queued batches are live)."""
        with self.lock:
            self._reclaim()
            idle = {id(c) for c in self.chunks if c.n_free * c.slot == c.size}
            if idle:
                for key, items in list(self.free.items()):
                    self.free[key] = [slot for slot in items if id(slot[0]) not in idle]
                for c in self.chunks:
                    if id(c) in idle:
                        self._destroy(c)
                self.chunks = [c for c in self.chunks if id(c) not in idle]
                if self.device.device_type == "cpu":
                    _heap_trim()
            self.high_water = self.allocated - self.in_use + self.keep_idle

    def info(self):
        """Bytes held from the driver, in live slots (arrays and slots queued work pins), and their peaks."""
        with self.lock:
            self._reclaim()
            return {"held_bytes": self.allocated, "in_use_bytes": self.in_use,
                    "peak_held_bytes": self.peak_held, "peak_in_use_bytes": self.peak_in_use}

    def close(self):
        """Free everything; arrays that still hold a slot become unusable (typed error on use)."""
        with self.lock:
            self.closed = True
            for c in self.chunks:
                self._destroy(c)
            self.chunks.clear()
            self.free.clear()
            self.dead.clear()
