"""Launch plans of aten kernels: the second and later calls of a kernel with the same operand layouts
skip the Python that decides what to launch.

Why: an aten kernel's fuelvk op spends most of its host time deciding what to launch (dtype checks,
broadcast and stride analysis, routes, tiles, Params packing), and a model calls the same ops on the
same shapes at every step. A plan is the dispatches one call recorded -- pipeline, workgroups, push
constant bytes, which binding was which operand -- and the buffers it allocated; replaying it allocates
those buffers again and records the same dispatches over the new operands' buffers.

Key: the aten op, and per argument its layout (dtype, sizes, strides, storage offset, the byte size of
its buffer, and which earlier argument shares its buffer) or its value (numbers, 0-d CPU tensors,
dtypes, lists). Everything a kernel decides from is in it: fuelvk's ops decide from layouts and
scalars, never from values in device memory (those need a host read, which makes a call unplannable).

When a call is planned: the kernel ran twice with one key, both runs only dispatched, filled and
deferred replayable checks (no upload, download, copy, other deferred check or CPU fallback; a
replayable check has rebind(slot): the same verdict over a fresh host-visible slot of the call's, as
fuelvk.ops.indexing's device bounds check), every bound buffer was an operand or allocated by the call
(or held by the op: read-only tables, texel stubs), the results are fresh tensors on the call's allocations, and the two runs recorded the
same launches (a first call may differ: it creates lazily made read-only buffers). Anything else marks the key unplannable (the kernel always runs). In-place, out=,
view, factory and random kernels are never planned (plannable()). A plan keeps the kernels and routes
chosen when it was made: after changing a FUELVK_* setting that is read per call (a route, a load path),
call fuelvk.torch.clear_plans(); ENABLED = False turns planning off.
"""
import threading
import weakref

import torch

from .. import runtime
from ..runtime import loadpath
from . import device as fuelvk_device
from ._fallback_log import fallback_stats

Tensor = torch.Tensor
_ATTR = fuelvk_device._ATTR

ENABLED = True
MAX_MISSES = 3           # runs that recorded other launches than the run before (a first call creates a stub)
MAX_PLANS = 4096          # per device; past it the table starts over (a model needs a few hundred)
_UNPLANNABLE = object()
_tables = weakref.WeakKeyDictionary()   # Context -> {key: plan, or the first capture, or _UNPLANNABLE}
_capture_lock = threading.Lock()
stats = {"replayed": 0, "captured": 0, "unplannable": 0}


def clear():
    _tables.clear()


class _NotPlannable(Exception):
    pass


_VALUES = (int, str, torch.dtype, torch.device, torch.memory_format, torch.layout)   # bool is an int


def _key(name, args, kwargs):
    """(key, the operands' buffers in first-seen order) or (None, None) when an argument cannot be keyed.
    (The hot path of every planned call: a device tensor is keyed inline, everything else by _add.)"""
    parts, bufs = [name, torch.get_default_dtype()], []   # (the result dtype of integer division)
    try:
        for a in args:
            if isinstance(a, Tensor) and not a.is_cpu:
                buf = getattr(a.untyped_storage(), _ATTR, None)
                if buf is None:
                    raise _NotPlannable
                for i, b in enumerate(bufs):
                    if b is buf:
                        break
                else:
                    i = len(bufs)
                    bufs.append(buf)
                parts.append((a.dtype, a.shape, a.stride(), a.storage_offset(), buf.size, i))
            else:
                _add(a, parts, bufs)
        if kwargs:
            for k in sorted(kwargs):
                parts.append(k)
                _add(kwargs[k], parts, bufs)
    except _NotPlannable:
        return None, None
    return tuple(parts), bufs


def _add(a, parts, bufs):
    """Append argument a's key part. (A module function, not a closure: a recursive closure is a reference
    cycle, which would keep the operands' buffers alive until the garbage collector runs.) A tensor's
    sizes are its torch.Size, a tuple (equal to and hashed as the plain tuple)."""
    if isinstance(a, Tensor):
        buf = None if a.is_cpu else getattr(a.untyped_storage(), _ATTR, None)
        if buf is not None:
            for i, b in enumerate(bufs):
                if b is buf:
                    break
            else:
                i = len(bufs)
                bufs.append(buf)
            parts.append((a.dtype, a.shape, a.stride(), a.storage_offset(), buf.size, i))
        elif a.is_cpu and a.dim() == 0 and not a.is_complex():
            parts.append((a.dtype, repr(a.item())))
        else:
            raise _NotPlannable
    elif isinstance(a, (list, tuple)):
        parts.append(len(a))
        for x in a:
            _add(x, parts, bufs)
    elif isinstance(a, float):
        parts.append(repr(a))        # -0.0 and 0.0 differ
    elif a is None or isinstance(a, _VALUES):
        parts.append((type(a), a))
    else:
        raise _NotPlannable          # a generator, or anything else not keyed by value


