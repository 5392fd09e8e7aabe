#!/usr/bin/env python3
"""fuelvk beside ggml's Vulkan backend (llama.cpp's) on the same device, same shapes, same sitting.

    python benches/ggml_side_by_side.py /path/to/build/bin/test-backend-ops [--rounds 2] [--only ADD,ROPE]

For each case, round after round, ggml's `test-backend-ops perf -b Vulkan0 --test-file ONE_CASE` runs
(a subprocess; the case is written in test-backend-ops' generic test-file format, op and type ids read
from the build's own libggml-base through ctypes: nothing of ggml is copied here), then fuelvk runs
the same op on the same shapes.  ggml reports wall us per op: a graph of the op repeated n times,
computed until >= 1 s, total wall / ops.  fuelvk is timed alike: k launches recorded back to back,
one submit and wait, wall / k; the device time of that batch from timestamp queries / k is shown too.
ratio = ggml us / fuelvk wall us (> 1: fuelvk faster).  Inputs are random on both sides (ggml draws
its own); K/V / weights in the types ggml uses (f16, q4_0), activations f32.

Building test-backend-ops (Debian bookworm: apt-get install libvulkan-dev spirv-headers glslc):

    cmake -S ggml -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DGGML_BUILD_EXAMPLES=OFF
    cmake --build build -j2 --target test-backend-ops

(with headers older than 1.3.261, ggml-vulkan.cpp's VK_EXT_layer_settings block in the instance creation
needs an `#if defined(VK_EXT_layer_settings)` around it, else an InstanceCreateInfo without that pNext.)

test-backend-ops sizes each perf graph for a GPU at 32 GB of traffic (or 100 GFLOP): on a CPU
device such as lavapipe that is minutes per case.  The numbers in the note came from a build whose
tests/test-backend-ops.cpp reads those two targets from GGML_PERF_TARGET_GB / GGML_PERF_TARGET_GFLOP
(a two-line change to eval_perf's constants, same measurement); this script sets both (--target-gb,
--target-gflop), which an unchanged build ignores.
"""
import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import fuelvk as fv
from fuelvk import runtime
from fuelvk.ops import quant as fq

# ggml_type ids are part of the GGUF file format (stable); checked against the build's names below.
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "i32": 26}
TYPE_BYTES = {"f32": (4, 1), "f16": (2, 1), "q4_0": (18, 32), "i32": (4, 1)}   # (bytes, block)


def _f(x):
    """A float op param as the int32 of its bits (ggml stores op_params as int32[])."""
    return int(np.array([x], np.float32).view(np.int32)[0])


class Case:
    """One op: ggml's view (op name, output type and ne, op params, sources) and fuelvk's (a callable
    factory).  ne are ggml's (innermost first)."""

    def __init__(self, label, op, out_type, out_ne, params, srcs, fuelvk):
        self.label, self.op, self.out_type, self.out_ne = label, op, out_type, out_ne
        self.params, self.srcs, self.fuelvk = params, srcs, fuelvk


def _ne(*ne):
    return list(ne) + [1] * (4 - len(ne))


def _rng(seed=0):
    return np.random.default_rng(seed)


def _arr(shape, dtype="float32", seed=0):
    return fv.asarray(_rng(seed).standard_normal(shape).astype(dtype))


def _add():
    a, b = _arr((4096, 4096)), _arr((4096, 4096), seed=1)
    return lambda: fv.add(a, b)


def _scale():
    a = _arr((4096, 4096))
    return lambda: fv.affine(a, 2.0, 0.0)


def _cpy():
    a = _arr((4096, 4096))
    return lambda: fv.astype(a, fv.float16)


def _rms_norm():
    x = _arr((512, 4096))
    return lambda: fv.rms_norm(x, eps=1e-6)


def _softmax():
    x = _arr((512, 4096))
    return lambda: fv.softmax(x, axis=-1)


def _rope():
    from fuelvk.ops.rope import rope
    x = _arr((512, 32, 128))                       # ggml's layout: tokens, heads, head_dim
    xv = fv.permute_dims(x, (1, 0, 2))             # [heads, seq, dim] view, no copy
    inv = 10000.0 ** (-np.arange(0, 128, 2, dtype=np.float64) / 128)
    ang = np.arange(512)[:, None] * inv[None, :]
    cos = fv.asarray(np.cos(np.concatenate([ang, ang], -1)).astype(np.float32))
    sin = fv.asarray(np.sin(np.concatenate([ang, ang], -1)).astype(np.float32))
    return lambda: rope(xv, cos, sin)


def _sum_rows():
    x = _arr((4096, 4096))
    return lambda: fv.sum(x, axis=-1)


def _matmul(m, n, k, wdtype):
    """x [m, k] @ w[n, k].T -> f32; with f16 weights x is f16 too (fuelvk has no f32 x f16 matmul;
    ggml's f16 kernels read the f32 activations and round them to f16 or not, per path)."""
    def make():
        x = _arr((m, k), wdtype)
        w = _arr((n, k), wdtype, seed=1)
        wt = fv.permute_dims(w, (1, 0))
        return lambda: fv.matmul(x, wt, out_dtype=fv.float32)
    return make


