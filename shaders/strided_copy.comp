#version 450
// Contiguize: copy a strided / broadcast / offset view (signed strides, rank <= 6 after the host
// collapses dims) into a contiguous output at off_o. Bit-exact for every width (NaN payloads too).
// Same Params block and indexing as elementwise.comp, so any view either kernel takes, this takes.
#include "common/width.glsl"
#include "common/index.glsl"

#define WG 256u
#define EPT 4u
layout(local_size_x = 256) in;

layout(constant_id = 1) const uint LINEAR = 0;  // 1: the input contiguous (or constant), offsets % 4 == 0

// The LINEAR path moves 4 elements per access as one unit Q. Why: lavapipe pays per loaded / stored
// component whatever its width, so the fewer and wider the components the better; 64-bit words
// (W64: the strided_copy_w64 twins, shaderInt64) halve the components of b2 / b4.
#if WIDTH == 8 || defined(W64)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if WIDTH == 1
#define Q uint
#elif WIDTH == 2 && defined(W64)
#define Q uint64_t
#elif WIDTH == 2
#define Q uvec2
#elif WIDTH == 4 && defined(W64)
#define Q u64vec2
#elif WIDTH == 4
#define Q uvec4
#else
#define Q u64vec4       // b8 needs shaderInt64 anyway (registry WIDTH_FEATURES)
#endif

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };
layout(set = 0, binding = 0) writeonly buffer Out4 { Q o4[]; };
layout(set = 0, binding = 1) readonly buffer A4 { Q a4[]; };

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

uint strided(uint i) {
    int idx = int(p.off_a);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        idx += int(i % n) * p.sa[d];
        i /= n;
    }
    return uint(idx);
}

// LINEAR path: 4 elements per access (a constant input is stored element by element); < 4 tail
// elements by the first invocation, out of the hot loop.
void main_linear() {
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    uint nq = p.n / 4u;
    bool contig = (p.flags & FLAG_A_CONTIGUOUS) != 0u;
    for (uint j = 0u; j < EPT; ++j) {
        uint q = base + j * WG;
        if (q >= nq) break;
        if (contig) {
            o4[p.off_o / 4u + q] = a4[p.off_a / 4u + q];
        } else {
            // (no local of type W: an 8 / 16-bit local would need shaderInt8 / shaderInt16)
            for (uint k = 0u; k < 4u; ++k) o[p.off_o + 4u * q + k] = a[p.off_a];
        }
    }
    if (linear_group() == 0u && gl_LocalInvocationID.x == 0u)
        for (uint i = nq * 4u; i < p.n; ++i) o[p.off_o + i] = a[contig ? p.off_a + i : p.off_a];
}

void main() {
    if (LINEAR != 0u) { main_linear(); return; }
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPT; ++j) {
        uint i = base + j * WG;
        if (i >= p.n) return;
        uint src = (p.flags & FLAG_A_CONTIGUOUS) != 0u ? p.off_a + i : ((p.flags & FLAG_A_CONSTANT) != 0u ? p.off_a : strided(i));
        o[p.off_o + i] = a[src];
    }
}
