"""Device memory: a caching allocator that sub-allocates size-classed slots from large chunks.

Allocating is Python bookkeeping (no Vulkan call) once a chunk of the size class exists, which is
what makes a tiny op cheap. A Buffer is a (chunk VkBuffer, byte offset, size) slot; it returns to
its free list when the last Python reference goes away. Batches in flight hold references to every
buffer they touch, so a slot is never reused while the device may still access it.
Texel-buffer bindings read a slot through a VkBufferView, cached on its chunk per (format, slot).
"""
import ctypes
import functools
import re
import sys

from ..errors import FuelVKMemoryError, UnsupportedError
from .vk import C, ffi, lib, check

USAGE = (C.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | C.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
         | C.VK_BUFFER_USAGE_TRANSFER_DST_BIT | C.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT
         | C.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT)
HUGE, MADV_HUGEPAGE = 2 << 20, 14
TEXEL_FEATURE = {"uniform_texel_buffer": C.VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT,
                 "storage_texel_buffer": C.VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT}


def texel_bytes(fmt):
    """Bytes per texel of a plain VkFormat name ("R32G32B32A32_UINT" -> 16)."""
    return sum(int(b) for b in re.findall(r"[RGBA](\d+)", fmt.split("_")[0])) // 8
HOST = C.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | C.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
LOCAL = C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
MIN_BYTES = 256          # also the slot alignment: >= every device's minStorageBufferOffsetAlignment
CHUNK_BYTES = 8 << 20    # slots up to this size share chunks; larger sizes get a chunk each


def size_class(nbytes):
    """Round up to 256 B, then to the next of 4 steps per power of two (<= 25% waste)."""
    n = max(int(nbytes), MIN_BYTES)
    if n <= 1024:
        return (n + 255) & ~255
    top = 1 << (n.bit_length() - 1)
    step = top >> 2
    return (n + step - 1) // step * step


class Chunk:
    """One VkBuffer + VkDeviceMemory carved into equal slots."""
    __slots__ = ("handle", "memory", "mapped", "size", "slot", "n_free", "views")

    def __init__(self, handle, memory, mapped, size, slot):
        self.handle, self.memory, self.mapped, self.size, self.slot = handle, memory, mapped, size, slot
        self.n_free = 0
        self.views = {}    # (format name, offset, range) -> VkBufferView


class Buffer:
    __slots__ = ("pool", "chunk", "handle", "offset", "size", "key", "host", "__weakref__")

    def __init__(self, pool, chunk, offset, size, host):
        self.pool, self.chunk, self.handle, self.offset, self.size = pool, chunk, chunk.handle, offset, size
        self.key = (chunk.handle, offset)   # hazard tracking identity
        self.host = host

    @property
    def mapped(self):
        """char* to this slot in mapped memory, or None for device-local memory."""
        m = self.chunk.mapped
        return None if m is None else m + self.offset

    def __del__(self):
        pool = self.pool
        if pool is not None and not pool.closed:
            pool.release(self)


@functools.lru_cache(maxsize=None)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _huge_pages(addr, size):
    """Ask Linux for transparent huge pages on a CPU device's memory (madvise(MADV_HUGEPAGE), before
    first touch). Why: kernels that stride through big arrays (a matvec walking B's rows) miss the TLB
    on every 4 KiB page otherwise; advisory only, ignored where unsupported."""
    lo, hi = -(-addr // HUGE) * HUGE, (addr + size) // HUGE * HUGE
    if sys.platform == "linux" and hi > lo:
        _libc().madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_HUGEPAGE)


