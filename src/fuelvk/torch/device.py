"""The PyTorch device "fuelvk": torch tensors whose memory is a fuelvk device buffer.

Registered from Python on torch's PrivateUse1 key (torch.utils.backend_registration), no C++ build.

Where the memory lives: on the tensor's *storage*. A fuelvk tensor is a plain torch.Tensor made by
torch._C._acc.create_empty_tensor; its UntypedStorage Python object carries the fuelvk Buffer
(attribute `_fuelvk_buffer`). torch keeps a storage's Python object alive exactly as long as the
storage, so the Buffer is freed when the last tensor on it dies. torch's own metadata (sizes,
strides, storage_offset, dtype) is the layout: array(t) is Array(buffer, shape, strides, offset,
dtype). Hence every view torch makes in C++ (alias, detach, transpose, select, expand, ...: they
share the storage) is a view of the same device memory with no Python code involved, and view ops
that need a kernel (view, as_strided, ...) run torch's Meta kernel, which only computes metadata.
A new tensor's layout is set with the Meta kernel of set_ (it sets sizes/strides/offset and the
storage's byte size, never touching data). data_ptr() is 0: the memory is not host-addressable.

A whole-storage overwrite (copy_ from the CPU, an in-place op over a contiguous tensor that covers
its storage) swaps the storage's Buffer for the freshly written one instead of copying into it;
every view of the storage sees the new contents, as after a write. Queued device work holds the old
Buffer until it retires (runtime/memory.py).

One torch device: "fuelvk" == "fuelvk:0" is fuelvk's default device (fuelvk.devices()[0]). The
other devices FUELVK_DEVICES lists are not mapped to torch indices (device_count() is 1), and
"fuelvk:1" (any index > 0) is a DeviceError at the factories (_aten._one_device): torch 2.13's Python
backend API makes every PrivateUse1 tensor on index 0 (torch._C._acc.create_empty_tensor takes no
device, and a Python DeviceGuard overrides only type_), so a tensor could not say it lives elsewhere.
"""
import math

import numpy as np
import torch

from .. import dtypes as _dt
from .. import runtime
from ..array import Array, asarray
from ..errors import DeviceError, DTypeError, UnsupportedError
from .._torch_bits import _BITS, TO_NUMPY, TO_TORCH, numpy_dtype, to_numpy
from ._fallback_log import note

NAME = "fuelvk"
META = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_SET = torch.ops.aten.set_.source_Storage_storage_offset
_ATTR = "_fuelvk_buffer"
_registered = False


class BackendModule:
    """torch.fuelvk: what torch asks a device module for (one device; CPU generator, see rand)."""

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def is_initialized():
        return runtime.current() is not None

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def _is_in_bad_fork():
        return False

    @staticmethod
    def manual_seed_all(seed):
        """No own generator: random factories draw from torch's CPU generator (torch.manual_seed)."""

    @staticmethod
    def get_rng_state(device=None):
        """Empty: the state is the CPU generator's (torch.get_rng_state), which callers save anyway."""
        return torch.empty(0, dtype=torch.uint8)

    @staticmethod
    def set_rng_state(new_state, device=None):
        pass

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.float16, torch.bfloat16]

    @staticmethod
    def is_bf16_supported(including_emulation=True):
        return True

    @staticmethod
    def synchronize(device=None):
        runtime.get().stream.synchronize()


def register_backend():
    """Name PrivateUse1 "fuelvk" (torch.fuelvk, hooks, guard) and patch printing and storages; True the
    first time. The aten kernels and the CPU fallback are registered on top of it by
    fuelvk.torch.register_device (this module stays below them in the import graph).

    torch allows one PrivateUse1 backend per process: another one already registered is a DeviceError.
    """
    global _registered
    if _registered:
        return False
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise DeviceError(f"fuelvk.torch: PrivateUse1 is already registered as {current!r}; torch allows one "
                          "PrivateUse1 backend per process, so the fuelvk device cannot be registered")
    try:
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend
    except ImportError:
        raise UnsupportedError(f"fuelvk.torch: the {NAME!r} torch device needs PyTorch's Python device backend "
                               "API (torch.utils.backend_registration._setup_privateuseone_for_python_backend, "
                               f"PyTorch >= 2.13); this is torch {torch.__version__}") from None
    _setup_privateuseone_for_python_backend(None if current == NAME else NAME, backend_module=BackendModule())
    _registered = True
    _patch_printing()
    _patch_storage()
    return True


