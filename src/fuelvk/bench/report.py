"""Outputs of a suite run (the dict suite.run returns): Markdown, JSON, pytest-JUnit XML, roofline PNG.

JUnit follows TileOPs' benchmark results: one <testcase> per case id (classname = the op), one
<property name="<impl>_<metric>"> per value, metrics latency_ms, tflops, bandwidth_tbs and, for the
baselines, ratio = baseline time / fuelvk time; fuelvk adds fuelvk_roof_pct, route and scale.
"""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

BASELINES = ("numpy", "torch")


def _f(v, fmt=".3g"):
    """3 significant digits without exponents for values the table shows (12300, 4.56, 0.00789)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if fmt == ".3g" and abs(v) >= 1000:
        return f"{v:.0f}"
    return format(v, fmt)


def _ref_cell(r):
    if r is None:
        return "-"
    if "error" in r:
        return "n/a"
    return f"{_f(r['median_ms'])} ({_f(r['ratio'], '.2f')}x)"


def header(res):
    rf = res["roofs"]
    peaks = ", ".join(f"{k} {v:.1f}" for k, v in rf["fma_GFLOPs"].items())
    return (f"device: {res['device']['name']} ({res['device']['type']}); roofs: copy {rf['bandwidth_GBps']:.2f} GB/s "
            f"(vkCmdCopyBuffer {rf['copy_cmd_GBps']:.2f}, shader {rf['copy_shader_GBps']:.2f}), FMA GFLOP/s: "
            f"{peaks}; median of {res['settings']['repeats']} (device timestamps), scale-down: "
            f"{res['settings']['scale_rule']}"
            + "".join(f"; {b} not installed" for b in res["settings"].get("baselines_not_installed", [])))


def markdown(res):
    out = [header(res), "",
           ("| op | case | shape (scale) | route | ms (p10-p90) | GB/s | GFLOP/s | % roof (bound) "
            "| numpy ms (ratio) | torch ms (ratio) |"),
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in res["cases"]:
        shape = c["shape"] + (f" (1/{c['scale']:.0f})" if c["scale"] > 1.5 else "")
        if c.get("error"):
            out.append(f"| {c['op']} | {c['case_id']} | {shape} | - | error: {c['error'][:80]} | | | | | |")
            continue
        fv = c["fuelvk"]
        out.append(f"| {c['op']} | {c['case_id']} | {shape} | {c['route'] or '-'} | {_f(fv['median_ms'])} "
                   f"({_f(fv['p10_ms'])}-{_f(fv['p90_ms'])}) | {_f(c['GBps'])} | {_f(c['GFLOPs'])} | "
                   f"{_f(c['pct_of_roof'], '.1f')}%{' !' if c.get('note') else ''} ({c['bound']}) | "
                   f"{_ref_cell(c.get('numpy'))} | {_ref_cell(c.get('torch'))} |")
    notes = [f"- {c['op']} {c['case_id']}: {c['note']}" for c in res["cases"] if c.get("note")]
    return "\n".join(out + ([""] + notes if notes else []))


def table(rows, columns=None):
    """A Markdown table of dicts (columns: their keys by default); floats to 4 significant digits."""
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    cell = lambda v: _f(v, ".4g") if isinstance(v, float) else ("-" if v is None else str(v))
    return "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] +
                     ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows])


def write_json(res, path):
    with open(path, "w") as f:
        json.dump(res, f, indent=1, default=str)


def junit(res):
    """The pytest-JUnit-style XML text."""
    cases = res["cases"]
    suite = ET.Element("testsuite", name="fuelvk.bench", tests=str(len(cases)),
                       errors=str(sum(1 for c in cases if c.get("error"))), failures="0", skipped="0",
                       time=f"{res['wall_s']:.3f}")
    props = ET.SubElement(suite, "properties")
    rf = res["roofs"]
    for k, v in [("device", res["device"]["name"]), ("roof_bandwidth_tbs", rf["bandwidth_GBps"] / 1e3)] + \
            [(f"roof_{d}_tflops", g / 1e3) for d, g in rf["fma_GFLOPs"].items()]:
        ET.SubElement(props, "property", name=k, value=str(v))
    for c in cases:
        tc = ET.SubElement(suite, "testcase", classname=f"fuelvk.bench.{c['op']}", name=c["case_id"],
                           time=f"{(c.get('fuelvk') or {}).get('median_ms', 0) / 1e3:.6f}")
        if c.get("error"):
            ET.SubElement(tc, "error", message=c["error"])
            continue
        p = ET.SubElement(tc, "properties")

        def prop(name, value, p=p):
            ET.SubElement(p, "property", name=name, value=repr(value) if isinstance(value, float) else str(value))

        for impl in ("fuelvk",) + BASELINES:
            r = c.get(impl)
            if not r or "error" in r:
                continue
            ms = r["median_ms"]
            prop(f"{impl}_latency_ms", float(ms))
            prop(f"{impl}_tflops", c["flops"] / ms / 1e9)
            prop(f"{impl}_bandwidth_tbs", c["bytes"] / ms / 1e9)
            if impl != "fuelvk":
                prop(f"{impl}_ratio", float(r["ratio"]))
        prop("fuelvk_roof_pct", float(c["pct_of_roof"]))
        prop("route", c["route"] or "")
        prop("scale", float(c["scale"]))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def write_junit(res, path):
    with open(path, "w") as f:
        f.write(junit(res))


def plot(res, path):
    """Roofline PNG: arithmetic intensity (FLOP/byte) vs achieved GFLOP/s, log-log, one point per case
    with FLOPs > 0, roofs min(peak, AI x bandwidth) from this run's calibration."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError(f"bench --plot needs matplotlib (pip install 'fuelvk[bench]'): {e}") from None
    pts = [c for c in res["cases"] if not c.get("error") and c["flops"] > 0 and c["bytes"] > 0]
    rf = res["roofs"]
    bw = rf["bandwidth_GBps"]
    ais = [c["flops"] / c["bytes"] for c in pts] or [1.0]
    lo, hi = min(ais + [0.01]) / 4, max(ais + [max(rf["fma_GFLOPs"].values()) / bw]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for dt, peak in rf["fma_GFLOPs"].items():
        ax.plot(xs, [min(peak, x * bw) for x in xs], lw=1.5, label=f"roof: {bw:.1f} GB/s, {dt} FMA {peak:.1f} GFLOP/s")
    sh = rf.get("copy_shader_GBps")
    if sh and sh < bw:                    # what a shader's loads + stores reach, when below the copy engine
        ax.plot(xs, [x * sh for x in xs], ls=":", color="gray", label=f"copy shader {sh:.2f} GB/s")
    ops = sorted({c["op"] for c in pts})
    cmap = plt.get_cmap("tab20")
    for i, op in enumerate(ops):
        mine = [c for c in pts if c["op"] == op]
        ax.scatter([c["flops"] / c["bytes"] for c in mine], [c["GFLOPs"] for c in mine], s=28,
                   color=cmap(i % 20), label=op, zorder=3)
    skipped = len(res["cases"]) - len(pts)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"fuelvk roofline on {res['device']['name']}"
                 + (f" ({skipped} case(s) with 0 FLOPs or errors not shown)" if skipped else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
