"""Concrete calls of a spec: instantiate from bindings (a workload row), infer from tensors, roofline.

`instantiate` turns values for parameters and indices (one dtype case of a row, or the keyword
arguments of eval_roofline) into the concrete shapes and dtypes of every tensor, running value
generators, checking shape rules and recording which names were read (the validator's "used on this
branch").  `infer` goes the other way, as a call would: it solves the forall indices by unifying the
inputs' shape terms with concrete shapes.  `roofline` evaluates the inline formulas, deriving bytes
from the signature when the spec does not give them (TileOPs Roofline: each input read once, each
output written once, a mutated input read and written, prod(shape) * bits / 8 per tensor).
"""
from __future__ import annotations

import math

from .evaluate import Scope, evaluate
from .expr import ExprError, Missing, Node, parse, substitute
from .kinds import DTYPE_BITS, DTYPES, KindError
from .model import ROW_SPECIAL, SpecError
from . import primitives


class Env:
    """Names visible to the expressions of one call: params, indices, lets (lazy), dtype names."""

    def __init__(self, spec, values, some=()):
        self.spec, self.values, self.some = spec, dict(values), set(some)
        self.reads, self.lets, self.inst = set(), {}, None
        self._presence_stack = set()

    def lookup(self, name):
        spec = self.spec
        if name in self.values:
            self.reads.add(name)
            return self.values[name]
        if name in spec.lets:
            if name not in self.lets:
                self.lets[name] = evaluate(parse(spec.lets[name]), self)
            self.reads.add(name)
            return self.lets[name]
        if name in spec.forall:
            raise Missing(name)
        if name in DTYPES:
            return name
        raise ExprError(f"unknown name {name!r}")

    def call(self, fname, args):
        return primitives.call(fname, args)

    def special(self, fname, name):
        if fname == "present":
            return self.present(name)
        if self.inst is None:
            raise ExprError(f"{fname}({name}) needs a concrete call")
        if fname == "bytes":
            return self.inst.tensor_bytes(name)
        return primitives.exclusive_prefix_of(self.inst.metadata_values(name))

    def present(self, name):
        spec = self.spec
        if name in spec.params:
            return self.values.get(name) is not None
        if name == "out":
            return False
        t = spec.tensors.get(name)
        if t is None:
            raise ExprError(f"present({name}): no tensor or parameter of that name")
        cond = t.nullable if t.role == "output" else t.optional
        if isinstance(cond, str):
            if name in self._presence_stack:
                raise ExprError(f"present({name}) depends on itself")
            self._presence_stack.add(name)
            try:
                return bool(evaluate(parse(cond), self))
            finally:
                self._presence_stack.discard(name)
        if t.role == "output" or not cond:
            return True
        return name in self.some


def shape_items(spec, node, env):
    """The items of a shape term (a list display), expanding a type-family application."""
    if node.kind == "list":
        return node.a
    if node.kind == "sub" and node.a.kind == "name" and node.a.a in spec.families:
        fam = spec.families[node.a.a]
        args = node.b.a if node.b.kind == "tuple" else [node.b]
        if len(args) != len(fam.params):
            raise ExprError(f"{fam.name}[...] takes {len(fam.params)} arguments, got {len(args)}")
        mapping = dict(zip(fam.params, args))
        disc = tuple(evaluate(mapping[m], env) for m in fam.match)
        for when, text in fam.cases:
            if tuple(when) == disc:
                return shape_items(spec, substitute(parse(text), mapping), env)
        raise ExprError(f"{fam.name}: no case for {dict(zip(fam.match, disc))}")
    raise ExprError("a shape is a list display [..] or a type-family application Fam[..]")


