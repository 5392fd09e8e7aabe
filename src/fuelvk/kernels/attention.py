"""Attention kernels: single-pass, FlashAttention-2 and flash-decoding forward (split keys + combine),
dQ/dK/dV backward (shaders/attention.comp).

One GLSL source serves all seven families; KIND picks the kernel, DT_* the storage dtype, and the
head dim D is a specialization constant (each D gets its own exactly-sized pipeline).
"""
from .registry import GPU_PARALLEL_GROUPS, family, id_defines, parallel_groups

GROUP = "Attention"
SRC = "attention.comp"

# Kernels of the one source (define KIND) and the Params flag bits; the shader sees both as defines
# (KIND_SINGLE, FLAG_ALIBI, ...). resume/partial are the tiled forward's (m, l, acc) carried between
# key-range launches; accum is the backward's "add to the gradient of an earlier launch".
KINDS = {"single": 1, "tiled": 2, "backward_q": 3, "backward_k": 4, "backward_v": 5, "decode": 6, "combine": 7}
FLAGS = {"alibi": 1, "resume": 2, "partial": 4, "accum": 2}
# flash_decode's operands with a texel view, as bits of its TEX spec constant (TEX_K, TEX_V), and
# TEX_P: the score tile in a global scratch buffer read through its view instead of shared memory.
DECODE_TEXELS = {"k": 1, "v": 2, "p": 4}
DECODE_CHUNKS = {"kc": 8, "vc": 16}      # TEX_KC / TEX_VC: K / V rows are whole 16-byte chunks
_DEFINES = id_defines(KIND=KINDS, FLAG=FLAGS)

WG = 128                  # single pass and backward: invocations per workgroup
SINGLE_SK_MAX = 4096      # the single-pass score row (inventory contract)
TILED_BR_MAX = 16         # tiled: rows per workgroup (fewer for decode-sized problems)
D_MAX = 256
SKMAX_BUCKETS = (256, 1024, SINGLE_SK_MAX)   # score-row sizes the single-pass pipelines are built for

family("flash_attn", SRC, {"f32": "flash_attn_f32", "bf16": "flash_attn_bf16", "f16": "flash_attn_f16"},
       GROUP, defines=dict(_DEFINES, KIND=KINDS["single"]))
family("flash_attention", SRC, {"f32": "flash_attention"}, GROUP, defines=dict(_DEFINES, KIND=KINDS["tiled"]),
       extra=("f16", "bf16"))
family("flash_decode", SRC, {}, GROUP, defines=dict(_DEFINES, KIND=KINDS["decode"], **id_defines(TEX=dict(DECODE_TEXELS, **DECODE_CHUNKS))),
       extra=("f32", "f16", "bf16"))
family("flash_decode_combine", SRC, {}, GROUP, defines=dict(_DEFINES, KIND=KINDS["combine"]),
       extra=("f32", "f16", "bf16"))
for _g in ("q", "k", "v"):
    family(f"flash_attn_backward_{_g}", SRC, {"f32": f"flash_attn_backward_{_g}_f32"}, GROUP,
           defines=dict(_DEFINES, KIND=KINDS[f"backward_{_g}"]))

def tiled_shared_bytes(d, br, bc):
    """Shared memory of the tiled kernel: the query tile, one score tile and 3 row scalars (f32)."""
    return 4 * br * (d + bc + 2)


def tiled_config(d, rows, shared_limit):
    """(BR, BC) of the tiled kernel for head dim d and rows = G * Sq query rows per kv head, or None.

    BC (keys per tile = invocations) covers D in at most 4 dims per invocation; BR is the smallest
    power of two >= rows up to 16, halved until the tile fits the device's shared memory.
    """
    bc = 32 if d <= 32 else 64
    br = 1
    while br < min(rows, TILED_BR_MAX):
        br *= 2
    while br > 1 and tiled_shared_bytes(d, br, bc) > shared_limit:
        br //= 2
    return (br, bc) if tiled_shared_bytes(d, br, bc) <= shared_limit else None


