"""Device buffers and a pooled allocator (size classes, reuse after the GPU is done with them).

A Buffer returns its Vulkan objects to the pool when the last Python reference goes away. Batches
in flight hold references to every buffer they touch, so reuse can never race the device.
"""
import weakref

from ..errors import FuelVKMemoryError
from .vk import C, ffi, lib, check

USAGE = (C.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | C.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
         | C.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
HOST = C.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | C.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
LOCAL = C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
MIN_BYTES = 256


def size_class(nbytes):
    """Round up to 256 B, then to the next of 4 steps per power of two (<= 25% waste)."""
    n = max(int(nbytes), MIN_BYTES)
    if n <= 1024:
        return (n + 255) & ~255
    top = 1 << (n.bit_length() - 1)
    step = top >> 2
    return (n + step - 1) // step * step


class Buffer:
    __slots__ = ("handle", "memory", "size", "mapped", "pool", "__weakref__")

    def __init__(self, pool, handle, memory, size, mapped):
        self.pool, self.handle, self.memory, self.size, self.mapped = pool, handle, memory, size, mapped

    def __del__(self):
        pool = self.pool
        if pool is not None and not pool.closed:
            pool.free.setdefault((self.size, self.mapped is not None), []).append(
                (self.handle, self.memory, self.mapped))


class MemoryPool:
    def __init__(self, device):
        self.device = device
        self.closed = False
        self.free = {}
        self.max_binding = device.limits.maxStorageBufferRange
        props = ffi.new("VkPhysicalDeviceMemoryProperties*")
        lib.vkGetPhysicalDeviceMemoryProperties(device.physical, props)
        self._types = [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                       for i in range(props.memoryTypeCount)]
        self.heaps = [props.memoryHeaps[i].size for i in range(props.memoryHeapCount)]
        # Arrays live in mapped memory when the device reads host-visible memory at full speed
        # (CPU and integrated devices, and UMA); discrete GPUs get device-local memory + staging.
        self.direct = device.device_type != "discrete"
        self.allocated = 0
        self.live = weakref.WeakSet()

    def _memory_type(self, bits, want_host):
        prefs = ([HOST | LOCAL, HOST] if want_host else [LOCAL])
        for flags in prefs:
            for i, (f, _) in enumerate(self._types):
                if bits & (1 << i) and (f & flags) == flags:
                    return i
        raise FuelVKMemoryError(f"no memory type with flags {prefs} for buffer on {self.device.name}")

    def alloc(self, nbytes, host=None):
        """A buffer of at least nbytes; host=True forces mapped memory (staging)."""
        host = self.direct if host is None else host
        size = size_class(nbytes)
        if host and not self.direct:
            size = max(size, MIN_BYTES)
        if nbytes > self.max_binding:
            raise FuelVKMemoryError(
                f"an array of {nbytes} bytes exceeds one binding's limit on {self.device.name} "
                f"(maxStorageBufferRange = {self.max_binding} bytes); split the tensor")
        size = min(size, max(self.max_binding, nbytes))
        free = self.free.get((size, host))
        if free:
            return self._track(Buffer(self, *_unpack(free.pop(), size)))
        try:
            return self._create(size, host)
        except FuelVKMemoryError:
            self.trim()
            try:
                return self._create(size, host)
            except FuelVKMemoryError as e:
                raise FuelVKMemoryError(f"out of device memory allocating {nbytes} bytes "
                                        f"({self.allocated} bytes in use by fuelvk): {e}") from None

    def _create(self, size, host):
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
        self.allocated += size
        return self._track(Buffer(self, h[0], m[0], size, mapped))

    def _track(self, buf):
        self.live.add(buf)
        return buf

    def trim(self):
        """Release every cached (free) buffer back to the driver."""
        dev = self.device.handle
        for (size, _), items in self.free.items():
            for handle, memory, _mapped in items:
                lib.vkDestroyBuffer(dev, handle, ffi.NULL)
                lib.vkFreeMemory(dev, memory, ffi.NULL)
                self.allocated -= size
        self.free.clear()

    def close(self):
        """Free everything, live buffers included; arrays that still hold one become unusable."""
        self.trim()
        dev = self.device.handle
        for buf in list(self.live):
            lib.vkDestroyBuffer(dev, buf.handle, ffi.NULL)
            lib.vkFreeMemory(dev, buf.memory, ffi.NULL)
            buf.pool = None
        self.closed = True


def _unpack(item, size):
    handle, memory, mapped = item
    return handle, memory, size, mapped
