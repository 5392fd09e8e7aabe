"""fuelvk.specs: the op specs validate, the validator catches broken specs, and fuelvk's rooflines
count FLOPs and bytes as the TileOPs reference formulas do.  No Vulkan device is needed."""
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
TILEOPS_DIR = SHARED / "reference" / "tileops-0.1.0-spec"


def _load_specs_package():
    """fuelvk.specs, or (when the rest of fuelvk does not import) the same package loaded alone."""
    if importlib.util.find_spec("fuelvk") is None:
        sys.path.insert(0, str(REPO / "src"))
    try:
        return importlib.import_module("fuelvk.specs")
    except Exception:  # noqa: BLE001 - fuelvk/__init__ mid-edit: the specs package needs none of it
        init = REPO / "src" / "fuelvk" / "specs" / "__init__.py"
        spec = importlib.util.spec_from_file_location("fuelvk_specs_alone", init,
                                                      submodule_search_locations=[str(init.parent)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod


specs = _load_specs_package()
expr = importlib.import_module(specs.__name__ + ".expr")
evaluate = importlib.import_module(specs.__name__ + ".evaluate")
tileops = importlib.import_module(specs.__name__ + ".tileops")
validate_mod = importlib.import_module(specs.__name__ + ".validate")
cli = importlib.import_module(specs.__name__ + ".cli")

needs_reference = pytest.mark.skipif(not TILEOPS_DIR.is_dir(),
                                     reason=f"TileOPs reference specs not found at {TILEOPS_DIR}")


def reference_files():
    return sorted(p for p in TILEOPS_DIR.glob("*.yaml") if p.name != "types.yaml")


# ------------------------------------------------------------------------------ fuelvk's own specs

def test_fuelvk_specs_are_valid():
    problems = specs.validate(check_impl=False)
    assert problems == [], "\n".join(map(str, problems))


def test_every_spec_names_a_function_and_has_workloads():
    loaded = specs.load_specs()
    assert len(loaded) >= 60
    for name, s in loaded.items():
        assert s.fuelvk_api and s.workloads, name
    assert specs.get_spec("rms_norm").name == "RMSNormFwdOp"
    assert specs.get_spec("quantize").fuelvk_api == "quant.quantize"


def test_implemented_specs_match_fuelvk_signatures():
    try:
        fv = importlib.import_module("fuelvk")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"fuelvk does not import ({e}); the implementation checks cannot run")
    implemented = [s for s in specs.load_specs().values() if s.status == "implemented"]
    assert implemented
    problems = validate_mod.check_implementations(implemented, fv)
    assert problems == [], "\n".join(map(str, problems))


def test_missing_specs():
    assert specs.missing_specs(["exp", "rms_norm", "quantize", "matmul", "no_such_op"]) == ["no_such_op"]


# -------------------------------------------------------------------------------- TileOPs reference

@needs_reference
def test_reference_tileops_specs_validate():
    """The validator accepts the real TileOPs files (every expression, row and re-inference)."""
    problems = specs.validate(reference_files(), fuelvk=False, check_ref_api=False)
    assert problems == [], "\n".join(map(str, problems))


@needs_reference
def test_roofline_matches_reference_formulas():
    ref = specs.load_specs(reference_files())
    mine = specs.load_specs()
    shared = sorted(set(ref) & set(mine))
    assert {"RMSNormFwdOp", "LayerNormFwdOp", "SoftmaxFwdOp", "SumFwdOp", "GEMMFwdOp", "RoPEFwdOp"} <= set(shared)
    for name in shared:
        s = mine[name]
        assert s.tileops and s.tileops["op"] == name, f"{name} has no fuelvk_tileops mapping"
        cases = tileops.compare(s, ref[name])
        compared = [c for c in cases if c.skipped is None]
        assert compared, name
        for c in compared:
            assert c.fuelvk == c.reference, f"{name} {c.case_id}: fuelvk {c.fuelvk} != TileOPs {c.reference}"
        for c in cases:
            assert c.skipped is None or "fuelvk_tileops.when" in c.skipped


# ---------------------------------------------------------------------------------------- roofline

def test_eval_roofline_counts():
    n = 2048 * 4096
    assert specs.eval_roofline("rms_norm", B=[2048], N=4096, T="bfloat16", some=["weight"]) == \
        (4 * n, 2 * n * 2 + 4096 * 2)
    assert specs.eval_roofline("RMSNormFwdOp", B=[2048], N=4096, T="float32")[0] == 3 * n
    assert specs.eval_roofline("softmax", S=[2048, 4096], T="float16") == (5 * n, 2 * n * 2)
    assert specs.eval_roofline("matmul", B=[], Bb=[], M=64, N=128, K=256, TA="float32", TB="bfloat16") == \
        (2 * 64 * 128 * 256, 64 * 256 * 4 + 256 * 128 * 2 + 64 * 128 * 4)
    # A mutated input is read and written.
    assert specs.eval_roofline("add_assign_scaled", S=[1024], R=[1024], T="float32", scale=2.0) == (2048, 3 * 4096)
    # An explicit bytes formula: the gather reads only the rows it names.
    assert specs.eval_roofline("take", S=[128256, 4096], I=[16], axis=0, T="bfloat16", X="int64") == \
        (0, 16 * 8 + 2 * 16 * 4096 * 2)


def test_attention_counts_visible_scores_bottom_right():
    base = dict(B=1, H_q=1, H_kv=1, D=8, T="float32")
    per = 4 * 8 + 5
    full = specs.eval_roofline("scaled_dot_product_attention", S_q=4, S_kv=4, **base)[0]
    causal = specs.eval_roofline("scaled_dot_product_attention", S_q=4, S_kv=4, is_causal=True, **base)[0]
    decode = specs.eval_roofline("scaled_dot_product_attention", S_q=1, S_kv=6, is_causal=True,
                                 causal_alignment="bottom_right", **base)[0]
    top_left = specs.eval_roofline("scaled_dot_product_attention", S_q=1, S_kv=6, is_causal=True, **base)[0]
    window = specs.eval_roofline("scaled_dot_product_attention", S_q=4, S_kv=4, is_causal=True, window=[1, 0],
                                 **base)[0]
    assert full == 16 * per + 4 * 8
    assert causal == 10 * per + 4 * 8
    assert decode == 6 * per + 8          # the last query row sees every key
    assert top_left == 1 * per + 8        # torch's top-left mask: query 0 sees key 0
    assert window == 7 * per + 4 * 8      # itself and one key to the left


def test_roofline_of_call_infers_indices():
    assert specs.roofline_of_call("rms_norm", {"x": ((8, 16, 64), "float16"), "weight": ((64,), "float16")}) == \
        specs.eval_roofline("rms_norm", B=[8, 16], N=64, T="float16", some=["weight"])
    got = specs.roofline_of_call("concatenate", {"arrays": [((2, 3), "float32"), ((2, 5), "float32")]}, axis=1)
    assert got == (0, 2 * 2 * 8 * 4)
    with pytest.raises(specs.SpecError):
        specs.roofline_of_call("add", {"a": ((3, 4), "float32"), "b": ((3, 4), "int8")})


def test_workloads_instantiate():
    cases = list(specs.workloads("rope"))
    assert cases[0]["case_id"] == "llama-8b-q-prefill-2k-float32"
    assert cases[0]["inputs"]["x"] == ((1, 32, 2048, 128), "float32")
    assert cases[0]["flops"] == 3 * 32 * 2048 * 128
    ids = [c["case_id"] for c in specs.workloads("matmul")]
    assert "llama-8b-down-prefill-bfloat16-bfloat16-float32" in ids and len(ids) == len(set(ids))
    concat = next(specs.workloads("concatenate"))
    assert [s for s, _ in concat["inputs"]["arrays"]] == [(1, 8, 4095, 128), (1, 8, 1, 128)]


# ----------------------------------------------------------------------------- expression language

class _Env:
    def __init__(self, **values):
        self.values = values

    def lookup(self, name):
        if name not in self.values:
            raise expr.ExprError(name)
        return self.values[name]

    def call(self, fname, args):
        from importlib import import_module
        return import_module(specs.__name__ + ".primitives").call(fname, args)

    def special(self, fname, name):
        assert fname == "present"
        return self.values.get(name) is not None


@pytest.mark.parametrize("text, value", [
    ("2 + 3 * 4", 14), ("(2 + 3) * 4", 20), ("-2 ** 2", -4), ("2 ** 3 ** 2", 512), ("7 // 2 * 2", 6),
    ("7 % 4 + 1", 4), ("6 / 3", 2), ("not 1 == 2", True), ("1 < 2 <= 2 < 3", True), ("3 > 2 > 2", False),
    ("1 if 0 else 2 if 1 else 3", 2), ("0 or 1 and 2", 2), ("not 0 and 0", 0), ("'a' in ('a', 'b')", True),
    ("(1, 2) not in ((1, 2),)", False), ("S[1:]", (3, 4)), ("S[-1]", 4), ("len(S) + prod(S)", 27),
    ("[*S, 5]", (2, 3, 4, 5)), ("sum(1 if n > 2 else 0 for n in S)", 2), ("all(n > 0 for n in S if n != 3)", True),
    ("eps.value * 2 if present(eps) else 0", 0.5), ("present(none)", False), ("-inf < 0 < inf", True),
    ("reduced(S, -1, True, 'full')", (2, 3, 1)), ("ceil_div(7, 2)", 4), ("S == (2, 3, 4)", True),
])
def test_expression_values(text, value):
    got = evaluate.evaluate(expr.parse(text), _Env(S=(2, 3, 4), eps=0.25, none=None))
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, message", [
    ("x.shape == (1, 2)", "attribute '.shape' is rejected"), ("x is None", "'is' is rejected"),
    ("lambda: 1", "lambda"), ("1 +", "expected a value"), ("f(x)(y)", "only named functions"),
    ("a = 1", "unexpected character"), ("(1, 2", "expected"), ("1 2", "unexpected token"),
])
def test_expression_syntax_rejected(text, message):
    with pytest.raises(expr.ExprError, match=message.replace("(", r"\(").replace(".", r"\.")):
        expr.parse(text)


