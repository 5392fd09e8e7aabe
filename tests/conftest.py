"""Test set-up: every test runs with the Khronos validation layer, and fails on any message it caused."""
import os

import pytest

# Validation on unless explicitly disabled (FUELVK_VALIDATION=0) or the layer is absent (then a
# test below says so loudly: CI installs it, so CI always validates).
os.environ.setdefault("FUELVK_VALIDATION", "1")
os.environ.setdefault("FUELVK_PIPELINE_CACHE", "1")

import fuelvk  # noqa: E402
from fuelvk import runtime  # noqa: E402
from fuelvk.runtime import loadpath  # noqa: E402


# FUELVK_CHECK_FAMILIES=1 (scripts/setup.sh's second-driver subset): record each kernel family whose
# pipeline was created, and fail the session if a registry family the device can run never was.
FAMILIES_RUN = set()
if os.environ.get("FUELVK_CHECK_FAMILIES") == "1":
    from fuelvk.runtime.pipelines import PipelineCache

    _create = PipelineCache._create

    def _recording_create(self, variant, spec):
        pipe = _create(self, variant, spec)
        FAMILIES_RUN.add(variant.family)
        return pipe
    PipelineCache._create = _recording_create


def families_not_run(features, run):
    """Registry families with a variant a device with these features can run, absent from `run`."""
    from fuelvk.kernels import FAMILIES
    return sorted(name for name, fam in FAMILIES.items() if name not in run
                  and any(set(v.features) <= set(features) for v in fam.variants.values()))


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("FUELVK_CHECK_FAMILIES") != "1":
        return
    ctx = runtime.get()
    missing = families_not_run(ctx.device.features, FAMILIES_RUN)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    say = tr.write_line if tr else print
    say(f"FUELVK_CHECK_FAMILIES: {len(FAMILIES_RUN)} kernel families created pipelines on {ctx.device.driver}")
    if missing:
        say(f"FUELVK_CHECK_FAMILIES: families this device can run that no test ran: {', '.join(missing)}")
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _validation_clean():
    """Fail the test if the validation layer reported anything while it ran."""
    ctx = runtime.current()
    if ctx is not None and ctx.device.messenger:
        ctx.device.messenger.take()  # messages of earlier tests belong to them
    yield
    ctx = runtime.current()
    if ctx is None or ctx.device.messenger is None:
        return
    fuelvk.synchronize()
    msgs = ctx.device.messenger.take()
    if msgs:
        pytest.fail("Vulkan validation messages:\n" + "\n".join(m[:2000] for m in msgs), pytrace=False)


@pytest.fixture(scope="session")
def ctx():
    return runtime.get()


@pytest.fixture
def launched(monkeypatch):
    """Variant ids launched during the test (to check which kernel a call took)."""
    ctx = runtime.get()
    seen, orig = [], ctx.launch
    monkeypatch.setattr(ctx, "launch", lambda v, *a, **k: (seen.append(v.id), orig(v, *a, **k))[1])
    return seen


@pytest.fixture
def device_limits(monkeypatch):
    """Override VkPhysicalDeviceLimits fields for one test: device_limits(maxTexelBufferElements=100)."""
    dev = runtime.get().device
    real = dev.limits

    def override(**values):
        class Limits:
            def __getattr__(self, name):
                return values[name] if name in values else getattr(real, name)
        monkeypatch.setattr(dev, "limits", Limits())
    return override


@pytest.fixture(params=["texel", "ssbo"])
def path(request, monkeypatch):
    """The load path forced (FUELVK_TEXEL_LOADS=1 / 0), the plan cache emptied so launches re-plan; test
    files that force more paths define their own `path`."""
    monkeypatch.setenv(loadpath.ENV, "1" if request.param == "texel" else "0")
    monkeypatch.setattr(runtime.get(), "plans", {})
    return request.param
