"""Runtime: spv freshness, Params layouts vs SPIR-V, batching and barriers, memory, device, errors."""
import ctypes
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.errors import LaunchError
from fuelvk.kernels import VARIANTS
from fuelvk.kernels.signature import Signature
from fuelvk.runtime.pipelines import spv_dir
from fuelvk.spirv import reflect

ROOT = Path(__file__).resolve().parents[1]


def test_spv_is_fresh():
    r = subprocess.run([sys.executable, str(ROOT / "build_shaders.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_spirv_val_reports_an_invalid_module(tmp_path):
    """build_shaders.validate (run by --check) names a module spirv-val rejects, and passes a good one."""
    sys.path.insert(0, str(ROOT))
    import build_shaders
    if build_shaders.spirv_val()[0] is None:
        pytest.skip(build_shaders.spirv_val()[1])
    good = (spv_dir() / VARIANTS["unary.f32"].spv).read_bytes()
    (tmp_path / "good.spv").write_bytes(good)
    (tmp_path / "bad.spv").write_bytes(good[:-4])        # last instruction cut short
    problems = build_shaders.validate([tmp_path / "good.spv", tmp_path / "bad.spv"])
    assert len(problems) == 1 and problems[0].startswith("bad.spv: spirv-val"), problems


def test_uniform_texel_buffers_are_samplerless():
    """Uniform texel buffers are OpTypeImage Dim Buffer Sampled=1, not wrapped in a sampled image
    (Mesa 25 rejects that), and reflect as uniform_texel_buffer."""
    for vid, v in VARIANTS.items():
        refl = reflect((spv_dir() / v.spv).read_bytes())
        assert refl["sampled_buffer_images"] == 0, vid
    refl = reflect((spv_dir() / VARIANTS["loadpath.utb_r32"].spv).read_bytes())
    assert [b.get("type") for b in refl["bindings"]] == [None, "uniform_texel_buffer"]


# SPIR-V capability -> the device feature (runtime/device.py FEATURE_FIELDS or subgroup names) it needs
CAP_FEATURE = {9: "float16", 10: "float64", 11: "int64", 22: "int16", 39: "int8", 61: "subgroup_basic",
               4433: "storage16", 4434: "uniform_storage16", 4448: "storage8", 5345: "memory_model",
               5346: "memory_model_device_scope", 6022: "cooperative_matrix"}


def test_coop_kernels_require_what_their_spirv_declares():
    """The coop matmul has never run here (no lavapipe has VK_KHR_cooperative_matrix): what its SPIR-V
    declares must be features the variant requires, so a GPU enables them (device.py) or the route
    is not offered."""
    from fuelvk.kernels.matmul import ROUTE_FEATURES
    from fuelvk.runtime.device import FEATURE_FIELDS
    for v in VARIANTS.values():
        if v.family != "matmul_coop":
            continue
        caps = reflect((spv_dir() / v.spv).read_bytes())["capabilities"]
        need = {CAP_FEATURE[c] for c in caps if c in CAP_FEATURE}
        assert 6022 in caps and need <= set(v.features), (v.id, need - set(v.features))
        assert set(ROUTE_FEATURES["coop"]) <= set(v.features)
        assert all(f in FEATURE_FIELDS or f.startswith("subgroup_") for f in v.features), v.features


def test_device_enables_every_used_feature_it_has():
    """The device was created with each feature fuelvk uses (the coop kernels' 16-bit uniform access
    and Vulkan memory model included) switched on exactly where the device has it."""
    from fuelvk.runtime.device import FEATURE_FIELDS
    dev = runtime.get().device
    for name, (key, field) in FEATURE_FIELDS.items():
        if key in dev._feat:
            assert bool(getattr(dev._feat[key], field)) == (name in dev.features), name


def test_family_coverage_check():
    """FUELVK_CHECK_FAMILIES (the second-driver subset): a family the device can run but no test ran
    is named; one it cannot run (coop on lavapipe) is not; a session that ran one test fails."""
    from conftest import families_not_run

    from fuelvk.kernels import FAMILIES
    feats = runtime.get().device.features
    runnable = set(FAMILIES) - ({"matmul_coop"} if "cooperative_matrix" not in feats else set())
    assert families_not_run(feats, set(FAMILIES)) == []
    assert families_not_run(feats, set(FAMILIES) - {"rope", "matmul_coop"}) == sorted(
        {"rope", "matmul_coop"} & runnable)
    env = dict(os.environ, FUELVK_CHECK_FAMILIES="1", PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "test_array.py"), "-k", "test_reshape_of_noncontiguous_view_copies"],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "no test ran: " in out, out[-2000:]
    missing = out.split("no test ran: ")[1].splitlines()[0].split(", ")
    ran = int(out.split("FUELVK_CHECK_FAMILIES: ")[1].split()[0])        # a strided download's copy kernel
    assert "rope" in missing and "matmul_coop" not in missing, missing
    assert ran >= 1 and len(missing) == len(runnable) - ran, (ran, missing)


@pytest.mark.parametrize("vid", sorted(VARIANTS))
def test_signature_matches_spirv(vid):
    """Launch by name packs exactly the push-constant block the compiler laid out, binds what the SPIR-V
    declares (written unless NonWritable) and knows every spec constant the module has."""
    v = VARIANTS[vid]
    refl = reflect((spv_dir() / v.spv).read_bytes())
    manifest = json.loads((spv_dir() / "manifest.json").read_text())["variants"][vid]
    sig = Signature(vid, manifest)
    pc = refl["push_constants"]
    args = {f: (0 if c == 1 else [0] * c) for f, _, c in sig.fields}
    args.update({b: None for b in sig.bindings})
    buffers, writes, push, spec = sig.bind(args)
    assert len(push) == (pc["size"] if pc else 0) == manifest["push_constant_size"]
    assert [f for f, _, _ in sig.fields] == [m["name"] for m in pc["members"]] if pc else not sig.fields
    assert len(buffers) == len({b["binding"] for b in refl["bindings"]}) == len(writes)
    assert sorted(sig.spec_ids.values()) == sorted(set(refl["spec_ids"]))
    assert manifest["names"] == list(v.names)


def test_launch_by_name_refuses_what_the_shader_does_not_declare():
    """A swapped, forgotten, unknown or mistyped argument is a LaunchError, never a wrong dispatch."""
    sig = Signature("norm", {"bindings": [{"set": 0, "binding": 0, "name": "out", "access": "write"},
                                          {"set": 0, "binding": 1, "name": "x", "access": "read"}],
                             "push_constant_size": 16,
                             "push_constants": [{"name": "n_rows", "offset": 0, "size": 4, "type": "u32"},
                                                {"name": "k", "offset": 4, "size": 4, "type": "i32"},
                                                {"name": "shape", "offset": 8, "size": 8, "type": "u32[2]"}],
                             "spec_names": {"WG": 0}})
    ok = dict(out=1, x=2, n_rows=3, k=-1, shape=[4], WG=64)
    buffers, writes, push, spec = sig.bind(ok)
    assert buffers == (1, 2) and writes == (True, False) and spec == ((0, 64),)
    assert struct.unpack("<Iiii", push) == (3, -1, 4, 0)
    for bad, match in [(dict(ok, n_rows=-1), "'n_rows' is u32"), (dict(ok, n_rows=1.5), "'n_rows' is u32"),
                       ({k: v for k, v in ok.items() if k != "k"}, "'k' not given"),
                       ({k: v for k, v in ok.items() if k != "x"}, "binding 'x' not given"),
                       (dict(ok, n_cols=1), "no argument \\['n_cols'\\]"),
                       (dict(ok, shape=[1, 2, 3]), "'shape' holds 2 values")]:
        with pytest.raises(LaunchError, match=match):
            sig.bind(bad)


def test_no_positional_launch_left():
    """Kernels are launched by name only: Context.launch takes no positional buffers / Params / spec
    (a TypeError), and no module of fuelvk packs Params positionally or passes (id, value) spec tuples."""
    import re
    ctx = fv.runtime.get()
    v = fv.kernels.kernel("unary", "f32")
    with pytest.raises(TypeError):
        ctx.launch(v, (1, 1, 1), (), (), b"")
    src = Path(fv.__file__).parent
    for f in sorted(src.rglob("*.py")):
        text = f.read_text()
        assert not re.search(r"_PARAMS\b|\bParams\(|\.pack\(\s*\w+\s*,|spec=\(\(\d|launch\([^)]*\(True", text), f


def test_kernels_listing_json():
    out = subprocess.run([sys.executable, "-m", "fuelvk", "kernels", "--json"], capture_output=True, text=True,
                         check=True).stdout
    rows = json.loads(out)
    names = {r["name"] for r in rows}
    assert {"unary", "unary_f16", "unary_bf16", "unary_f64", "binary_bf16", "affine_f64", "strided_copy",
            "strided_copy_signed_b8", "clamp", "powi"} <= names
    for r in rows:
        assert set(r) >= {"name", "family", "tag", "spv"}
        assert (spv_dir() / r["spv"]).exists()


def test_info_cli_and_device_info():
    info = fv.device_info()
    assert info["name"] and info["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
    assert info["limits"]["maxStorageBufferRange"] > 0 and "matmul" in info["routes"]
    out = subprocess.run([sys.executable, "-m", "fuelvk", "info"], capture_output=True, text=True, check=True).stdout
    assert info["name"] in out and "features" in out
    assert f"loops    : budget {info['loop_budget'] or 'none'}" in out   # the probed (or forced) loop budget
    for line in ("limits   :", "memory   :", "binding  :", "loads    :", "routes   :"):   # the active modes
        assert line in out, line
    assert info["load_path"]["maxTexelBufferElements"] > 0


def test_device_selector_errors():
    from fuelvk.runtime.device import Device
    with pytest.raises(fv.DeviceError, match="matches no device"):
        Device(selector="no-such-device-xyz", validation=False)
    name = fv.device_info()["name"]
    d = Device(selector=name.split()[0], validation=False)  # a name substring selects it
    assert d.name == name
    d.destroy()


def test_batching_and_barriers(monkeypatch):
    ctx = runtime.get()
    st = ctx.stream
    # One batch: an early submit the device finished before the next command needs no barrier after it.
    monkeypatch.setattr(st, "_device_idle", lambda: False)
    fv.synchronize()
    a = fv.asarray(np.arange(16, dtype=np.float32))
    fv.synchronize()   # device-local memory: the upload is a copy that the first add must wait for
    b0, d0 = st.barriers, st.dispatches
    outs = [fv.add(a, a) for _ in range(100)]           # independent: read-only inputs, fresh outputs
    assert st.dispatches - d0 == 100
    assert st.barriers == b0, "independent dispatches need no barrier"
    x = a
    for _ in range(10):                                # a dependent chain: each reads the last write
        x = fv.add(x, 1.0)
    assert st.barriers - b0 >= 9
    np.testing.assert_array_equal(x.numpy(), np.arange(16, dtype=np.float32) + 10)
    np.testing.assert_array_equal(outs[-1].numpy(), 2 * np.arange(16, dtype=np.float32))


def test_cached_whole_op_plans(monkeypatch):
    """Elementwise ops on fresh outputs plan once per (op, dtype, load paths, input geometry) and then
    run the cached plan: the same bits as numpy, a plan of its own for every geometry that differs (an
    offset view, a broadcast, another dtype, a forced load path), and barriers where a cached launch
    reads the previous one's output."""
    from oracles import spy_plans
    planned = spy_plans(monkeypatch, lambda plan: [1])
    st = runtime.get().stream
    rng = np.random.default_rng(0)
    h = rng.standard_normal(40).astype(np.float32)
    x = fv.asarray(h)
    fv.synchronize()
    a, b = x[:16], x[1:17]
    np.testing.assert_array_equal(fv.add(a, a).numpy(), h[:16] + h[:16])
    n = len(planned)
    assert n >= 1
    for _ in range(2):
        np.testing.assert_array_equal(fv.add(a, a).numpy(), h[:16] + h[:16])
    assert len(planned) == n, "a repeated geometry runs its cached plan"
    cases = [(lambda: fv.add(a, b), h[:16] + h[1:17]),                       # another offset
             (lambda: fv.multiply(a, a), h[:16] * h[:16]),                   # another op
             (lambda: fv.add(x[:16].reshape(4, 4), x[:4]), h[:16].reshape(4, 4) + h[:4]),   # broadcast
             (lambda: fv.exp(a), np.exp(h[:16])),                            # unary
             (lambda: fv.add(a.astype(fv.float16), a.astype(fv.float16)),   # another dtype
              h[:16].astype(np.float16) + h[:16].astype(np.float16))]
    for f, want in cases:
        for i in range(2):
            n = len(planned)
            got = f().numpy()
            if want.dtype == np.float32 and f is not cases[3][0]:
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=2e-3 if want.dtype == np.float16 else 1e-6)
            assert (len(planned) > n) == (i == 0), "planned on the first call only"
    n = len(planned)
    monkeypatch.setenv("FUELVK_TEXEL_LOADS", "1")     # the load path is part of the key
    np.testing.assert_array_equal(fv.add(a, b).numpy(), h[:16] + h[1:17])
    assert len(planned) > n
    monkeypatch.delenv("FUELVK_TEXEL_LOADS")
    fv.synchronize()
    b0 = st.barriers
    y, want = a, h[:16]
    with monkeypatch.context() as m:   # one batch (after an early submit that finished, no barrier is needed)
        m.setattr(st, "_device_idle", lambda: False)
        for _ in range(6):                              # a chain through the cached plan
            y, want = fv.add(y, a), want + h[:16]
    assert st.barriers - b0 >= 5, "each link reads the last one's output"
    np.testing.assert_array_equal(y.numpy(), want)


def test_cached_scalar_plans(monkeypatch):
    """An Array OP a Python scalar caches its plan per scalar side, type and value: -0.0 and 0.0 (equal,
    but x + -0.0 keeps -0.0 where x + 0.0 does not), an int and a float, NaN and the reflected side each
    give numpy's bits, repeated or not; integer division of an int array (cast first) is never cached."""
    from fuelvk.ops import _core
    planned, real = [], _core.launch_strided
    monkeypatch.setattr(_core, "launch_strided", lambda *a, **k: (planned.append(1), real(*a, **k))[1])
    monkeypatch.setattr(runtime.get(), "plans", {})
    h = np.array([-0.0, 0.0, 1.5, -2.25, np.inf, np.nan, 3.0, -7.0], np.float32)
    x = fv.asarray(h)
    for _ in range(2):
        for s_ in (0.0, -0.0, 2, 2.0, 0.5, float("nan")):
            for f, want in ((lambda: fv.add(x, s_), lambda: h + np.float32(s_)),
                            (lambda: fv.subtract(s_, x), lambda: np.float32(s_) - h),
                            (lambda: fv.multiply(x, s_), lambda: h * np.float32(s_))):
                got = f().numpy()
                with np.errstate(invalid="ignore"):
                    want = want()
                np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(got)],
                                              want.view(np.uint32)[~np.isnan(want)])
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        if _ == 0:
            n = len(planned)
    assert len(planned) == n + 3, "only the NaN launches take the general path again"
    hi = np.arange(-4, 4, dtype=np.int32)
    xi = fv.asarray(hi)
    for _ in range(2):
        np.testing.assert_array_equal(fv.divide(xi, 2).numpy(), hi / 2)
        np.testing.assert_array_equal(fv.add(xi, 3).numpy(), hi + 3)