def _q4_matvec():
    n, k = 4096, 4096
    rng = _rng(2)
    blocks = np.zeros((n * k // 32, 18), np.uint8)
    blocks[:, :2] = (rng.uniform(0.002, 0.02, n * k // 32).astype(np.float16)).view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = rng.integers(0, 256, (n * k // 32, 16), dtype=np.uint8)
    qw = fq.QuantTensor(fv.asarray(blocks.reshape(-1)), "q4_0", (n, k))
    x = _arr((1, k))
    return lambda: fq.qmatmul(x, qw)


def _fa_decode():
    q = _arr((1, 32, 1, 128), "float16")
    k = _arr((1, 8, 4096, 128), "float16", seed=1)
    v = _arr((1, 8, 4096, 128), "float16", seed=2)
    return lambda: fv.scaled_dot_product_attention(q, k, v, scale=128 ** -0.5)


def _src(t, *ne):
    return (t, _ne(*ne))


ROPE_PARAMS = [0, 128, 2, 0, 4096] + [_f(v) for v in (10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)]
CASES = [
    Case("ADD f32 4096x4096", "ADD", "f32", _ne(4096, 4096), [],
         [_src("f32", 4096, 4096), _src("f32", 4096, 4096)], _add),
    Case("SCALE f32 4096x4096", "SCALE", "f32", _ne(4096, 4096), [_f(2.0), _f(0.0)],
         [_src("f32", 4096, 4096)], _scale),
    Case("CPY f32->f16 4096x4096", "CPY", "f16", _ne(4096, 4096), [],
         [_src("f32", 4096, 4096), _src("f16", 4096, 4096)], _cpy),
    Case("RMS_NORM f32 512x4096", "RMS_NORM", "f32", _ne(4096, 512), [_f(1e-6)],
         [_src("f32", 4096, 512)], _rms_norm),
    Case("SOFT_MAX f32 512x4096", "SOFT_MAX", "f32", _ne(4096, 512), [_f(1.0), _f(0.0)],
         [_src("f32", 4096, 512)], _softmax),
    Case("ROPE neox f32 512 tok x 32 h x 128", "ROPE", "f32", _ne(128, 32, 512), ROPE_PARAMS,
         [_src("f32", 128, 32, 512), _src("i32", 512)], _rope),
    Case("SUM_ROWS f32 4096x4096", "SUM_ROWS", "f32", _ne(1, 4096), [],
         [_src("f32", 4096, 4096)], _sum_rows),
    Case("MUL_MAT f16 matvec 4096x4096", "MUL_MAT", "f32", _ne(4096, 1), [],
         [_src("f16", 4096, 4096), _src("f32", 4096, 1)], _matmul(1, 4096, 4096, "float16")),
    Case("MUL_MAT f16 n=64 4096x4096", "MUL_MAT", "f32", _ne(4096, 64), [],
         [_src("f16", 4096, 4096), _src("f32", 4096, 64)], _matmul(64, 4096, 4096, "float16")),
    Case("MUL_MAT q4_0 matvec 4096x4096", "MUL_MAT", "f32", _ne(4096, 1), [],
         [_src("q4_0", 4096, 4096), _src("f32", 4096, 1)], _q4_matvec),
    Case("MUL_MAT f32 1024^3", "MUL_MAT", "f32", _ne(1024, 1024), [],
         [_src("f32", 1024, 1024), _src("f32", 1024, 1024)], _matmul(1024, 1024, 1024, "float32")),
    Case("FLASH_ATTN_EXT decode 32q/8kv h x 4096 x 128 f16 K/V", "FLASH_ATTN_EXT", "f32", _ne(128, 32, 1),
         [_f(128 ** -0.5), _f(0.0), _f(0.0)],
         [_src("f32", 128, 1, 32), _src("f16", 128, 4096, 8), _src("f16", 128, 4096, 8)], _fa_decode),
]


def ggml_ids(binary):
    """{op name: ggml_op id} and a type check, from the libggml-base beside the binary (ctypes)."""
    here = Path(binary).resolve().parent
    libs = [p for d in (here, here.parent / "lib", here.parent / "src", here.parent) for p in d.glob("libggml-base.so*")]
    if not libs:
        raise SystemExit(f"no libggml-base.so near {binary}: build ggml with shared libraries (the default)")
    lib = ctypes.CDLL(str(libs[0]))
    lib.ggml_op_name.restype = lib.ggml_type_name.restype = ctypes.c_char_p
    lib.ggml_op_name.argtypes = lib.ggml_type_name.argtypes = [ctypes.c_int]
    for name, i in GGML_TYPES.items():
        if lib.ggml_type_name(i).decode() != name:
            raise SystemExit(f"ggml type {i} is {lib.ggml_type_name(i)!r} in this build, expected {name}")
    want, ids = {c.op for c in CASES}, {}
    for i in range(1, 256):               # stop at the last op we need: past GGML_OP_COUNT is undefined
        ids.setdefault(lib.ggml_op_name(i).decode(), i)
        if want <= set(ids):
            return ids
    raise SystemExit(f"ops {sorted(want - set(ids))} not found in this ggml")


def test_file_line(case, ids):
    """One line of test-backend-ops' --test-file format (make_test_cases_from_file)."""
    parts = [ids[case.op], GGML_TYPES[case.out_type], *case.out_ne, len(case.params), *case.params, len(case.srcs)]
    for t, ne in case.srcs:
        size, block = TYPE_BYTES[t]
        nb = [size, size * ne[0] // block]
        nb += [nb[1] * ne[1], nb[1] * ne[1] * ne[2]]
        parts += [GGML_TYPES[t], *ne, *nb]
    return " ".join(str(p) for p in parts) + " -"


def run_ggml(binary, case, ids, backend, env):
    """ggml's us/run for the case (None and the output's tail when it did not run)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(test_file_line(case, ids) + "\n")
    try:
        p = subprocess.run([binary, "perf", "-b", backend, "--test-file", f.name], capture_output=True,
                           text=True, env=env, timeout=1800, check=False)
    finally:
        os.unlink(f.name)
    m = re.search(r"(\d+) runs -\s+([\d.]+) us/run", p.stdout)
    if m is None:
        return None, (p.stdout + p.stderr).strip()[-400:]
    return float(m.group(2)), int(m.group(1))


def run_fuelvk(case, target_s=0.5, max_k=200):
    """(wall us, device us) per op: k launches back to back, one wait; best of 3 batches."""
    fn = case.fuelvk()
    ctx = runtime.get()
    fn()
    ctx.stream.synchronize()
    t = time.perf_counter()
    fn()
    ctx.stream.synchronize()
    one = time.perf_counter() - t
    k = int(min(max_k, max(1, target_s // max(one, 1e-6))))
    timer = ctx.timer()
    walls, devs = [], []
    for _ in range(3):
        timer.start()
        for _ in range(k):
            fn()
        d, w = timer.stop()
        walls.append(w * 1e3 / k)
        devs.append(d * 1e3 / k)
    return min(walls), min(devs), k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="a built test-backend-ops")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (each case: ggml then fuelvk)")
    ap.add_argument("--only", help="comma-separated ggml op names or label prefixes")
    ap.add_argument("--backend", default="Vulkan0")
    ap.add_argument("--target-gb", default="1", help="GGML_PERF_TARGET_GB for a build that reads it")
    ap.add_argument("--target-gflop", default="4", help="GGML_PERF_TARGET_GFLOP for a build that reads it")
    args = ap.parse_args(argv)
    cases = CASES
    if args.only:
        keys = args.only.split(",")
        cases = [c for c in CASES if c.op in keys or any(c.label.startswith(k) for k in keys)]
    ids = ggml_ids(args.binary)
    # ggml-vulkan hides CPU devices (lavapipe) unless GGML_VK_VISIBLE_DEVICES names them
    env = {"GGML_VK_VISIBLE_DEVICES": "0", **os.environ,
           "GGML_PERF_TARGET_GB": args.target_gb, "GGML_PERF_TARGET_GFLOP": args.target_gflop}
    info = fv.device_info()
    print(f"device: {info['name']} ({info['type']}), driver {info['driver']}; {args.rounds} interleaved rounds",
          flush=True)
    res = {c.label: {"ggml": [], "wall": [], "dev": []} for c in cases}
    for r in range(args.rounds):
        for c in cases:
            us, n = run_ggml(args.binary, c, ids, args.backend, env)
            if us is None:
                print(f"round {r + 1} {c.label}: ggml did not run: {n}", file=sys.stderr, flush=True)
            else:
                res[c.label]["ggml"].append(us)
            try:
                wall, dev, k = run_fuelvk(c)
                res[c.label]["wall"].append(wall)
                res[c.label]["dev"].append(dev)
            except Exception as e:  # noqa: BLE001 -- a case fuelvk cannot run is reported in the table
                print(f"round {r + 1} {c.label}: fuelvk failed: {type(e).__name__}: {e}", file=sys.stderr)
                wall = dev = k = None
            print(f"round {r + 1} {c.label}: ggml {us} us ({n} runs), fuelvk wall {wall} us, device {dev} us "
                  f"(k={k})", file=sys.stderr, flush=True)
    print("| case | ggml-vulkan us/op | fuelvk wall us/op | fuelvk device us/op | ggml / fuelvk wall |")
    print("|---|---|---|---|---|")
    for c in cases:
        r = res[c.label]
        g = " / ".join(f"{v:.0f}" for v in r["ggml"]) or "did not run"
        w = " / ".join(f"{v:.0f}" for v in r["wall"]) or "failed"
        d = " / ".join(f"{v:.0f}" for v in r["dev"]) or "-"
        ratio = (f"{min(r['ggml']) / min(r['wall']):.2f}x (best of each), "
                 f"{statistics.median(r['ggml']) / statistics.median(r['wall']):.2f}x (medians)"
                 if r["ggml"] and r["wall"] else "-")
        print(f"| {c.label} | {g} | {w} | {d} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
