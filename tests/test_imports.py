"""The import graph of src/fuelvk has no cycle (issue 15 item 3).

Every import counts: module-level, function-local and relative ones. An import of package.module
is an edge to that module; the implicit import of its parent packages is not (every module would
otherwise reach fuelvk/__init__, which imports the whole namespace): the rule is about what each
module depends on directly. Array's operators reach the ops through fuelvk._hooks, not imports.
The packages fuelvk.ops and fuelvk.api load each public module of theirs by name (importlib) to build
the namespace: those dynamic imports count as edges to each of those modules."""
import ast
import itertools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "fuelvk"
DYNAMIC = ("fuelvk.ops", "fuelvk.api")   # packages whose __init__ imports each public module by name

# Cycles tolerated for now (none): an entry here must name a cycle that exists, or the test fails.
KNOWN_CYCLES = []


def modules(root):
    """{dotted module name: (path, is_package)} for every .py file under root (a package dir)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def import_graph(root):
    """{module: {module it imports: first line number}}, within root's package."""
    mods = modules(root)
    top = root.name
    graph = {}
    for name, (path, is_pkg) in mods.items():
        pkg = name if is_pkg else name.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            else:
                continue
            for t in targets:
                if t in mods and t != name and (t == top or t.startswith(top + ".")):
                    edges.setdefault(t, node.lineno)
        if name in DYNAMIC:
            edges.update((m, 0) for m in mods if m.rpartition(".")[0] == name
                         and not m.rpartition(".")[2].startswith("_"))
        graph[name] = edges
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each a sorted list."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _where(line):
    return f"line {line}" if line else "by name"


def cycle_path(graph, comp):
    """One concrete cycle through comp's first module, as 'a -> b (line n) -> ... -> a'."""
    start, comp = comp[0], set(comp)
    paths = {start: [start]}
    frontier = [start]
    while frontier:                       # breadth-first: the shortest way back to start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = paths[v] + [start]
                    return " -> ".join(f"{a} ({_where(graph[a][b])})" for a, b in itertools.pairwise(path)) + f" -> {start}"
                if w in comp and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycle():
    graph = import_graph(ROOT)
    assert "fuelvk.array" in graph and "fuelvk.ops.matmul" in graph["fuelvk.ops"]   # the walk found the package
    found = cycles(graph)
    known = [set(k) for k in KNOWN_CYCLES]
    new = [c for c in found if set(c) not in known]
    assert not new, "import cycles in src/fuelvk:\n" + "\n".join(cycle_path(graph, c) for c in new)
    stale = [sorted(k) for k in known if sorted(k) not in found]
    assert not stale, f"KNOWN_CYCLES lists cycles that are gone (remove them): {stale}"


def test_array_imports_no_op():
    """Array binds its operators through _hooks: array.py imports nothing above it."""
    deps = set(import_graph(ROOT)["fuelvk.array"])
    assert deps <= {"fuelvk._hooks", "fuelvk._device", "fuelvk._torch_bits", "fuelvk.dtypes", "fuelvk.layout",
                    "fuelvk.runtime", "fuelvk.errors"}, deps


def test_the_graph_sees_local_and_relative_imports(tmp_path):
    """The checker itself: a cycle closed by a function-local relative import is found and named."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("import os\n\ndef f():\n    from .. import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from .a import x\n")       # into the cycle, not part of it
    graph = import_graph(pkg)
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert cycle_path(graph, ["pkg.a", "pkg.c", "pkg.sub.b"]) == (
        "pkg.a (line 1) -> pkg.sub.b (line 4) -> pkg.c (line 1) -> pkg.a")


def test_every_op_array_calls_is_bound():
    """Each op array.py calls through _hooks (operators, methods, indexing) is bound by fuelvk/__init__."""
    import fuelvk  # noqa: F401  (binds the namespace)
    from fuelvk import _hooks
    tree = ast.parse((ROOT / "array.py").read_text())
    names = {node.args[0].value for node in ast.walk(tree)
             if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
             and isinstance(node.args[0].value, str)
             and (isinstance(node.func, ast.Attribute) and node.func.attr == "op"
                  or isinstance(node.func, ast.Name) and node.func.id in ("_binary", "_reduction"))}
    assert {"add", "astype", "copy", "setitem", "advanced_getitem", "mask_setitem", "sum"} <= names   # the walk saw them
    missing = sorted(n for n in names if n not in _hooks._OPS)
    assert not missing, f"array.py calls ops nobody bound: {missing}"


def test_an_unbound_op_is_a_typed_error():
    from fuelvk import _hooks
    from fuelvk.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match="fuelvk.no_such_op is not bound"):
        _hooks.op("no_such_op")