def test_cached_plans_give_memory_back():
    """Outputs of cached whole-op plans go back to the pool when they die (slot records reused)."""
    pool = runtime.get().pool
    a = fv.asarray(np.ones(64, np.float32))
    fv.add(a, a)
    fv.synchronize()
    base = fv.memory_info()["in_use_bytes"]
    for _ in range(300):
        fv.add(a, a)
    fv.synchronize()
    assert fv.memory_info()["in_use_bytes"] == base
    outs = [fv.add(a, a) for _ in range(10)]
    fv.synchronize()
    assert fv.memory_info()["in_use_bytes"] == base + sum(o.buffer.size for o in outs)
    assert len({o.buffer.key for o in outs}) == 10 and all(o.buffer.pool is pool for o in outs)


def test_many_dispatches_cross_flush_threshold():
    from fuelvk.runtime.commands import FLUSH_EVERY
    x = fv.asarray(np.zeros(8, np.float32))
    for _ in range(FLUSH_EVERY + 10):
        x = x + 1.0
    np.testing.assert_array_equal(x.numpy(), np.full(8, FLUSH_EVERY + 10, np.float32))


def test_idle_device_gets_work_early_then_in_growing_batches(monkeypatch):
    """After a host wait an idle device gets the first EARLY_FIRST recorded commands at once (it works
    while the host records more); each early submit doubles the threshold up to EARLY_SUBMIT, a busy
    device gets nothing early, synchronize starts over; a chain across such submits stays ordered."""
    import time

    from fuelvk.runtime.commands import EARLY_CHECK, EARLY_FIRST, EARLY_SUBMIT
    st = runtime.get().stream
    x = fv.asarray(np.zeros(8, np.float32))
    n = 0

    def record(k):
        nonlocal x, n
        for _ in range(k):
            x = x + 1.0
        n += k

    def wait_idle():
        while not st._device_idle():
            time.sleep(0.001)
    fv.synchronize()
    assert st.early == EARLY_FIRST and EARLY_FIRST % EARLY_CHECK == 0
    record(EARLY_FIRST - 1)
    assert st.cur is not None and st.count == EARLY_FIRST - 1 and not st.in_flight   # still recording
    record(1)
    assert st.cur is None and st.early == 2 * EARLY_FIRST   # submitted (without waiting: no sync here)
    with monkeypatch.context() as m:   # a busy device: the batch grows past the threshold
        m.setattr(st, "_device_idle", lambda: False)
        record(3 * EARLY_FIRST)
        assert st.cur is not None and st.count == 3 * EARLY_FIRST
    wait_idle()
    record(EARLY_CHECK)                # idle again: submitted at the next check
    assert st.cur is None and st.early == 4 * EARLY_FIRST
    while st.early < EARLY_SUBMIT:
        wait_idle()
        record(st.early)
        assert st.cur is None
    wait_idle()
    record(EARLY_SUBMIT)
    assert st.cur is None and st.early == EARLY_SUBMIT   # capped
    np.testing.assert_array_equal(x.numpy(), np.full(8, n, np.float32))
    assert st.early == EARLY_FIRST                       # the host waited: start over


