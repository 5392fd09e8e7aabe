"""fuelvk.bench: the calibration kernels compute what they claim, workload rows scale down within
the budget keeping the spec's roofline, and one small suite run's outputs (Markdown, JSON,
JUnit XML, roofline PNG) parse back and agree with each other and with the spec's formulas."""
import contextlib
import io
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime, specs
from fuelvk.bench import cases as bench_cases
from fuelvk.bench import report, suite
from fuelvk.bench.roofs import attainable, peak_for
from fuelvk.kernels import calibrate as K
from fuelvk.kernels import kernel

# Three tiny cases: memory-bound (add, rms_norm) and compute-bound (matmul, route reported).
OPS, FILTER = "add,rms_norm,matmul", r"resid-decode-float32|norm llama-8b-decode-float32|square-1k-float32"
MAX_MB, MAX_GFLOP = 0.25, 0.005


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = suite.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    paths = {k: d / f"out.{k}" for k in ("json", "xml", "png")}
    ctx = runtime.get()
    if ctx.device.messenger:
        ctx.device.messenger.take()
    code, out, err = _main(["--ops", OPS, "--filter", FILTER, "--repeats", "3", "--warmup", "1",
                            "--max-mb", str(MAX_MB), "--max-gflop", str(MAX_GFLOP), "--json", str(paths["json"]),
                            "--junit", str(paths["xml"]), "--plot", str(paths["png"])])
    fv.synchronize()
    msgs = ctx.device.messenger.take() if ctx.device.messenger else []
    assert not msgs, "Vulkan validation messages during the bench run:\n" + "\n".join(msgs)
    return {"code": code, "stdout": out, "stderr": err, "json": json.loads(paths["json"].read_text()),
            **{f"{k}_path": p for k, p in paths.items()}}


# ---- calibration kernels -------------------------------------------------------------------------

