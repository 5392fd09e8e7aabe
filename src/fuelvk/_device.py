"""The array API's Device object: fuelvk binds one Vulkan context per process, so arrays live on one
device; `device=` arguments accept it, its name, or None. Below Array (array.py imports it)."""
from . import runtime
from .errors import DeviceError


class Device:
    """The Vulkan device of the process-wide context (fuelvk binds one context per process; the
    standard's `device=` arguments accept this object, its name, or None)."""
    __slots__ = ()

    @property
    def name(self):
        return runtime.get().device.name

    def __eq__(self, other):
        return isinstance(other, Device)

    def __hash__(self):
        return hash(Device)

    def __repr__(self):
        ctx = runtime.current()
        return f"fuelvk.Device({ctx.device.name!r})" if ctx is not None else "fuelvk.Device(<not started>)"


DEVICE = Device()


def devices():
    """Every device arrays can live on: the one the context uses (FUELVK_DEVICE picks it)."""
    return [DEVICE]


def check_device(op, device):
    """Accept None, the Device, or its name; anything else is a DeviceError."""
    if device is None or isinstance(device, Device) or (isinstance(device, str) and device in ("vulkan", DEVICE.name)):
        return DEVICE
    raise DeviceError(f"{op}: device {device!r} is not a fuelvk device; accepted: None, {DEVICE!r} "
                      f"(fuelvk.devices())")
