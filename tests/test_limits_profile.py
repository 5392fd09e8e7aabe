"""Device limits: the pipeline-limits check, fits(), the reflected expressions it evaluates, and one
run of every kernel family under FUELVK_LIMITS=small (a 16 KiB / 256-invocation device).

The direct tests tighten VkPhysicalDeviceLimits with the `device_limits` fixture; the profile run is
a subprocess (the profile is read when the device is created), under the validation layer, that
checks results against numpy / torch / gguf and that no pipeline it created exceeds the small
limits, computed here from the manifest independently of the runtime's check.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fuelvk as fv
from fuelvk.errors import DeviceError, UnsupportedError
from fuelvk.kernels import attention as KA
from fuelvk.kernels import kernel
from fuelvk.ops import matmul as opm
from fuelvk.runtime.device import LIMIT_PROFILES, Device, Limits
from fuelvk.spirv import evaluate

SMALL = LIMIT_PROFILES["small"]
TILED = kernel("matmul_tiled", "f32_f32_f32")


def _spec(ctx, family, tag, **named):
    """(spec id, value) pairs of a variant's specialization constants given by their shader names."""
    ids = ctx.pipelines.signature(kernel(family, tag)).spec_ids
    return tuple(sorted((ids[n], v) for n, v in named.items()))


def test_reflected_shared_bytes_match_the_kernels_own_formulas(ctx):
    """The manifest's expressions over spec constants (spirv.py) against the hand-written sizes the
    attention picker uses, and the tiled matmul's 2 x 32 x 65 f32 slabs."""
    meta = ctx.pipelines.meta
    assert meta(TILED.id)["shared_bytes"] == 2 * 32 * 65 * 4 == 16640
    tiled, single = meta(kernel("flash_attention", "f32").id), meta(kernel("flash_attn", "f32").id)
    for d, br, bc in ((32, 1, 32), (64, 16, 64), (256, 8, 64), (80, 4, 64)):
        spec = _spec(ctx, "flash_attention", "f32", D=d, BR=br, BC=bc)
        assert evaluate(tiled["shared_bytes"], spec) == KA.tiled_shared_bytes(d, br, bc)
        assert [evaluate(e, spec) for e in tiled["workgroup_size_spec"]] == [bc, 1, 1]
    for d, sk in ((64, 256), (128, 4096)):
        spec = _spec(ctx, "flash_attn", "f32", D=d, SKMAX=sk)
        assert evaluate(single["shared_bytes"], spec) == KA.single_shared_bytes(d, sk)
    reduce = meta(kernel("reduce_last_dim", "f32").id)
    spec = _spec(ctx, "reduce_last_dim", "f32", WG=512)
    assert [evaluate(e, spec) for e in reduce["workgroup_size_spec"]] == [512, 1, 1]


def test_check_names_kernel_quantity_and_limit(ctx, device_limits):
    device_limits(maxComputeSharedMemorySize=16384, maxComputeWorkGroupInvocations=256)
    pc = ctx.pipelines
    assert not pc.fits(TILED)
    with pytest.raises(UnsupportedError, match=r"matmul_tiled\.f32_f32_f32.*shared memory bytes 16640 exceeds "
                                               r"maxComputeSharedMemorySize = 16384"):
        pc.get(TILED, _spec(ctx, "matmul_tiled", "f32_f32_f32", SG8=99))   # never built, so the check runs
    attn = kernel("flash_attn", "f32")
    assert pc.fits(attn, _spec(ctx, "flash_attn", "f32", D=64, SKMAX=1024))
    assert not pc.fits(attn, _spec(ctx, "flash_attn", "f32", D=64, SKMAX=4096))   # 4 * (64 + 4096 + 128) B
    red = kernel("reduce_last_dim", "f32")
    assert pc.fits(red, _spec(ctx, "reduce_last_dim", "f32", WG=256))
    assert not pc.fits(red, _spec(ctx, "reduce_last_dim", "f32", WG=512))
    with pytest.raises(UnsupportedError, match="workgroup invocations 512 exceeds maxComputeWorkGroupInvocations = 256"):
        pc.get(red, _spec(ctx, "reduce_last_dim", "f32", WG=512, OP=0, MODE=0))
    device_limits(maxPushConstantsSize=64)
    mm = kernel("matmul", "f32_f32_f32")
    n = pc.meta(mm.id)["push_constant_size"]
    assert n > 64 and pc.over_limits(mm) == [("push-constant bytes", n, "maxPushConstantsSize", 64)]