def _patch_printing():
    """Tensor printing slices and compares the tensor with many ops; fuelvk tensors print their CPU
    copy instead (torch does the same for xla/lazy/ipu/mtia), so repr never runs device ops."""
    import torch._tensor_str as ts
    orig = ts._tensor_str
    if getattr(orig, "_fuelvk", False):
        return

    def _tensor_str(self, indent):
        if self.device.type == NAME:
            with torch.no_grad():
                self = self.cpu()
        return orig(self, indent)
    _tensor_str._fuelvk = True
    ts._tensor_str = _tensor_str


def _patch_storage():
    """UntypedStorage.clone/.cpu/.to/.fuelvk would allocate a PrivateUse1 storage through torch's (absent)
    allocator and memcpy from data_ptr 0 (a segfault), and data_ptr() of a storage with bytes but no
    host pointer raises. For fuelvk storages these copy the Buffer instead and data_ptr() is 0 (as
    Tensor.data_ptr()), so copy.deepcopy, torch.save and torch.load (map_location too) work."""
    cls = torch.UntypedStorage
    if getattr(cls.clone, "_fuelvk", False):
        return
    clone, cpu, to, data_ptr = cls.clone, cls.cpu, cls.to, cls.data_ptr

    def _clone(self):
        if self.device.type != NAME:
            return clone(self)
        new = empty([self.nbytes()], torch.uint8).untyped_storage()
        runtime.get().stream.copy(getattr(self, _ATTR), getattr(new, _ATTR), self.nbytes())
        return new

    def _cpu(self):
        if self.device.type != NAME:
            return cpu(self)
        host = runtime.get().download(getattr(self, _ATTR), 0, self.nbytes()) if self.nbytes() else b""
        return torch.UntypedStorage.from_buffer(bytearray(host), dtype=torch.uint8) if host else torch.UntypedStorage(0)

    def _to_fuelvk(self, device=None, non_blocking=False):
        if self.device.type == NAME:
            return self
        return upload(torch.tensor([], dtype=torch.uint8).set_(self.cpu())).untyped_storage()

    def _to(self, *, device, non_blocking=False):
        device = torch.device(device)
        if device.type == NAME:
            return _to_fuelvk(self)
        if self.device.type == NAME and device.type == "cpu":
            return _cpu(self)
        return to(self, device=device, non_blocking=non_blocking)

    def _data_ptr(self):
        return 0 if self.device.type == NAME else data_ptr(self)
    for f in (_clone, _cpu, _to_fuelvk, _to, _data_ptr):
        f._fuelvk = True
    cls.clone, cls.cpu, cls.to, cls.data_ptr = _clone, _cpu, _to, _data_ptr
    setattr(cls, NAME, _to_fuelvk)


# -- tensor <-> Array ------------------------------------------------------------------------------
def is_fuelvk(t):
    """t is a tensor on fuelvk memory. (Every aten kernel asks this per operand: the storage attribute is
    read instead of t.device, which builds a torch.device object each time.)"""
    return isinstance(t, torch.Tensor) and not t.is_cpu and hasattr(t.untyped_storage(), _ATTR)


def not_here(t):
    """The error for a tensor of another device met by a fuelvk kernel (torch's own words for CPU ops)."""
    return DeviceError(f"Expected all tensors to be on the same device, but found at least two devices, {NAME}:0 "
                       f"and {t.device} (a {t.device} operand of shape {tuple(t.shape)}); move it with "
                       f".to('{NAME}')")


def buffer_of(t):
    try:
        return getattr(t.untyped_storage(), _ATTR)
    except AttributeError:
        if t.device.type != NAME:   # a CPU operand beside fuelvk ones (x_fuelvk @ w_cpu)
            raise not_here(t) from None
        raise DeviceError(f"a {NAME} tensor without device memory (shape {tuple(t.shape)}); it was not made by "
                          "fuelvk.torch") from None


def array(t):
    """The fuelvk Array view of a fuelvk tensor: same buffer, torch's sizes/strides/offset (no copy).
    (Every aten kernel calls this per operand: the dtype lookup is the table's, numpy_dtype only names
    a dtype fuelvk cannot hold.)"""
    dt = TO_NUMPY.get(t.dtype) or numpy_dtype("device", t.dtype)
    return Array(buffer_of(t), tuple(t.shape), t.stride(), t.storage_offset(), dt)


