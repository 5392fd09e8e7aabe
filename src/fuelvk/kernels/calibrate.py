"""Roof calibration kernels for the bench suite (fuelvk.bench.roofs): FMA peak per arithmetic dtype
and a 16-byte-per-invocation copy, both in shaders/calibrate.comp (its MODE specialization constant
takes MODES' ids, MODE_FMA / MODE_COPY in the shader). Bench-only: no public op runs them."""
from .registry import family, id_defines

CALIB_WG = 256
CALIB_FMAS_PER_ITER = 32          # 16 chains x 2 steps per loop iteration
MODES = {"fma": 0, "copy": 1}
MODE_FMA, MODE_COPY = MODES["fma"], MODES["copy"]

# f16 computes in float16_t (shaderFloat16); storage is uvec4 words, so no 16-bit storage is needed.
family("calibrate", "calibrate.comp", {"f32": "calibrate", "f16": "calibrate_f16"},
       "Benchmark calibration", defines=id_defines(MODE=MODES), tag_features={"f32": (), "f16": ("float16",)},
       bench_only=True)
