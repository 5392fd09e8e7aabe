"""Evaluation of expression trees (expr.py) in an environment: Python's semantics for the forms the
language has, integer arithmetic staying integral (a / b is an int when b divides a)."""
from __future__ import annotations

from .expr import SPECIAL_FORMS, ExprError

def _as_seq(v):
    return tuple(v) if isinstance(v, list) else v


def _cmp(op, x, y):
    x, y = _as_seq(x), _as_seq(y)
    if op == "in" or op == "not in":
        if not isinstance(y, (tuple, str)):
            raise ExprError(f"'in' needs a tuple on the right, got {y!r}")
        found = any(_as_seq(x) == _as_seq(e) for e in y) if isinstance(y, tuple) else x in y
        return found if op == "in" else not found
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    try:
        return {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
    except TypeError:
        raise ExprError(f"cannot compare {x!r} {op} {y!r}") from None


def _arith(op, x, y):
    for v in (x, y):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            if op == "+" and isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
                return tuple(x) + tuple(y)
            raise ExprError(f"arithmetic {op!r} needs numbers, got {x!r} and {y!r}")
    try:
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if op == "//":
            return x // y
        if op == "%":
            return x % y
        if op == "**":
            return x ** y
        if isinstance(x, int) and isinstance(y, int) and x % y == 0:
            return x // y
        return x / y
    except ZeroDivisionError:
        raise ExprError(f"division by zero in {x!r} {op} {y!r}") from None


def evaluate(node, env):
    """Value of `node` in `env` (an object with lookup(name), call(fname, args) and special(fname, arg))."""
    k = node.kind
    if k == "const":
        return node.a
    if k == "name":
        return env.lookup(node.a)
    if k == "bin":
        return _arith(node.a, evaluate(node.b, env), evaluate(node.c, env))
    if k == "call":
        if node.a in SPECIAL_FORMS:
            if len(node.b) != 1 or node.b[0].kind != "name":
                raise ExprError(f"{node.a}() takes one tensor or parameter name")
            return env.special(node.a, node.b[0].a)
        if len(node.b) == 1 and node.b[0].kind == "gen":
            return env.call(node.a, [_generate(node.b[0], env)])
        return env.call(node.a, [evaluate(a, env) for a in node.b])
    if k == "cmp":
        left = evaluate(node.a, env)
        for op, r in node.b:
            right = evaluate(r, env)
            if not _cmp(op, left, right):
                return False
            left = right
        return True
    if k == "and":
        v = True
        for x in node.a:
            v = evaluate(x, env)
            if not v:
                return v
        return v
    if k == "or":
        v = False
        for x in node.a:
            v = evaluate(x, env)
            if v:
                return v
        return v
    if k == "not":
        return not evaluate(node.a, env)
    if k == "if":
        return evaluate(node.b if evaluate(node.a, env) else node.c, env)
    if k == "unary":
        v = evaluate(node.b, env)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ExprError(f"unary {node.a} needs a number, got {v!r}")
        return -v if node.a == "-" else v
    if k in ("tuple", "list"):
        out = []
        for x in node.a:
            if x.kind == "star":
                v = evaluate(x.a, env)
                if not isinstance(v, (tuple, list)):
                    raise ExprError(f"*{v!r}: only a sequence can be expanded")
                out.extend(v)
            else:
                out.append(evaluate(x, env))
        return tuple(out)
    if k == "sub":
        seq, idx = evaluate(node.a, env), node.b
        if not isinstance(seq, (tuple, list)):
            raise ExprError(f"cannot index {seq!r}")
        if idx.kind == "slice":
            lo, hi, st = (None if p is None else evaluate(p, env) for p in (idx.a, idx.b, idx.c))
            return tuple(seq[lo:hi:st])
        i = evaluate(idx, env)
        if isinstance(i, bool) or not isinstance(i, int) or not -len(seq) <= i < len(seq):
            raise ExprError(f"index {i!r} out of range for {tuple(seq)!r}")
        return seq[i]
    if k == "attr":
        v = evaluate(node.a, env)
        if v is None:
            raise ExprError("'.value' of an absent (None) value; guard it with present()")
        return v
    if k == "gen":
        return _generate(node, env)
    if k == "star":
        raise ExprError("*x is only allowed inside a shape or tuple display")
    raise ExprError(f"cannot evaluate {k}")


def _generate(node, env):
    items = evaluate(node.c, env)
    if not isinstance(items, (tuple, list)):
        raise ExprError(f"a comprehension needs a sequence, got {items!r}")
    out = []
    for item in items:
        if len(node.b) == 1:
            local = {node.b[0]: item}
        else:
            if not isinstance(item, (tuple, list)) or len(item) != len(node.b):
                raise ExprError(f"cannot unpack {item!r} into {', '.join(node.b)}")
            local = dict(zip(node.b, item))
        scope = Scope(env, local)
        if node.d is None or evaluate(node.d, scope):
            out.append(evaluate(node.a, scope))
    return tuple(out)


class Scope:
    """Comprehension variables layered over an environment."""

    def __init__(self, parent, local):
        self.parent, self.local = parent, local

    def lookup(self, name):
        return self.local[name] if name in self.local else self.parent.lookup(name)

    def call(self, fname, args):
        return self.parent.call(fname, args)

    def special(self, fname, arg):
        return self.parent.special(fname, arg)
