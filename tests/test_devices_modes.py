"""Device modes lavapipe does not pick by itself, forced so that the code written for other devices
runs here: FUELVK_NO_PUSH_DESCRIPTOR=1 (descriptor sets, as on a device without
VK_KHR_push_descriptor) and FUELVK_MEMORY=device-local (unmapped arrays + staging copies, as on a
discrete GPU). The context is per process, so each mode runs in a fresh interpreter: it reports the
mode, then one op of every kernel family is compared with numpy (torch CPU for conv2d, gguf for
quantization). scripts/setup.sh `test` also runs the suite under both modes.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import fuelvk as fv
from fuelvk.runtime import memory

MODES = ("FUELVK_NO_PUSH_DESCRIPTOR", "FUELVK_MEMORY")

PRELUDE = """
import json, sys
import numpy as np, ml_dtypes
import fuelvk as fv
import fuelvk.quant as fq
from fuelvk import runtime
from fuelvk.runtime import commands

def report(**values):
    ctx = runtime.current()
    msgs = ctx.device.messenger.take() if ctx is not None and ctx.device.messenger else []
    print(json.dumps(dict(values, info={k: fv.device_info()[k] for k in ("memory", "descriptors", "extensions")},
                          validation=msgs[:3])))
"""

# One op per kernel family, each against an oracle that is not fuelvk.
FAMILIES = """
rng = np.random.default_rng(0)
x = rng.standard_normal((37, 129)).astype(np.float32)       # 19 KB: several staging steps when they are small
xa = fv.asarray(x)

def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)

def same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()