def test_matmul_routes_follow_the_shared_memory_limit(ctx, device_limits, monkeypatch):
    f = np.zeros
    a, b = f((64, 64), np.float32), f((64, 64), np.float32)
    assert "tiled" in opm.available_routes()
    monkeypatch.setattr(ctx.device, "device_type", "discrete")     # the picker's GPU branch
    assert opm.matmul_route(a, b) == "tiled"
    device_limits(maxComputeSharedMemorySize=16384)
    assert "tiled" not in opm.available_routes() and "register_tiled" in opm.available_routes()
    assert fv.device_info()["routes"]["matmul"] == opm.available_routes()
    assert opm.matmul_route(a, b) == "register_tiled"
    with pytest.raises(UnsupportedError, match=r"route 'tiled'.*16640.*maxComputeSharedMemorySize = 16384"):
        opm.matmul(a, b, route="tiled")


def test_limits_view_takes_the_tighter_value():
    class Real:
        maxComputeSharedMemorySize, maxComputeWorkGroupInvocations = 8192, 1024
        maxComputeWorkGroupSize = (1024, 128, 64)
        maxPushConstantsSize, maxStorageBufferRange, timestampPeriod = 256, 1 << 40, 1.0
    lim = Limits(Real(), SMALL)
    assert lim.maxComputeSharedMemorySize == 8192                  # the device's is already smaller
    assert lim.maxComputeWorkGroupInvocations == 256 and lim.maxPushConstantsSize == 128
    assert lim.maxComputeWorkGroupSize == (256, 128, 64) and lim.maxStorageBufferRange == 64 << 20
    assert lim.timestampPeriod == 1.0                              # not in the profile: the device's
    assert "maxComputeSharedMemorySize" not in lim.overrides


def test_unknown_profile_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("FUELVK_LIMITS", "tiny")
    with pytest.raises(DeviceError, match="FUELVK_LIMITS='tiny'.*accepted: small"):
        Device()


# ------------------------------------------------------------------ one run under FUELVK_LIMITS=small

