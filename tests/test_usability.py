"""A new user's first hour: the command line's help and settings, the docs' names, and the typed errors
that common first mistakes get (each names what was wrong and what is accepted)."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import fuelvk as fv
from fuelvk import config
from fuelvk.__main__ import main
from fuelvk.errors import DeviceError, DTypeError, ShapeError, ValueCastError

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


# -- the command line -------------------------------------------------------------------------------
def test_help_lists_every_command_the_docs_use(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    usage = capsys.readouterr().out
    listed = set(re.findall(r"^    (\w+)", usage, re.MULTILINE))
    used = {cmd for path in DOCS for cmd in re.findall(r"python -m fuelvk (\w+)", path.read_text())}
    assert {"info", "settings", "kernels", "specs", "bench", "definitions"} <= listed
    assert used <= listed, f"the docs use commands --help does not list: {used - listed}"


def test_settings_shows_values_bad_values_and_unknown_names(monkeypatch, capsys):
    monkeypatch.setenv("FUELVK_TIMEOUT_S", "5")
    monkeypatch.setenv("FUELVK_MEMORY", "vram")
    monkeypatch.setenv("FUELVK_VALIDATON", "1")   # a typo of FUELVK_VALIDATION
    assert main(["settings"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^FUELVK_TIMEOUT_S +5\.0$", out, re.MULTILINE)
    assert re.search(r"^FUELVK_POOL_KEEP_MB +\(unset: 256\)$", out, re.MULTILINE)
    assert "BAD: FUELVK_MEMORY='vram' is not a memory mode; accepted: auto, mapped, device-local" in out
    assert "FUELVK_VALIDATON           not a fuelvk setting (ignored); did you mean FUELVK_VALIDATION?" in out
    monkeypatch.delenv("FUELVK_MEMORY")
    assert main(["settings"]) == 0


def test_settings_markdown_is_the_readme_table(capsys):
    assert main(["settings", "--markdown"]) == 0
    table = (ROOT / "README.md").read_text().split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end")[0]
    assert capsys.readouterr().out == table


def test_a_closed_pipe_is_not_a_traceback():
    """`python -m fuelvk kernels | head -1`: the reader leaving early ends the command quietly."""
    p = subprocess.Popen([sys.executable, "-m", "fuelvk", "kernels"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    assert p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err, err


def test_specs_roofline_shows_a_whole_call_and_reads_1e_6(capsys):
    assert main(["specs", "roofline", "rms_norm"]) == 1
    err = capsys.readouterr().err
    assert "needs index N, which is not given" in err
    example = err.split("python -m fuelvk specs roofline ")[1].split()
    assert main(["specs", "roofline", *example]) == 0             # the example it shows runs as given
    want = capsys.readouterr().out
    assert main(["specs", "roofline", "rms_norm", "B=[2048]", "N=4096", "T=float32", "eps=1e-6",
                 "some=[weight]"]) == 0                           # YAML alone reads 1e-6 as a string
    assert capsys.readouterr().out == want == "flops=33554432 bytes=67125248\n"


@pytest.mark.parametrize("env, said", [
    ({"FUELVK_MEMORY": "vram"},
     "DeviceError: FUELVK_MEMORY='vram' is not a memory mode; accepted: auto, mapped, device-local"),
    ({"VK_ICD_FILENAMES": "/nonexistent/icd.json"},
     "DeviceError: no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER"),
])
def test_info_says_what_is_wrong_in_one_line(env, said):
    """No driver installed, or a bad setting: one line naming it, exit status 1, no traceback."""
    r = subprocess.run([sys.executable, "-m", "fuelvk", "info"], capture_output=True, text=True,
                       env={**ENV, **env}, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"python -m fuelvk: {said}") and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("raw, want", [("0", "storage buffers (FUELVK_TEXEL_LOADS=0)"),
                                       ("1", "texel-view loads where aligned (FUELVK_TEXEL_LOADS=1)")])
def test_info_shows_the_load_path_a_setting_forces(monkeypatch, raw, want):
    monkeypatch.setenv("FUELVK_TEXEL_LOADS", raw)
    assert want in fv.device_info()["load_path"]["other kernels"]


def test_definitions_only_names_an_unknown_definition(capsys, tmp_path):
    defs = ROOT / "tests" / "data" / "flashinfer" / "definitions"
    name = min(defs.rglob("*.json")).stem
    (tmp_path / "w.jsonl").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["definitions", "run", str(defs), str(tmp_path), "--only", name + "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"--only: no Definition named '{name}x' (did you mean {name}" in err


def test_definitions_run_names_missing_or_swapped_inputs(tmp_path, capsys):
    defs = ROOT / "tests" / "data" / "flashinfer" / "definitions"
    (tmp_path / "w.jsonl").write_text("")
    nope = tmp_path / "nope"
    for argv, said in (([str(nope), str(defs)], f"run: definitions '{nope}' does not exist"),
                       ([str(tmp_path), str(defs)], "the order is DEFINITIONS WORKLOADS")):
        with pytest.raises(SystemExit) as e:
            main(["definitions", "run", *argv])
        assert e.value.code == 2 and said in capsys.readouterr().err


# -- settings -----------------------------------------------------------------------------------------
def test_a_misspelt_variable_warns_once_with_the_setting_it_resembles(monkeypatch):
    monkeypatch.setattr(config, "_warned", set())
    monkeypatch.setenv("FUELVK_VALIDATON", "1")
    monkeypatch.setenv("FUELVK_STRESS_S", "2")        # read by the tests, not by fuelvk: no warning
    with pytest.warns(UserWarning) as w:
        config.check("at context creation")
    assert [str(x.message) for x in w] == [
        "FUELVK_VALIDATON is set but is not a fuelvk setting, so it does nothing; did you mean FUELVK_VALIDATION?"]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.check("at context creation")          # once per name and process


def test_spv_dir_must_hold_the_manifest(monkeypatch, tmp_path):
    monkeypatch.setenv("FUELVK_SPV_DIR", str(tmp_path))
    with pytest.raises(DeviceError, match=f"FUELVK_SPV_DIR='{tmp_path}' is not a directory holding manifest.json"):
        config.get("FUELVK_SPV_DIR")
    (tmp_path / "manifest.json").write_text("{}")
    assert config.get("FUELVK_SPV_DIR") == str(tmp_path)


# -- the docs -----------------------------------------------------------------------------------------
def test_every_fuelvk_name_in_the_docs_exists():
    """`fv.x`, `fuelvk.a.b` in README.md and docs/*.md resolve (attribute or submodule)."""
    import importlib

    import fuelvk.torch  # noqa: F401  (the docs name its functions)
    missing = []
    for path in DOCS:
        for name in set(re.findall(r"\b(?:fv|fuelvk)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", path.read_text())):
            if name == "array_api" or name.endswith(("_py", "md", "json")):   # README: "no fuelvk.array_api"
                continue
            obj, mod = fv, "fuelvk"
            for part in name.split("."):
                if hasattr(obj, part):
                    obj = getattr(obj, part)
                else:
                    try:
                        obj = importlib.import_module(f"{mod}.{part}")
                    except ImportError:
                        missing.append(f"{path.name}: {name}")
                        break
                mod = f"{mod}.{part}"
    assert missing == []


def test_every_public_function_says_what_it_does():
    """help(fv.zeros) and friends: a docstring on every public function of the namespace."""
    import inspect
    bare = [n for n in dir(fv) if not n.startswith("_") and inspect.isfunction(inspect.unwrap(getattr(fv, n)))
            and not (getattr(fv, n).__doc__ or "").strip()]
    assert bare == []


def test_every_repository_path_in_the_docs_exists():
    """Paths the docs name (globs must match something; `<family>` placeholders are not paths)."""
    pat = r"(?<![\w/.])((?:scripts|benches|shaders|tests|src|docs|spv|\.ci)/[\w./*<>-]*[\w*>])"
    found = lambda p, m: any((base / m).exists() or "*" in m and any(base.glob(m)) for base in (ROOT, p.parent))
    missing = [f"{p.name}: {m}" for p in DOCS for m in set(re.findall(pat, p.read_text()))
               if "<" not in m and not found(p, m)]
    assert missing == []


# -- first mistakes: typed errors that say what is accepted ------------------------------------------------
@pytest.mark.parametrize("bad", ["floot32", "float128", 5, object])
def test_unknown_dtype_lists_the_supported_ones(bad):
    with pytest.raises(DTypeError, match="fuelvk supports float32, float16, bfloat16, float64, float8_e4m3fn"):
        fv.zeros(3, dtype=bad)


def test_torch_dtypes_are_taken_by_name():
    torch = pytest.importorskip("torch")
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    for t, want in ((torch.bfloat16, fv.bfloat16), (torch.float16, fv.float16), (torch.int8, fv.int8),
                    (torch.bool, fv.bool), (torch.float8_e4m3fn, fv.float8_e4m3fn)):
        got = fv.asarray(x, dtype=t)
        assert got.dtype == want and np.array_equal(got.numpy(), x.astype(want))
    with pytest.raises(DTypeError, match="unsupported dtype 'float8_e5m2'; fuelvk supports"):
        fv.zeros(3, dtype=torch.float8_e5m2)


@pytest.mark.parametrize("obj, holds", [
    ([None, 1], "NoneType None"), ({"a": 1}, "dict {'a': 1}"), ("abc", "str_ np.str_('abc')"),
    (np.array([1, "a"], dtype=object), "str 'a'"), (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
    ([2 ** 70], "numbers that fit no fuelvk dtype"),
])
def test_asarray_of_non_numbers_names_what_it_holds(obj, holds):
    with pytest.raises(DTypeError) as e:
        fv.asarray(obj)
    msg = str(e.value)
    assert msg.startswith("asarray: numpy makes dtype ") and holds in msg
    assert "accepted: bools, integers, floats and complex numbers" in msg


def test_asarray_of_mixed_lists():
    assert np.array_equal(fv.asarray([1, 2.5, True]).numpy(), np.array([1, 2.5, 1], np.float32))
    with pytest.raises(ValueCastError, match="asarray: the input cannot be stored as float32"):
        fv.asarray([1, "a", 2.0])
    with pytest.raises(ShapeError, match="asarray: cannot make an array of this input"):
        fv.asarray([[1, 2], [3]])


def test_truth_value_of_an_array_is_numpys_rule():
    a = fv.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match=r"truth value of an array with 6 elements is ambiguous .*fuelvk.any"):
        bool(a)
    with pytest.raises(ValueError):
        bool(a[:0])
    assert bool(a[:1, :1]) is True and bool(fv.asarray(0.0)) is False


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_norm_weight_passed_where_eps_goes(op):
    """torch's F.rms_norm(x, shape, weight) order: fuelvk's second argument is eps."""
    x, w = np.ones((2, 4), np.float32), np.ones(4, np.float32)
    with pytest.raises(DTypeError, match=f"{op}: eps must be a real number, got ndarray; weight and bias are keywords"):
        getattr(fv, op)(x, w)
    assert getattr(fv, op)(x, 1e-5, weight=w).shape == (2, 4)


# -- fuelvk.torch -------------------------------------------------------------------------------------
def test_a_cpu_operand_of_a_device_op_names_both_devices():
    torch = pytest.importorskip("torch")
    import fuelvk.torch  # noqa: F401
    d, c = torch.ones(3, 3, device="fuelvk"), torch.ones(3, 3)
    for f in (lambda: d + c, lambda: c * d, lambda: d @ c, lambda: torch.mm(c, d)):
        with pytest.raises(DeviceError, match=r"same device, .* fuelvk:0 and cpu .*move it with .to\('fuelvk'\)"):
            f()


def test_fallback_result_of_a_dtype_the_device_cannot_hold(monkeypatch):
    torch = pytest.importorskip("torch")
    import fuelvk.torch
    from fuelvk.torch import _fallback_log
    monkeypatch.setattr(_fallback_log, "_warned", set())   # the warning is once per op and process
    monkeypatch.setenv("FUELVK_TORCH_FALLBACK", "1")
    fuelvk.torch.reset_fallback_stats()
    d = torch.ones(4, device="fuelvk")
    with pytest.warns(fuelvk.torch.FallbackWarning, match="aten::_fft_r2c has no fuelvk kernel"), \
            pytest.raises(DTypeError, match=r"aten::_fft_r2c ran on the CPU .* torch.complex64 result cannot live on "
                                            r"the fuelvk device: .*accepted: torch.float32"):
        torch.fft.rfft(d)
    assert fuelvk.torch.fallback_stats() == {"aten::_fft_r2c": 1}
    monkeypatch.setenv("FUELVK_TORCH_FALLBACK", "0")
    with pytest.raises(fuelvk.torch.FallbackError, match="aten::_fft_r2c has no fuelvk kernel, and "
                                                         "FUELVK_TORCH_FALLBACK=0 forbids"):
        torch.fft.rfft(d)


def test_no_vulkan_loader_says_what_to_install(tmp_path):
    """The vulkan bindings dlopen libvulkan.so.1 at import (a machine without libvulkan1: their OSError
    asks for an "SDK"); a stand-in package raising that error simulates it."""
    (tmp_path / "vulkan").mkdir()
    (tmp_path / "vulkan" / "__init__.py").write_text("raise OSError('Cannot find Vulkan SDK version.')\n")
    r = subprocess.run([sys.executable, "-c", "import fuelvk"], capture_output=True, text=True, timeout=120,
                       env={**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ENV['PYTHONPATH']}"}, check=False)
    assert r.returncode == 1
    assert "ImportError: fuelvk needs the Vulkan loader library (libvulkan.so.1 on Linux) and a driver: on Debian, " \
           "apt-get install libvulkan1 mesa-vulkan-drivers" in r.stderr


def test_fuelvk_torch_without_torch_says_what_to_install():
    code = "import sys; sys.modules['torch'] = None\nimport fuelvk, numpy\nfuelvk.exp(numpy.ones(2, 'f4'))\n" \
           "import fuelvk.torch"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120,
                       check=False)
    assert r.returncode == 1
    assert r.stderr.strip().endswith("ImportError: fuelvk.torch needs PyTorch (pip install torch); the rest of "
                                     "fuelvk works without it")