same(xa.numpy(), x)                                           # transfers, whole and strided views
same(xa[5:30:3, ::-2].numpy(), x[5:30:3, ::-2])
same(fv.asarray(x, fv.bfloat16).numpy(), x.astype(ml_dtypes.bfloat16))
same(fv.zeros((3, 5), fv.int16).numpy(), np.zeros((3, 5), np.int16))
close(fv.exp(xa), np.exp(x), 3e-6, 3e-6)                      # unary
close(xa * xa[0] + 1.0, x * x[0] + 1.0)                       # binary, broadcast, scalar
f64 = rng.standard_normal(1000)
same((fv.asarray(f64) + fv.asarray(f64[::-1])).numpy(), f64 + f64[::-1])   # 64-bit words
same(xa.astype(fv.float16).numpy(), x.astype(np.float16))     # cast
same((xa < 0.25).numpy(), x < 0.25)                           # compare
close(fv.clip(xa, -0.5, 0.5), np.clip(x, -0.5, 0.5))          # clamp
close(fv.power(xa, 3), x.astype(np.float64) ** 3, 1e-5, 1e-5) # powi
close(fv.sum(xa, axis=0), x.sum(0), 1e-5, 1e-4)               # reductions
same(fv.argmax(xa, axis=1).numpy().astype(np.int64), x.argmax(1))
close(fv.cumsum(xa, axis=1), np.cumsum(x, 1), 1e-5, 1e-4)
e = np.exp(x - x.max(1, keepdims=True))
close(fv.softmax(xa, axis=-1), e / e.sum(1, keepdims=True))   # row ops
close(fv.rms_norm(xa, eps=1e-6), x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6), 1e-5, 1e-5)
mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
close(fv.layer_norm(xa, eps=1e-5), (x - mu) / np.sqrt(var + 1e-5), 1e-4, 1e-4)
b = rng.standard_normal((129, 65)).astype(np.float32)
close(fv.matmul(xa, fv.asarray(b)), x.astype(np.float64) @ b, 1e-4, 1e-4)     # matmul
close(fv.matmul(xa[3], fv.asarray(b)), x[3].astype(np.float64) @ b, 1e-4, 1e-4)  # matvec
import gguf
w = rng.standard_normal((24, 64)).astype(np.float32)           # quantization, fused qmatmul
blocks = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
same(fq.quantize(w, "q8_0"), blocks)
wd = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q8_0)
close(fq.qmatmul(x[:5, :64], blocks, "q8_0", (24, 64)), x[:5, :64].astype(np.float64) @ wd.T, 1e-4, 1e-4)
q, k, v = (rng.standard_normal((1, 2, n, 16)).astype(np.float32) for n in (5, 7, 7))   # attention
s = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / 4.0
p = np.exp(s - s.max(-1, keepdims=True))
close(fv.scaled_dot_product_attention(q, k, v), (p / p.sum(-1, keepdims=True)) @ v, 1e-4, 1e-4)
same(fv.ascontiguousarray(xa.T).numpy(), np.ascontiguousarray(x.T))   # movement
same(fv.flip(xa, 1).numpy(), np.flip(x, 1))
same(fv.roll(xa, 3, 0).numpy(), np.roll(x, 3, 0))
same(fv.tril(xa).numpy(), np.tril(x))
same(fv.concatenate([xa, xa[:2]], axis=0).numpy(), np.concatenate([x, x[:2]], 0))
same(fv.masked_fill(xa, xa < 0, 0.0).numpy(), np.where(x < 0, np.float32(0), x))
y, yn = fv.asarray(x), x.copy()
y[3:9, 2] = 7.0
yn[3:9, 2] = 7.0
same(y.numpy(), yn)
idx = rng.integers(0, 37, 50)                                  # indexing
same(fv.take(xa, idx, axis=0).numpy(), x[idx])
upd = rng.standard_normal((50, 129)).astype(np.float32)
base = np.zeros((37, 129), np.float64)
np.add.at(base, idx, upd)
close(fv.index_add(np.zeros((37, 129), np.float32), 0, idx, upd), base, 1e-5, 1e-5)
sidx = rng.integers(0, 37, (20, 129))
base = np.zeros((37, 129), np.float64)
np.add.at(base, (sidx, np.arange(129)[None, :]), x[:20])
close(fv.scatter_add(np.zeros((37, 129), np.float32), 0, sidx, x[:20]), base, 1e-5, 1e-5)
sm, g = e / e.sum(1, keepdims=True), x[::-1].copy()             # a backward kernel
close(fv.softmax_backward(sm, g), sm * (g - (g * sm).sum(1, keepdims=True)), 1e-5, 1e-5)
same(fv.pad(xa, ((1, 2), (3, 0)), mode="reflect").numpy(), np.pad(x, ((1, 2), (3, 0)), mode="reflect"))  # padding
ang = rng.standard_normal((37, 64)).astype(np.float32)        # rope (rotate-half)
cos, sin = np.cos(ang), np.sin(ang)
xr = np.ascontiguousarray(x[:, :128])                          # [seq 37, head_dim 128]
c2, s2 = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
rot = np.concatenate([-xr[:, 64:], xr[:, :64]], -1)
close(fv.rope(xr, c2, s2), xr * c2 + rot * s2, 1e-5, 1e-5)
import torch                                                   # conv2d (im2col + matmul); torch transfers
img, ker = rng.standard_normal((1, 3, 9, 11)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
close(fv.conv2d(img, ker, padding=1), torch.nn.functional.conv2d(torch.from_numpy(img), torch.from_numpy(ker),
                                                                 padding=1).numpy(), 1e-4, 1e-4)
import fuelvk.torch as ft
tb = torch.from_numpy(x).to(torch.bfloat16)
same(fv.asarray(tb).numpy(), x.astype(ml_dtypes.bfloat16))
assert torch.equal(ft.to_tensor(fv.asarray(tb)), tb)
close(torch.ops.fuelvk.softmax(torch.from_numpy(x), -1).numpy(), e / e.sum(1, keepdims=True))
"""


def _run(env_mode, *parts, timeout=600):
    """PRELUDE + parts in a fresh interpreter with the mode variables set as given (others unset); the
    dict its report() printed last, which must show no validation message."""
    env = {k: v for k, v in os.environ.items() if k not in MODES}
    env.update(env_mode)
    env.setdefault("FUELVK_VALIDATION", "1")
    src = os.path.join(os.path.dirname(fv.__file__), os.pardir)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", PRELUDE + "\n".join(textwrap.dedent(b) for b in parts)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert not out["validation"], out["validation"]
    return out


def test_descriptor_sets_mode():
    """FUELVK_NO_PUSH_DESCRIPTOR=1: the extension stays disabled, every family runs on descriptor sets;
    tiny pools (3 sets) make a batch add pools; a set is written once per (pipeline, buffers) per batch."""
    out = _run({"FUELVK_NO_PUSH_DESCRIPTOR": "1"}, """
        commands.POOL_SETS = 3
    """, FAMILIES, """
        st = runtime.get().stream
        assert st.push_descriptor is None     # dispatch() binds through _bind_set
        z = xa
        for _ in range(10):                  # one batch of 10 sets: 4 pools of 3
            z = fv.exp(z * 0.5)
        zn = x
        for _ in range(10):
            zn = np.exp(zn * np.float32(0.5))
        close(z, zn)
        pools = max(len(s.descriptors.pools) for s in list(st.free) + list(st.in_flight))
        fv.synchronize()
        a, b = fv.asarray(np.arange(64, dtype=np.float32)), fv.asarray(np.ones(64, np.float32))
        fv.synchronize()
        for _ in range(5):
            fv.add_assign_scaled(a, b, 1.0)  # same pipeline, same buffers: one set
        n_sets = len(st.sets)
        same(a.numpy(), np.arange(64, dtype=np.float32) + 5)
        report(pools=pools, sets=n_sets)
    """)
    assert out["info"]["descriptors"] == {"path": "descriptor sets", "why": "forced (FUELVK_NO_PUSH_DESCRIPTOR=1)"}
    assert "VK_KHR_push_descriptor" not in out["info"]["extensions"]
    assert out["info"]["memory"]["why"].startswith("auto")
    assert out["pools"] > 1, "the pools never grew: the test did not reach that path"
    assert out["sets"] == 1


def test_device_local_mode():
    """FUELVK_MEMORY=device-local: arrays are unmapped, every family runs with staging copies (in 4 KiB
    steps here, so transfers are split), and staging slots go back to the pool: many transfers leave
    the memory held where it was."""
    out = _run({"FUELVK_MEMORY": "device-local"}, """
        runtime.STAGING_BYTES = 4096
    """, FAMILIES, """
        assert xa.buffer.mapped is None and runtime.get().staging_bytes == 4096
        sizes = [1, 3, 1000, 4096, 4097, 50_000, 123_457]
        for n in sizes:                      # warm the pool with every size class once
            fv.asarray(np.ones(n, np.uint8)).numpy()
        fv.synchronize()
        before = fv.memory_info()
        for i in range(300):
            h = rng.integers(0, 255, sizes[i % len(sizes)], dtype=np.uint8)
            assert fv.asarray(h).numpy().tobytes() == h.tobytes()
        fv.synchronize()
        report(before=before, after=fv.memory_info())
    """)
    mem = out["info"]["memory"]
    assert mem["kind"] == "device-local + staging" and mem["why"] == "forced (FUELVK_MEMORY=device-local)"
    assert out["info"]["descriptors"]["why"].startswith("auto")
    before, after = out["before"], out["after"]
    assert after["in_use_bytes"] <= before["in_use_bytes"], out
    assert after["held_bytes"] <= before["held_bytes"] + (1 << 20), out


def test_default_modes_are_auto_and_bad_values_are_typed():
    out = _run({}, "report()")
    dev_type = fv.device_info()["type"]
    mem = out["info"]["memory"]
    assert mem["why"] == f"auto ({dev_type} device)"
    assert mem["kind"] == ("device-local + staging" if dev_type == "discrete" else "mapped")
    assert out["info"]["descriptors"]["why"].startswith("auto")
    with pytest.raises(AssertionError, match="DeviceError: FUELVK_MEMORY='vram' is not a memory mode"):
        _run({"FUELVK_MEMORY": "vram"}, "fv.zeros(3)")


def test_memory_type_preferences_of_a_discrete_gpu():
    """On a typical discrete GPU's memory types: arrays take VRAM (not the host-visible BAR window),
    staging takes cached system memory, mapped arrays the host-visible VRAM; lavapipe's single type
    serves all three."""
    L, H, Ca = memory.LOCAL, memory.HOST, memory.CACHED
    types = [(L, 0), (H, 1), (H | Ca, 1), (L | H, 2)]
    pick = memory.pick_memory_type
    assert pick(types, 0b1111, host=False, direct=False) == 0
    assert pick(types, 0b1111, host=True, direct=False) == 2
    assert pick(types, 0b1111, host=True, direct=True) == 3
    assert pick(types, 0b1110, host=False, direct=False) == 3     # the buffer cannot live in type 0
    assert pick(types, 0b0001, host=True, direct=False) is None   # no host-visible type allowed
    lavapipe = [(L | H | Ca, 0)]
    assert [pick(lavapipe, 1, h, d) for h, d in ((False, False), (True, False), (True, True))] == [0, 0, 0]