class MemoryPool:
    def __init__(self, device):
        self.device = device
        self.closed = False
        self.free = {}            # (size class, host) -> [(chunk, offset)]
        self.chunks = []
        self.max_binding = device.limits.maxStorageBufferRange
        props = ffi.new("VkPhysicalDeviceMemoryProperties*")
        lib.vkGetPhysicalDeviceMemoryProperties(device.physical, props)
        self._types = [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                       for i in range(props.memoryTypeCount)]
        self.heaps = [props.memoryHeaps[i].size for i in range(props.memoryHeapCount)]
        # Arrays live in mapped memory when the device reads host-visible memory at full speed
        # (CPU and integrated devices); discrete GPUs get device-local memory + staging copies.
        self.direct = device.device_type != "discrete"
        self.allocated = 0
        self._format_ok = {}

    def texel_view(self, buf, fmt, kind, what):
        """The VkBufferView of `buf`'s whole slot as `fmt` for a `kind` binding (cached on its chunk)."""
        key = (fmt, buf.offset, buf.size)
        view = buf.chunk.views.get(key)
        if view is not None:
            return view
        ok = self._format_ok.get((fmt, kind))
        if ok is None:
            props = ffi.new("VkFormatProperties*")
            lib.vkGetPhysicalDeviceFormatProperties(self.device.physical, getattr(C, "VK_FORMAT_" + fmt), props)
            ok = self._format_ok[(fmt, kind)] = bool(props.bufferFeatures & TEXEL_FEATURE[kind])
        if not ok:
            raise UnsupportedError(f"{what}: {self.device.name} cannot read format {fmt} as a {kind}")
        tb = texel_bytes(fmt)
        elements = buf.size // tb
        limit = self.device.limits.maxTexelBufferElements
        if elements > limit:
            raise UnsupportedError(f"{what}: a {buf.size}-byte array is {elements} {fmt} texels, over this "
                                   f"device's maxTexelBufferElements = {limit}; split the tensor")
        info = ffi.new("VkBufferViewCreateInfo*", {"sType": C.VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                                   "buffer": buf.chunk.handle,
                                                   "format": getattr(C, "VK_FORMAT_" + fmt),
                                                   "offset": buf.offset, "range": elements * tb})
        out = ffi.new("VkBufferView*")
        check(lib.vkCreateBufferView(self.device.handle, info, ffi.NULL, out), f"vkCreateBufferView({what})")
        view = buf.chunk.views[key] = out[0]
        return view

    def _memory_type(self, bits, want_host):
        prefs = [HOST | LOCAL, HOST] if want_host else [LOCAL]
        for flags in prefs:
            for i, (f, _) in enumerate(self._types):
                if bits & (1 << i) and (f & flags) == flags:
                    return i
        raise FuelVKMemoryError(f"no memory type with flags {prefs} for a buffer on {self.device.name}")

    def alloc(self, nbytes, host=None):
        """A buffer slot of at least nbytes; host=True forces mapped memory (staging)."""
        host = self.direct if host is None else host
        if nbytes > self.max_binding:
            raise FuelVKMemoryError(
                f"an array of {nbytes} bytes exceeds one binding's limit on {self.device.name} "
                f"(maxStorageBufferRange = {self.max_binding} bytes); split the tensor")
        size = min(size_class(nbytes), max(self.max_binding & ~255, nbytes))
        free = self.free.get((size, host))
        if not free:
            self._grow(size, host)
            free = self.free[(size, host)]
        chunk, offset = free.pop()
        chunk.n_free -= 1
        return Buffer(self, chunk, offset, size, host)

    def release(self, buf):
        buf.chunk.n_free += 1
        self.free.setdefault((buf.size, buf.host), []).append((buf.chunk, buf.offset))

    def _grow(self, size, host):
        n_slots = max(1, CHUNK_BYTES // size) if size <= CHUNK_BYTES else 1
        try:
            chunk = self._create(size * n_slots, host, size)
        except FuelVKMemoryError:
            self.trim()
            try:
                chunk = self._create(size, host, size)   # retry with a single slot
            except FuelVKMemoryError as e:
                raise FuelVKMemoryError(f"out of device memory allocating {size} bytes "
                                        f"({self.allocated} bytes held by fuelvk): {e}") from None
        n_slots = chunk.size // size
        chunk.n_free = n_slots
        self.free.setdefault((size, host), []).extend((chunk, i * size) for i in reversed(range(n_slots)))

    def _create(self, size, host, slot):
        dev = self.device.handle
        info = ffi.new("VkBufferCreateInfo*", {"sType": C.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                               "usage": USAGE, "sharingMode": C.VK_SHARING_MODE_EXCLUSIVE})
        h = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(dev, info, ffi.NULL, h), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(dev, h[0], req)
        ai = ffi.new("VkMemoryAllocateInfo*", {"sType": C.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                               "allocationSize": req.size,
                                               "memoryTypeIndex": self._memory_type(req.memoryTypeBits, host)})
        m = ffi.new("VkDeviceMemory*")
        res = lib.vkAllocateMemory(dev, ai, ffi.NULL, m)
        if res != C.VK_SUCCESS:
            lib.vkDestroyBuffer(dev, h[0], ffi.NULL)
            check(res, f"vkAllocateMemory({req.size} bytes)")
        check(lib.vkBindBufferMemory(dev, h[0], m[0], 0), "vkBindBufferMemory")
        mapped = None
        if host:
            p = ffi.new("void**")
            check(lib.vkMapMemory(dev, m[0], 0, size, 0, p), "vkMapMemory")
            mapped = ffi.cast("char*", p[0])
            if self.device.device_type == "cpu":
                _huge_pages(int(ffi.cast("uintptr_t", mapped)), size)
        self.allocated += size
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

    def trim(self):
        """Give every chunk with no live slot back to the driver."""
        idle = {id(c) for c in self.chunks if c.n_free * c.slot == c.size}
        if not idle:
            return
        for key, items in list(self.free.items()):
            self.free[key] = [(c, o) for c, o in items if id(c) not in idle]
        for c in self.chunks:
            if id(c) in idle:
                self._destroy(c)
        self.chunks = [c for c in self.chunks if id(c) not in idle]

    def close(self):
        """Free everything; arrays that still hold a slot become unusable (typed error on use)."""
        for c in self.chunks:
            self._destroy(c)
        self.chunks.clear()
        self.free.clear()
        self.closed = True