def test_repeated_push_constants_are_recorded_once_per_pipeline():
    """Stream.dispatch skips vkCmdPushConstants when the same pipeline pushes the same bytes again; a
    different pipeline with identical bytes (add then multiply over the same geometry) must push its own."""
    from fuelvk.runtime.vk import lib
    ha, hb = np.arange(16, dtype=np.float32), np.arange(16, dtype=np.float32)[::-1].copy()
    a, b = fv.asarray(ha), fv.asarray(hb)
    fv.synchronize()
    calls = []
    real = lib.vkCmdPushConstants

    class Counting:                   # lib is a cffi module: wrap it for the stream's calls only
        def __getattr__(self, name):
            return getattr(lib, name)

        def vkCmdPushConstants(self, *args):
            calls.append(args[1])
            return real(*args)

    import fuelvk.runtime.commands as commands
    commands.lib = Counting()
    try:
        outs = [(fv.add(a, b), fv.multiply(a, b)) for _ in range(3)] + [(fv.add(a, b), fv.add(a, b))]
    finally:
        commands.lib = lib
    assert len(calls) == 6 + 1, "alternating pipelines push every time; a repeat of the same one does not"
    for s_, p_ in outs[:3]:
        np.testing.assert_array_equal(s_.numpy(), ha + hb)
        np.testing.assert_array_equal(p_.numpy(), ha * hb)
    for o in outs[3]:
        np.testing.assert_array_equal(o.numpy(), ha + hb)