def test_expression_unknown_function_is_not_python():
    with pytest.raises(expr.ExprError, match="unknown function"):
        evaluate.evaluate(expr.parse("__import__('os')"), _Env())
    with pytest.raises(expr.ExprError, match="unknown function"):
        evaluate.evaluate(expr.parse("eval('1')"), _Env())


# -------------------------------------------------------------------------- broken specs are caught

BASE = """
ScaleFwdOp:
  family: elementwise
  status: spec-only
  fuelvk_api: scale
  signature:
    forall: {S: Shape, N: Dim, T: "DType[float32 | float16]"}
    params:
      mode: {type: "'fast' | 'exact'", default: fast}
    inputs:
      x: {dtype: T, shape: "[*S, N]"}
    outputs:
      output: {dtype: T, shape: "[*S, N]"}
    shape_rules:
    - "N % 2 == 0"
  workloads:
  - {S: [2048], N: 4096, dtype_cases: [{T: float32}, {T: float16}], label: llama-8b-hidden}
  - {S: [1], N: 4096, mode: exact, dtype_cases: [{T: float16}], label: llama-8b-decode}
  roofline:
    flops: "prod(S) * N"
"""

BROKEN = {
    "missing field": ([("  roofline:\n    flops: \"prod(S) * N\"\n", "")], "schema",
                      "missing required field 'roofline'"),
    "unknown top-level key": ([("  status: spec-only", "  status: spec-only\n  owner: me")], "schema",
                              "unknown top-level key 'owner'"),
    "bad status": ([("status: spec-only", "status: done")], "schema", "status must be"),
    "family vs file": ([("family: elementwise", "family: norm")], "schema", "must match the file name"),
    "unknown kind": ([("N: Dim,", "N: Dimension,")], "kind", "unknown kind 'Dimension'"),
    "unknown dtype": ([("float32 | float16", "float32 | half")], "kind", "unknown dtype(s) half"),
    "unsolvable index": ([('output: {dtype: T, shape: "[*S, N]"}', 'output: {dtype: T, shape: "[*S, N, M]"}'),
                          ("N: Dim,", "N: Dim, M: Dim,")], "unsolvable", "index M cannot be solved"),
    "two unknown stars": ([("forall: {S: Shape,", "forall: {S: Shape, R: Shape,"),
                           ('x: {dtype: T, shape: "[*S, N]"}', 'x: {dtype: T, shape: "[*S, *R, N]"}'),
                           ('flops: "prod(S) * N"', 'flops: "prod(S) * prod(R) * N"')],
                          "unsolvable", "index S cannot be solved"),
    "bad expression": ([('flops: "prod(S) * N"', 'flops: "prod(S) * * N"')], "expr", "roofline.flops"),
    "python attribute": ([('"N % 2 == 0"', '"x.shape[0] > 0"')], "expr", "'.shape' is rejected"),
    "unknown name": ([('flops: "prod(S) * N"', 'flops: "prod(S) * K"')], "expr", "unknown name 'K'"),
    "unknown function": ([('flops: "prod(S) * N"', 'flops: "numel(S) * N"')], "expr", "unknown function numel()"),
    "literal outside enum": ([('"N % 2 == 0"', '"mode != \'slow\'"')], "expr", "'slow' is not one of fast | exact"),
    "label too long": ([("label: llama-8b-decode", "label: llama-8b-decode-and-much-more")], "label",
                       "1-24 characters"),
    "label characters": ([("label: llama-8b-decode", "label: 'llama 8b/decode'")], "label", "[A-Za-z0-9._-]"),
    "label repeats dtype": ([("label: llama-8b-decode", "label: llama-8b-float16")], "label", "repeats the dtype"),
    "label repeats op": ([("label: llama-8b-decode", "label: llama-scale-decode")], "label", "repeats the op name"),
    "duplicate case id": ([("label: llama-8b-decode", "label: llama-8b-hidden")], "case-id", "duplicate case id"),
    "label shared by different rows": ([("label: llama-8b-decode", "label: llama-8b-hidden")], "label",
                                       "may differ only in dtype"),
    "shape rule": ([("N: 4096, mode", "N: 4095, mode")], "shape-rule", "'N % 2 == 0' does not hold"),
    "missing index": ([("{S: [1], N: 4096, mode", "{S: [1], mode")], "row", "needs index N"),
    "unused index": ([("forall: {S: Shape,", "forall: {S: Shape, M: Dim,"),
                      ("{S: [1], N: 4096,", "{S: [1], N: 4096, M: 3,")], "row", "gives index M, which is not used"),
    "dtype index as row key": ([("{S: [1], N: 4096, mode: exact, dtype_cases: [{T: float16}]",
                                 "{S: [1], N: 4096, mode: exact, T: float16")], "row", "DType indices go in dtype_cases"),
    "bad param value": ([("mode: exact", "mode: slow")], "row", "'slow' is not a 'fast' | 'exact'"),
    "reserved name": ([("      output: {dtype", "      out: {dtype")], "name", "'out' is reserved"),
    "bad shape term": ([('shape: "[*S, N]"}\n    outputs', 'shape: "S"}\n    outputs')], "expr", "not a shape term"),
}