SCRIPT = textwrap.dedent(r'''
    import json, sys
    import numpy as np, ml_dtypes, torch
    import fuelvk as fv, fuelvk.quant as fq
    from fuelvk import runtime
    from fuelvk.ops.attention import attention_route
    from fuelvk.ops.conv import conv2d
    from fuelvk.ops.matmul import available_routes, matmul, matmul_route
    from fuelvk.runtime.pipelines import PipelineCache
    from fuelvk.spirv import evaluate

    created = []
    orig = PipelineCache._create
    def hook(self, variant, spec):
        created.append((variant.id, dict(spec)))
        return orig(self, variant, spec)
    PipelineCache._create = hook

    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)
    def close(got, want, tol=1e-4):
        got = got.numpy() if isinstance(got, fv.Array) else np.asarray(got)
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)
    def exact(got, want):
        got = got.numpy() if isinstance(got, fv.Array) else np.asarray(got)
        want = np.ascontiguousarray(want)
        assert got.dtype == want.dtype and np.array_equal(np.ascontiguousarray(got).view(np.uint8), want.view(np.uint8))

    ctx = runtime.get()
    out = {"profile": ctx.device.limits_profile, "subgroup": ctx.device.subgroup_size,
           "routes": available_routes(), "info": fv.device_info()["limits_profile"]}
    x = r(7, 300)
    close(fv.exp(x), np.exp(x), 1e-5); close(fv.add(x, x[0]), x + x[0])                  # elementwise
    exact(fv.astype(x, fv.bfloat16), x.astype(ml_dtypes.bfloat16))                        # casts
    exact(fv.flip(x, 1), np.flip(x, 1)); exact(fv.concatenate([x, x], 0), np.concatenate([x, x]))   # movement
    exact(fv.ascontiguousarray(fv.asarray(x).T), np.ascontiguousarray(x.T))
    close(fv.sum(x, axis=1), x.astype(np.float64).sum(1)); exact(fv.argmax(x, axis=1), np.argmax(x, 1))
    y = r(100000); close(fv.max(x), x.max()); close(fv.mean(y), y.astype(np.float64).mean(), 1e-5)   # reductions
    rms = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6)
    close(fv.rms_norm(x), rms)
    ln = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    close(fv.layer_norm(x), ln, 1e-3)                                                       # norms
    e = np.exp(x - x.max(1, keepdims=True)); close(fv.softmax(x), e / e.sum(1, keepdims=True), 1e-5)
    close(fv.cumsum(x, axis=1), np.cumsum(x.astype(np.float64), 1), 1e-3)
    long = r(3, 9000); close(fv.cumsum(long, axis=1), np.cumsum(long.astype(np.float64), 1), 2e-3)
    xr, ang = r(2, 5, 16), rng.standard_normal((5, 16)).astype(np.float32)                  # rope
    c, s = np.cos(ang), np.sin(ang)
    rot = np.concatenate([-xr[..., 8:], xr[..., :8]], -1)
    close(fv.rope(xr, c, s), xr * c + rot * s, 1e-5)
    ids = np.array([3, 0, 6, 6])
    exact(fv.take(x, ids, axis=0), x[ids])                                                  # indexing
    sa = np.zeros((7, 300), np.float32); np.add.at(sa, ids, x[:4])
    close(fv.index_add(np.zeros((7, 300), np.float32), 0, ids, x[:4]), sa, 1e-5)
    import gguf                                                                             # quant
    w = r(64, 256)
    blocks = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    wd = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q8_0)
    exact(fq.quantize(w, "q8_0"), blocks); exact(fq.dequantize(blocks, "q8_0"), wd)
    xq = r(5, 256)
    for route in ("matvec", "tiled"):
        xx = xq[:1] if route == "matvec" else xq
        close(fq.qmatmul(xx, blocks, "q8_0", (64, 256), route=route), xx.astype(np.float64) @ wd.T, 1e-3)
    a, b = r(40, 72), r(72, 48)                                                             # matmul
    ran = []
    for route in available_routes():
        if route == "coop":
            continue
        aa = a[:1] if route == "matvec" else a
        close(matmul(aa, b, route=route), aa.astype(np.float64) @ b, 1e-4); ran.append(route)
    h = a.astype(np.float16)
    close(matmul(h, b.astype(np.float16)), h.astype(np.float64) @ b.astype(np.float16), 2e-2)
    out["matmul_ran"] = ran
    out["auto_64"] = matmul_route(np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32))
    try:
        matmul(a, b, route="tiled"); out["forced_tiled"] = "ran"
    except fv.UnsupportedError as err:
        out["forced_tiled"] = str(err)
    F = torch.nn.functional                                                                 # attention
    q, k, v = r(1, 2, 1, 64), r(1, 2, 2048, 64), r(1, 2, 2048, 64)
    out["attn_route_2048"] = attention_route(q, k)
    out["attn_route_512"] = attention_route(q, k[:, :, :512])
    try:
        attention_route(q, k, route="single"); out["forced_single"] = "picked"
    except fv.UnsupportedError as err:
        out["forced_single"] = str(err)
    for kk, vv in ((k, v), (k[:, :, :512], v[:, :, :512])):
        want = F.scaled_dot_product_attention(*(torch.from_numpy(np.ascontiguousarray(t)).double() for t in (q, kk, vv)))
        close(fv.scaled_dot_product_attention(q, kk, vv), want.numpy(), 1e-4)
    qb, kb, vb = r(1, 4, 9, 32), r(1, 2, 9, 32), r(1, 2, 9, 32)
    o, lse = fv.scaled_dot_product_attention(qb, kb, vb, is_causal=True, return_lse=True)
    dq, dk, dv = fv.scaled_dot_product_attention_backward(np.ones_like(qb), qb, kb, vb, o, lse, is_causal=True)
    tq, tk, tv = (torch.from_numpy(t).double().requires_grad_() for t in (qb, kb, vb))
    to = F.scaled_dot_product_attention(tq, tk.repeat_interleave(2, 1), tv.repeat_interleave(2, 1), is_causal=True)
    to.sum().backward()
    close(o, to.detach().numpy(), 1e-4); close(dq, tq.grad.numpy(), 1e-3); close(dk, tk.grad.numpy(), 1e-3)
    close(dv, tv.grad.numpy(), 1e-3)
    xc, wc = r(1, 3, 9, 9), r(4, 3, 3, 3)                                                   # conv / im2col
    want = F.conv2d(torch.from_numpy(xc).double(), torch.from_numpy(wc).double(), padding=1).numpy()
    close(conv2d(xc, wc, padding=1), want, 1e-4)
    exact(fv.pad(x, ((1, 2), (3, 0))), np.pad(x, ((1, 2), (3, 0))))                        # padding
    exact(fv.pad(x, ((1, 1), (2, 2)), mode="reflect"), np.pad(x, ((1, 1), (2, 2)), mode="reflect"))
    out["max_binding"] = ctx.device.limits.maxStorageBufferRange                            # one binding
    y = fv.zeros(((64 << 20) // 4 + 4,), fv.float32) + 1.0      # over one binding: split at 64 MiB
    out["big"] = [float(fv.max(y).numpy()), float(fv.min(y[-8:]).numpy()), int(ctx.stream.dispatches)]
    fv.synchronize()
    out["validation"] = ctx.device.messenger.take() if ctx.device.messenger else None
    # every created pipeline against the small limits, from the manifest (not the runtime's check)
    over = []
    for vid, spec in created:
        m = ctx.pipelines.meta(vid)
        wg = [evaluate(e, spec) for e in (m["workgroup_size_spec"] or m["workgroup_size"])]
        sh = evaluate(m["shared_bytes"], spec)
        if sh > 16384 or wg[0] * wg[1] * wg[2] > 256 or m["push_constant_size"] > 128:
            over.append((vid, spec, wg, sh))
    out["created"] = sorted({vid for vid, _ in created})
    out["sg8"] = sorted({spec.get(ctx.pipelines.meta(vid)["spec_names"]["SG8"]) for vid, spec in created
                         if vid.startswith("matmul") and "SG8" in ctx.pipelines.meta(vid)["spec_names"]})
    out["over"] = over
    print("RESULT " + json.dumps(out))
''')


