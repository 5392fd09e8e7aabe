"""Counter-based random numbers (rng.comp: Philox4x32-10): raw u32 words, and bernoulli keep-masks
(dropout's, drawn on the device; fuelvk.ops.rng)."""
from .registry import family, id_defines

GROUP = "Random numbers"
WG = 64
MODES = {"raw": 0, "keep": 1}

family("rng", "rng.comp", {m: f"rng_{m}" for m in MODES}, GROUP, defines={"WG": WG, **id_defines(MODE=MODES)},
       tag_defines={m: {"MODE": v} for m, v in MODES.items()}, tag_features={})