def _validate_text(tmp_path, text):
    path = tmp_path / "elementwise.yaml"
    path.write_text(text)
    return specs.validate([path], check_impl=False, check_ref_api=False)


def test_base_of_broken_specs_is_valid(tmp_path):
    assert _validate_text(tmp_path, BASE) == []


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_validator_catches(tmp_path, case):
    edits, code, message = BROKEN[case]
    text = BASE
    for old, new in edits:
        assert old in text, f"bad test edit {old!r}"
        text = text.replace(old, new, 1)
    problems = _validate_text(tmp_path, text)
    hits = [p for p in problems if p.code == code and message in p.message]
    assert hits, f"expected [{code}] ...{message}... in:\n" + "\n".join(map(str, problems))
    assert all(p.op == "ScaleFwdOp" and p.file.endswith("elementwise.yaml") for p in hits)


def test_implementation_check_reports_mismatches(tmp_path):
    path = tmp_path / "elementwise.yaml"
    path.write_text(BASE.replace("spec-only", "implemented"))
    s = specs.load_specs([path])["ScaleFwdOp"]

    def good(x, mode="fast"):
        pass

    def bad(x, mode="exact", *, out=None):
        pass

    def policy(x, mode="fast", route=None):
        pass

    assert validate_mod.check_implementations([s], types.SimpleNamespace(scale=good)) == []
    assert validate_mod.check_implementations([s], types.SimpleNamespace(scale=policy)) == []
    msgs = [p.message for p in validate_mod.check_implementations([s], types.SimpleNamespace(scale=bad))]
    assert any("parameter 'out', which the spec does not declare" in m for m in msgs)
    assert any("mode has default 'exact', the spec default 'fast'" in m for m in msgs)
    missing = validate_mod.check_implementations([s], types.SimpleNamespace())
    assert missing and "fuelvk.scale is missing" in missing[0].message


