"""The spec validator: schema, kinds, expressions, solvability, labels, case ids, rows, implementation.

Each check appends Problem(file, op, code, message).  Codes: schema, kind, name, expr,
unsolvable, label, case-id, row, shape-rule, roofline, ref-api, impl (severity "warning" when the
implementation could not be looked at because fuelvk does not import).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

from . import impl, rows
from .expr import CONSTANTS, ExprError, free_names, parse, substitute
from .instance import infer, instantiate
from .kinds import DTYPES
from .model import ROW_SPECIAL, SpecError, load_file
from .primitives import KNOWN_FUNCTIONS

SPEC_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Problem:
    file: str
    op: str | None
    code: str
    message: str
    severity: str = "error"

    def __str__(self):
        where = f"{Path(self.file).name}: {self.op}" if self.op else Path(self.file).name
        return f"{where}: {self.severity} [{self.code}] {self.message}"


def default_paths():
    return sorted(SPEC_DIR.glob("*.yaml"))


def validate(paths=None, *, fuelvk=True, check_impl=True, check_ref_api=True, namespace=None):
    """Problems in the spec files (default: all of fuelvk's).  fuelvk=False checks plain TileOPs files
    (no fuelvk_api required, no implementation checks); namespace replaces the fuelvk module."""
    problems, specs = [], []
    for path in (default_paths() if paths is None else [Path(p) for p in paths]):
        raw = []
        loaded = load_file(path, raw)
        problems += [Problem(*p) for p in raw]
        for spec in loaded:
            if fuelvk and spec.family and spec.family != path.stem:
                spec.problem("schema", f"family {spec.family!r} must match the file name {path.name}")
            specs.append(spec)
    for spec in specs:
        problems += check_spec(spec, fuelvk=fuelvk, check_ref_api=check_ref_api)
    if fuelvk and check_impl:
        problems += check_implementations([s for s in specs if s.status == "implemented"], namespace)
    return problems


def check_spec(spec, *, fuelvk=True, check_ref_api=True):
    out = []

    def add(code, msg):
        out.append(Problem(spec.file, spec.name, code, msg))

    if fuelvk:
        if not isinstance(spec.fuelvk_api, str) or not all(p.isidentifier() for p in spec.fuelvk_api.split(".")):
            spec.problem("schema", f"fuelvk_api must name the fuelvk function, got {spec.fuelvk_api!r}")
        if spec.tileops:
            _check_tileops_map(spec)
    elif spec.fuelvk_api is not None or spec.tileops is not None:
        spec.problem("schema", "fuelvk_* fields belong to fuelvk's own specs")
    for code, msg in spec.problems:
        add(code, msg)
    expr_ok = _check_expressions(spec, add)
    if spec.problems or not expr_ok:
        return out                         # the deeper checks need a well-formed entry
    _check_solvable(spec, add)
    _check_rows(spec, add)
    if check_ref_api and spec.ref_api:
        msg = impl.ref_api_missing(spec.ref_api)
        if msg:
            add("ref-api", msg)
    return out


# ----------------------------------------------------------------------------------- expressions

def _expressions(spec):
    """(context, text, extra allowed names, is shape term) for every expression of the spec."""
    for t in spec.tensors.values():
        local = {"i"} if t.list_len else set()
        yield f"{t.name}.shape", t.shape, local, True
        yield f"{t.name}.dtype", t.dtype, set(), False
        for key in ("optional", "mutated", "nullable"):
            if isinstance(getattr(t, key), str):
                yield f"{t.name}.{key}", getattr(t, key), set(), False
        for key, val in (("values", t.values), ("fuelvk_list", t.list_len)):
            if val is not None:
                yield f"{t.name}.{key}", val, set(), False
        for r in t.requires:
            yield f"{t.name}.requires", r, set(), False
    for fam in spec.families.values():
        for when, text in fam.cases:
            yield f"types.{fam.name}", text, set(fam.params), True
    for name, text in spec.lets.items():
        yield f"let {name}", text, set(), False
    for rule in spec.shape_rules:
        yield "shape rule", rule, set(), False
    for key in ("flops", "bytes"):
        if key in spec.roofline:
            yield f"roofline.{key}", str(spec.roofline[key]), set(), False
    for r, row in enumerate(spec.workloads):
        for k, v in row.items():
            if k in spec.forall and spec.forall[k].name == "Seq" and isinstance(v, str):
                yield f"row {r} {k}", v, set(), False


def _check_expressions(spec, add):
    known = set(spec.forall) | set(spec.params) | set(spec.lets) | set(spec.tensors) | DTYPES | set(CONSTANTS)
    ok = True
    for where, text, local, is_shape in _expressions(spec):
        try:
            node = parse(text)
        except ExprError as e:
            add("expr", f"{where}: {e}")
            ok = False
            continue
        if is_shape and not (node.kind == "list" or (node.kind == "sub" and node.a.kind == "name"
                                                     and node.a.a in spec.families)):
            add("expr", f"{where}: {text!r} is not a shape term ([..] or a type family application)")
            ok = False
        names, calls = free_names(node)
        for n in sorted(names - known - local - set(spec.families)):
            add("expr", f"{where}: unknown name {n!r} in {text!r}")
            ok = False
        for f in sorted(calls - KNOWN_FUNCTIONS):
            add("expr", f"{where}: unknown function {f}() in {text!r}")
            ok = False
        _check_literals(spec, node, where, add)
    return ok


def _literal_domain(spec, node):
    if node.kind == "attr":
        node = node.a
    if node.kind != "name":
        return None
    if node.a in spec.params:
        t = spec.params[node.a].type
        return t.literals or t.dtypes or None
    kind = spec.forall.get(node.a)
    return kind.members if kind is not None and kind.name == "DType" else None


def _check_literals(spec, node, where, add):
    """A comparison with a literal outside the enum or dtype set can never hold: reject it."""
    if node is None or not hasattr(node, "kind"):
        return
    if node.kind == "cmp":
        chain = [node.a] + [r for _, r in node.b]
        for (op, _), left, right in zip(node.b, chain, chain[1:]):
            for a, b in ((left, right), (right, left)):
                dom = _literal_domain(spec, a)
                lits = [b.a] if b.kind == "const" and isinstance(b.a, str) else \
                    [x.a for x in b.a if x.kind == "const" and isinstance(x.a, str)] if b.kind == "tuple" else []
                for lit in lits:
                    if dom and lit not in dom:
                        add("expr", f"{where}: {lit!r} is not one of {' | '.join(dom)}")
    for child in (node.a, node.b, node.c, node.d):
        for c in (child if isinstance(child, list) else [child]):
            if isinstance(c, tuple):
                c = c[1]
            if hasattr(c, "kind"):
                _check_literals(spec, c, where, add)


# ---------------------------------------------------------------------------------- solvability

def _index_deps(spec, node, seen=()):
    """forall indices an expression depends on, through lets."""
    names, _ = free_names(node)
    out = set()
    for n in names:
        if n in spec.forall:
            out.add(n)
        elif n in spec.lets and n not in seen:
            out |= _index_deps(spec, parse(spec.lets[n]), (*seen, n))
    return out


def _alternatives(spec, text):
    node = parse(text)
    if node.kind == "list":
        return [node.a]
    fam = spec.families[node.a.a]
    args = node.b.a if node.b.kind == "tuple" else [node.b]
    mapping = dict(zip(fam.params, args))
    return [substitute(parse(t), mapping).a for _, t in fam.cases]


def _linear(spec, node, unknown):
    if node.kind == "name":
        return node.a in unknown and spec.forall[node.a].name == "Dim"
    if node.kind == "bin" and node.a in "+-*":
        l, r = _index_deps(spec, node.b) & unknown, _index_deps(spec, node.c) & unknown
        return (not l and _linear(spec, node.c, unknown)) or (not r and _linear(spec, node.b, unknown))
    return False


def _solved_by(spec, items, unknown):
    stars = [it for it in items if it.kind == "star" and _index_deps(spec, it.a) & unknown]
    if len(stars) > 1:
        return set()
    got = set()
    for s in stars:
        n = s.a
        if n.kind == "name" and spec.forall[n.a].name == "Shape":
            got.add(n.a)
        elif n.kind == "call" and n.a == "insert_axis" and len(n.b) == 3 and n.b[0].kind == "name" \
                and not _index_deps(spec, n.b[1]) & unknown:
            got.add(n.b[0].a)
            if _linear(spec, n.b[2], unknown - got):
                got |= _index_deps(spec, n.b[2]) & unknown
        else:
            return set()
    for it in items:
        if it.kind != "star":
            deps = _index_deps(spec, it) & unknown
            if len(deps) == 1 and _linear(spec, it, unknown):
                got |= deps
    return got


def _check_solvable(spec, add):
    """Every Dim/Shape/DType index must be solvable by unification of the inputs (on some branch)."""
    unknown = {i for i, k in spec.forall.items() if k.name != "Seq"}
    terms = [(_alternatives(spec, t.shape), parse(t.dtype)) for t in spec.tensors.values()
             if t.role != "output"]
    changed = True
    while changed:
        changed = False
        for alts, dnode in terms:
            got = set().union(*(_solved_by(spec, items, unknown) for items in alts))
            if dnode.kind == "name" and dnode.a in unknown:
                got.add(dnode.a)
            if got & unknown:
                unknown -= got
                changed = True
    used = set()
    for _, text, _, _ in _expressions(spec):
        used |= _index_deps(spec, parse(text))
    for i in spec.forall:
        if i not in used:
            add("unsolvable", f"index {i} is declared but used nowhere")
        elif i in unknown:
            add("unsolvable", f"index {i} cannot be solved from the inputs' shapes and dtypes")


# ------------------------------------------------------------------------------------------- rows

def _check_rows(spec, add):
    ids, by_label = {}, {}
    dtype_idx = {i for i, k in spec.forall.items() if k.name == "DType"}
    dtype_params = {p for p, d in spec.params.items() if d.type.dtypes}
    allowed = set(spec.params) | (set(spec.forall) - dtype_idx) | ROW_SPECIAL
    for r, row in enumerate(spec.workloads):
        label = row.get("label")
        where = f"row {r} ({label})"
        for msg in rows.label_problems(spec, label, DTYPES):
            add("label", f"{where}: {msg}")
        for k in row:
            if k not in allowed:
                add("row", f"{where}: key {k!r} is not a parameter, a non-dtype index or some/dtype_cases/label"
                    + (" (DType indices go in dtype_cases)" if k in dtype_idx else ""))
        dcs = row.get("dtype_cases")
        if dcs is not None and (not isinstance(dcs, list) or not dcs or not all(isinstance(d, dict) for d in dcs)):
            add("row", f"{where}: dtype_cases must be a non-empty list of mappings")
        rest = {k: v for k, v in row.items() if k not in ("dtype_cases", "label") and k not in dtype_params}
        if label in by_label and by_label[label] != rest:
            add("label", f"{where}: rows sharing label {label!r} may differ only in dtype")
        by_label.setdefault(label, rest)
    for case in rows.expand(spec):
        where = f"case {case.case_id}"
        if case.case_id in ids:
            add("case-id", f"{where}: duplicate case id (rows {ids[case.case_id]} and {case.row_index})")
        ids.setdefault(case.case_id, case.row_index)
        _check_case(spec, case, where, add)


def _check_case(spec, case, where, add):
    try:
        inst = instantiate(spec, case.bindings, case.some, strict=False)
    except SpecError as e:
        add("row", f"{where}: {e}")
        return
    for code, msg in inst.errors:
        add(code, f"{where}: {msg}")
    if inst.errors:
        return
    if "func" not in spec.roofline:        # a func roofline names Python code fuelvk does not have
        try:
            inst.roofline()
        except (ExprError, SpecError) as e:
            add("roofline", f"{where}: {e}")
    env = inst.env
    used = env.reads & set(spec.forall)
    given = {k for k in case.bindings if k in spec.forall}
    for i in sorted(given - used):
        add("row", f"{where}: gives index {i}, which is not used on this branch")
    for i in sorted(given & inst.generated):
        add("row", f"{where}: gives index {i}, which a value generator solves")
    if spec.dtype_combos and not any(all(c.get(k) == v for k, v in case.dtype_case.items())
                                     for c in spec.dtype_combos if isinstance(c, dict)):
        add("row", f"{where}: dtype case {case.dtype_case} is not one of dtype_combos")
    tensors = {n: (inst.shapes[n], inst.dtypes[n]) if not isinstance(inst.shapes[n], list) else
               [(s, inst.dtypes[n]) for s in inst.shapes[n]]
               for n in inst.present if spec.tensors[n].role != "output"}
    seqs = {i: env.values[i] for i in used if spec.forall[i].name == "Seq"}
    try:
        back = infer(spec, tensors, {p: env.values[p] for p in spec.params}, seqs).values
    except SpecError as e:
        add("row", f"{where}: the instantiated call does not re-infer: {e}")
        return
    for i in sorted(used):
        if i not in back:
            add("unsolvable", f"{where}: index {i} cannot be solved from the inputs of this call")
        elif back[i] != env.values[i]:
            add("row", f"{where}: re-inferred {i} = {back[i]!r}, the row gives {env.values[i]!r}")


def _check_tileops_map(spec):
    m = spec.tileops
    bind = m.get("bind", {}) or {}
    if not isinstance(bind, dict):
        spec.problem("schema", "fuelvk_tileops.bind must map fuelvk names to expressions")
        return
    for k, text in list(bind.items()) + [(k, m[k]) for k in ("when", "bytes_delta") if k in m]:
        if k in bind and k not in spec.forall and k not in spec.params:
            spec.problem("schema", f"fuelvk_tileops.bind: {k!r} is not an index or param of {spec.name}")
        try:
            parse(str(text))
        except ExprError as e:
            spec.problem("expr", f"fuelvk_tileops.{k}: {e}")


# ------------------------------------------------------------------------------- implementation

def check_implementations(specs, namespace=None):
    out = []
    if not specs:
        return out
    if namespace is None:
        try:
            import importlib
            namespace = importlib.import_module("fuelvk")
        except Exception as e:  # noqa: BLE001 - any import failure only skips these checks
            files = sorted({s.file for s in specs})
            return [Problem(f, None, "impl", f"cannot import fuelvk ({type(e).__name__}: {e}); skipped the "
                            f"implementation checks of {sum(s.file == f for s in specs)} implemented ops",
                            "warning") for f in files]
    for spec in specs:
        try:
            func = impl.resolve_api(spec.fuelvk_api, namespace)
        except (ImportError, AttributeError) as e:
            out.append(Problem(spec.file, spec.name, "impl",
                               f"status is implemented but fuelvk.{spec.fuelvk_api} is missing ({e})"))
            continue
        func = inspect.unwrap(func)    # fuelvk.api's extensions (complex, the standard's clip) wrap the op
        for msg in impl.signature_problems(spec, func):
            out.append(Problem(spec.file, spec.name, "impl", msg))
    return out
