"""The closed expression language of TileOPs manifests: tokenizer, parser and static analysis.

Shapes, dtypes, `let`, refinements and inline rooflines are all written in one small language with
Python's precedence. It is parsed here by hand (never with Python's eval or ast) so the set of
accepted forms is exactly the manifest's:

    literals     1  2.5  1.0e-6  'str'  True False None  inf
    displays     (a, b)  ()  (a,)  [a, *S, b]       (* only inside displays: shape terms)
    postfix      f(args)  f(x for v in xs if c)  x[i]  x[a:b]  Fam[a, b]  x.value
    operators    **  unary - +  * / // %  + -  comparisons (chained, in, not in)  not  and  or
                 a if c else b

`x.shape`, `is`, lambda and every other Python form are rejected with a message.  Functions are
looked up in the environment (see primitives.py); `present`, `bytes` and `exclusive_prefix_of` are
special forms whose argument is a tensor or parameter name, not a value.  evaluate.py runs the trees.
"""
from __future__ import annotations

import re
from functools import lru_cache

SPECIAL_FORMS = frozenset({"present", "bytes", "exclusive_prefix_of"})
CONSTANTS = {"True": True, "False": False, "None": None, "inf": float("inf")}
_KEYWORDS = {"and", "or", "not", "in", "if", "else", "for", "is", "lambda"}
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d[\d_]*)?\.?\d+(?:[eE][-+]?\d+)?)
  | (?P<str>'[^'\\]*'|"[^"\\]*")
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>\*\*|//|==|!=|<=|>=|[-+*/%<>()\[\],:.])
""", re.VERBOSE)
_COMPARE = {"<", ">", "==", "!=", "<=", ">=", "in", "not in"}


class ExprError(ValueError):
    """An expression that is not in the language (syntax), or that cannot be evaluated."""


class Missing(ExprError):
    """A declared name that has no value in this instantiation (e.g. an index a row does not give)."""

    def __init__(self, name):
        super().__init__(f"'{name}' has no value here")
        self.name = name


class Node:
    __slots__ = ("kind", "a", "b", "c", "d")

    def __init__(self, kind, a=None, b=None, c=None, d=None):
        self.kind, self.a, self.b, self.c, self.d = kind, a, b, c, d

    def __repr__(self):
        return f"Node({self.kind}, {self.a!r}, {self.b!r}, {self.c!r}, {self.d!r})"


# Node kinds and fields:
#   const(value) name(id) unary(op, x) bin(op, l, r) and(list) or(list) not(x)
#   cmp(left, [(op, right)]) if(test, body, orelse) call(fname, [args]) gen(elt, [targets], iter, cond)
#   tuple([items]) list([items]) star(x) sub(x, index) slice(lo, hi, step) attr(x, name)


def _tokenize(text):
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r} at {pos} in {text!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        val = m.group()
        if kind == "num":
            val = float(val) if any(c in val for c in ".eE") else int(val.replace("_", ""))
        elif kind == "str":
            val = val[1:-1]
        elif kind == "name" and val in _KEYWORDS:
            kind = "kw"
        out.append((kind, val, m.start()))
    out.append(("end", None, len(text)))
    return out


class _Parser:
    def __init__(self, text):
        self.text, self.toks, self.i = text, _tokenize(text), 0

    def peek(self, k=0):
        return self.toks[self.i + k]

    def at(self, val, k=0):
        t = self.peek(k)
        return t[0] in ("op", "kw") and t[1] == val

    def take(self, val=None):
        t = self.toks[self.i]
        if val is not None and not (t[0] in ("op", "kw") and t[1] == val):
            self.fail(f"expected {val!r}")
        self.i += 1
        return t

    def fail(self, msg):
        t = self.peek()
        got = "end of input" if t[0] == "end" else repr(t[1])
        raise ExprError(f"{msg}, got {got} at {t[2]} in {self.text!r}")

    def parse(self):
        node = self.expr()
        if self.peek()[0] != "end":
            self.fail("unexpected token")
        return node

    def expr(self):
        if self.at("lambda"):
            self.fail("lambda is not part of the expression language")
        body = self.or_()
        if self.at("if"):
            self.take("if")
            test = self.or_()
            self.take("else")
            return Node("if", test, body, self.expr())
        return body

    def or_(self):
        items = [self.and_()]
        while self.at("or"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else Node("or", items)

    def and_(self):
        items = [self.not_()]
        while self.at("and"):
            self.take()
            items.append(self.not_())
        return items[0] if len(items) == 1 else Node("and", items)

    def not_(self):
        if self.at("not"):
            self.take()
            return Node("not", self.not_())
        return self.compare()

    def compare(self):
        left, rest = self.arith(), []
        while True:
            if self.at("is"):
                self.fail("'is' is rejected: write present(x) or compare values with ==")
            if self.at("not") and self.at("in", 1):
                self.take(), self.take()
                op = "not in"
            elif self.peek()[0] in ("op", "kw") and self.peek()[1] in _COMPARE:
                op = self.take()[1]
            else:
                break
            rest.append((op, self.arith()))
        return Node("cmp", left, rest) if rest else left

    def arith(self):
        node = self.term()
        while self.at("+") or self.at("-"):
            node = Node("bin", self.take()[1], node, self.term())
        return node

    def term(self):
        node = self.factor()
        while any(self.at(o) for o in ("*", "/", "//", "%")):
            node = Node("bin", self.take()[1], node, self.factor())
        return node

    def factor(self):
        if self.at("-") or self.at("+"):
            op = self.take()[1]
            return Node("unary", op, self.factor())
        return self.power()

    def power(self):
        base = self.postfix()
        if self.at("**"):
            self.take()
            return Node("bin", "**", base, self.factor())
        return base

    def postfix(self):
        node = self.atom()
        while True:
            if self.at("("):
                if node.kind != "name":
                    self.fail("only named functions can be called")
                self.take("(")
                node = Node("call", node.a, self.call_args())
            elif self.at("["):
                self.take("[")
                node = Node("sub", node, self.subscript())
                self.take("]")
            elif self.at("."):
                self.take(".")
                t = self.take()
                if t[1] != "value":
                    raise ExprError(f"attribute '.{t[1]}' is rejected (only Maybe '.value' exists) "
                                    f"in {self.text!r}")
                node = Node("attr", node, "value")
            else:
                return node

    def call_args(self):
        args = []
        while not self.at(")"):
            arg = self.expr()
            if self.at("for"):
                arg = self.comprehension(arg)
            args.append(arg)
            if not self.at(")"):
                self.take(",")
        self.take(")")
        return args

    def comprehension(self, elt):
        self.take("for")
        targets = [self.take_name()]
        while self.at(","):
            self.take(",")
            targets.append(self.take_name())
        self.take("in")
        it = self.or_()
        cond = None
        if self.at("if"):
            self.take("if")
            cond = self.or_()
        return Node("gen", elt, targets, it, cond)

    def take_name(self):
        t = self.take()
        if t[0] != "name":
            raise ExprError(f"expected a name, got {t[1]!r} in {self.text!r}")
        return t[1]

    def subscript(self):
        items = [self.slice_or_expr()]
        while self.at(","):
            self.take(",")
            items.append(self.slice_or_expr())
        return items[0] if len(items) == 1 else Node("tuple", items)

    def slice_or_expr(self):
        parts, cur = [], None
        if not self.at(":"):
            cur = self.expr()
            if not self.at(":"):
                return cur
        while True:
            parts.append(cur)
            if not self.at(":") or len(parts) == 3:
                break
            self.take(":")
            cur = None if (self.at(":") or self.at("]") or self.at(",")) else self.expr()
        parts += [None] * (3 - len(parts))
        return Node("slice", *parts[:3])

    def display_items(self, close):
        items = []
        while not self.at(close):
            if self.at("*"):
                self.take("*")
                items.append(Node("star", self.or_()))
            else:
                items.append(self.expr())
            if self.at("for") and len(items) == 1:
                items[0] = self.comprehension(items[0])
                break
            if not self.at(close):
                self.take(",")
                if self.at(close):
                    items.append(None)  # trailing comma marker
        self.take(close)
        return items

    def atom(self):
        kind, val, _ = self.peek()
        if kind == "num" or kind == "str":
            self.take()
            return Node("const", val)
        if kind == "name":
            self.take()
            return Node("const", CONSTANTS[val]) if val in CONSTANTS else Node("name", val)
        if self.at("("):
            self.take("(")
            items = self.display_items(")")
            trailing = items and items[-1] is None
            items = [x for x in items if x is not None]
            if len(items) == 1 and not trailing and items[0].kind not in ("star",):
                return items[0]  # parenthesised expression or generator
            return Node("tuple", items)
        if self.at("["):
            self.take("[")
            items = [x for x in self.display_items("]") if x is not None]
            if len(items) == 1 and items[0].kind == "gen":
                return Node("call", "list", items)
            return Node("list", items)
        self.fail("expected a value")


@lru_cache(maxsize=None)
def parse(text: str) -> Node:
    """Parse one expression (cached: specs repeat the same strings many times)."""
    if not isinstance(text, str):
        raise ExprError(f"an expression must be a string, got {text!r}")
    return _Parser(text).parse()


def free_names(node, bound=frozenset()):
    """Names an expression reads (comprehension variables excluded), and the functions it calls."""
    names, calls = set(), set()

    def walk(n, bound):
        if n is None:
            return
        k = n.kind
        if k == "name":
            if n.a not in bound:
                names.add(n.a)
        elif k == "call":
            calls.add(n.a)
            if n.a in SPECIAL_FORMS:
                names.update(a.a for a in n.b if a.kind == "name")
                return
            for a in n.b:
                walk(a, bound)
        elif k == "gen":
            walk(n.c, bound)
            inner = bound | set(n.b)
            walk(n.a, inner)
            walk(n.d, inner)
        elif k in ("and", "or", "tuple", "list"):
            for x in n.a:
                walk(x, bound)
        elif k == "cmp":
            walk(n.a, bound)
            for _, r in n.b:
                walk(r, bound)
        elif k in ("unary", "bin"):
            walk(n.b, bound)
            walk(n.c, bound)
        elif k in ("not", "star", "attr"):
            walk(n.a, bound)
        elif k in ("if", "sub", "slice"):
            for x in (n.a, n.b, n.c):
                if isinstance(x, Node):
                    walk(x, bound)

    walk(node, frozenset(bound))
    return names, calls


def substitute(node, mapping):
    """Copy of `node` with each free name in `mapping` replaced by that node (type-family expansion)."""
    if node is None or not isinstance(node, Node):
        return node
    k = node.kind
    if k == "name":
        return mapping.get(node.a, node)
    if k == "gen":
        inner = {n: v for n, v in mapping.items() if n not in node.b}
        return Node("gen", substitute(node.a, inner), node.b, substitute(node.c, mapping),
                    substitute(node.d, inner))
    if k == "call":
        return Node("call", node.a, [substitute(a, mapping) for a in node.b])
    if k in ("and", "or", "tuple", "list"):
        return Node(k, [substitute(x, mapping) for x in node.a])
    if k == "cmp":
        return Node("cmp", substitute(node.a, mapping), [(o, substitute(r, mapping)) for o, r in node.b])
    if k in ("unary", "bin"):
        return Node(k, node.a, substitute(node.b, mapping), substitute(node.c, mapping))
    if k == "attr":
        return Node(k, substitute(node.a, mapping), node.b)
    return Node(k, *(substitute(x, mapping) for x in (node.a, node.b, node.c, node.d)))