def test_hazard_keys_tell_chunks_apart():
    """Hazard keys are ints (chunk serial, offset): slots at the same offset of different chunks differ,
    and a window shares its slot's key (barriers see the whole array)."""
    pool = runtime.get().pool
    big, big2 = pool.alloc(16 << 20), pool.alloc(16 << 20)    # larger than a shared chunk: one each
    assert big.offset == big2.offset == 0 and big.chunk is not big2.chunk
    assert big.key != big2.key and isinstance(big.key, int)
    assert big.window(256, 512).key == big.key


def test_packed_descriptors_are_the_c_struct():
    """Buffer.descriptor (bytes copied into a pipeline's VkDescriptorBufferInfo array at each dispatch)
    reads back as the slot's handle, offset and size, for a slot and a window of one."""
    from fuelvk.runtime.memory import DESCRIPTOR
    from fuelvk.runtime.vk import ffi
    assert DESCRIPTOR.size == ffi.sizeof("VkDescriptorBufferInfo")
    pool = runtime.get().pool
    buf = pool.alloc(4096)
    for b in (buf, buf.window(256, 1024)):
        info = ffi.new("VkDescriptorBufferInfo*")
        ffi.buffer(info)[:] = b.descriptor
        assert info.buffer == b.handle and info.offset == b.offset and info.range == b.size


