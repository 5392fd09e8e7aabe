"""Workload rows: their expansion into cases (one per dtype case) and the case ids.

A case id joins, with '-': the label; each dtype of the dtype case in forall order; the values of
the dtype parameters (as given by the row, else their defaults) in params order, None left out.
Nightly history is keyed by it, so it is computed in exactly one place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .model import ROW_SPECIAL

LABEL = re.compile(r"^[A-Za-z0-9._-]{1,24}$")


@dataclass
class Case:
    case_id: str
    label: str
    bindings: dict       # params, indices and the dtype case's DType indices
    some: tuple
    dtype_case: dict
    row_index: int


def dtype_param_values(spec, row):
    vals = []
    for p in spec.params.values():
        if p.type.dtypes:
            v = row.get(p.name, p.default if p.has_default else None)
            if v is not None:
                vals.append(str(v))
    return vals


def case_id(spec, label, dtype_case, row):
    parts = [str(label)]
    parts += [str(dtype_case[i]) for i in spec.forall if i in dtype_case]
    parts += dtype_param_values(spec, row)
    return "-".join(parts)


def expand(spec):
    """Every case of every workload row, in order."""
    out = []
    for r, row in enumerate(spec.workloads):
        base = {k: v for k, v in row.items() if k not in ROW_SPECIAL}
        some = tuple(row.get("some") or ())
        cases = row.get("dtype_cases") or [{}]
        for dc in cases if isinstance(cases, list) else [{}]:
            dc = dc if isinstance(dc, dict) else {}
            label = row.get("label", "")
            out.append(Case(case_id(spec, label, dc, row), str(label), {**base, **dc}, some, dc, r))
    return out


def _tokens(text):
    return [t for t in re.split(r"[-_.]", text.lower()) if t]


def op_words(spec):
    """Lower-case spellings of the op's name a label must not repeat."""
    base = re.sub(r"(Fwd|Bwd)?Op$", "", spec.name).lower()
    words = {base} if base else set()
    if spec.fuelvk_api:
        words.add(spec.fuelvk_api.split(".")[-1].replace("_", "").lower())
    return words


def label_problems(spec, label, dtype_names):
    if not isinstance(label, str) or not LABEL.match(label):
        return [f"label {label!r} must be 1-24 characters of [A-Za-z0-9._-]"]
    out, toks = [], _tokens(label)
    runs = {"".join(toks[i:j]) for i in range(len(toks)) for j in range(i + 1, len(toks) + 1)}
    for w in sorted(op_words(spec) & runs):
        out.append(f"label {label!r} repeats the op name ({w}); the case id already carries it")
    for t in toks:
        if t in dtype_names:
            out.append(f"label {label!r} repeats the dtype {t}; the case id already carries it")
    return out
