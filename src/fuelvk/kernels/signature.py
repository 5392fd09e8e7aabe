"""A kernel variant's interface as the compiler laid it out, so that ops launch kernels by name.

spv/manifest.json records, per variant, what SPIR-V reflection found (fuelvk.spirv): each binding's
name and access (NonWritable / NonReadable, i.e. GLSL readonly / writeonly), each Params member's
name, offset and type, and each specialization constant's name. A Signature turns named launch
arguments into what a dispatch needs -- buffers in binding order, the write set, packed Params,
(spec id, value) pairs -- and refuses a missing, unknown or mistyped argument with a LaunchError,
so a swapped or forgotten field is an error, never a wrong answer.
"""
import struct
from operator import itemgetter

from ..errors import LaunchError

_CODES = {"u32": "I", "i32": "i", "f32": "f"}


def _field_type(t):
    """('u32', 1) for "u32", ('i32', 6) for "i32[6]"."""
    if t.endswith("]"):
        base, n = t[:-1].split("[")
        return base, int(n)
    return t, 1


class Signature:
    __slots__ = ("vid", "bindings", "writes", "fields", "spec_ids", "size", "_struct", "_names", "_get_buffers",
                 "_get_values", "_arrays", "_spec_items")

    def __init__(self, vid, meta):
        self.vid = vid
        by_binding = {}
        for b in meta["bindings"]:
            # One binding declared with several element types (aliases such as out / out4) goes by its
            # shortest name; it is written if any alias is.
            prev = by_binding.get(b["binding"])
            writes = b.get("access", "read_write") != "read"
            if prev is None:
                by_binding[b["binding"]] = [b["name"], writes]
            else:
                prev[0] = min(prev[0], b["name"], key=len)
                prev[1] = prev[1] or writes
        order = sorted(by_binding)
        self.bindings = tuple(by_binding[i][0] for i in order)
        self.writes = tuple(by_binding[i][1] for i in order)
        fmt, fields, end = "<", [], 0
        for m in meta["push_constants"]:
            base, count = _field_type(m.get("type", "u32"))
            if base not in _CODES:
                raise LaunchError(f"kernel {vid}: Params member {m['name']} has type {m.get('type')}; "
                                  f"launch by name packs {sorted(_CODES)} scalars and arrays of them")
            if m["offset"] > end:
                fmt += f"{m['offset'] - end}x"
            fmt += f"{count}{_CODES[base]}"
            end = m["offset"] + 4 * count
            fields.append((m["name"], base, count))
        self.fields = tuple(fields)
        self.size = meta.get("push_constant_size", end)
        if self.size > end:
            fmt += f"{self.size - end}x"
        self._struct = struct.Struct(fmt)
        self.spec_ids = dict(meta.get("spec_names", {}))
        self._names = set(self.bindings) | {f[0] for f in self.fields} | set(self.spec_ids)
        # The fast path of bind(): C-level lookups; any KeyError/struct.error takes the slow path that
        # names what was wrong.
        self._get_buffers = _getter(self.bindings)
        self._get_values = _getter([f[0] for f in self.fields])
        self._arrays = [(i, c) for i, (_, _, c) in enumerate(self.fields) if c > 1][::-1]
        self._spec_items = sorted(self.spec_ids.items(), key=lambda kv: kv[1])

    def accepts(self):
        return (f"bindings {list(self.bindings)}, Params {[f[0] for f in self.fields]}, "
                f"spec constants {sorted(self.spec_ids)}")

    def pack(self, args):
        """Params bytes from a dict of field name -> value (every field; arrays zero-padded)."""
        values = []
        for name, base, count in self.fields:
            try:
                v = args[name]
            except KeyError:
                raise LaunchError(f"kernel {self.vid}: Params field {name!r} not given; it takes "
                                  f"{self.accepts()}") from None
            if count == 1:
                values.append(v)
                continue
            v = list(v)
            if len(v) > count:
                raise LaunchError(f"kernel {self.vid}: Params field {name!r} holds {count} values, got {len(v)}")
            values.extend(v)
            values.extend([0] * (count - len(v)))
        try:
            return self._struct.pack(*values)
        except struct.error:
            pass
        for name, base, count in self.fields:   # name the field that did not pack
            for v in (args[name] if count > 1 else [args[name]]):
                try:
                    struct.pack("<" + _CODES[base], v)
                except struct.error as e:
                    raise LaunchError(f"kernel {self.vid}: Params field {name!r} is {base}; got {v!r} ({e})") from None
        raise LaunchError(f"kernel {self.vid}: Params did not pack")   # not reached

    def bind(self, args):
        """(buffers, writes, Params bytes, spec) for a launch with named arguments: every binding (a
        Buffer or anything with .buffer, e.g. an Array) and Params field, any spec constant."""
        try:
            spec = tuple([(i, int(args[n])) for n, i in self._spec_items if n in args])
            if len(args) != len(self.bindings) + len(self.fields) + len(spec):
                raise KeyError
            buffers = tuple([getattr(b, "buffer", b) for b in self._get_buffers(args)])
            values = self._get_values(args)
            if self._arrays:
                values = list(values)
                for i, count in self._arrays:    # right to left, so earlier indices stay valid
                    v = list(values[i])
                    if len(v) > count:
                        raise KeyError
                    values[i:i + 1] = v + [0] * (count - len(v))
            return buffers, self.writes, self._struct.pack(*values), spec
        except (KeyError, TypeError, struct.error):
            return self._bind_checked(args)

    def _bind_checked(self, args):
        unknown = set(args) - self._names
        if unknown:
            raise LaunchError(f"kernel {self.vid} has no argument {sorted(unknown)}; it takes {self.accepts()}")
        buffers = []
        for name in self.bindings:
            try:
                b = args[name]
            except KeyError:
                raise LaunchError(f"kernel {self.vid}: binding {name!r} not given; it takes "
                                  f"{self.accepts()}") from None
            buffers.append(getattr(b, "buffer", b))
        spec = tuple(sorted((i, int(args[n])) for n, i in self.spec_ids.items() if n in args))
        return tuple(buffers), self.writes, self.pack(args), spec


def _getter(names):
    """args -> tuple of args[name] for names (itemgetter returns a bare value for one name)."""
    if not names:
        return lambda args: ()
    if len(names) == 1:
        one = names[0]
        return lambda args: (args[one],)
    return itemgetter(*names)
