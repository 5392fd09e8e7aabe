"""Kinds of `forall` indices and the types of construction parameters.

Kinds (Dim, Shape, DType[a | b], Seq[Int]) say how an index is solved and written in a row; types
("int | None", "list[int] | tuple[int, ...]", "'neox' | 'interleaved'", dtype unions) say which
values a parameter takes.  Both convert YAML values to Python values the way the manifest does:
Shape and tuple[...] become tuples, lists stay lists, dtype names stay strings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

DTYPE_BITS = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "float8_e4m3fn": 8, "float8_e5m2": 8,
    "int64": 64, "int32": 32, "int16": 16, "int8": 8, "uint64": 64, "uint32": 32, "uint16": 16,
    "uint8": 8, "bool": 8, "complex64": 64, "complex128": 128,
}
DTYPES = frozenset(DTYPE_BITS)
INT_DTYPES = frozenset(d for d in DTYPES if "int" in d or d == "bool")


class KindError(ValueError):
    pass


@dataclass(frozen=True)
class Kind:
    """An index kind: name is Dim, Shape, DType or Seq; members lists a DType's dtypes."""
    name: str
    members: tuple = ()

    def convert(self, value, index):
        """Row value -> Python value, or KindError."""
        if self.name == "Dim":
            if not _is_int(value) or value < 0:
                raise KindError(f"{index} is a Dim and needs a non-negative integer, got {value!r}")
            return value
        if self.name == "Shape":
            if not isinstance(value, (list, tuple)) or not all(_is_int(v) and v >= 0 for v in value):
                raise KindError(f"{index} is a Shape and needs a list of non-negative integers, got {value!r}")
            return tuple(value)
        if self.name == "Seq":
            if not isinstance(value, (list, tuple)) or not all(_is_int(v) and v >= 0 for v in value):
                raise KindError(f"{index} is a Seq[Int] and needs non-negative integers, got {value!r}")
            return list(value)
        if value not in self.members:
            raise KindError(f"{index} takes one of {' | '.join(self.members)}, got {value!r}")
        return value


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_DTYPE_KIND = re.compile(r"^DType\[(.*)\]$")


def parse_kind(text) -> Kind:
    if not isinstance(text, str):
        raise KindError(f"a kind must be a string, got {text!r}")
    text = text.strip()
    if text in ("Dim", "Shape"):
        return Kind(text)
    if text == "Seq[Int]":
        return Kind("Seq")
    m = _DTYPE_KIND.match(text)
    if m:
        members = tuple(p.strip() for p in m.group(1).split("|"))
        bad = [p for p in members if p not in DTYPES]
        if bad or not members:
            raise KindError(f"unknown dtype(s) {', '.join(bad) or '(none)'} in kind {text!r}")
        return Kind("DType", members)
    raise KindError(f"unknown kind {text!r} (use Dim, Shape, DType[a | b] or Seq[Int])")


# ------------------------------------------------------------------------------------ parameter types

@dataclass(frozen=True)
class Type:
    """A union of atoms: ('int',) ('float',) ('bool',) ('str',) ('Number',) ('None',) ('dtype', name)
    ('lit', value) ('list', Type) ('tuple*', Type) ('tuple', (Type, ...))."""
    alts: tuple
    text: str

    @property
    def dtypes(self):
        """Dtype names if this is a dtype parameter's type (a union of dtype names, maybe None)."""
        names = [a[1] for a in self.alts if a[0] == "dtype"]
        rest = [a for a in self.alts if a[0] not in ("dtype", "None")]
        return tuple(names) if names and not rest else ()

    @property
    def literals(self):
        return tuple(a[1] for a in self.alts if a[0] == "lit")

    @property
    def nullable(self):
        return any(a[0] == "None" for a in self.alts)

    def convert(self, value):
        for alt in self.alts:
            ok, v = _convert(alt, value)
            if ok:
                return v
        raise KindError(f"{value!r} is not a {self.text}")


def _convert(alt, v):
    tag = alt[0]
    if tag == "int":
        return _is_int(v), v
    if tag in ("float", "Number"):
        return (isinstance(v, (int, float)) and not isinstance(v, bool)), v
    if tag == "bool":
        return isinstance(v, bool), v
    if tag == "str":
        return isinstance(v, str), v
    if tag == "None":
        return v is None, v
    if tag in ("dtype", "lit"):
        return (isinstance(v, str) and v == alt[1]) or (tag == "lit" and v is alt[1]), v
    if not isinstance(v, (list, tuple)):
        return False, v
    if tag == "tuple" and len(v) != len(alt[1]):
        return False, v
    elems = alt[1] if tag == "tuple" else [alt[1]] * len(v)
    out = []
    for t, e in zip(elems, v):
        try:
            out.append(t.convert(e))
        except KindError:
            return False, v
    return True, (list(out) if tag == "list" else tuple(out))


def _split_top(text, sep):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def parse_type(text) -> Type:
    if not isinstance(text, str) or not text.strip():
        raise KindError(f"a parameter type must be a non-empty string, got {text!r}")
    return Type(tuple(_atom(p.strip(), text) for p in _split_top(text, "|")), text)


def _atom(p, whole):
    if p in ("int", "float", "bool", "str", "Number", "None"):
        return (p,)
    if p in DTYPES:
        return ("dtype", p)
    if len(p) >= 2 and p[0] == p[-1] and p[0] in "'\"":
        return ("lit", p[1:-1])
    m = re.match(r"^(list|tuple)\[(.*)\]$", p)
    if m:
        args = [a.strip() for a in _split_top(m.group(2), ",")]
        if m.group(1) == "list" and len(args) == 1:
            return ("list", parse_type(args[0]))
        if m.group(1) == "tuple" and len(args) == 2 and args[1] == "...":
            return ("tuple*", parse_type(args[0]))
        if m.group(1) == "tuple" and "..." not in args:
            return ("tuple", tuple(parse_type(a) for a in args))
    raise KindError(f"unknown type {p!r} in {whole!r}")


# Kinds of type-family parameters (signature.types.<Fam>.params).
def parse_family_param(text):
    if text in ("Dim", "Shape", "Bool", "Int"):
        return text
    return parse_type(text)
