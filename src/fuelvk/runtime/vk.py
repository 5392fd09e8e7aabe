"""The one place that touches the `vulkan` cffi bindings: raw ffi/lib and result translation.

fuelvk calls the cffi functions directly (``lib.vkCmdDispatch(...)``) instead of the package's
Python wrappers: the wrappers' per-call overhead (docs/MEASUREMENTS.md) dominates a small dispatch.
"""
try:
    import vulkan as _vulkan
except OSError as e:   # the bindings dlopen libvulkan.so.1 at import; their message asks for an "SDK"
    raise ImportError("fuelvk needs the Vulkan loader library (libvulkan.so.1 on Linux) and a driver: on Debian, "
                      "apt-get install libvulkan1 mesa-vulkan-drivers (lavapipe, the CPU driver) or your GPU's "
                      f"driver; no SDK is needed (the vulkan package said: {e})") from e

from ..errors import DeviceError, FuelVKMemoryError

ffi = _vulkan.ffi
lib = _vulkan.lib
consts = _vulkan  # the VK_* constants

_RESULT_NAMES = {getattr(consts, n): n for n in dir(consts)
                 if n.startswith(("VK_ERROR_", "VK_TIMEOUT", "VK_NOT_READY", "VK_INCOMPLETE"))}


def check(result, what):
    """Raise the fuelvk error for a non-success VkResult (VK_TIMEOUT/VK_NOT_READY included)."""
    if result == consts.VK_SUCCESS:
        return
    name = _RESULT_NAMES.get(result, str(result))
    if result in (consts.VK_ERROR_OUT_OF_DEVICE_MEMORY, consts.VK_ERROR_OUT_OF_HOST_MEMORY):
        raise FuelVKMemoryError(f"{what}: {name}")
    raise DeviceError(f"{what} failed: {name}")


def new(ctype, init=None, keep=None):
    """ffi.new that optionally records the struct in `keep` so nested pointers outlive the call."""
    obj = ffi.new(ctype, init) if init is not None else ffi.new(ctype)
    if keep is not None:
        keep.append(obj)
    return obj


def cstrs(strings, keep):
    bufs = [ffi.new("char[]", s.encode()) for s in strings]
    keep.extend(bufs)
    arr = ffi.new("const char*[]", bufs) if bufs else ffi.NULL
    keep.append(arr)
    return arr


def enumerate_(fn, ctype, *args):
    """The two-call enumerate idiom (count, then fill)."""
    n = ffi.new("uint32_t*")
    res = fn(*args, n, ffi.NULL)
    if res is not None:
        check(res, fn.__name__ if hasattr(fn, "__name__") else "enumerate")
    arr = ffi.new(f"{ctype}[]", n[0])
    res = fn(*args, n, arr)
    if res is not None and res != consts.VK_INCOMPLETE:
        check(res, "enumerate")
    return [arr[i] for i in range(n[0])], arr


def proc(device, name):
    """An extension entry point as a typed cffi function pointer (None when absent)."""
    p = lib.vkGetDeviceProcAddr(device, name.encode())
    return None if p == ffi.NULL else ffi.cast("PFN_" + name, p)


def instance_proc(instance, name):
    p = lib.vkGetInstanceProcAddr(instance, name.encode())
    return None if p == ffi.NULL else ffi.cast("PFN_" + name, p)
