"""Recurrent state updates (shaders/recurrent.comp): Mamba2's selective state update and the gated
delta rule (gated delta-net decode / multi-token / prefill), each one dispatch per loop-budget window.

Tags are the dtype of the activations (x, dt, B, C / q, k, v, a, b and the output); the state is
float32 (mamba: float32 or the activations' dtype, STATE_F32), the per-head parameters float32."""
from .registry import family, float_variants

GROUP = "Recurrent updates"
RECURRENT_WG = 64
TAGS = ("f32", "f16", "bf16")
# Loop iterations per invocation: mamba, per request its dstate loop plus a few; gdn, per token its
# two passes over K, plus the state row's load and store (2 K) once a launch.
MAMBA_LOOP = (1, 2)          # (per dstate element, per request)
GDN_LOOP = (2, 4)            # (per K element, per token)
LOOP_FIXED = 16

family("mamba_ssu", "recurrent.comp", float_variants("mamba_ssu", TAGS), GROUP,
       defines={"WG": RECURRENT_WG, "MAMBA": 1})
family("gated_delta_rule", "recurrent.comp", float_variants("gated_delta_rule", TAGS), GROUP,
       defines={"WG": RECURRENT_WG, "GDN": 1})