def _extent(shape, strides):
    """Elements a layout reaches (0 for an empty tensor)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _contiguous(shape):
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(int(shape[i]), 1)
    return strides


def non_overlapping_and_dense(shape, strides):
    """torch's is_non_overlapping_and_dense(): the elements fill a dense block, each once."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    expected = 1
    for d in dims:
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def dense_order(shape, strides):
    """The dims of a non-overlapping dense layout, slowest first (None when it is not dense)."""
    if not non_overlapping_and_dense(shape, strides):
        return None
    return sorted(range(len(shape)), key=lambda d: (-strides[d], -d))


def _make(buffer, shape, strides, offset, dtype):
    """A tensor on buffer with this layout: set_'s Meta kernel sets sizes, strides, offset and the
    storage's byte size. It is reached by putting Meta in the thread's included keys for one call, which
    costs less than a boxed redispatch (every aten kernel's result comes through here), below autograd and
    ADInplaceOrView: a kernel the dispatcher called from the autograd layer already is (its guard
    excludes both); anything else takes the guard here. shape and strides: lists or tuples."""
    t = _create(shape, dtype)
    s = t.untyped_storage()
    setattr(s, _ATTR, buffer)
    _set_on_meta(t, s, offset, shape, strides)
    return t


def meta_method(method):
    """Tensor method `method` called with Meta in the thread's included keys (cheaper than a boxed
    redispatch to Meta), below autograd and ADInplaceOrView: torch's Meta kernel computes a view's (or,
    for set_, a result's) metadata on the same storage."""
    def view(self, *args, **kwargs):
        before = _meta_included()
        _include_meta(True)
        try:
            if _excluded(_AD_INPLACE) and _excluded(_AUTOGRAD):
                return method(self, *args, **kwargs)
            with torch._C._AutoDispatchBelowADInplaceOrView():
                return method(self, *args, **kwargs)
        finally:
            _include_meta(before)
    view.__name__ = method.__name__
    return view


_set_on_meta = meta_method(torch.Tensor.set_)
_meta_included, _include_meta = torch._C._meta_in_tls_dispatch_include, torch._C._set_meta_in_tls_dispatch_include
_create, _excluded = torch._C._acc.create_empty_tensor, torch._C._dispatch_tls_is_dispatch_key_excluded
_AD_INPLACE, _AUTOGRAD = torch._C.DispatchKey.ADInplaceOrView, torch._C.DispatchKey.AutogradPrivateUse1


def empty(shape, dtype, strides=None):
    """A new fuelvk tensor (contents undefined); contiguous unless strides are given."""
    shape = [int(n) for n in shape]
    strides = _contiguous(shape) if strides is None else strides
    if any(s < 0 for s in strides):
        raise DTypeError(f"{NAME}: negative strides {tuple(strides)} (torch tensors have none)")
    numpy_dtype("empty", dtype)   # a dtype fuelvk cannot hold is refused here, not at first use
    buf = runtime.get().pool.alloc(max(_extent(shape, strides), 1) * dtype.itemsize)
    return _make(buf, shape, strides, 0, dtype)


def wrap(arr):
    """A fuelvk tensor on arr's buffer with arr's layout (arr is a fresh result: no copy). A contiguous
    arr gets torch's contiguous strides (fuelvk's size-1 dims may have any stride, torch's (1,) stay)."""
    strides = arr.strides
    if strides and min(strides) < 0:
        arr = arr.copy()
        strides = arr.strides
    if 1 in arr.shape and arr.is_contiguous:
        strides = _contiguous(arr.shape)
    return _make(arr.buffer, arr.shape, strides, arr.offset, TO_TORCH[arr.dtype])


def covers_storage(t):
    """t is contiguous from offset 0 over exactly its whole storage (a write to t rewrites all of it)."""
    return (t.storage_offset() == 0 and t.is_contiguous()
            and t.numel() * t.element_size() == t.untyped_storage().nbytes())


