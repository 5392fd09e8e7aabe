"""Roof calibration kernels for the bench suite (fuelvk.bench.roofs): FMA peak per arithmetic dtype
and a 16-byte-per-invocation copy, both in shaders/calibrate.comp (mode = specialization constant 0)."""
from .registry import P, family

CALIB_PARAMS = P("n:u32", "iters:u32")
CALIB_WG = 256
CALIB_FMAS_PER_ITER = 32          # 16 chains x 2 steps per loop iteration
MODE_FMA, MODE_COPY = 0, 1

# f16 computes in float16_t (shaderFloat16); storage is uvec4 words, so no 16-bit storage is needed.
family("calibrate", "calibrate.comp", {"f32": "calibrate", "f16": "calibrate_f16"},
       "Benchmark calibration", tag_features={"f32": (), "f16": ("float16",)})
