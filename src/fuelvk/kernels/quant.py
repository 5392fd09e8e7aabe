"""GGML quantized kernels: dequant, quantize, fused qmatvec (M == 1) and tiled qmatmul (M > 1).

All four families are one source, shaders/quant.comp (MODE picks the kernel, KIND the block
format), so each block decoder is written once. Tags are the GGML kinds; the inventory's kernels
are the q4_0/q8_0/q4_k ones, the rest (q6_k everywhere, q4_0 quantize, q8_0/q4_k/q6_k fused
matmuls) are fuelvk additions.
"""
from .registry import family, id_defines

GROUP = "Quantized (GGML) family"
SRC = "quant.comp"
MODES = {"dequant": 1, "quantize": 2, "qmatvec": 3, "qmatmul_tiled": 4}
KIND_IDS = {"q4_0": 0, "q8_0": 1, "q4_k": 2, "q6_k": 3}
# (elements per block, bytes per block): GGML's block sizes (gguf.constants.GGML_QUANT_SIZES)
BLOCK = {"q4_0": (32, 18), "q8_0": (32, 34), "q4_k": (256, 144), "q6_k": (256, 210)}

DEQUANT_WG, QUANTIZE_WG = 64, 64   # shaders/quant.comp local sizes (dequant: one 32-element sub-block per lane)
TEXEL_BYTES = 16                    # an rgba32ui texel (the load path of dequant / qmatvec)
MATVEC_ROWS = 16                    # output rows per qmatvec workgroup (NR; lavapipe CPU time per matvec, 1792 x 4096: NR 4 > 8 > 16)
TILE_M, TILE_N = 16, 64

# Loop iterations per invocation as kernels/matmul.py K_LOOP counts them: the tiled kernel per 32-deep
# chunk runs 4 load steps and the 32-step FMA loop (its W tile's decode was 16 more steps before it
# became one unrolled sub-block per lane; still counted: the K spans, hence the result bits, stay as
# they were); qmatvec's in matvec_k_loop (docs/MEASUREMENTS.md: where lavapipe's cap falls).
K_LOOP = {"tiled": (32, 57, 64)}
MATVEC_WG_MAX = 64                  # qmatvec's lanes: the subgroup width up to this (shared partials red[64])


def matvec_wg(device):
    """qmatvec's workgroup size: one subgroup (no barrier: shaders/quant.comp's qmatvec notes why), at
    most MATVEC_WG_MAX lanes."""
    return max(1, min(MATVEC_WG_MAX, device.subgroup_size or MATVEC_WG_MAX))


def matvec_k_loop(wg):
    """K_LOOP of a qmatvec of wg lanes: they stride over K's 32-element sub-blocks wg at a time (one
    loop iteration a step, 64 outside it)."""
    return (32 * wg, 1, 64)


_ID_DEFINES = id_defines(MODE=MODES, KIND=KIND_IDS)   # MODE_DEQUANT, KIND_Q4_0, ... for the shader
_KIND_DEFINES = {k: {"KIND": v} for k, v in KIND_IDS.items()}
_FEATURES = {k: ("storage16",) for k in KIND_IDS}


def _family(name, variants, features=()):
    family(name, SRC, variants, GROUP, defines=dict(_ID_DEFINES, MODE=MODES[name]), tag_defines=_KIND_DEFINES,
           tag_features=_FEATURES, features=features)


_family("dequant", {"q4_0": "dequant_q4_0", "q8_0": "dequant_q8_0", "q4_k": "dequant_q4_km",
                                     "q6_k": "dequant_q6_k"})
_family("quantize", {"q8_0": "quantize_q8_0", "q4_0": "quantize_q4_0"})
_family("qmatvec", {k: f"qmatvec_{k}" for k in KIND_IDS}, features=("subgroup_arithmetic",))
_family("qmatmul_tiled", {k: f"matmul_{k}_tiled" for k in KIND_IDS})