def assign(dst, arr):
    """Write arr (same shape, any dtype) into fuelvk tensor dst; returns dst.

    A fresh contiguous result covering dst's whole storage replaces the storage's buffer (no copy
    kernel); anything else is written through dst's view (broadcasting arr)."""
    want = numpy_dtype("copy_", dst.dtype)
    if arr.dtype != want:
        arr = arr.astype(want)
    if (arr.offset == 0 and arr.is_contiguous and arr.shape == tuple(dst.shape) and covers_storage(dst)
            and arr.buffer is not buffer_of(dst)):
        setattr(dst.untyped_storage(), _ATTR, arr.buffer)
    elif dst.numel():
        array(dst)[...] = arr
    return dst


def upload(host):
    """A new fuelvk tensor with the values of CPU tensor host (bit-exact): with host's strides when host is
    dense (a CPU fallback's result keeps the layout torch gave it), else contiguous."""
    host = host.detach()
    if host.dim() < 2 or (host.is_contiguous() and host.stride() == tuple(_contiguous(host.shape))):
        return wrap(asarray(to_numpy(host.contiguous(), "to")))
    order = dense_order(tuple(host.shape), host.stride())
    if order is None:
        return wrap(asarray(to_numpy(host.contiguous(), "to")))
    arr = asarray(to_numpy(host.permute(order).contiguous(), "to"))   # (already contiguous: no copy)
    return _make(arr.buffer, tuple(host.shape), host.stride(), arr.offset, host.dtype)


def download(t):
    """A new CPU tensor with the values of fuelvk tensor t (waits for queued device work)."""
    if t.numel() == 0:
        return torch.empty(tuple(t.shape), dtype=t.dtype)
    return host_tensor(array(t))


def host_tensor(a):
    """A CPU tensor holding the bits of a fuelvk Array or numpy array (bfloat16/float8 through their raw bits)."""
    host = a.numpy() if isinstance(a, Array) else np.asarray(a)
    if host.dtype in (_dt.bfloat16, _dt.float8_e4m3fn):
        raw, want = _BITS[TO_TORCH[host.dtype]][1], TO_TORCH[host.dtype]
        return torch.from_numpy(host.view(np.int16 if raw == torch.int16 else np.uint8)).view(want)
    if not host.flags.writeable:
        host = host.copy()
    return torch.from_numpy(host)


# -- the kernels torch needs from any device ----------------------------------------------------------
def copy_from(src, dst, non_blocking=False):
    """aten::_copy_from: what copy_ calls when either side is a fuelvk tensor (all three directions)."""
    if dst.device.type == "cpu":
        dst.copy_(download(src))
        return dst
    if src.device.type == "cpu":
        if dst.numel() == 0:   # nothing to write (an empty cache tensor a model makes per forward)
            src.expand(dst.shape)   # (the shape check the copy below makes)
            return dst
        host = src.to(dst.dtype).expand(dst.shape)
        if covers_storage(dst):
            return assign(dst, asarray(to_numpy(host.contiguous(), "copy_")))
        array(dst)[...] = asarray(to_numpy(host.contiguous(), "copy_"))
        return dst
    if not is_fuelvk(src):
        raise UnsupportedError(f"copy_: from a {src.device} tensor to {NAME}; copy through the CPU")
    a = array(src)
    if tuple(src.shape) != tuple(dst.shape):
        a = a.broadcast_to(tuple(dst.shape))
    if src.dtype != dst.dtype:
        try:
            return assign(dst, a.astype(numpy_dtype("copy_", dst.dtype)))
        except DTypeError as e:   # fuelvk casts floats only: integer / bool casts go through the host
            note("aten::_copy_from", f"a {src.dtype} -> {dst.dtype} cast: {e}")
            return copy_from(download(src), dst)
    if covers_storage(dst) and dst.numel():
        return assign(dst, a.copy())
    if dst.numel():
        array(dst)[...] = a
    return dst


def resize_(self, size, memory_format=None):
    """aten::resize_: grow the buffer when needed (old bytes kept, as torch does), then the metadata."""
    s = self.untyped_storage()
    need = (self.storage_offset() + math.prod(size)) * self.element_size()
    old = getattr(s, _ATTR)
    if need > old.size:
        new = runtime.get().pool.alloc(need)
        runtime.get().stream.copy(old, new, min(s.nbytes(), old.size))
        setattr(s, _ATTR, new)
    _SET.redispatch(META, self, s, self.storage_offset(), list(size), _contiguous(size))
    return self