@pytest.mark.parametrize("tag", ["f32", "f16"])
def test_calibrate_fma_chains(ctx, tag):
    """Each invocation's 16 chains of s = fma(s, m, q), 2 * iters steps, summed. Oracle in float64,
    rounded to the arithmetic dtype after each step: once (fused) or after the product and the sum
    (GLSL lets fma be split; lavapipe splits f16 fma), whichever is nearer."""
    if tag == "f16" and "float16" not in ctx.device.features:
        pytest.skip(f"{ctx.device.name} has no shaderFloat16")
    n, iters = 512, 100
    out = fv.zeros((4 * n,), np.uint32)
    ctx.launch(kernel("calibrate", tag), ctx.groups(n // K.CALIB_WG), dst=out, src=out, n=n, iters=iters,
               MODE=K.MODE_FMA)
    got = out.numpy().reshape(n, 4)
    ft = np.float32 if tag == "f32" else np.float16
    rnd = lambda v: v.astype(ft).astype(np.float64)
    m, q = 0.9990234375, 0.0009765625                  # exact in f16 and f32
    x = rnd((np.arange(n) & 1023).astype(np.float32) * np.float32(1e-4))
    wants = []
    for step in (lambda s: rnd(s * m + q), lambda s: rnd(rnd(s * m) + q)):
        want = np.zeros(n)
        for j in range(16):
            s = rnd(x + j)
            for _ in range(2 * iters):
                s = step(s)
            want += s
        wants.append(want)
    assert np.all(got[:, 1:] == 0)
    # the chains moved: 200 steps take the sum from ~120 to ~101-103, far outside the tolerance
    assert all(np.all(np.abs(w - (16 * x + 120)) > 0.1 * w) for w in wants)
    v = got[:, 0].view(np.float32).astype(np.float64)
    want = min(wants, key=lambda w: np.max(np.abs(v - w)))
    np.testing.assert_allclose(v, want, rtol=1e-5 if tag == "f32" else 1e-3)


def test_calibrate_copy_is_exact(ctx):
    src = np.random.default_rng(0).integers(0, 2**32, 4 * 1000, dtype=np.uint32)
    a, b = fv.asarray(src), fv.zeros(src.shape, np.uint32)
    ctx.launch(kernel("calibrate", "f32"), ctx.groups(-(-1000 // K.CALIB_WG)), dst=b, src=a, n=1000, iters=0,
               MODE=K.MODE_COPY)
    np.testing.assert_array_equal(b.numpy(), src)


# ---- case selection and scale-down (no device work) -----------------------------------------------

def test_scale_down_keeps_spec_roofline():
    (case,) = bench_cases.select(["add"], "resid-prefill-float32$")
    full = bench_cases.prepare(bench_cases.select(["add"], "resid-prefill-float32$")[0], None, None)
    assert full.call["inputs"]["a"][0] == (2048, 4096) and full.scale == 1
    bench_cases.prepare(case, 1 << 20, None)
    shape = case.call["inputs"]["a"][0]
    assert case.bytes <= 1 << 20 and case.call["inputs"]["b"][0] == shape     # broadcast dims stay equal
    assert all(f % s == 0 and (f // s) & (f // s - 1) == 0 for f, s in zip((2048, 4096), shape))   # halvings
    assert case.scale == full.bytes / case.bytes
    assert (case.flops, case.bytes) == specs.roofline_of_call("add", case.call["inputs"])
    assert (case.flops, case.bytes) == (math.prod(shape), 3 * 4 * math.prod(shape))


def test_every_workload_case_scales_into_the_cpu_budget():
    """Every implemented op's every case instantiates scaled (its spec's rules hold) and fits."""
    picked = bench_cases.select()
    assert {c.op for c in picked} >= {"add", "matmul", "take", "quant.dequantize", "setitem"}
    for c in picked:
        bench_cases.prepare(c, bench_cases.CPU_MAX_BYTES, bench_cases.CPU_MAX_FLOPS)
        inst = bench_cases.instantiate(c.spec, c.bindings, c.some)
        assert bench_cases._size(inst, c.bytes) <= bench_cases.CPU_MAX_BYTES and c.flops <= bench_cases.CPU_MAX_FLOPS, (c.op, c.case_id)
        assert inst.roofline() == (c.flops, c.bytes) and c.scale >= 1


def test_scale_down_halves_mirroring_params():
    (c,) = bench_cases.select(["quant.dequantize"], "q4k$")
    bench_cases.prepare(c, bench_cases.CPU_MAX_BYTES, None)
    rows = c.call["inputs"]["blocks"][0][0]
    assert c.call["params"]["shape"] == (rows, 4096) or list(c.call["params"]["shape"]) == [rows, 4096]
    assert rows < 14336 and 14336 % rows == 0


def test_quick_selection_fits_cpu_budget():
    picked = bench_cases.select(quick=True)
    ops = {c.op for c in picked}
    assert {"add", "rms_norm", "matmul", "softmax"} <= ops
    for c in picked:
        bench_cases.prepare(c, bench_cases.CPU_MAX_BYTES, bench_cases.CPU_MAX_FLOPS)
        assert c.bytes <= bench_cases.CPU_MAX_BYTES and c.flops <= bench_cases.CPU_MAX_FLOPS, (c.case_id, c.bytes, c.flops)


@pytest.mark.parametrize("argv, message", [
    (["--ops", "no_such_op"], "names no op spec"),
    (["--ops", "add", "--filter", "no-such-case"], "no workload case matches"),
    (["--filter", "("], "not a regular expression"),
    (["--quick", "--ops", "add"], "--quick picks its own cases"),
    (["--ops", "add", "--repeats", "0"], "repeats must be >= 1"),
    (["--ops", "add", "--baselines", "jax"], "unknown baseline"),
    (["--ops", "add", "--max-mb", "-1"], "--max-mb must be >= 0"),
    (["--ops", "add", "--plot", "roof.jpg"], "ending in .png"),
    (["--ops", "add", "--repeats", "x"], "invalid int value"),
])
def test_bad_arguments(argv, message, capsys):
    """Usage errors exit with status 2 before any timing, saying what was wrong."""
    with pytest.raises(SystemExit) as e:
        suite.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_plot_without_matplotlib(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib -> ImportError
    with pytest.raises(SystemExit):
        suite.main(["--ops", "add", "--plot", "roof.png"])
    assert "--plot needs matplotlib" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="needs matplotlib"):
        report.plot({"cases": [], "roofs": {}}, "roof.png")


# ---- one suite run, its outputs parsed back -------------------------------------------------------

def test_run_json(run):
    res = run["json"]
    assert run["code"] == 0
    roofs = res["roofs"]
    assert roofs["copy_cmd_GBps"] > 0 and roofs["copy_shader_GBps"] > 0
    assert roofs["bandwidth_GBps"] == max(roofs["copy_cmd_GBps"], roofs["copy_shader_GBps"])
    assert roofs["fma_GFLOPs"]["float32"] > 0 and all(v > 0 for v in roofs["fma_GFLOPs"].values())
    ids = [(c["op"], c["case_id"]) for c in res["cases"]]
    assert ids == [("add", "llama-8b-resid-decode-float32"), ("rms_norm", "llama-8b-decode-float32"),
                   ("matmul", "square-1k-float32-float32")]
    for c in res["cases"]:
        assert c["error"] is None
        ms = c["fuelvk"]["median_ms"]
        assert 0 < c["fuelvk"]["p10_ms"] <= ms <= c["fuelvk"]["p90_ms"] and c["fuelvk"]["repeats"] == 3
        assert c["bytes"] <= MAX_MB * 2**20 and c["flops"] <= MAX_GFLOP * 1e9
        assert math.isclose(c["GBps"], c["bytes"] / ms / 1e6) and math.isclose(c["GFLOPs"], c["flops"] / ms / 1e6)
        # % of roof from the numbers alone: speed of light = max(bytes / bandwidth, flops / peak)
        peak = roofs["fma_GFLOPs"]["float32"]
        t_mem, t_fma = c["bytes"] / roofs["bandwidth_GBps"] / 1e6, c["flops"] / peak / 1e6
        assert math.isclose(c["pct_of_roof"], 100 * max(t_mem, t_fma) / ms)
        assert c["bound"] == ("memory" if t_mem >= t_fma else "compute")
        for impl in ("numpy", "torch"):
            r = c[impl]
            assert r is not None and "error" not in r, (c["case_id"], impl, r)
            assert r["median_ms"] > 0 and math.isclose(r["ratio"], r["median_ms"] / ms)
    add, rms, mm = res["cases"]
    assert add["scale"] == 1 and add["shape"] == "a=1x4096 b=1x4096" and add["bound"] == "memory"
    assert (add["flops"], add["bytes"]) == (4096, 3 * 4 * 4096)
    assert (rms["flops"], rms["bytes"]) == specs.eval_roofline("rms_norm", B=[1], N=4096, T="float32",
                                                              some=["weight"], eps=1e-6)
    assert mm["scale"] > 1 and mm["full_shape"] == "a=1024x1024 b=1024x1024"
    n = int(mm["shape"].split("x")[-1])
    assert mm["shape"] == f"a={n}x{n} b={n}x{n}" and mm["flops"] == 2 * n ** 3 and mm["bound"] == "compute"
    assert mm["route"] in fv.device_info()["routes"]["matmul"]
    assert mm["route"] == fv.ops.matmul.matmul_route(np.zeros((n, n), np.float32), np.zeros((n, n), np.float32))
    assert add["route"] is None


def test_run_junit(run):
    root = ET.parse(run["xml_path"]).getroot()
    (ts,) = root.iter("testsuite")
    assert ts.get("tests") == "3" and ts.get("errors") == "0"
    by_case = {c["case_id"]: c for c in run["json"]["cases"]}
    tcs = list(ts.iter("testcase"))
    assert [t.get("name") for t in tcs] == list(by_case)
    for t in tcs:
        c = by_case[t.get("name")]
        assert t.get("classname") == f"fuelvk.bench.{c['op']}"
        props = {p.get("name"): p.get("value") for p in t.find("properties")}
        for impl in ("fuelvk", "numpy", "torch"):
            ms = c[impl]["median_ms"]
            assert float(props[f"{impl}_latency_ms"]) == ms
            assert math.isclose(float(props[f"{impl}_tflops"]), c["flops"] / ms / 1e9)
            assert math.isclose(float(props[f"{impl}_bandwidth_tbs"]), c["bytes"] / ms / 1e9)
        for impl in ("numpy", "torch"):
            assert float(props[f"{impl}_ratio"]) == c[impl]["ratio"]
        assert "fuelvk_ratio" not in props
        assert float(props["fuelvk_roof_pct"]) == c["pct_of_roof"]


def test_run_markdown(run):
    lines = run["stdout"].splitlines()
    assert lines[0].startswith("device: ") and "roofs: copy" in lines[0]
    table = [ln for ln in lines if ln.startswith("|")]
    head = [h.strip() for h in table[0].strip("|").split("|")]
    assert head[:5] == ["op", "case", "shape (scale)", "route", "ms (p10-p90)"] and "% roof (bound)" in head
    rows = [dict(zip(head, (v.strip() for v in ln.strip("|").split("|")))) for ln in table[2:]]
    assert len(rows) == len(run["json"]["cases"])
    for r, c in zip(rows, run["json"]["cases"]):
        assert (r["op"], r["case"], r["route"]) == (c["op"], c["case_id"], c["route"] or "-")
        assert math.isclose(float(r["ms (p10-p90)"].split()[0]), c["fuelvk"]["median_ms"], rel_tol=5e-3)
        pct, bound = r["% roof (bound)"].replace(" !", "").split()
        assert float(pct.rstrip("%")) == round(c["pct_of_roof"], 1) and bound == f"({c['bound']})"
        assert r["numpy ms (ratio)"].endswith(f"({c['numpy']['ratio']:.2f}x)")
    assert "3/4" in run["stderr"] and "done" in run["stderr"]          # the progress bar


def test_run_plot(run):
    data = run["png_path"].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_attainable_and_peak():
    roofs = {"bandwidth_GBps": 10.0, "fma_GFLOPs": {"float32": 100.0, "float16": 200.0}}
    assert attainable(roofs, 1e6, 1e6, 100.0) == (0.1, "memory")      # 1 MB at 10 GB/s = 0.1 ms
    assert attainable(roofs, 1e8, 1e6, 100.0) == (1.0, "compute")     # 0.1 GFLOP at 100 GFLOP/s = 1 ms
    assert peak_for(roofs, ["float16", "float16"]) == ("float16", 200.0)
    assert peak_for(roofs, ["float16", "bfloat16"]) == ("float32", 100.0)
    assert peak_for(roofs, ["float32", "int64"]) == ("float32", 100.0)


def test_higher_roofs_takes_each_roofs_best_calibration():
    a = {"copy_cmd_GBps": 20.0, "copy_shader_GBps": 3.0, "bandwidth_GBps": 20.0, "copy_bytes": 1 << 20,
         "fma_GFLOPs": {"float32": 47.0, "float16": 11.0}}
    b = {"copy_cmd_GBps": 18.0, "copy_shader_GBps": 4.0, "bandwidth_GBps": 18.0, "copy_bytes": 2 << 20,
         "fma_GFLOPs": {"float32": 90.0, "float16": 10.0}}
    assert suite.higher_roofs(a, b) == {"copy_cmd_GBps": 20.0, "copy_shader_GBps": 4.0, "bandwidth_GBps": 20.0,
                                        "copy_bytes": 2 << 20, "fma_GFLOPs": {"float32": 90.0, "float16": 11.0}}


def test_list_prints_scaled_cases(capsys):
    assert suite.main(["--list", "--ops", "add", "--filter", "resid-prefill-float32", "--max-mb", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    op, case_id, a, b, scale = line.split()
    assert (op, case_id, scale) == ("add", "llama-8b-resid-prefill-float32", "(1/128)")
    assert a == "a=256x256" and b == "b=256x256"          # 2048x4096 -> 256x256: 96 MiB -> 0.75 MiB


def test_quick_set_runs_without_an_error_row():
    """`python -m fuelvk bench --quick` (the README's main job) runs every case of its set: a case whose
    call fails (e.g. an op refusing its spec's argument names) makes the command fail."""
    r = subprocess.run([sys.executable, "-m", "fuelvk", "bench", "--quick", "--no-progress", "--repeats", "1",
                        "--warmup", "0"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "error" not in r.stdout.lower(), r.stdout[-3000:]
