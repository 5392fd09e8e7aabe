"""Matmul / matvec family: matvec, register-tiled, shared-memory tiled, small scalar, cooperative matrix.

The four GLSL routes are one generic kernel (shaders/matmul.comp, MODE macro) monomorphized per
dtype combination A_B_C; the cooperative-matrix route is Slang (shaders/matmul_coop.slang) and is
built into pipelines only on devices with VK_KHR_cooperative_matrix. ROUTES is the route table the
picker (ops/matmul.py) and device_info() read.
"""
from .registry import family, id_defines, parallel_groups  # noqa: F401 - ops/matmul reads it here (tests patch it)

GROUP = "Matmul / matvec family"
MAX_BATCH_DIMS = 3

# dtype combinations "A_B_C" (all accumulate in f32) and their shader defines / device features.
COMBOS = ("f32_f32_f32", "f32_bf16_f32", "f16_f16_f32", "f16_f16_f16", "bf16_bf16_f32", "bf16_bf16_bf16")
TYPE_IDS = {"f32": 0, "f16": 1, "bf16": 2}   # the shaders' A_DT / B_DT / C_DT (defines TYPE_F32, ...)
# The four GLSL routes of matmul.comp (define MODE; the shader names them MODE_MATVEC, ...).
MODES = {"matvec": 0, "register_tiled": 1, "tiled": 2, "small": 3}
_IDS = id_defines(TYPE=TYPE_IDS, MODE=MODES)
COMBO_DEFINES = {t: dict(_IDS, **dict(zip(("A_DT", "B_DT", "C_DT"), (TYPE_IDS[x] for x in t.split("_")))))
                 for t in COMBOS}
COMBO_FEATURES = {t: ("storage16",) if any(x != "f32" for x in t.split("_")) else () for t in COMBOS}

# Geometry the host needs to size grids (must match shaders/matmul.comp and matmul_coop.slang).
WG = 64
REG_LANE_COLS = {"f32": 4, "f16": 8, "bf16": 8}  # register tile: columns per lane per TNV (one texel of B)
REG_TM = (1, 4, 8, 16, 32)                     # rows per invocation (specialization constant TM)
REG_TNV = (1, 2)                               # column groups (texels of B) per lane (constant TNV)
REG_GN = (8, 4, 2, 1)                          # 8-lane groups side by side along N (constant GN)
REG_LANE_TARGET = 8                            # columns per lane at most (more column groups only up to it)
REG_MAX_ACC = 256                              # accumulators per lane (TM x columns): 32 x 8 f32 measured best
# Relative cost of one texel load against one 8-lane FMA in the register tile's loop, for the tile
# picker's cost model (ops/matmul.py _reg_tile): each A texel feeds 4 k x (columns per lane) FMAs, each
# B texel 4 x TM; lavapipe measured ~half of a 32 x 4 tile's time in its A loads (the same kernel with
# A loaded once per step ran 1.7-2x faster), i.e. a load ~8 FMAs.
REG_LOAD_COST = 8
# Why loads cost that much there (Mesa 22.3 llvmpipe, read from the JIT'd loop of the 32 x 8 tile): one
# 8-deep K step is ~8,700 x86 instructions, 4,096 of them the FMAs (fma() becomes vmulps + vaddps) and
# ~40 per texel load (8 lane offsets extracted, 8 16-byte loads, a 4 x 8 transpose, bounds masking), 80
# loads a step, 64 of them A's. Every lane of an 8-lane group loads the same A texel, but gallivm has a
# one-load path only for uniform-buffer / push-constant offsets built from constants and push constants
# (no workgroup id, no loop counter), and LLVM does not merge the 8 loads even when the coordinate goes
# through subgroupBroadcast first (measured: same instruction mix, no gain); handing A out with
# subgroupBroadcast costs an 8-iteration loop per value (1.8x slower). Time over tile shapes fits
# ~F + L (1 / columns per lane + 1 / rows) with the loads ~55% of it. Mesa 25.0's llvmpipe is the other
# way round for A: each texel load is a call into a JIT'd image function (the live vector registers
# spilled around it), a broadcast a register shuffle, so there the lanes share A's texels (TEXA 3,
# chosen by a probe: ops/matmul.py share_a). Its 512^3 f32 loop with every load removed (timing only)
# ran at ~99% of the FMA calibration kernel per CPU second; the texel loads take the rest.
REG_MATVEC_GROUPS = 2                          # column groups per lane of the one-row (matvec) tile
MATVEC_KSPLIT_COLS = 8 * 8                     # matvec with K-contiguous B: 8 groups x NCG columns
TEXEL_BYTES = 16                               # matvec / register tile texel views: rgba32ui
TILED_BLOCK = (64, 64)                         # shared-memory tiled: BM x BN
SMALL_BLOCK = (16, 16)
COOP_BLOCK = (64, 64)                          # coop: 2 x 2 subgroups, each 32 x 32 = 2 x 2 tiles of 16^3
COOP_TILE = 16                                 # M, N, K must be multiples of it

