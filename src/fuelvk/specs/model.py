"""Spec entries read from YAML, with the schema checked on the way in.

A Spec keeps the raw mapping and a parsed view of it (kinds, parameter types, tensors, type
families, lets).  Loading never raises on a malformed entry: every departure from the manifest
schema is recorded in `spec.problems` as (code, message), so the validator can report all of them
and the roofline/workload API can refuse a broken spec with a clear error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .kinds import KindError, parse_family_param, parse_kind, parse_type

TOP_KEYS = {"family", "status", "ref_api", "signature", "workloads", "roofline", "composition"}
REQUIRED_TOP = ("family", "status", "signature", "workloads", "roofline")
FUELVK_KEYS = {"fuelvk_api", "fuelvk_tileops"}
SIG_KEYS = {"forall", "params", "inputs", "outputs", "types", "let", "shape_rules", "dtype_combos"}
TENSOR_KEYS = {"dtype", "shape", "optional", "mutated", "values", "requires", "write_only", "contiguous",
               "kw_only", "nullable", "buffer", "alias", "fuelvk_list"}
PARAM_KEYS = {"type", "default", "kw_only"}
ROW_SPECIAL = {"some", "dtype_cases", "label"}
TILEOPS_KEYS = {"op", "bind", "when", "bytes_delta"}
STATUSES = ("implemented", "spec-only")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # same YAML, C speed
_QUALNAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


class SpecError(ValueError):
    """A spec that cannot be used (schema problems, or a call it does not accept)."""


@dataclass
class Tensor:
    name: str
    role: str                  # input | output | param
    dtype: str
    shape: str
    optional: object = False   # bool, or an expression: present iff true
    mutated: object = False
    nullable: object = False   # outputs: bool, or an expression: returned (not None) iff true
    values: str | None = None
    requires: tuple = ()
    write_only: bool = False
    kw_only: bool = False
    alias: str | None = None
    list_len: str | None = None  # fuelvk_list: the tensor is a Python list of this many tensors


@dataclass
class Param:
    name: str
    type: object               # kinds.Type
    has_default: bool
    default: object = None
    kw_only: bool = False


@dataclass
class Family:
    name: str
    params: dict               # name -> "Dim" | "Bool" | Type ...
    match: tuple
    cases: list                # [(when values tuple, shape text)]


@dataclass
class Spec:
    name: str
    file: str
    raw: dict
    problems: list = field(default_factory=list)
    family: str = ""
    status: str = ""
    ref_api: str | None = None
    fuelvk_api: str | None = None
    tileops: dict | None = None
    forall: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)   # inputs, then param tensors, then outputs
    families: dict = field(default_factory=dict)
    lets: dict = field(default_factory=dict)
    shape_rules: list = field(default_factory=list)
    dtype_combos: list = field(default_factory=list)
    workloads: list = field(default_factory=list)
    roofline: dict = field(default_factory=dict)

    def problem(self, code, msg):
        self.problems.append((code, msg))

    @property
    def inputs(self):
        return {n: t for n, t in self.tensors.items() if t.role == "input"}

    @property
    def outputs(self):
        return {n: t for n, t in self.tensors.items() if t.role == "output"}

    def require_ok(self):
        if self.problems:
            code, msg = self.problems[0]
            raise SpecError(f"spec {self.name} ({self.file}) is invalid: {msg}")


def _mapping(spec, value, where):
    if value is None:
        return {}
    if not isinstance(value, dict):
        spec.problem("schema", f"{where} must be a mapping, got {type(value).__name__}")
        return {}
    return value


def _unknown_keys(spec, d, allowed, where):
    for k in d:
        if k not in allowed:
            spec.problem("schema", f"unknown key {k!r} in {where} (allowed: {', '.join(sorted(allowed))})")


def _tensor(spec, name, d, role):
    where = f"{role} {name}"
    if not isinstance(d, dict):
        spec.problem("schema", f"{where} must be a mapping with dtype and shape")
        return None
    _unknown_keys(spec, d, TENSOR_KEYS, where)
    for key in ("dtype", "shape"):
        if not isinstance(d.get(key), str):
            spec.problem("schema", f"{where} needs a string {key!r}")
            return None
    req = d.get("requires", [])
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        spec.problem("schema", f"{where}: requires must be a list of expressions")
        req = []
    return Tensor(name, role, d["dtype"], d["shape"], d.get("optional", False), d.get("mutated", False),
                  d.get("nullable", False), d.get("values"), tuple(req), bool(d.get("write_only")),
                  bool(d.get("kw_only")), d.get("alias") or d.get("buffer"), d.get("fuelvk_list"))


def _param(spec, name, d):
    if not isinstance(d, dict):
        spec.problem("schema", f"param {name} must be a mapping")
        return None
    if "dtype" in d or "shape" in d:      # a tensor passed at construction
        return _tensor(spec, name, d, "param")
    _unknown_keys(spec, d, PARAM_KEYS, f"param {name}")
    try:
        typ = parse_type(d.get("type"))
    except KindError as e:
        spec.problem("kind", f"param {name}: {e}")
        return None
    default = d.get("default")
    if "default" in d:
        try:
            default = typ.convert(default)
        except KindError as e:
            spec.problem("schema", f"param {name}: default {e}")
    return Param(name, typ, "default" in d, default, bool(d.get("kw_only")))


def _families(spec, types):
    for fname, fd in _mapping(spec, types, "signature.types").items():
        if not isinstance(fd, dict) or not {"params", "match", "cases"} <= set(fd):
            spec.problem("schema", f"type family {fname} needs params, match and cases")
            continue
        try:
            params = {p: parse_family_param(k) for p, k in _mapping(spec, fd["params"], fname).items()}
        except KindError as e:
            spec.problem("kind", f"type family {fname}: {e}")
            continue
        match = tuple(fd["match"]) if isinstance(fd["match"], list) else (fd["match"],)
        cases = []
        for c in fd["cases"] or []:
            if not isinstance(c, dict) or set(c) != {"when", "is"}:
                spec.problem("schema", f"type family {fname}: each case is {{when, is}}")
                continue
            when = tuple(c["when"]) if isinstance(c["when"], list) else (c["when"],)
            if len(when) != len(match):
                spec.problem("schema", f"type family {fname}: 'when' {c['when']!r} does not fit match {match}")
            cases.append((when, c["is"]))
        bad = [m for m in match if m not in params]
        if bad:
            spec.problem("schema", f"type family {fname}: match names {bad} are not its params")
        spec.families[fname] = Family(fname, params, match, cases)


def build(name, raw, file) -> Spec:
    spec = Spec(name, str(file), raw if isinstance(raw, dict) else {})
    if not isinstance(raw, dict):
        spec.problem("schema", "an entry must be a mapping")
        return spec
    for key in raw:
        if key not in TOP_KEYS and key not in FUELVK_KEYS:
            spec.problem("schema", f"unknown top-level key {key!r}")
    for key in REQUIRED_TOP:
        if key not in raw:
            spec.problem("schema", f"missing required field {key!r}")
    spec.family, spec.status = raw.get("family", ""), raw.get("status", "")
    if "status" in raw and spec.status not in STATUSES:
        spec.problem("schema", f"status must be implemented or spec-only, got {spec.status!r}")
    spec.ref_api = raw.get("ref_api")
    if spec.ref_api is not None and not (isinstance(spec.ref_api, str) and _QUALNAME.match(spec.ref_api)):
        spec.problem("schema", f"ref_api must be a fully qualified name, got {spec.ref_api!r}")
    spec.fuelvk_api = raw.get("fuelvk_api")
    spec.tileops = raw.get("fuelvk_tileops")
    if spec.tileops is not None:
        if not isinstance(spec.tileops, dict) or "op" not in spec.tileops:
            spec.problem("schema", "fuelvk_tileops must be a mapping with at least 'op'")
            spec.tileops = None
        else:
            _unknown_keys(spec, spec.tileops, TILEOPS_KEYS, "fuelvk_tileops")
    sig = _mapping(spec, raw.get("signature"), "signature")
    _unknown_keys(spec, sig, SIG_KEYS, "signature")
    if "signature" in raw and "forall" not in sig:
        spec.problem("schema", "signature needs forall")
    for idx, kind in _mapping(spec, sig.get("forall"), "forall").items():
        try:
            spec.forall[idx] = parse_kind(kind)
        except KindError as e:
            spec.problem("kind", f"forall {idx}: {e}")
    for pname, pd in _mapping(spec, sig.get("params"), "params").items():
        p = _param(spec, pname, pd)
        if isinstance(p, Tensor):
            spec.tensors[pname] = p
        elif p is not None:
            spec.params[pname] = p
    for role, key in (("input", "inputs"), ("output", "outputs")):
        if "signature" in raw and key not in sig:
            spec.problem("schema", f"signature needs {key} (write {{}} for none)")
        for tname, td in _mapping(spec, sig.get(key), key).items():
            t = _tensor(spec, tname, td, role)
            if t is not None:
                spec.tensors[tname] = t
    for t in spec.tensors.values():
        if t.alias is not None and (t.role != "output" or spec.tensors.get(t.alias) is None
                                    or spec.tensors[t.alias].role != "input"):
            spec.problem("schema", f"{t.role} {t.name}: alias/buffer must name an input, got {t.alias!r}")
    _families(spec, sig.get("types"))
    spec.lets = {k: v for k, v in _mapping(spec, sig.get("let"), "let").items()}
    rules = sig.get("shape_rules", [])
    if not isinstance(rules, list):
        spec.problem("schema", "shape_rules must be a list of expressions")
        rules = []
    spec.shape_rules = rules
    combos = sig.get("dtype_combos", [])
    spec.dtype_combos = combos if isinstance(combos, list) else []
    wl = raw.get("workloads")
    if "workloads" in raw and (not isinstance(wl, list) or not wl):
        spec.problem("schema", "workloads must be a non-empty list of rows")
    spec.workloads = [r for r in (wl or []) if isinstance(r, dict)] if isinstance(wl, list) else []
    if isinstance(wl, list) and len(spec.workloads) != len(wl):
        spec.problem("schema", "every workload row must be a mapping")
    roof = _mapping(spec, raw.get("roofline"), "roofline")
    if "roofline" in raw:
        if "func" in roof:
            if set(roof) != {"func"}:
                spec.problem("schema", "roofline is either {func} or {flops, bytes}")
        elif "flops" not in roof:
            spec.problem("schema", "roofline needs flops (and optionally bytes) or func")
        _unknown_keys(spec, roof, {"flops", "bytes", "func"}, "roofline")
    spec.roofline = roof
    _names(spec)
    return spec


def _names(spec):
    """Indices, lets, tensors and params share one namespace; `out` is reserved."""
    seen = {}
    for group, names in (("index", spec.forall), ("let", spec.lets), ("tensor", spec.tensors),
                         ("param", spec.params)):
        for n in names:
            if not _IDENT.match(str(n)):
                spec.problem("name", f"{group} name {n!r} is not an identifier")
            if n == "out":
                spec.problem("name", f"'out' is reserved and cannot name a {group}")
            if n in seen:
                spec.problem("name", f"{n!r} names both a {seen[n]} and a {group}")
            seen[n] = group


def load_file(path, problems=None):
    """Specs in one YAML file (a mapping op name -> entry); a file-level error goes to `problems`."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=_LOADER)
    except (OSError, yaml.YAMLError) as e:
        if problems is None:
            raise SpecError(f"cannot read {path}: {e}") from None
        problems.append((str(path), None, "schema", f"cannot read spec file: {e}"))
        return []
    if not isinstance(data, dict):
        if problems is not None:
            problems.append((str(path), None, "schema", "a spec file must be a mapping of op names"))
        return []
    entries = generated(data.get("templates") or {}, path.stem) + [
        (name, entry) for name, entry in data.items() if name not in ("adts", "templates")]
    return [build(name, entry, path) for name, entry in entries]


def generated(templates, family):
    """(name, entry) of the specs the op records generate from a file's `templates:` (fuelvk/ops/_opdef.py:
    a record whose `spec` names a template of this file): <Name>FwdOp with the record's ref_api, the
    template's flops times the record's FLOPs per element and the row set the record names.
    Without an importable fuelvk there are no records, and no generated entries."""
    if not templates:
        return []
    try:
        from ..ops._opdef import opdefs
        records = opdefs().values()
    except Exception:  # noqa: BLE001 - the specs package works without the rest of fuelvk
        return []
    out = []
    for rec in records:
        want = rec.spec or {}
        t = templates.get(want.get("template"))
        if t is None or t.get("family") != family:
            continue
        flops = t["flops"] if want["flops"] == 1 else f"{want['flops']} * {t['flops']}"
        entry = {"family": t["family"], "status": t["status"], "ref_api": want["ref_api"], "fuelvk_api": rec.name,
                 "signature": t["signature"], "workloads": t["rows"][want["rows"]], "roofline": {"flops": flops}}
        out.append(("".join(p.capitalize() for p in rec.name.split("_")) + "FwdOp", entry))
    return out