def eval_shape(spec, text, env):
    out = evaluate(Node("list", list(shape_items(spec, parse(text), env))), env)
    for n in out:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ExprError(f"shape {text!r} gives {out}: every axis must be a non-negative integer")
    return tuple(out)


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError(f"{what} must be a number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ExprError(f"{what} must be a whole number, got {value!r}")
        value = int(value)
    if value < 0:
        raise ExprError(f"{what} is negative ({value})")
    return value


class Instance:
    """One concrete call: parameter values, index values, and every present tensor's shape and dtype."""

    def __init__(self, spec, env):
        self.spec, self.env = spec, env
        env.inst = self
        self.shapes, self.dtypes, self.metadata = {}, {}, {}
        self.errors = []           # (problem code, message)
        self.generated = set()     # indices solved by a value generator

    @property
    def present(self):
        return [n for n in self.spec.tensors if n in self.shapes]

    def tensor_bytes(self, name):
        if name not in self.shapes:
            raise ExprError(f"bytes({name}): {name} is not part of this call")
        shapes = self.shapes[name]
        shapes = shapes if isinstance(shapes, list) else [shapes]
        return sum(primitives.prod(s) for s in shapes) * DTYPE_BITS[self.dtypes[name]] // 8

    def metadata_values(self, name):
        if name not in self.metadata:
            raise ExprError(f"{name} has no generated values")
        return self.metadata[name]

    def derived_bytes(self):
        aliased = {t.alias for t in self.spec.outputs.values() if t.alias and t.name in self.shapes}
        total = 0
        for name in self.present:
            t = self.spec.tensors[name]
            if t.role == "param" or (t.role == "output" and t.alias):
                continue
            reps = 1
            if t.role == "input" and not t.write_only and (self.mutated(name) or name in aliased):
                reps = 2
            total += reps * self.tensor_bytes(name)
        return total

    def mutated(self, name):
        m = self.spec.tensors[name].mutated
        return bool(evaluate(parse(m), self.env)) if isinstance(m, str) else bool(m)

    def roofline(self):
        roof = self.spec.roofline
        if "func" in roof:
            raise SpecError(f"{self.spec.name}: roofline func {roof['func']} is not available in fuelvk")
        flops = _count(evaluate(parse(str(roof["flops"])), self.env), "flops")
        if "bytes" in roof:
            return flops, _count(evaluate(parse(str(roof["bytes"])), self.env), "bytes")
        return flops, self.derived_bytes()

    def call(self):
        """The call as plain data: params, indices, and {tensor: (shape, dtype)} for inputs and outputs."""
        spec, vals = self.spec, self.env.values
        tensors = {role: {n: (self.shapes[n], self.dtypes[n]) for n in self.present
                          if spec.tensors[n].role == role} for role in ("input", "output", "param")}
        return {"params": {p: vals[p] for p in spec.params},
                "indices": {i: vals[i] for i in spec.forall if i in vals},
                "some": sorted(self.env.some), "inputs": tensors["input"], "outputs": tensors["output"],
                "param_tensors": tensors["param"]}


def resolve(spec, bindings, some=()):
    """Env for `bindings` (params, indices, dtype indices): values converted by their type or kind."""
    values, errors = {}, []
    for k, v in bindings.items():
        if k in spec.params:
            try:
                values[k] = spec.params[k].type.convert(v)
            except KindError as e:
                errors.append(f"param {k}: {e}")
        elif k in spec.forall:
            kind = spec.forall[k]
            if kind.name == "Seq" and isinstance(v, str):
                try:
                    v = evaluate(parse(v), Env(spec, {}))
                except ExprError as e:
                    errors.append(f"{k}: {e}")
                    continue
            try:
                values[k] = kind.convert(v, k)
            except KindError as e:
                errors.append(str(e))
        elif k not in ROW_SPECIAL:
            errors.append(f"{k!r} is neither a parameter nor an index of {spec.name}")
    for p in spec.params.values():
        if p.name not in values and p.name not in bindings:
            if p.has_default:
                values[p.name] = p.default
            else:
                errors.append(f"param {p.name} has no default and needs a value")
    for s in some:
        t = spec.tensors.get(s)
        if t is None or t.role == "output" or t.optional is not True:
            errors.append(f"some: {s!r} is not an optional tensor (optional: true) of {spec.name}")
    return Env(spec, values, some), errors


def instantiate(spec, bindings, some=(), strict=True):
    """Instance for one set of bindings; with strict, any error raises SpecError."""
    spec.require_ok()
    env, errors = resolve(spec, bindings, some)
    inst = Instance(spec, env)
    inst.errors = [("row", e) for e in errors]
    if not errors:
        _build(inst)
    if strict and inst.errors:
        raise SpecError(f"{spec.name}: " + "; ".join(msg for _, msg in inst.errors))
    return inst


def _guard(inst, what, f):
    try:
        return f()
    except Missing as e:
        inst.errors.append(("row", f"{what}: needs index {e.name}, which is not given"))
    except ExprError as e:
        inst.errors.append(("row", f"{what}: {e}"))
    return None


def _build(inst):
    spec, env = inst.spec, inst.env
    present = [n for n in spec.tensors if _guard(inst, f"presence of {n}", lambda n=n: env.present(n))]
    for n in present:                       # value generators first: they solve indices
        t = spec.tensors[n]
        if t.values is None:
            continue
        vals = _guard(inst, f"values of {n}", lambda t=t: list(evaluate(parse(t.values), env)))
        if vals is None:
            continue
        inst.metadata[n] = vals
        before = set(env.values)
        _guard(inst, f"shape of {n}", lambda t=t, vals=vals: Unifier(spec, env).tensor(t, (len(vals),)))
        inst.generated |= set(env.values) - before
    for rule in spec.shape_rules:
        ok = _guard(inst, f"shape rule {rule!r}", lambda r=rule: evaluate(parse(r), env))
        if ok is not None and not ok:
            inst.errors.append(("shape-rule", f"shape rule {rule!r} does not hold"))
    if inst.errors:
        return
    for n in present:
        t = spec.tensors[n]
        if t.list_len is not None:
            count = _guard(inst, f"list length of {n}", lambda t=t: evaluate(parse(t.list_len), env))
            shapes = [_guard(inst, f"shape of {n}[{i}]", lambda t=t, i=i: eval_shape(spec, t.shape,
                                                                                  Scope(env, {"i": i})))
                      for i in range(count or 0)]
            shape = shapes if all(s is not None for s in shapes) else None
        else:
            shape = _guard(inst, f"shape of {n}", lambda t=t: eval_shape(spec, t.shape, env))
        dtype = _guard(inst, f"dtype of {n}", lambda t=t: evaluate(parse(t.dtype), env))
        if dtype is not None and dtype not in DTYPES:
            inst.errors.append(("row", f"dtype of {n} is {dtype!r}, not a dtype"))
            dtype = None
        if shape is not None and dtype is not None:
            inst.shapes[n], inst.dtypes[n] = shape, dtype
    for n in present:
        for req in spec.tensors[n].requires:
            pred = _guard(inst, f"requires of {n}", lambda r=req: evaluate(parse(r), env))
            if pred is not None and not isinstance(pred, primitives.Requirement):
                inst.errors.append(("row", f"requires of {n}: {req!r} is not a requirement such as in_range()"))
            elif pred is not None and n in inst.metadata and not pred(inst.metadata[n]):
                inst.errors.append(("row", f"the values of {n} do not satisfy {req!r}"))
        _guard(inst, f"mutated of {n}", lambda n=n: inst.mutated(n))


class Mismatch(ExprError):
    pass


class Unifier:
    """Solves indices from concrete shapes: axes that are a name or linear in one unknown, and at
    most one `*S` (or `*insert_axis(S, a, n)`) of unknown length per shape term."""

    def __init__(self, spec, env):
        self.spec, self.env = spec, env
        self.seqs = {}    # Seq index -> {position: value}, filled by list inputs

    def _try(self, node, local=None):
        try:
            return True, evaluate(node, Scope(self.env, local) if local else self.env)
        except Missing:
            return False, None

    def _bind(self, name, value):
        kind = self.spec.forall[name]
        try:
            value = kind.convert(list(value) if kind.name == "Shape" else value, name)
        except KindError as e:
            raise Mismatch(str(e)) from None
        self.env.values[name] = tuple(value) if kind.name == "Shape" else value

    def _invert(self, node, value, local):
        ok, v = self._try(node, local)
        if ok:
            if (tuple(v) if isinstance(v, list) else v) != value:
                raise Mismatch(f"expected {v}, got {value}")
            return True
        k = node.kind
        if k == "name" and self.spec.forall.get(node.a) and self.spec.forall[node.a].name == "Dim":
            self._bind(node.a, value)
            return True
        if k == "bin" and node.a in "+-*":
            lk, lv = self._try(node.b, local)
            rk, rv = self._try(node.c, local)
            if node.a == "+" and (lk or rk):
                return self._invert(node.c if lk else node.b, value - (lv if lk else rv), local)
            if node.a == "-" and rk:
                return self._invert(node.b, value + rv, local)
            if node.a == "-" and lk:
                return self._invert(node.c, lv - value, local)
            if node.a == "*" and (lk or rk):
                c = lv if lk else rv
                if not c or value % c:
                    raise Mismatch(f"{value} is not a multiple of {c}")
                return self._invert(node.c if lk else node.b, value // c, local)
        if k == "sub" and node.a.kind == "name" and self.spec.forall.get(node.a.a) and \
                self.spec.forall[node.a.a].name == "Seq":
            ok, pos = self._try(node.b, local)
            if ok:
                self.seqs.setdefault(node.a.a, {})[pos] = value
                return True
        return False

    def _star(self, node, local):
        """(known tuple, None) | (None, kind, width) for a *item; kind var | insert | stuck, width None
        when unknown."""
        ok, v = self._try(node, local)
        if ok:
            return tuple(v), None, len(v)
        if node.kind == "name" and self.spec.forall.get(node.a) and self.spec.forall[node.a].name == "Shape":
            return None, "var", None
        if node.kind == "call" and node.a == "insert_axis" and len(node.b) == 3 and self._try(node.b[1], local)[0]:
            base = self._star(node.b[0], local)
            if base[1] in (None, "var"):
                return None, "insert", None if base[2] is None else base[2] + 1
        return None, "stuck", None

    def term(self, items, concrete, local=None):
        """Unify shape items with a concrete shape; True when every item is resolved."""
        stars = [self._star(it.a, local) if it.kind == "star" else None for it in items]
        if any(s is not None and s[1] == "stuck" for s in stars):
            return False
        unknown = [s for s in stars if s is not None and s[2] is None]
        if len(unknown) > 1:
            return False
        fixed = sum(1 if s is None else s[2] for s in stars if s is None or s[2] is not None)
        free = len(concrete) - fixed
        if (not unknown and free != 0) or free < 0:
            raise Mismatch(f"rank {len(concrete)} does not fit a term of {fixed} fixed axes")
        pos, done = 0, True
        for it, s in zip(items, stars):
            if s is None:
                done &= self._invert(it, concrete[pos], local)
                pos += 1
                continue
            width = free if s[2] is None else s[2]
            part = tuple(concrete[pos:pos + width])
            pos += width
            if s[1] is None and s[0] != part:
                raise Mismatch(f"expected {s[0]}, got {part}")
            if s[1] == "var":
                self._bind(it.a.a, part)
            elif s[1] == "insert":
                base, axis, n = it.a.b
                a = primitives.norm_axis(evaluate(axis, self.env), len(part))
                done &= self._invert(base, part[:a] + part[a + 1:], local) if base.kind != "name" else \
                    self._bind_or_check(base.a, part[:a] + part[a + 1:])
                done &= self._invert(n, part[a], local)
        return done

    def _bind_or_check(self, name, value):
        if name in self.env.values:
            if tuple(self.env.values[name]) != value:
                raise Mismatch(f"{name} is {self.env.values[name]}, got {value}")
        else:
            self._bind(name, value)
        return True

    def tensor(self, t, concrete, local=None):
        items = shape_items(self.spec, parse(t.shape), Scope(self.env, local) if local else self.env)
        return self.term(items, tuple(concrete), local)

    def dtype(self, t, dtype):
        node = parse(t.dtype)
        if node.kind == "name" and self.spec.forall.get(node.a) and node.a not in self.env.values:
            self._bind(node.a, dtype)
            return True
        ok, v = self._try(node)
        if ok and v != dtype:
            raise Mismatch(f"dtype {dtype} where {t.dtype} = {v} is expected")
        return ok


def infer(spec, tensors, params=None, given=None):
    """Solve indices from concrete tensors {name: (shape, dtype) or [(shape, dtype), ...]}.

    Returns the Env; indices that could not be solved are absent from env.values."""
    some = [n for n in tensors if spec.tensors.get(n) and spec.tensors[n].optional is True]
    env, errors = resolve(spec, {**(params or {}), **(given or {})}, some)
    if errors:
        raise SpecError(f"{spec.name}: " + "; ".join(errors))
    uni = Unifier(spec, env)
    pending = {}
    for name, val in tensors.items():
        t = spec.tensors.get(name)
        if t is None or t.role == "output":
            raise SpecError(f"{spec.name}: {name!r} is not an input of the spec")
        pending[name] = val if t.list_len is not None else [val]
    while pending:
        progress = False
        for name in list(pending):
            t, vals, before = spec.tensors[name], pending[name], len(env.values)
            try:
                done = True
                for i, (shape, dt) in enumerate(vals):
                    done &= uni.tensor(t, shape, {"i": i} if t.list_len else None)
                    done &= uni.dtype(t, dt)
            except Missing:
                done = False
            except Mismatch as e:
                raise SpecError(f"{spec.name}: {name} of shape {vals[0][0]} and dtype {vals[0][1]}: {e}")
            for seq, got in uni.seqs.items():
                if seq not in env.values and len(got) == len(vals) and t.list_len:
                    env.values[seq] = [got[i] for i in range(len(vals))]
            if done:
                del pending[name]
            progress |= done or len(env.values) > before
        if not progress:
            break
    return env