class _Capture:
    """Records what one kernel call launches on ctx (instance attributes over ctx/stream/pool methods,
    restored after; other host transfers and stream commands make the call unplannable)."""

    def __init__(self, ctx):
        self.ctx, self.dispatches, self.allocs, self.spoiled = ctx, [], [], False

    def __enter__(self):
        ctx, stream, pool = self.ctx, self.ctx.stream, self.ctx.pool
        self.saved = [(o, n, o.__dict__.get(n)) for o, n in (
            (stream, "dispatch"), (pool, "alloc"), (ctx, "upload"), (ctx, "download"), (stream, "copy"),
            (stream, "fill"), (stream, "defer_check"))]
        dispatch, alloc, fill, defer = stream.dispatch, pool.alloc, stream.fill, stream.defer_check
        self.checks = []

        def recording_dispatch(pipe, groups, buffers, writes, push):
            self.dispatches.append((pipe, tuple(groups), list(buffers), tuple(writes), bytes(push or b"")))
            return dispatch(pipe, groups, buffers, writes, push)

        def recording_alloc(nbytes, host=None):
            buf = alloc(nbytes, host)
            self.allocs.append((buf, nbytes, host))
            return buf

        def recording_fill(dst, nbytes, value=0, dst_offset=0):   # a fill is a launch without a pipeline
            self.dispatches.append((None, (nbytes, value, dst_offset), [dst], (True,), b""))
            return fill(dst, nbytes, value, dst_offset)

        def recording_defer(check):   # replayable: a check over a slot the call allocated (rebind)
            if getattr(check, "rebind", None) is None:
                self.spoiled = True
            self.checks.append(check)
            return defer(check)
        stream.dispatch, pool.alloc, stream.fill, stream.defer_check = (recording_dispatch, recording_alloc,
                                                                        recording_fill, recording_defer)
        for obj, name, _ in self.saved[2:5]:
            setattr(obj, name, self._spoiling(getattr(obj, name)))
        self.fallbacks = sum(fallback_stats().values())
        return self

    def _spoiling(self, f):
        def call(*a, **k):
            self.spoiled = True
            return f(*a, **k)
        return call

    def __exit__(self, *exc):
        for obj, name, before in self.saved:
            if before is None:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, before)
        if sum(fallback_stats().values()) != self.fallbacks:
            self.spoiled = True

    def plan(self, bufs, result):
        """The plan of this call (operand buffers bufs, what the kernel returned), or None."""
        if self.spoiled or not self.dispatches:
            return None
        single = isinstance(result, torch.Tensor)
        results = (result,) if single else result
        if not isinstance(results, tuple) or not all(isinstance(r, torch.Tensor) and fuelvk_device.is_fuelvk(r)
                                                     for r in results):
            return None
        fresh = {id(b): j for j, (b, _, _) in enumerate(self.allocs)}
        given = {id(b): i for i, b in reversed(list(enumerate(bufs)))}
        held = []

        def role(b, written):
            if id(b) in given:
                return given[id(b)]
            j = fresh.get(id(b))
            if j is not None:
                return -1 - j
            if written and b is not loadpath.stub(self.ctx.pool):
                raise _NotPlannable       # a buffer neither passed in nor allocated by the call, written
            for h, x in enumerate(held):
                if x is b:
                    return ("held", h)
            held.append(b)                # kept by the op (a texel stub, never written; a table): held as is
            return ("held", len(held) - 1)
        try:
            launches = [(pipe, groups, [role(b, w) for b, w in zip(buffers, writes)], writes, push)
                        for pipe, groups, buffers, writes, push in self.dispatches]
            checks = [(role(c.slot, True), c) for c in self.checks]
            if any(not isinstance(r, int) or r >= 0 for r, _ in checks):
                raise _NotPlannable       # a check over an operand's memory: not this call's to replay
            outs = []
            for r in results:
                b = fuelvk_device.buffer_of(r)
                if id(b) not in fresh:
                    raise _NotPlannable   # a result on an operand's memory (a view, or the input itself)
                outs.append((-1 - fresh[id(b)], tuple(r.shape), tuple(r.stride()), r.storage_offset(), r.dtype))
        except _NotPlannable:
            return None
        # Replay binds from one list: the operands, then the buffers it allocates (those a launch, check
        # or result uses, in allocation order), then the held ones; each role becomes an index into it.
        used = sorted({-1 - r for launch in launches for r in launch[2] if isinstance(r, int) and r < 0}
                      | {-1 - o[0] for o in outs} | {-1 - r for r, _ in checks})
        allocs = tuple(self.allocs[j][1:] for j in used)
        slot = {j: len(bufs) + n for n, j in enumerate(used)}
        base = len(bufs) + len(used)

        def index(r):
            return r if isinstance(r, int) and r >= 0 else slot[-1 - r] if isinstance(r, int) else base + r[1]
        launches = tuple((pipe, groups, tuple(index(r) for r in roles), writes, push)
                         for pipe, groups, roles, writes, push in launches)
        checks = tuple((index(r), c) for r, c in checks)
        outs = tuple((index(o[0]),) + o[1:] for o in outs)
        return launches, allocs, tuple(held), outs, single, checks


