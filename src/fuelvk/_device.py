"""The array API's Device object, and how ops find the device they run on. Below Array (array.py
imports it).

`fuelvk.devices()` lists the devices arrays can live on: the one FUELVK_DEVICE picks, or those
FUELVK_DEVICES lists (a device named twice is a second logical device on the same physical one, its
own VkDevice: "0,0"). `Device(i)` is entry i; device 0 is the default. Each has its own runtime
Context, opened on first use; an array is bound to the context that owns its buffer
(`array.buffer.pool.context`).

Ops run on their inputs' device: every public function is wrapped by `on_device`, which, once a
second device has been opened (or when `device=` is given), runs the function with the runtime's
thread-local context (runtime.running) set to its Array inputs' device, or to `device=`. Arrays of
two devices in one call are a DeviceError naming both. With one device the wrapper only tests a flag,
so the default path costs what it did; the device's stream refuses any buffer of another device
(a typed error, never a dispatch on the wrong VkDevice).
"""
import functools

from . import runtime
from .errors import DeviceError


class Device:
    """Device `index` of fuelvk.devices() (0: the default). Equal when the index is; `device=` accepts it."""
    __slots__ = ("index",)

    def __init__(self, index=0):
        if type(index) is not int or index < 0:
            raise DeviceError(f"fuelvk.Device: index must be an int >= 0 (a position in fuelvk.devices()), "
                              f"got {index!r}")
        self.index = index

    def context(self):
        """Its runtime context (opened on first use)."""
        return runtime.context(self.index)

    @property
    def name(self):
        return self.context().device.name

    def __eq__(self, other):
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self):
        return hash((Device, self.index))

    def __repr__(self):
        ctx = runtime.opened(self.index)
        return f"fuelvk.Device({self.index}, {ctx.device.name!r})" if ctx is not None \
            else f"fuelvk.Device({self.index}, <not started>)"


DEVICE = Device(0)
_Array = None   # fuelvk.Array, set by array.py (which imports this module)


def devices():
    """Every device arrays can live on (FUELVK_DEVICES, else the one FUELVK_DEVICE picks); the first
    is the default."""
    return [DEVICE] + [Device(i) for i in range(1, len(runtime.selectors()))]


def check_device(op, device):
    """The Device `device=` names: None (None), a Device of fuelvk.devices() (or one already open), "vulkan"
    (the default) or the name of the default or an open device (the first with it); anything else is a
    DeviceError."""
    if device is None:
        return None
    if isinstance(device, Device):
        if device.index == 0 or device.index < len(runtime.selectors()) or runtime.opened(device.index):
            return device
    elif isinstance(device, str):
        if device in ("vulkan", DEVICE.name):
            return DEVICE
        for d in devices()[1:]:      # (a name never opens a device: only those open are asked)
            ctx = runtime.opened(d.index)
            if ctx is not None and device == ctx.device.name:
                return d
    raise DeviceError(f"{op}: device {device!r} is not a fuelvk device; accepted: None, one of "
                      f"{devices()!r} (fuelvk.devices(); FUELVK_DEVICES lists them), or its name")


def device_of(x):
    """The Device an Array lives on."""
    return device_of_pool(x.buffer.pool)


def device_of_pool(pool):
    return Device(pool.context.index)


def _inputs_context(op, args, kwargs):
    """The context of the Array inputs (top level, or inside a list / tuple), None when there are none;
    a closed device or two devices is a DeviceError."""
    pool = None
    for a in (*args, *kwargs.values()) if kwargs else args:
        for x in a if type(a) in (list, tuple) else (a,):
            if isinstance(x, _Array):
                p = x.buffer.pool
                if p is pool:
                    continue
                runtime.check_alive(x.buffer)
                if pool is not None:
                    raise DeviceError(f"{op}: its inputs live on two devices, {device_of_pool(pool)!r} and "
                                      f"{device_of_pool(p)!r}; move one with x.to_device(...)")
                pool = p
    return None if pool is None else pool.context


def _run(fn, args, kwargs):
    device = kwargs.get("device")
    if device is not None:
        target = check_device(fn.__name__, device)
        ctx = target.context()
    else:
        ctx = _inputs_context(fn.__name__, args, kwargs)
        if ctx is None:       # no Array input: the thread's device (an enclosing op's) or the default
            return fn(*args, **kwargs)
    tls = runtime._tls
    prev = getattr(tls, "ctx", None)
    if prev is ctx:
        return fn(*args, **kwargs)
    tls.ctx = ctx     # (runtime.running, inlined: this runs around every op while two devices are open)
    try:
        return fn(*args, **kwargs)
    finally:
        tls.ctx = prev


def on_device(fn):
    """fn run on its Array inputs' device, or on `device=` (see the module docstring)."""
    def op(*args, **kwargs):
        if runtime.many or kwargs and kwargs.get("device") is not None:
            return _run(fn, args, kwargs)
        return fn(*args, **kwargs)
    functools.update_wrapper(op, fn)
    return op