def test_implementation_checks_skip_when_fuelvk_does_not_import(tmp_path, monkeypatch):
    path = tmp_path / "elementwise.yaml"
    path.write_text(BASE.replace("spec-only", "implemented"))
    monkeypatch.setitem(sys.modules, "fuelvk", None)   # import fuelvk now raises ImportError
    problems = specs.validate([path], check_ref_api=False)
    assert [(p.code, p.severity) for p in problems] == [("impl", "warning")]
    assert "cannot import fuelvk" in problems[0].message
    assert cli.main(["validate", str(path), "--no-ref-api"]) == 0   # a warning is not an error


# ---------------------------------------------------------------------------------------------- cli

def test_cli(tmp_path, capsys):
    assert cli.main(["validate", "--no-impl", "--no-ref-api"]) == 0
    assert "0 error(s)" in capsys.readouterr().out
    broken = tmp_path / "elementwise.yaml"
    broken.write_text(BASE.replace("N % 2 == 0", "N % 3 == 0"))
    assert cli.main(["validate", str(broken), "--no-impl"]) == 1
    assert "[shape-rule]" in capsys.readouterr().out
    assert cli.main(["roofline", "softmax", "S=[4, 8]", "T=float32"]) == 0
    assert capsys.readouterr().out.strip() == f"flops={5 * 32} bytes={2 * 32 * 4}"
    assert cli.main(["workloads", "sdpa_nope"]) == 1
    assert cli.main(["list"]) == 0 and "RMSNormFwdOp" in capsys.readouterr().out


def test_every_public_op_has_a_spec():
    import fuelvk
    assert specs.missing_specs(fuelvk.OPS) == []