def test_pool_reuses_buffers():
    a = fv.empty((1000,))
    h = a.buffer.handle
    del a
    fv.synchronize()
    b = fv.empty((1000,))
    assert b.buffer.handle == h


def test_cpu_device_memory_asks_for_huge_pages():
    """On a CPU device (lavapipe) big chunks are madvise(MADV_HUGEPAGE)d: THP-eligible in smaps where
    the driver maps private memory (Mesa 22); where it maps a shared memfd (Mesa >= 25) madvise has no
    effect, and the pool must say so rather than claim huge pages."""
    from fuelvk.runtime.memory import smaps_entry
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if fv.device_info()["type"] != "cpu" or not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("needs a CPU Vulkan device on Linux with transparent huge pages not disabled")
    a = fv.empty((4 << 20,), fv.float32)        # 16 MiB: a chunk of its own (advised: its whole 2 MiB pages)
    if a.buffer.mapped is None:
        pytest.skip("arrays are device-local (FUELVK_MEMORY=device-local): not mapped, nothing to advise")
    fields = smaps_entry(int(runtime.ffi.cast("uintptr_t", a.buffer.mapped)) + (8 << 20))
    pool = runtime.get().pool
    assert "VmFlags" in fields, fields
    if "sh" in fields["VmFlags"].split():
        assert pool.huge_pages is (fields.get("THPeligible") == "1"), (pool.huge_pages, fields)
    else:
        assert fields.get("THPeligible") == "1", fields
        assert pool.huge_pages is True
    assert fv.device_info()["memory"]["huge_pages"] is pool.huge_pages


