"""fuelvk.Array: a strided view of a device buffer (shape, strides in elements, offset, dtype).

Views (transpose, reshape where possible, slicing with any step, broadcast_to, flip) are free:
they share the buffer and change only the metadata. Kernels that cannot take a view get a
contiguous copy from the dispatcher; outputs are always contiguous.

Operators and methods that need a kernel (a + b, astype, copy, a[mask], a.sum()) call the op of
that name bound in fuelvk._hooks: every op module imports Array, so array.py imports no op.
"""
import numbers
import sys

import numpy as np

from . import _hooks
from . import dtypes as _dt
from . import layout
from . import _device, runtime
from ._device import check_device
from .errors import DeviceError, DTypeError, ShapeError, ValueCastError


class Array:
    __slots__ = ("buffer", "shape", "strides", "offset", "dtype", "__weakref__")
    __array_priority__ = 100  # numpy defers binary operators to Array

    def __init__(self, buffer, shape, strides, offset, dtype):
        self.buffer, self.shape, self.strides, self.offset, self.dtype = buffer, shape, strides, offset, dtype

    # -- metadata ---------------------------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return layout.size_of(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    def __len__(self):
        if not self.shape:
            raise DTypeError("len() of a 0-d fuelvk.Array (it has no length; use .item() or .size)")
        return self.shape[0]

    @property
    def is_contiguous(self):
        return layout.is_contiguous(self.shape, self.strides)

    def __repr__(self):
        try:
            body = np.array2string(self.numpy(), separator=", ")
        except DeviceError:
            body = "<closed device>"
        return f"fuelvk.Array({body}, dtype={self.dtype})"

    # -- views ------------------------------------------------------------------------------------
    def _view(self, shape, strides, offset):
        return Array(self.buffer, tuple(shape), tuple(strides), offset, self.dtype)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        axes = tuple(layout.normalize_axis("transpose", a, self.ndim) for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ShapeError(f"transpose: axes {axes} are not a permutation of {self.ndim} dims")
        return self._view([self.shape[a] for a in axes], [self.strides[a] for a in axes], self.offset)

    permute = transpose

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        if self.ndim < 2:
            raise ShapeError("mT needs at least 2 dims")
        return self.swapaxes(-1, -2)

    def swapaxes(self, a, b):
        axes = list(range(self.ndim))
        a, b = (layout.normalize_axis("swapaxes", i, self.ndim) for i in (a, b))
        axes[a], axes[b] = axes[b], axes[a]
        return self.transpose(axes)

    def reshape(self, *shape):
        """A view when the strides allow it (numpy's rule), else a contiguous copy."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = layout.resolve_reshape(self.size, shape)
        strides = layout.reshape_strides(self.shape, self.strides, shape)
        if strides is None:
            c = self.copy()
            return c._view(shape, layout.contiguous_strides(shape), c.offset)
        return self._view(shape, strides, self.offset)

    def ravel(self):
        return self.reshape(-1)

    def broadcast_to(self, shape):
        shape = layout.as_shape("broadcast_to", shape)
        if len(shape) < self.ndim:
            raise ShapeError(f"broadcast_to: cannot broadcast {self.shape} to {shape}")
        return self._view(shape, layout.broadcast_strides(self.shape, self.strides, shape), self.offset)

    def expand_dims(self, axis):
        axis = layout.normalize_axis("expand_dims", axis, self.ndim + 1)
        return self._view(self.shape[:axis] + (1,) + self.shape[axis:],
                          self.strides[:axis] + (0,) + self.strides[axis:], self.offset)

    def squeeze(self, axis=None):
        if axis is None:
            keep = [i for i, n in enumerate(self.shape) if n != 1]
        else:
            axes = {layout.normalize_axis("squeeze", a, self.ndim)
                    for a in (axis if isinstance(axis, tuple) else (axis,))}
            if any(self.shape[a] != 1 for a in axes):
                raise ShapeError(f"squeeze: cannot squeeze axes {sorted(axes)} of shape {self.shape}")
            keep = [i for i in range(self.ndim) if i not in axes]
        return self._view([self.shape[i] for i in keep], [self.strides[i] for i in keep], self.offset)

    def flip(self, axis=None):
        axes = range(self.ndim) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        axes = {layout.normalize_axis("flip", a, self.ndim) for a in axes}
        off, strides = self.offset, list(self.strides)
        for a in axes:
            if self.shape[a] > 0:
                off += (self.shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
        return self._view(self.shape, strides, off)

    def __getitem__(self, key):
        if _advanced(key):     # bool masks, integer arrays (mixed with basic indices): fuelvk.api.indexing
            return _hooks.op("advanced_getitem")(self, key)
        view = self.index_view(key)
        if any(layout.is_bool(k) for k in (key if isinstance(key, tuple) else (key,))):
            return view.copy()   # a boolean mask is advanced indexing: numpy returns a copy
        return view

    def index_view(self, key):
        """The view a basic index selects (what a[key] = v writes through; bool masks included)."""
        return self._view(*layout.index_view(self.shape, self.strides, self.offset, key))

    def __setitem__(self, key, value):
        """a[index] = b: an in-place write through the view (write_slice / strided write kernels)."""
        k = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        if isinstance(k, (Array, np.ndarray)) and k.dtype == np.bool_:
            return _hooks.op("mask_setitem")(self, k, value)    # a[mask] = value (fuelvk.api.indexing)
        _hooks.op("setitem")(self, key, value)

    # -- host transfer ----------------------------------------------------------------------------
    def numpy(self):
        """Copy to a new contiguous numpy array (waits for pending device work)."""
        runtime.check_alive(self.buffer)
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        lo = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0)
        hi = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0)
        host = self.buffer.pool.context.download(self.buffer, lo * self.itemsize, (hi - lo + 1) * self.itemsize)
        flat = np.frombuffer(host, dtype=self.dtype)
        view = np.lib.stride_tricks.as_strided(flat[self.offset - lo:], self.shape,
                                               [s * self.itemsize for s in self.strides])
        return np.array(view, copy=True)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.size != 1:
            raise ShapeError(f"item: only size-1 arrays convert to a Python scalar, shape is {self.shape}")
        return self.numpy().reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __bool__(self):
        if self.size != 1:   # numpy's rule and words (item() would blame "item")
            raise ShapeError(f"the truth value of an array with {self.size} elements is ambiguous (shape "
                             f"{self.shape}); use fuelvk.any(x) or fuelvk.all(x)")
        return bool(self.item())

    def astype(self, dtype, /, *, copy=True, device=None):
        return _hooks.op("astype")(self, dtype, copy=copy, device=device)

    def copy(self):
        return _hooks.op("copy")(self)

    # -- operators --------------------------------------------------------------------------------
    def _binary(name, reflected=False, inplace=False):  # noqa: N805
        """The operator for public op `name`; in place (``a += b``): numpy's rule, the result is
        computed into a temporary and written back through this view (aliases and views see it; the
        temporary makes overlap harmless), cast under numpy's same_kind rule."""
        def op(self, other):
            f = _hooks.op(name)   # the public op (fuelvk.<name>)
            if name in ("equal", "not_equal") and not _array_like(other):
                return NotImplemented    # X == None, X in [None, "a"]: Python's identity fallback
            if not inplace:
                return f(other, self) if reflected else f(self, other)
            r = f(self, other)
            if not np.can_cast(r.dtype, self.dtype, "same_kind"):
                raise DTypeError(f"{name} (in place): cannot cast the result's dtype {r.dtype} to the array's "
                                 f"{self.dtype} with numpy's casting rule 'same_kind'")
            if r.shape != self.shape:
                raise ShapeError(f"{name} (in place): the result has shape {r.shape}, which does not fit the "
                                 f"array's shape {self.shape}")
            self[...] = r
            return self
        op.__name__ = name
        return op

    __add__, __radd__, __iadd__ = _binary("add"), _binary("add", True), _binary("add", inplace=True)
    __sub__, __rsub__, __isub__ = _binary("subtract"), _binary("subtract", True), _binary("subtract", inplace=True)
    __mul__, __rmul__, __imul__ = _binary("multiply"), _binary("multiply", True), _binary("multiply", inplace=True)
    __truediv__, __rtruediv__ = _binary("divide"), _binary("divide", True)
    __itruediv__ = _binary("divide", inplace=True)
    __matmul__, __rmatmul__ = _binary("matmul"), _binary("matmul", True)
    __imatmul__ = _binary("matmul", inplace=True)
    __pow__, __ipow__ = _binary("power"), _binary("power", inplace=True)
    # Comparisons are elementwise (bool Arrays), as numpy's; hashing stays by identity, as torch.Tensor
    # keeps it: identity-keyed caches and weak dicts keep working (dict lookups test `is` first).
    __eq__, __ne__ = _binary("equal"), _binary("not_equal")
    __lt__, __le__ = _binary("less"), _binary("less_equal")
    __gt__, __ge__ = _binary("greater"), _binary("greater_equal")
    __hash__ = object.__hash__

    def __rpow__(self, base):
        return _hooks.op("pow")(base, self)      # the array API's pow (complex: fuelvk.ops.complex)

    __floordiv__, __rfloordiv__ = _binary("floor_divide"), _binary("floor_divide", True)
    __ifloordiv__ = _binary("floor_divide", inplace=True)
    __mod__, __rmod__, __imod__ = _binary("remainder"), _binary("remainder", True), _binary("remainder", inplace=True)
    __and__, __rand__, __iand__ = _binary("bitwise_and"), _binary("bitwise_and", True), _binary("bitwise_and", inplace=True)
    __or__, __ror__, __ior__ = _binary("bitwise_or"), _binary("bitwise_or", True), _binary("bitwise_or", inplace=True)
    __xor__, __rxor__, __ixor__ = _binary("bitwise_xor"), _binary("bitwise_xor", True), _binary("bitwise_xor", inplace=True)
    __lshift__, __rlshift__ = _binary("bitwise_left_shift"), _binary("bitwise_left_shift", True)
    __ilshift__ = _binary("bitwise_left_shift", inplace=True)
    __rshift__, __rrshift__ = _binary("bitwise_right_shift"), _binary("bitwise_right_shift", True)
    __irshift__ = _binary("bitwise_right_shift", inplace=True)

    def __neg__(self):
        return _hooks.op("negative")(self)

    def __pos__(self):
        return self.copy()

    def __abs__(self):
        return _hooks.op("abs")(self)

    def __invert__(self):
        return _hooks.op("bitwise_invert")(self)

    del _binary

    # -- the array API's array object ----------------------------------------------------------------
    def __array_namespace__(self, *, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueCastError(f"__array_namespace__: api_version {api_version!r} is not supported; "
                                 "fuelvk implements 2024.12 (and accepts the earlier versions)")
        return sys.modules[__package__]

    @property
    def device(self):
        """The fuelvk.Device this array lives on (the one owning its buffer)."""
        return _device.device_of(self)

    def to_device(self, device, /, *, stream=None):
        """This array on `device`: itself when it lives there already, else a copy (through host memory:
        the devices are separate VkDevices), bit-exact. stream is accepted and ignored (fuelvk has one
        in-order stream per device)."""
        target = check_device("to_device", device)
        runtime.check_alive(self.buffer)
        if target is None or target == self.device:
            return self
        return asarray(self.numpy(), device=target)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export as host (kDLCPU) memory. Arrays in mapped memory (CPU and integrated devices,
        memory_info()'s mode) are exported zero-copy once pending device work is done: the capsule's
        numpy view keeps this array's buffer alive (device writes made after the export are seen once
        fuelvk.synchronize() returns). Device-local arrays export a downloaded copy, so
        there copy=False is a BufferError (the standard's rule)."""
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"__dlpack__: fuelvk exports host memory (kDLCPU, 0), not {dl_device}")
        kw = {} if max_version is None else {"max_version": max_version}
        runtime.check_alive(self.buffer)
        if self.size == 0:
            return np.empty(self.shape, self.dtype).__dlpack__(**kw)     # no memory to share
        if copy is not True and self.buffer.mapped is not None:
            self.buffer.pool.context.stream.synchronize()
            return np.asarray(_HostView(self)).__dlpack__(**kw)
        if copy is False:
            raise BufferError("__dlpack__: this array lives in device-local memory; exporting it needs a "
                              "host copy (copy=False is impossible)")
        return self.numpy().__dlpack__(**kw)

    def __dlpack_device__(self):
        return (1, 0)   # kDLCPU: mapped memory, or the host copy __dlpack__ hands over

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise DTypeError(f"__index__: only integer arrays convert to an index, this is {self.dtype}")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def _reduction(name):  # noqa: N805
        def method(self, *args, **kwargs):
            return _hooks.op(name)(self, *args, **kwargs)
        method.__name__ = name
        method.__doc__ = f"fuelvk.{name}(self, ...)"
        return method

    sum, prod, max, min = _reduction("sum"), _reduction("prod"), _reduction("max"), _reduction("min")
    mean, std, var = _reduction("mean"), _reduction("std"), _reduction("var")
    argmax, argmin, cumsum = _reduction("argmax"), _reduction("argmin"), _reduction("cumsum")
    all, any = _reduction("all"), _reduction("any")
    del _reduction


_device._Array = Array


class _HostView:
    """numpy's view of an Array in mapped memory (np.asarray(_HostView(a))): its base keeps the Array,
    hence the device buffer, alive while the view (or a DLPack capsule of it) lives."""
    __slots__ = ("array", "__array_interface__")

    def __init__(self, a):
        self.array = a
        ptr = int(runtime.ffi.cast("uintptr_t", a.buffer.mapped)) + a.offset * a.itemsize
        self.__array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "data": (ptr, False), "version": 3,
                                    "strides": tuple(s * a.itemsize for s in a.strides)}


def complex_part(x, part):
    """The real (part 0) or imaginary (1) float view of a complex Array (same buffer, no copy)."""
    fdt = _dt.float32 if x.dtype == _dt.complex64 else _dt.float64
    return Array(x.buffer, x.shape, tuple(2 * s for s in x.strides), 2 * x.offset + part, fdt)


def _advanced(key):
    """Whether an index needs advanced indexing (an Array, numpy array or list in it)."""
    return any(isinstance(k, (Array, np.ndarray, list)) for k in (key if isinstance(key, tuple) else (key,)))


def _array_like(x):
    """What fuelvk can turn into an Array: Arrays, numpy arrays and scalars, numbers, sequences,
    torch tensors."""
    torch = sys.modules.get("torch")
    return (isinstance(x, (Array, np.ndarray, np.generic, numbers.Number, list, tuple))
            or torch is not None and isinstance(x, torch.Tensor))


def _context(op, device):
    """The context an array created with `device=` lives on (None: the one ops run on now)."""
    return runtime.get() if device is None else check_device(op, device).context()


def empty(shape, dtype=_dt.float32, *, device=None):
    """A new contiguous device array (contents undefined)."""
    ctx = _context("empty", device)
    shape = layout.as_shape("empty", shape)
    dt = _dt.float32 if dtype is None else _dt.dtype(dtype)   # (np.dtype(None) would be float64)
    buf = ctx.pool.alloc(max(layout.size_of(shape), 1) * dt.itemsize)
    return Array(buf, shape, layout.contiguous_strides(shape), 0, dt)


def zeros(shape, dtype=_dt.float32, *, device=None):
    """An array of zeros (float32 unless dtype is given), filled on the device."""
    a = empty(layout.as_shape("zeros", shape), dtype, device=device)
    a.buffer.pool.context.stream.fill(a.buffer, (a.nbytes + 3) & ~3)
    return a


def _host(obj, dt):
    """obj as a numpy array (of dt when given), with typed errors; torch tensors keep their bits."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        from ._torch_bits import to_numpy   # (imports torch: only once torch is); bf16 / float8 bit-exact
        obj = to_numpy(obj.detach().cpu(), "asarray")
    try:
        host = np.asarray(obj)
    except ValueError as e:
        raise ShapeError(f"asarray: cannot make an array of this input ({e})") from None
    if dt is None and host.dtype.kind in "OUSVMm" and host.dtype not in _dt.ALL:   # objects, strings, dates
        odd = [v for v in host.ravel()[:1000] if not isinstance(v, numbers.Number)] \
            if host.dtype.kind == "O" else list(host.ravel()[:1])
        what = (f" (it holds {type(odd[0]).__name__} {odd[0]!r})" if odd else
                " (numbers that fit no fuelvk dtype, e.g. integers past 64 bits)" if host.size else "")
        raise DTypeError(f"asarray: numpy makes dtype {host.dtype} of the input{what}; "
                         "accepted: bools, integers, floats and complex numbers (scalars, nested lists, numpy "
                         f"arrays, torch tensors) of {', '.join(map(str, _dt.ALL))}")
    if dt is None or host.dtype == dt:
        return host
    if isinstance(obj, np.ndarray):
        return host.astype(dt)           # numpy's astype (unsafe casting, as numpy)
    try:
        return np.asarray(obj, dtype=dt)     # scalars and lists: numpy refuses NaN into ints, etc.
    except (ValueError, OverflowError) as e:
        raise ValueCastError(f"asarray: the input cannot be stored as {dt} ({e})") from None


def _python_kind(obj):
    """"c" / "f" when obj is Python data (a scalar or nested sequence, not numpy / torch) holding a
    complex / float, else None: those take fuelvk's default complex64 / float32."""
    if isinstance(obj, np.generic):
        return None               # numpy scalars keep their dtype (np.float64 subclasses float)
    if isinstance(obj, complex):
        return "c"
    if isinstance(obj, float):
        return "f"
    if isinstance(obj, (list, tuple)):
        kinds = {_python_kind(o) for o in obj}
        return "c" if "c" in kinds else "f" if "f" in kinds else None
    return None


def asarray(obj, dtype=None, *, device=None, copy=None):
    """An Array from an Array (no copy unless dtype differs or copy=True), numpy array, torch tensor
    (bit-exact, bf16 / float8 included), scalar or nested list.

    Python floats (scalars and lists) become float32, fuelvk's default floating dtype (the array
    API's choice is the library's; README "Array API"); numpy arrays keep their dtype. copy=False
    never copies: it raises ValueCastError where a copy (an upload or a cast) would be needed.
    device=: the array is created there; an Array on another device is copied there (to_device)."""
    target = check_device("asarray", device)
    if isinstance(obj, Array):
        runtime.check_alive(obj.buffer)
        if target is not None and target != obj.device:
            if copy is False:
                raise ValueCastError(f"asarray: copy=False, but the array lives on {obj.device!r}, not {target!r}; "
                                     "moving it is a copy")
            obj, copy = obj.to_device(target), None
        if dtype is not None and _dt.dtype(dtype) != obj.dtype:
            if copy is False:
                raise ValueCastError(f"asarray: copy=False, but {obj.dtype} -> {_dt.dtype(dtype)} needs a copy")
            return obj.astype(dtype)
        return obj.copy() if copy else obj
    if copy is False:
        raise ValueCastError("asarray: copy=False, but this input lives on the host and must be uploaded "
                             "(a copy)")
    dt = None if dtype is None else _dt.dtype(dtype)
    if dt is None:
        kind = _python_kind(obj)
        dt = _dt.complex64 if kind == "c" else _dt.float32 if kind == "f" else None
    host = _host(obj, dt)
    dt = _dt.dtype(host.dtype) if dt is None else dt
    host = host if host.flags.c_contiguous else host.copy()  # (ascontiguousarray makes 0-d 1-d)
    a = empty(host.shape, dt, device=target)
    if host.size:
        a.buffer.pool.context.upload(a.buffer, host)
    return a
