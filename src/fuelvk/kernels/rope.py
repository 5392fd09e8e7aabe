"""RoPE: fused rotary position embedding (NeoX rotate_half, GPT-J interleaved, partial rotary dim).

One invocation per row, read and written in 16-byte chunks (shaders/common/rowchunks.glsl); the flag bits
below and the operands' texel-view bits (ROPE_TEXELS: TEX_X, ... in the shader) reach the shader as
defines of the same names."""
from .registry import family, float_variants, id_defines

ROPE_WG = 256
ROPE_CPU_HEADS = 4     # rows sharing table entries per invocation on a CPU device (ops/rope.py: rope_heads)
FLAG_INTERLEAVED, FLAG_HALF_TABLE = 1, 2
ROPE_TEXELS = {"x": 1, "c": 2, "s": 4, "o": 8}

family("rope", "rope.comp", float_variants("rope"), "RoPE",
       defines={"WG": ROPE_WG, "FLAG_INTERLEAVED": FLAG_INTERLEAVED, "FLAG_HALF_TABLE": FLAG_HALF_TABLE,
                **id_defines(TEX=ROPE_TEXELS)})
