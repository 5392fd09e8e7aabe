"""fuelvk.config: every FUELVK_* setting in one table, read when asked, bad values named."""
import ast
import pathlib
import re

import pytest

from fuelvk import config, runtime
from fuelvk.errors import DeviceError
from fuelvk.runtime.device import LIMIT_PROFILES

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fuelvk"


def test_unset_and_empty_give_the_default(monkeypatch):
    for name, s in config.SETTINGS.items():
        monkeypatch.delenv(name, raising=False)
        assert config.get(name) == s.default and not config.is_set(name)
        monkeypatch.setenv(name, "  ")
        assert config.get(name) == s.default and not config.is_set(name)


@pytest.mark.parametrize("name, raw, want", [
    ("FUELVK_VALIDATION", "1", True), ("FUELVK_VALIDATION", "0", False), ("FUELVK_VALIDATION", "Yes", True),
    ("FUELVK_PIPELINE_CACHE", "off", False), ("FUELVK_TORCH_FALLBACK", "0", False),
    ("FUELVK_MEMORY", "device-local", "device-local"), ("FUELVK_MEMORY", " Mapped ", "mapped"),
    ("FUELVK_LIMITS", "small", "small"), ("FUELVK_ATOMICS", "cas", "cas"),
    ("FUELVK_TIMEOUT_S", "0.5", 0.5), ("FUELVK_POOL_KEEP_MB", "64", 64.0),
    ("FUELVK_LOOP_BUDGET", "1000", 1000), ("FUELVK_LOOP_BUDGET", "none", None),
    ("FUELVK_DEVICE", "llvmpipe", "llvmpipe"), ("FUELVK_MATMUL_ROUTE", "tiled", "tiled"),
])
def test_values_parse(monkeypatch, name, raw, want):
    monkeypatch.setenv(name, raw)
    assert config.get(name) == want and config.is_set(name)


@pytest.mark.parametrize("name, raw, accepted", [
    ("FUELVK_VALIDATION", "maybe", "1, true, yes, on or 0, false, no, off"),
    ("FUELVK_MEMORY", "vram", "auto, mapped, device-local"),
    ("FUELVK_LIMITS", "tiny", "small, device, none"),
    ("FUELVK_ATOMICS", "fast", "cas, native"),
    ("FUELVK_TIMEOUT_S", "-1", "a number > 0"), ("FUELVK_TIMEOUT_S", "soon", "a number > 0"),
    ("FUELVK_POOL_KEEP_MB", "inf", "a number > 0"),
    ("FUELVK_LOOP_BUDGET", "0", "a positive integer or 'none'"),
    ("FUELVK_LOOP_BUDGET", "1.5", "a positive integer or 'none'"),
])
def test_bad_values_name_the_variable_and_what_it_accepts(monkeypatch, name, raw, accepted):
    monkeypatch.setenv(name, raw)
    with pytest.raises(DeviceError) as e:
        config.get(name)
    assert str(e.value).startswith(f"{name}={raw!r} is not ") and str(e.value).endswith(f"accepted: {accepted}")


def test_read_per_call(monkeypatch):
    """get() reads the environment each time (nothing is cached in config itself)."""
    monkeypatch.setenv("FUELVK_MATMUL_ROUTE", "tiled")
    assert config.get("FUELVK_MATMUL_ROUTE") == "tiled"
    monkeypatch.setenv("FUELVK_MATMUL_ROUTE", "small")
    assert config.get("FUELVK_MATMUL_ROUTE") == "small"


def test_limit_profiles_match_the_device_table():
    assert set(config.SETTINGS["FUELVK_LIMITS"].kind.values) == set(LIMIT_PROFILES) | {"device", "none"}


def _sources():
    return [p for p in SRC.rglob("*.py") if p != SRC / "config.py"]


def test_every_variable_is_a_setting_and_read_only_through_config():
    """No module reads the environment itself, every FUELVK_ name the package uses is a setting, and
    every setting is used somewhere."""
    used = set()
    for path in _sources():
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno} reads the environment; use fuelvk.config")
        used |= set(re.findall(r"\bFUELVK_[A-Z0-9_]*[A-Z0-9]\b", text))
    used -= {"FUELVK_KEYS"}   # specs/model.py: the spec format's key set, not a variable
    assert used - set(config.SETTINGS) == set(), "FUELVK_ names that are not settings"
    assert set(config.SETTINGS) - used == set(), "settings no module reads"


def test_readme_table_is_generated_from_config():
    text = (ROOT / "README.md").read_text()
    table = text.split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert table == config.markdown_table(), "README.md settings table is stale: python -m fuelvk.config"


@pytest.mark.parametrize("name, raw", [("FUELVK_TIMEOUT_S", "soon"), ("FUELVK_MEMORY", "vram"),
                                       ("FUELVK_PIPELINE_CACHE", "maybe")])
def test_a_bad_context_setting_fails_before_the_device_is_made(monkeypatch, name, raw):
    """Settings read at context creation are all checked first: no half-built context to give back."""
    made = []
    monkeypatch.setattr(runtime, "Device", lambda *a: made.append(a))
    monkeypatch.setenv(name, raw)
    with pytest.raises(DeviceError, match=f"{name}={raw!r}"):
        runtime.Context()
    assert made == []
