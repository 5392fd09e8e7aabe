"""fuelvk's settings: every FUELVK_* environment variable, in one table.

`get(name)` reads the variable when called and parses it; a value the setting does not accept is a
DeviceError naming the variable and what it accepts (unset or empty: the default). Each row says
when fuelvk reads it: per call (the op or cache reads it each time), or once where the value must
stay fixed for the object it configures (the device and its memory pool are built once per context,
so changing FUELVK_DEVICE afterwards cannot move them). README.md's settings table is generated
from this one (`python -m fuelvk settings --markdown`; tests/test_config.py checks they agree), and
`python -m fuelvk settings` shows every value now.
"""
import difflib
import os
import warnings
from collections import namedtuple

from .errors import DeviceError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Flag:
    what, accepts = "a switch", "1, true, yes, on or 0, false, no, off"

    def parse(self, raw):
        v = raw.lower()
        if v in _TRUE or v in _FALSE:
            return v in _TRUE
        raise ValueError


class Choice:
    def __init__(self, what, *values):
        self.what, self.values = what, values
        self.accepts = ", ".join(values)

    def parse(self, raw):
        v = raw.lower()
        if v not in self.values:
            raise ValueError
        return v


class Number:
    """A float > 0 (seconds, MiB)."""
    accepts = "a number > 0"

    def __init__(self, what):
        self.what = what

    def parse(self, raw):
        v = float(raw)
        if not v > 0 or v == float("inf"):
            raise ValueError
        return v


class LoopBudget:
    """A positive integer, or 'none' (no budget: loops are never split; is_set() tells it from unset)."""
    what, accepts = "a loop budget", "a positive integer or 'none'"

    def parse(self, raw):
        if raw.lower() == "none":
            return None
        v = int(raw)
        if v < 1:
            raise ValueError
        return v


class Text:
    """Any non-empty string (a path, a device selector, a route its op checks)."""

    what = "a value"

    def __init__(self, accepts):
        self.accepts = accepts

    def parse(self, raw):
        return raw


class Directory:
    """An existing directory, holding `holds` when given (a path that is not one is named at once,
    not as a FileNotFoundError from deep inside whatever reads it)."""

    def __init__(self, accepts, holds=None):
        self.what, self.accepts, self.holds = "a directory" + (f" holding {holds}" if holds else ""), accepts, holds

    def parse(self, raw):
        if not os.path.isdir(raw) or self.holds and not os.path.isfile(os.path.join(raw, self.holds)):
            raise ValueError
        return raw


class DeviceList:
    """Comma-separated device selectors, each as FUELVK_DEVICE takes it (one per device)."""
    what, accepts = "a device list", "comma-separated device indices or name substrings"

    def parse(self, raw):
        items = tuple(s.strip() for s in raw.split(","))
        if not all(items):
            raise ValueError
        return items


Setting = namedtuple("Setting", "name kind default read doc")

SETTINGS = {s.name: s for s in (
    Setting("FUELVK_DEVICE", Text("a device index or a name substring"), None, "at context creation",
            "the device (default: discrete > integrated > virtual > CPU)"),
    Setting("FUELVK_DEVICES", DeviceList(), None, "per call (each device's context: once)",
            "the devices `fuelvk.devices()` lists, the first the default one (then it replaces "
            "`FUELVK_DEVICE`); a device named twice is a second logical device on it (`0,0`; see Devices)"),
    Setting("FUELVK_VALIDATION", Flag(), False, "at context creation",
            "enable VK_LAYER_KHRONOS_validation and collect its messages (the tests do)"),
    Setting("FUELVK_LIMITS", Choice("a limits profile", "small", "device", "none"), None, "at context creation",
            "run within a smaller GPU's limits (`small`; `device`/`none`: the device's own); "
            "`python -m fuelvk info` shows the profile"),
    Setting("FUELVK_NO_PUSH_DESCRIPTOR", Flag(), False, "at context creation",
            "bind descriptor sets instead of push descriptors (see Devices)"),
    Setting("FUELVK_MEMORY", Choice("a memory mode", "auto", "mapped", "device-local"), "auto", "at context creation",
            "`device-local`: arrays unmapped, staging copies; `mapped`: arrays in host-visible memory "
            "(see Devices)"),
    Setting("FUELVK_POOL_KEEP_MB", Number("a size in MiB"), 256.0, "at context creation",
            "idle memory (MiB) the pool may keep cached before giving chunks back"),
    Setting("FUELVK_TIMEOUT_S", Number("a time in seconds"), 600.0, "at context creation",
            "how long to wait for a batch before raising `DeviceError`"),
    Setting("FUELVK_LOOP_BUDGET", LoopBudget(), None, "at context creation",
            "loop iterations one invocation may run before work is split (`none`: no split); "
            "default: probed (below)"),
    Setting("FUELVK_TEXEL_LOADS", Flag(), None, "per call",
            "read memory-bound kernels' inputs through texel views (`1`) or storage buffers (`0`); "
            "default: probed, the faster on this device (runtime/loadpath.py)"),
    Setting("FUELVK_HALF_NATIVE", Flag(), None, "at context creation",
            "float16 kernels convert with the device's f16 instructions (`1`) or integer arithmetic (`0`), "
            "same bits; default: probed per direction, native where exact and not slower (runtime/halfconv.py)"),
    Setting("FUELVK_SPV_DIR", Directory("a directory holding manifest.json", "manifest.json"), None, "at context creation",
            "where the compiled shaders are (default: the spv/ next to the package; "
            "`python build_shaders.py` writes it)"),
    Setting("FUELVK_PIPELINE_CACHE", Flag(), True, "at context creation",
            "read/write the on-disk VkPipelineCache and probed loop cap (`0`: probe in every process)"),
    Setting("FUELVK_CACHE_DIR", Text("a directory"), None, "at context creation",
            "where the disk caches live (default `~/.cache/fuelvk`)"),
    Setting("FUELVK_MATMUL_ROUTE", Text("a route of fuelvk.matmul_route"), None, "per call",
            "force matmul's route (tests, benchmarks); `route=` wins"),
    Setting("FUELVK_ATTENTION_ROUTE", Text("auto, single, tiled, decode"), None, "per call",
            "force attention's route (tests, benchmarks); `route=` wins"),
    Setting("FUELVK_QMATMUL_ROUTE", Text("matvec, dequant, tiled"), None, "per call",
            "force qmatmul's route (tests, benchmarks); `route=` wins"),
    Setting("FUELVK_ATOMICS", Choice("an atomics mode", "cas", "native"), None, "at import of fuelvk",
            "scatter_add / index_add: force compare-and-swap or native float atomics (default: native "
            "where the device has them); frozen as `fuelvk.ops.indexing.ATOMICS`, which tests set"),
    Setting("FUELVK_TORCH_CACHE", Flag(), True, "at import of fuelvk.torch (one weight cache)",
            "`fuelvk.torch`: keep parameters uploaded (`0`: re-upload on every call)"),
    Setting("FUELVK_TORCH_FALLBACK", Flag(), True, "per call",
            "the `\"fuelvk\"` torch device: run aten ops without a fuelvk kernel on the CPU (`0`: raise "
            "`FallbackError`)"),
)}


