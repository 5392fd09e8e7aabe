"""RoPE: fused rotary position embedding (NeoX rotate_half, GPT-J interleaved, partial rotary dim)."""
from .registry import P, family, float_variants

ROPE_WG = 256
ROPE_PARAMS = P("o1:u32", "seq:u32", "head_dim:u32", "rot:u32", "flags:u32", "total:u32",
                "off_x:u32", "off_c:u32", "off_s:u32", "xs:i32[4]", "cs:i32[4]", "ss:i32[4]")
FLAG_INTERLEAVED, FLAG_HALF_TABLE = 1, 2

family("rope", "rope.comp", float_variants("rope"), "RoPE")