def _replay(ctx, plan, bufs):
    """Record plan's launches over the operands' buffers bufs and fresh allocations; its results."""
    launches, allocs, held, outs, single, checks = plan
    alloc = ctx.pool.alloc
    for nbytes, host in allocs:
        bufs.append(alloc(nbytes, host))
    bufs += held
    if checks:
        checks = [c.rebind(bufs[i]) for i, c in checks]   # (each resets its new slot before any launch)
    stream = ctx.stream
    dispatch = stream.dispatch
    for pipe, groups, take, writes, push in launches:
        if pipe is None:
            stream.fill(bufs[take[0]], *groups)
        else:
            dispatch(pipe, groups, [bufs[i] for i in take], writes, push)
    for c in checks:
        stream.defer_check(c)
    make = fuelvk_device._make
    if single:
        i, shape, strides, offset, dtype = outs[0]
        return make(bufs[i], shape, strides, offset, dtype)
    return tuple(make(bufs[i], shape, strides, offset, dtype) for i, shape, strides, offset, dtype in outs)


def planned(fn, name):
    """fn (an aten kernel) with launch plans: see the module docstring."""
    def k(*args, **kwargs):
        if not ENABLED:
            return fn(*args, **kwargs)
        key, bufs = _key(name, args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        ctx = runtime.get()
        table = _tables.get(ctx)
        if table is None:
            table = _tables[ctx] = {}
        entry = table.get(key)
        if entry is _UNPLANNABLE:
            return fn(*args, **kwargs)
        if isinstance(entry, _Plan):
            stats["replayed"] += 1
            return _replay(ctx, entry.plan, bufs)
        with _capture_lock, ctx.stream.lock:   # one capture at a time; other threads wait for the device
            with _Capture(ctx) as cap:
                result = fn(*args, **kwargs)
            plan = cap.plan(bufs, result)
        if len(table) >= MAX_PLANS:
            table.clear()
        misses = 0 if entry is None else entry[1] + (entry[0] != plan)
        if plan is None or misses >= MAX_MISSES:
            table[key] = _UNPLANNABLE
            stats["unplannable"] += 1
        elif entry is None or entry[0] != plan:
            table[key] = (plan, misses)  # planned once the next run records the same launches
        else:
            table[key] = _Plan(plan)
            stats["captured"] += 1
        return result
    k.__name__ = getattr(fn, "__name__", name)
    return k


class _Plan:
    __slots__ = ("plan",)

    def __init__(self, plan):
        self.plan = plan


def plannable(name):
    """Whether kernel `name` ("add.Tensor") is a functional op whose results are fresh tensors: not in-place
    (a trailing _), out=, a view, a factory, random, or a copy between devices."""
    base, _, overload = name.partition(".")
    return not (base.endswith("_") or "out" in overload or base in _NEVER)


_NEVER = {"view", "as_strided", "_reshape_alias", "unfold", "set", "empty", "empty_strided", "_copy_from",
          "_copy_from_and_resize", "_local_scalar_dense", "multinomial", "native_dropout", "arange", "nonzero",
          "masked_select", "index", "_index_put_impl", "scatter", "unique", "bernoulli", "normal", "rand"}