# Loop iterations one invocation runs (lavapipe caps their sum: Device.loop_budget), per route, as
# (K elements per step of its K loop, iterations per step, iterations outside it + margin), counted
# from the shaders and checked on lavapipe 22.3 (cap 65,534) by bisecting the largest K an unsplit
# launch gets right. matvec / register tile: one iteration per 8 K (right up to K = 524,280);
# matvec_ksplit (lanes split K): one per 64 K; tiled: per 32-deep slab two 32-step load loops and the
# 32-step FMA loop, ~100 in all (right up to K = 20,960); small: up to 4 outputs per lane, each its
# own K loop (right up to K = 16,376 at M >= 16); coop: per 32-deep slab two 16-step load loops and
# the 2 x 2 MMA loops.
K_LOOP = {"matvec": (8, 1, 32), "matvec_ksplit": (64, 1, 32), "register_tiled": (8, 1, 32),
          "tiled": (32, 101, 64), "small": (1, 4, 32), "coop": (32, 96, 64)}
# Split-K for occupancy: a launch with fewer workgroups than the device runs at once (parallel_groups)
# and a long K sums K spans of at least this depth side by side (one launch, the spans an extra batch
# dim), into float32 partials added in a fixed order (deterministic, one rounding to the output dtype).
# Only where one workgroup's share is large (its rows x columns of the product x K >= KSPLIT_MIN_WORK):
# below it the partials' extra dispatch (~0.05-0.1 ms on lavapipe) costs more than the spread gains.
KSPLIT_MIN_K = 256
KSPLIT_MIN_WORK = 1 << 22
K_SPAN_ALIGN = 8   # K spans keep the 16-byte texel alignment of K-contiguous operands (8 half / 2 x 4 f32)


def _names(prefix, inventory, combos=COMBOS):
    return {t: inventory.get(t, f"{prefix}_{t}") for t in combos}


SRC = "matmul.comp"
family("matvec", SRC, _names("matvec", {"f32_f32_f32": "matvec", "f32_bf16_f32": "matvec_bf16_b"}), GROUP,
       defines={"MODE": MODES["matvec"]}, tag_defines=COMBO_DEFINES, tag_features=COMBO_FEATURES)
family("matmul", SRC, _names("matmul", {"f32_f32_f32": "matmul"}), GROUP,
       defines={"MODE": MODES["register_tiled"]}, tag_defines=COMBO_DEFINES, tag_features=COMBO_FEATURES)
family("matmul_tiled", SRC, _names("matmul_tiled", {"f32_f32_f32": "matmul_tiled", "f32_bf16_f32": "matmul_tiled_bf16_b"}), GROUP,
       defines={"MODE": MODES["tiled"]}, tag_defines=COMBO_DEFINES, tag_features=COMBO_FEATURES)
family("matmul_small", SRC, _names("matmul_small", {}), GROUP,
       defines={"MODE": MODES["small"]}, tag_defines=COMBO_DEFINES, tag_features=COMBO_FEATURES)
# CooperativeMatrixKHR plus what the Slang SPIR-V declares with it (runtime/device.py FEATURE_FIELDS)
COOP_FEATURES = ("cooperative_matrix", "float16", "uniform_storage16", "memory_model", "memory_model_device_scope",
                 "subgroup_basic")
COOP_COMBOS = ("f32_bf16_f32", "f16_f16_f32", "f16_f16_f16", "bf16_bf16_f32", "bf16_bf16_bf16")
family("matmul_coop", "matmul_coop.slang", {"f32_bf16_f32": "matmul_coop", "bf16_bf16_f32": "matmul_coop_bf16_bf16",
        "f16_f16_f32": "matmul_coop_f16_f16", "bf16_bf16_bf16": "matmul_coop_bf16_bf16_bf16",
        "f16_f16_f16": "matmul_coop_f16_f16_f16"}, GROUP,
       tag_defines=COMBO_DEFINES, features=COOP_FEATURES,   # Slang's bf16 bit casts declare Int16
       tag_features={t: COMBO_FEATURES[t] + (("int16",) if "bf16" in t else ()) for t in COOP_COMBOS})

# route name -> family; "coop" needs the device feature, the others run everywhere.
ROUTES = {"matvec": "matvec", "register_tiled": "matmul", "tiled": "matmul_tiled", "small": "matmul_small",
          "coop": "matmul_coop"}
ROUTE_FEATURES = {"coop": COOP_FEATURES}


def route_variant_tag(route):
    """A dtype tag the route's family has (its shared memory and workgroup size are the same for
    every tag), for asking whether its pipeline fits a device."""
    return COOP_COMBOS[0] if route == "coop" else COMBOS[0]


def available_routes(features, fits=None):
    """Routes a device with these feature names can run (device_info()["routes"]["matmul"]);
    `fits(route)`, when given, drops those whose pipeline exceeds the device limits."""
    return [r for r in ROUTES
            if all(f in features for f in ROUTE_FEATURES.get(r, ())) and (fits is None or fits(r))]