def test_every_family_under_the_small_profile():
    env = dict(os.environ, FUELVK_LIMITS="small", FUELVK_VALIDATION="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], check=False, env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-4000:]
    out = json.loads(line[len("RESULT "):])
    assert out["profile"] == "small" and out["info"]["name"] == "small"
    assert out["info"]["overrides"]["maxComputeSharedMemorySize"] == 16384
    assert out["validation"] in (None, []), out["validation"]
    assert out["over"] == [], out["over"]
    assert "tiled" not in out["routes"] and "register_tiled" in out["routes"]
    assert out["matmul_ran"] == [r for r in out["routes"] if r != "coop"]
    assert out["auto_64"] == "register_tiled"
    assert "16640" in out["forced_tiled"] and "maxComputeSharedMemorySize = 16384" in out["forced_tiled"]
    assert not any(v.startswith("matmul_tiled") for v in out["created"])
    assert out["attn_route_2048"] == "decode" and out["attn_route_512"] == "decode"  # decode: no score row
    assert "17152 B" in out["forced_single"] and "maxComputeSharedMemorySize = 16384" in out["forced_single"]
    # bindings hold at most 64 MiB: an array over it is split at that size (issue 20 item 1)
    assert out["max_binding"] == 64 << 20
    assert out["big"][:2] == [1.0, 1.0], out["big"]
    if out["subgroup"] == 32:          # lavapipe's 8-wide subgroups: the kernels took the GPU path (SG8 = 2)
        assert out["sg8"] == [2], out["sg8"]