# flash_decode's rows per workgroup on a CPU device (device_type "cpu", whose workgroups run one per
# thread): one vec4 row group, so the query tile fits in registers (QREG) and a row block shares its K / V
# reads with no shared-memory broadcasts, which a CPU driver runs lane by lane. There the decode kernel
# also serves prefill (any G * Sq): lavapipe, 2 cores, causal bottom-right, f32, CPU time per call:
#   q 32x40x128, k 16x70:  tiled (BR 16) 112 ms, flash_decode BR 16 65 ms, BR 4 32 ms
#   q 8x256x64,  k 8x256:  tiled 237 ms, flash_decode BR 16 125 ms, BR 4 60 ms
#   q 8x128x128, k 2x512:  tiled 525 ms, flash_decode BR 4 78 ms
#   q 16x1x128,  k 1x4096: flash_decode BR 16 35 ms, BR 4 9.5 ms (decode, GQA 16)
# A GPU keeps up to TILED_BR_MAX rows per workgroup (K / V shared by more rows) and the tiled kernel for more.
CPU_DECODE_ROWS = 4


def decode_config(d, rows, shared_limit, device_type):
    """(BR, BC) of flash_decode for rows = G * Sq query rows per kv head on a device of device_type."""
    return tiled_config(d, min(rows, CPU_DECODE_ROWS) if device_type == "cpu" else rows, shared_limit)


def decode_shared_bytes(d, br, bc):
    """Shared memory of flash_decode: query and score tiles as vec4s over 4 rows, 2 row scalars, 2 uvec4s
    (the score tile's worst case: in shared memory, without TEX_P)."""
    return 16 * -(-br // 4) * (d + bc) + 8 * br + 32


def single_shared_bytes(d, skmax):
    return 4 * (d + skmax + WG)


# Loop iterations per invocation (lavapipe caps their sum, Device.loop_budget), counted without
# unrolling except the [[unroll]] loops over constant bounds, with a margin for the prologue.
def tiled_keys_per_launch(d, br, bc, budget):
    """Keys one tiled launch may cover: each BC-key tile runs D + 3 * BC loop steps."""
    return None if budget is None else max(1, (budget - br * d // bc - 256) // (d + 3 * bc)) * bc


def bwd_span_per_launch(d, budget):
    """Pairs (keys for dQ, GQA-group rows for dK/dV) one backward launch may cover: WG per
    chunk, each chunk D + ceil(D / WG) * WG loop steps."""
    return None if budget is None else max(1, (budget - 512) // (d + -(-d // WG) * WG)) * WG


# flash_decode's key splits. A decode launch has few row blocks (B * Hkv of them), too few workgroups
# to occupy a GPU; the keys are split until the launch has about `target` workgroups (decode_target:
# the host's cores for a CPU device, whose workgroups run one per thread; DECODE_TARGET_GROUPS on a
# GPU, whose core count Vulkan does not report), each split keeping at least DECODE_MIN_SPLIT_TILES
# tiles of keys (a split's fixed cost: loading the query tile, one state row per row written and
# merged) and at most the keys one invocation's loops may cover on this device (Device.loop_budget,
# via tiled_keys_per_launch). Measured on lavapipe (2 cores, q 1x32x1x128, k 1x8x512x128 f32, CPU
# time per call): 1 split (8 workgroups) 2.9 ms, 2 splits 3.8 ms, 4 splits 5.1 ms.
DECODE_TARGET_GROUPS = GPU_PARALLEL_GROUPS
DECODE_MIN_SPLIT_TILES = 4


def decode_target(device):
    """Workgroups a decode launch aims for on `device` (see above): the device's parallel_groups."""
    return parallel_groups(device)


def decode_splits(sk, blocks, bc, keys_cap, target):
    """(nsplit, split_keys) for Sk = sk keys over `blocks` row blocks, BC = bc keys per tile, aiming
    at `target` workgroups: split_keys a multiple of bc, nsplit = ceil(sk / split_keys)."""
    tiles = max(1, -(-sk // bc))
    n = max(1, min(-(-target // max(blocks, 1)), tiles // DECODE_MIN_SPLIT_TILES))
    if keys_cap is not None:
        n = max(n, -(-sk // keys_cap))
    per = -(-tiles // n) * bc
    return -(-max(sk, 1) // per), per