def test_smaps_entry_reads_private_and_shared_mappings():
    """The detection itself: an anonymous private mapping is private and, madvised, THP-eligible; a
    shared memfd mapping is shared (what Mesa 25 hands out) and _huge_pages reports no effect."""
    import mmap

    from fuelvk.runtime.memory import _huge_pages, smaps_entry
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not Path("/proc/self/smaps").exists():
        pytest.skip("needs Linux /proc/self/smaps")
    size = 8 << 20
    priv = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    fd = os.memfd_create("fuelvk-test")
    os.ftruncate(fd, size)
    shared = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    try:
        p, q = (ctypes.addressof(ctypes.c_char.from_buffer(m)) for m in (priv, shared))
        took_p, took_q = _huge_pages(p, size, check=True), _huge_pages(q, size, check=True)
        fp, fq = smaps_entry(p + (4 << 20)), smaps_entry(q + (4 << 20))
        assert "sh" not in fp["VmFlags"].split() and "sh" in fq["VmFlags"].split(), (fp, fq)
        assert "memfd:fuelvk-test" in fq["name"]
        if "[never]" not in thp.read_text():
            assert took_p is True and fp["THPeligible"] == "1"
        assert took_q is (fq["THPeligible"] == "1")
        shmem = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
        if shmem.exists() and "[never]" in shmem.read_text():
            assert took_q is False
        assert smaps_entry(0) == {}
    finally:
        priv.close()
        shared.close()
        os.close(fd)


def test_allocation_over_buffer_limit_is_a_typed_error():
    limit = runtime.get().pool.max_buffer
    with pytest.raises(fv.FuelVKMemoryError, match="maxBufferSize"):
        fv.empty((limit // 4 + 1,), fv.float32)
    with pytest.raises(MemoryError):
        fv.empty((limit // 2 + 1,), fv.float16)


def test_timer_measures_device_time():
    from fuelvk.bench.timing import measure
    a = fv.asarray(np.ones(1 << 16, np.float32))
    r = measure(lambda: fv.exp(a), warmup=1, repeats=3)
    assert 0 < r["p10_ms"] <= r["median_ms"] <= r["p90_ms"]


def test_validation_messages_are_caught():
    """A deliberately invalid command reaches the messenger (so the autouse fixture can fail tests)."""
    ctx = runtime.get()
    if ctx.device.messenger is None:
        pytest.skip("validation layer disabled (FUELVK_VALIDATION=0)")
    from fuelvk.kernels import kernel
    from fuelvk.runtime.vk import consts, ffi, lib
    fv.synchronize()
    pipe = ctx.pipelines.get(kernel("unary", "f32"), ((0, 0),))
    st = ctx.stream
    st._begin()
    data = ffi.new("char[]", 4)
    # a stage the layout's push-constant range does not include: invalid, yet harmless to the driver
    lib.vkCmdPushConstants(st.cb, pipe.layout, consts.VK_SHADER_STAGE_VERTEX_BIT, 0, 4, data)
    fv.synchronize()
    msgs = ctx.device.messenger.take()
    assert any("PushConstants" in m or "push constant" in m.lower() for m in msgs), msgs


def test_validation_enabled_in_ci():
    if os.environ.get("CI"):
        assert runtime.get().device.messenger is not None, "CI must run with the validation layer"


def test_closed_device_arrays_raise():
    a = fv.asarray(np.ones(4, np.float32))
    runtime.close()
    with pytest.raises(fv.DeviceError, match="closed"):
        a.numpy()
    with pytest.raises(fv.DeviceError, match="closed"):
        fv.add(a, a)
    b = fv.asarray(np.ones(4, np.float32))  # a fresh context starts on demand
    np.testing.assert_array_equal((b + b).numpy(), np.full(4, 2, np.float32))