def get(name):
    """The parsed value of setting `name` now (its default when unset or empty)."""
    s = SETTINGS[name]
    raw = os.environ.get(name, "").strip()
    if not raw:
        return s.default
    try:
        return s.kind.parse(raw)
    except ValueError:
        raise DeviceError(f"{name}={raw!r} is not {s.kind.what}; accepted: {s.kind.accepts}") from None


def check(read):
    """Parse every setting read `read` (e.g. "at context creation") now: a bad one raises before
    anything it configures is built. At context creation, also warn (once) about FUELVK_ names that
    are no setting: a typo (FUELVK_VALIDATON=1) would otherwise be ignored without a word."""
    for name, s in SETTINGS.items():
        if s.read == read:
            get(name)
    if read == "at context creation":
        for name, near in unknown_variables():
            if name not in _warned:
                _warned.add(name)
                hint = f"; did you mean {near}?" if near else "; `python -m fuelvk settings` lists them"
                warnings.warn(f"{name} is set but is not a fuelvk setting, so it does nothing{hint}",
                              UserWarning, stacklevel=3)


# FUELVK_ variables read by the tools around the package, not by it: build_shaders.py (SPIRV_VAL),
# tests/conftest.py and tests/test_threads.py (CHECK_FAMILIES, STRESS_S), scripts/second_driver.sh.
TOOL_VARIABLES = frozenset(("FUELVK_SPIRV_VAL", "FUELVK_CHECK_FAMILIES", "FUELVK_STRESS_S", "FUELVK_DEBIAN_MIRROR"))
_warned = set()


def unknown_variables():
    """[(name, the closest setting's name or None)] for each FUELVK_* variable set in the environment
    that neither fuelvk nor its tools read."""
    return [(name, next(iter(difflib.get_close_matches(name, SETTINGS, n=1, cutoff=0.8)), None))
            for name in sorted(os.environ) if name.startswith("FUELVK_")
            and name not in SETTINGS and name not in TOOL_VARIABLES]


# is_set runs per launch for FUELVK_TEXEL_LOADS (tests switch it with monkeypatch.setenv, so it is
# read per call), where os.environ.get costs 0.6-5 us (key encoding, a KeyError raised inside when
# unset): the environment's own mapping is read with each key encoded once.
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEYS = {}


def is_set(name):
    """Whether `name` is set to a non-empty value (FUELVK_LOOP_BUDGET=none differs from unset)."""
    if _ENV_DATA is None:
        return bool(os.environ.get(name, "").strip())
    key = _ENV_KEYS.get(name)
    if key is None:
        key = _ENV_KEYS[name] = os.environ.encodekey(name)
    raw = _ENV_DATA.get(key)
    return raw is not None and bool(raw.strip())


def _shown(default):
    if default is None:
        return ""
    if isinstance(default, bool):
        return "`1`" if default else "`0`"
    return f"`{default:g}`" if isinstance(default, float) else f"`{default}`"


def shown_default(s):
    """A setting's default as README's table shows it, without the backticks ('' when it has none:
    probed, or picked by the device)."""
    return _shown(s.default).strip("`")


def markdown_table():
    """README.md's settings table."""
    rows = ["| variable | accepts | default | read | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS.values():
        rows.append(f"| `{s.name}` | {s.kind.accepts} | {_shown(s.default)} | {s.read} | {s.doc} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
