"""Padding: pad_const / pad_reflect / pad_replicate and pad_backward_const (byte-width keyed, remap.comp),
pad_backward_reflect / pad_backward_replicate (dtype keyed, pad_backward.comp: a deterministic gather
of each input element's preimage instead of the inventory's atomic CAS scatter)."""
from .movement import REMAP_MODES, WG, remap_family
from .registry import DTYPE_DEFINES, id_defines, texel_twins, width_variants

GROUP = "Padding (forward + backward)"
# pad_backward.comp: consecutive elements of a row per invocation, 64 bytes of grad_in (remap.comp's
# span): a row's coordinates are split once per run, so longer runs split less often (RUN 8 -> 16 for
# f32 took 1024x1024 reflect backward from 15.1 to 9.9 CPU ms on lavapipe)
BACKWARD_RUN = {"f32": 16, "f64": 8, "f16": 32, "bf16": 32}

remap_family("pad_const", "pad_const", width_variants("pad_const"), GROUP)
remap_family("pad_reflect", "pad_reflect", width_variants("pad_reflect"), GROUP)
remap_family("pad_replicate", "pad_replicate", width_variants("pad_replicate"), GROUP)
remap_family("pad_backward_const", "pad_const", width_variants("pad_backward_const"), GROUP)

# pad_backward.comp reads grad_out through a one-element-per-texel view (binding 2, a_t) where the
# device reads texels faster, else its storage-only twin pad_backward_<mode>_ssbo.
_BACKWARD_TEXELS = {"f32": {2: "R32_UINT"}, "f64": {2: "R32G32_UINT"}, "f16": {2: "R16_UINT"}, "bf16": {2: "R16_UINT"}}
for _mode in ("reflect", "replicate"):
    texel_twins(f"pad_backward_{_mode}", "pad_backward.comp", {t: f"pad_backward_{_mode}_{t}" for t in ("f32", "f64", "f16", "bf16")},
                GROUP, defines={"WG": WG, "MODE": REMAP_MODES[f"pad_{_mode}"],
                                **id_defines(MODE={m: REMAP_MODES[m] for m in ("pad_reflect", "pad_replicate")})},
                tag_defines={t: {**DTYPE_DEFINES[t], "RUN": r} for t, r in BACKWARD_RUN.items()}, tag_texel_formats=_BACKWARD_TEXELS)
