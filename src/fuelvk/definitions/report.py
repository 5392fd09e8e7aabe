"""Per-op_type report of a `definitions run` Trace JSONL: Definitions x status, rows x status, the
slowest and the fastest PASSED workload of each op_type (fuelvk ms vs the torch CPU reference ms) and
every row that did not pass with its log.  Markdown, for a progress note.

    python -m fuelvk definitions report DEFINITIONS TRACES.jsonl [-o report.md]

A Definition's status is its worst row's: a failure (INCORRECT_*, RUNTIME_ERROR) if any row failed,
else PASSED if any row passed, else the rows' common status (INPUT_UNAVAILABLE, NO_SOLUTION);
NOT_RUN when the traces hold no row of it (filtered out or never given a workload).
"""
from __future__ import annotations

import json
from pathlib import Path

from .run import INPUT_UNAVAILABLE, NO_SOLUTION, STATUSES, load_definitions

NOT_RUN = "NOT_RUN"
FAILURES = tuple(s for s in STATUSES if s.startswith("INCORRECT_") or s == "RUNTIME_ERROR")


def load_traces(path):
    """[trace dict] from a Trace JSONL file (blank lines ignored)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def definition_status(statuses):
    """One status for a Definition from its rows' statuses (module docstring's rule)."""
    if not statuses:
        return NOT_RUN
    failed = [s for s in statuses if s not in ("PASSED", INPUT_UNAVAILABLE, NO_SOLUTION)]
    if failed:
        return min(failed, key=lambda s: STATUSES.index(s) if s in STATUSES else len(STATUSES))
    for s in ("PASSED", NO_SOLUTION, INPUT_UNAVAILABLE):
        if s in statuses:
            return s
    raise AssertionError(statuses)


def summarize(traces, defs):
    """{op_type: {"definitions": {status: n}, "rows": {status: n}, "fastest": trace, "slowest": trace}};
    fastest / slowest by fuelvk latency among PASSED rows (None when none passed)."""
    rows_of = {}
    for t in traces:
        rows_of.setdefault(t["definition"], []).append(t)
    out = {}
    for name, d in sorted(defs.items(), key=lambda kv: (kv[1]["op_type"], kv[0])):
        s = out.setdefault(d["op_type"], {"definitions": {}, "rows": {}, "fastest": None, "slowest": None})
        rows = rows_of.get(name, [])
        status = definition_status([t["evaluation"]["status"] for t in rows])
        s["definitions"][status] = s["definitions"].get(status, 0) + 1
        for t in rows:
            st = t["evaluation"]["status"]
            s["rows"][st] = s["rows"].get(st, 0) + 1
            perf = t["evaluation"].get("performance")
            if st != "PASSED" or not perf:
                continue
            ms = perf["latency_ms"]
            if s["fastest"] is None or ms < s["fastest"]["evaluation"]["performance"]["latency_ms"]:
                s["fastest"] = t
            if s["slowest"] is None or ms > s["slowest"]["evaluation"]["performance"]["latency_ms"]:
                s["slowest"] = t
    return out


def _cell(t):
    if t is None:
        return "-"
    p = t["evaluation"]["performance"]
    axes = ", ".join(f"{k}={v}" for k, v in t["workload"]["axes"].items())
    return (f"{t['definition']} ({axes}): {p['latency_ms']:.3g} vs {p['reference_latency_ms']:.3g} ms "
            f"(x{p['speedup_factor']:.2f})")


def markdown(traces, defs):
    """The report as Markdown text (three tables and the list of rows that did not pass)."""
    summary = summarize(traces, defs)
    cols = list(STATUSES) + [NOT_RUN]
    seen = {k for s in summary.values() for part in ("definitions", "rows") for k in s[part]}
    cols += sorted(seen - set(cols))            # statuses not foreseen still get a column
    lines = ["Definitions x status (a Definition takes its worst row's status):", "",
             "| op_type | Definitions | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    total = dict.fromkeys(cols, 0)
    for op, s in summary.items():
        for c in cols:
            total[c] += s["definitions"].get(c, 0)
        lines.append(f"| {op} | {sum(s['definitions'].values())} | "
                     + " | ".join(str(s["definitions"].get(c, 0) or ".") for c in cols) + " |")
    lines.append(f"| total | {sum(total.values())} | " + " | ".join(str(total[c] or ".") for c in cols) + " |")
    row_cols = [c for c in cols if c != NOT_RUN]
    lines += ["", "Workload rows x status:", "", "| op_type | rows | " + " | ".join(row_cols) + " |",
              "|---" * (len(row_cols) + 2) + "|"]
    for op, s in summary.items():
        lines.append(f"| {op} | {sum(s['rows'].values())} | "
                     + " | ".join(str(s["rows"].get(c, 0) or ".") for c in row_cols) + " |")
    lines += ["", ("Fastest and slowest PASSED workload per op_type (fuelvk ms vs torch CPU reference ms, "
                   "median of the timed runs; x = reference / fuelvk):"), "",
              "| op_type | fastest | slowest |", "|---|---|---|"]
    for op, s in summary.items():
        lines.append(f"| {op} | {_cell(s['fastest'])} | {_cell(s['slowest'])} |")
    bad = [t for t in traces if t["evaluation"]["status"] != "PASSED"]
    lines += ["", f"Rows that did not pass ({len(bad)}):", ""]
    for t in bad:
        axes = json.dumps(t["workload"]["axes"])
        log = " ".join(t["evaluation"].get("log", "").split())[:300]
        lines.append(f"- {t['definition']} {axes}: {t['evaluation']['status']}: {log}")
    return "\n".join(lines) + "\n"


def report(definitions, traces, out=None):
    """Markdown report of the Trace JSONL `traces` over the Definitions at `definitions` (file or
    folder); written to `out` when given; returned."""
    text = markdown(load_traces(traces), load_definitions(definitions))
    if out:
        Path(out).write_text(text)
    return text
