#version 450
// masked_fill: out = mask != 0 ? fill : x, for any dtype of WIDTH bytes (raw words, bit-exact).
// x and the u8/bool mask are strided + broadcast + offset views (the EW Params of elementwise.comp;
// FLAG_* bits: x at a's, the mask at b's); fill is the element's bit pattern in s0.
// Output contiguous. The mask is read as bytes (8-bit storage), never packed four to a word.
// MASKED_COPY (fuelvk.where): out[i] = x[i] where the mask is set, and out[i] is left as it is
// elsewhere (the caller filled it with the other operand first): a select of two strided views.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#include "common/width.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };
layout(set = 0, binding = 2) readonly buffer Mask { uint8_t m[]; };

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

uint strided(uint i, uint off, int st[6]) {
    int idx = int(off);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        idx += int(i % n) * st[d];
        i /= n;
    }
    return uint(idx);
}

// flags: an input's bits at a's positions (b's shifted down by FLAG_B_SHIFT).
uint input_index(uint i, uint flags, uint off, int st[6]) {
    if ((flags & FLAG_A_CONTIGUOUS) != 0u) return off + i;
    if ((flags & FLAG_A_CONSTANT) != 0u) return off;
    return strided(i, off, st);
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
#if WIDTH == 8
    W fill = uvec2(p.s0[0], p.s0[1]);
#else
    W fill = W(p.s0[0]);
#endif
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
#ifdef MASKED_COPY
        if (m[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, p.sb)] != uint8_t(0))
            o[p.off_o + i] = a[input_index(i, p.flags, p.off_a, p.sa)];
#else
        W v;
        if (m[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, p.sb)] != uint8_t(0)) v = fill;
        else v = a[input_index(i, p.flags, p.off_a, p.sa)];
        o[p.off_o + i] = v;
#endif
    }
}
