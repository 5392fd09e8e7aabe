"""Code-dependent checks: does the fuelvk function an `implemented` spec names take the spec's arguments?

fuelvk's public ops are functions, so a spec's parameter list is the function's: its inputs and its
params, each group in spec order (the two may interleave, as in rms_norm(x, eps, weight)), params
with the spec's default and kw_only, optional inputs defaulting to None, and nothing else.
The function is found lazily (importlib), so a broken or absent fuelvk only skips these checks.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from types import ModuleType

_MISSING = object()
POLICY = "route"   # fuelvk's execution-policy parameter (TileOPs' `target`): allowed last, default None


def resolve_api(api, namespace=None):
    """The object `fuelvk.<api>` ('rms_norm', 'quant.quantize'); raises ImportError/AttributeError."""
    obj = namespace if namespace is not None else importlib.import_module("fuelvk")
    for part in api.split("."):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, ModuleType):
            obj = importlib.import_module(f"{obj.__name__}.{part}")
        else:
            raise AttributeError(f"{getattr(obj, '__name__', type(obj).__name__)} has no attribute {part!r}")
    return obj


def _same(a, b):
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def signature_problems(spec, func):
    """Messages for each way func's parameters differ from the spec's inputs and params."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as e:
        return [f"cannot read the signature of fuelvk.{spec.fuelvk_api}: {e}"]
    got = list(sig.parameters.values())
    out = []
    for p in got:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            out.append(f"fuelvk.{spec.fuelvk_api} takes *{p.name}; the spec needs named parameters")
    inputs = [t for t in spec.tensors.values() if t.role == "input"]
    expected = {t.name for t in inputs} | set(spec.params)
    names = [p.name for p in got if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if names and names[-1] == POLICY and POLICY not in expected:
        p = got[[q.name for q in got].index(POLICY)]
        if p.default is not None:
            out.append(f"fuelvk.{spec.fuelvk_api}: the execution-policy parameter {POLICY} must default to None")
        names = names[:-1]
    for n in names:
        if n not in expected:
            out.append(f"fuelvk.{spec.fuelvk_api} has parameter {n!r}, which the spec does not declare")
    for n in sorted(expected - set(names)):
        out.append(f"fuelvk.{spec.fuelvk_api} lacks the spec's {'input' if n in spec.tensors else 'param'} {n!r}")
    for group, order in (("inputs", [t.name for t in inputs]), ("params", list(spec.params))):
        mine = [n for n in names if n in order]
        if mine != [n for n in order if n in names]:
            out.append(f"fuelvk.{spec.fuelvk_api} orders its {group} {mine}, the spec {order}")
    by_name = {p.name: p for p in got}
    for n in expected & set(by_name):
        p = by_name[n]
        if n in spec.params:
            decl = spec.params[n]
            want, kw = (decl.default if decl.has_default else _MISSING), decl.kw_only
        else:
            t = spec.tensors[n]
            want, kw = (None if t.optional is True else _MISSING), t.kw_only
        have = _MISSING if p.default is p.empty else p.default
        if (want is _MISSING) != (have is _MISSING) or (want is not _MISSING and not _same(want, have)):
            show = lambda v: "no default" if v is _MISSING else f"default {v!r}"  # noqa: E731
            out.append(f"fuelvk.{spec.fuelvk_api}: {n} has {show(have)}, the spec {show(want)}")
        if (p.kind == p.KEYWORD_ONLY) != kw:
            out.append(f"fuelvk.{spec.fuelvk_api}: {n} is {'' if p.kind == p.KEYWORD_ONLY else 'not '}"
                       f"keyword-only, the spec says kw_only: {str(kw).lower()}")
    return out


def ref_api_missing(name):
    """Message if `name` names nothing in a module that can be imported; None when fine or unknowable."""
    parts = name.split(".")
    try:
        if importlib.util.find_spec(parts[0]) is None:
            return None
    except (ImportError, ValueError):
        return None
    obj, i = None, len(parts)
    while i > 0:                         # the longest importable module prefix
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            i -= 1
        except Exception:                # a module that fails on import says nothing about the name
            return None
    if obj is None:
        return None
    for part in parts[i:]:
        try:
            obj = getattr(obj, part)
        except Exception:
            return f"ref_api {name}: {'.'.join(parts[:i])} has no {part!r}"
        i += 1
    return None
