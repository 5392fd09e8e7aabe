"""definitions/report.py: the per-op_type Markdown report of a run's Trace JSONL."""
import json

from fuelvk.definitions import cli
from fuelvk.definitions.report import NOT_RUN, definition_status, markdown, summarize


def _defn(name, op_type):
    return {"name": name, "op_type": op_type, "axes": {}, "inputs": {}, "outputs": {}}


def _trace(name, status, axes, ms=None, ref_ms=None, log=""):
    ev = {"status": status, "log": log}
    if ms is not None:
        ev["performance"] = {"latency_ms": ms, "reference_latency_ms": ref_ms, "speedup_factor": ref_ms / ms}
    return {"definition": name, "workload": {"axes": axes}, "solution": "fuelvk", "evaluation": ev}


DEFS = {d["name"]: d for d in (_defn("gemm_a", "gemm"), _defn("gemm_b", "gemm"), _defn("norm_a", "rmsnorm"),
                              _defn("norm_b", "rmsnorm"), _defn("moe_a", "moe"))}
TRACES = [_trace("gemm_a", "PASSED", {"M": 1}, 0.5, 2.0), _trace("gemm_a", "PASSED", {"M": 64}, 9.0, 3.0),
          _trace("gemm_b", "PASSED", {"M": 8}, 0.25, 1.0),
          _trace("gemm_b", "INCORRECT_NUMERICAL", {"M": 16}, log="out: exceeds atol\n(max abs 3)"),
          _trace("norm_a", "INPUT_UNAVAILABLE", {"batch_size": 2}, log="input x: blob not found"),
          _trace("norm_a", "PASSED", {"batch_size": 3}, 1.0, 1.0),
          _trace("norm_b", "INPUT_UNAVAILABLE", {"batch_size": 2}, log="input x: blob not found")]


def test_definition_status_takes_the_worst_row():
    assert definition_status(["PASSED", "RUNTIME_ERROR", "INCORRECT_NUMERICAL"]) == "INCORRECT_NUMERICAL"
    assert definition_status(["INPUT_UNAVAILABLE", "PASSED"]) == "PASSED"
    assert definition_status(["INPUT_UNAVAILABLE"]) == "INPUT_UNAVAILABLE"
    assert definition_status(["NO_SOLUTION"]) == "NO_SOLUTION"
    assert definition_status([]) == NOT_RUN


def test_summary_counts_and_extremes_per_op_type():
    s = summarize(TRACES, DEFS)
    assert list(s) == ["gemm", "moe", "rmsnorm"]
    assert s["gemm"]["definitions"] == {"PASSED": 1, "INCORRECT_NUMERICAL": 1}
    assert s["gemm"]["rows"] == {"PASSED": 3, "INCORRECT_NUMERICAL": 1}
    # by fuelvk latency among PASSED rows only, across the op_type's Definitions
    assert s["gemm"]["fastest"]["workload"]["axes"] == {"M": 8}
    assert s["gemm"]["slowest"]["workload"]["axes"] == {"M": 64}
    assert s["rmsnorm"]["definitions"] == {"PASSED": 1, "INPUT_UNAVAILABLE": 1}
    assert s["moe"]["definitions"] == {NOT_RUN: 1} and s["moe"]["fastest"] is None


def test_markdown_tables_and_failed_rows(tmp_path):
    text = markdown(TRACES, DEFS)
    assert "| gemm | 2 | 1 | 1 | . | . | . | . | . | . |" in text
    assert "| total | 5 | 2 | 1 | . | . | . | 1 | . | 1 |" in text
    assert "| gemm | gemm_b (M=8): 0.25 vs 1 ms (x4.00) | gemm_a (M=64): 9 vs 3 ms (x0.33) |" in text
    assert "| moe | - | - |" in text
    assert '- gemm_b {"M": 16}: INCORRECT_NUMERICAL: out: exceeds atol (max abs 3)' in text
    assert text.count("INPUT_UNAVAILABLE: input x: blob not found") == 2


def test_cli_report_writes_the_markdown(tmp_path, capsys):
    (tmp_path / "defs").mkdir()
    for d in DEFS.values():
        (tmp_path / "defs" / f"{d['name']}.json").write_text(json.dumps(d))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TRACES) + "\n")
    out = tmp_path / "r.md"
    assert cli.main(["report", str(tmp_path / "defs"), str(tmp_path / "t.jsonl"), "-o", str(out)]) == 0
    assert out.read_text() == capsys.readouterr().out == markdown(TRACES, DEFS)
