#version 450
// Contiguize: copy a strided / broadcast / offset view (signed strides, rank <= 6 after the host
// collapses dims) into a contiguous output at off_o. Bit-exact for every width (NaN payloads too).
// Same Params block and indexing as elementwise.comp, so any view either kernel takes, this takes.
#include "common/width.glsl"
#include "common/index.glsl"

#define WG 256u
#define EPT 4u
layout(local_size_x = 256) in;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer In { W a[]; };

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

void main() {
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPT; ++j) {
        uint i = base + j * WG;
        if (i >= p.n) return;
        uint src = (p.flags & 1u) != 0u ? p.off_a + i : ((p.flags & 2u) != 0u ? p.off_a : strided(i));
        o[p.off_o + i] = a[src];
    }
}
