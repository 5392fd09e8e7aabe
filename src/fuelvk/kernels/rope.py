"""RoPE: fused rotary position embedding (NeoX rotate_half, GPT-J interleaved, partial rotary dim).

The flag bits below reach the shader as defines of the same names."""
from .registry import family, float_variants

ROPE_WG = 256
FLAG_INTERLEAVED, FLAG_HALF_TABLE = 1, 2

family("rope", "rope.comp", float_variants("rope"), "RoPE",
       defines={"WG": ROPE_WG, "FLAG_INTERLEAVED": FLAG_INTERLEAVED, "FLAG_HALF_TABLE": FLAG_HALF_TABLE})
