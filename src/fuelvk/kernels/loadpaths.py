"""Load-path micro-benchmark kernels (shaders/loadpath.comp): one copy kernel per way of reading a
buffer (storage buffer scalar/vector loads, uniform texel buffer texelFetch, storage texel buffer
imageLoad), so benches/bench_load_paths.py can compare what each costs on a device. Bench-only.

LOADPATHS: tag -> (path id, 32-bit words per texel, uniform texel buffer format or None, features); the
shader sees the ids as defines (PATH_SSBO_F32, ...) and PATH, the variant's own.
"""
from .registry import family, id_defines

LOADPATH_WG, LOADPATH_EPT = 256, 4        # invocations per workgroup, texels per invocation
LOADPATH_RPT = 16                          # READ mode (spec constant READ = 1): texels combined per invocation
LOADPATHS = {
    "ssbo_f32": (1, 1, None, ()),
    "ssbo_u2": (2, 2, None, ()),
    "ssbo_u4": (3, 4, None, ()),
    "ssbo_u64": (8, 2, None, ("int64",)),
    "ssbo_u64x2": (9, 4, None, ("int64",)),
    "utb_r32": (4, 1, "R32_UINT", ()),
    "utb_rg32": (10, 2, "R32G32_UINT", ()),
    "utb_rgba32": (5, 4, "R32G32B32A32_UINT", ()),
    "utb_rgba16f": (11, 2, "R16G16B16A16_SFLOAT", ()),   # f16 data only (converted to f32 and back)
    "stb_r32": (6, 1, None, ()),          # storage texel buffers: format from the shader's qualifier
    "stb_rgba32": (7, 4, None, ()),
}

PATH_IDS = {t: row[0] for t, row in LOADPATHS.items()}
if len(set(PATH_IDS.values())) != len(PATH_IDS):
    raise ValueError(f"loadpath ids collide: {PATH_IDS}")
family("loadpath", "loadpath.comp", {t: f"loadpath_{t}" for t in LOADPATHS},
       "Benchmark calibration", defines=id_defines(PATH=PATH_IDS),
       tag_defines={t: {"PATH": i} for t, i in PATH_IDS.items()},
       tag_features={t: row[3] for t, row in LOADPATHS.items()},
       tag_texel_formats={t: {1: row[2]} for t, row in LOADPATHS.items() if row[2]}, bench_only=True)
