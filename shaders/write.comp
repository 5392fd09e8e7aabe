#version 450
// Strided write: dst view <- src view, element for element over `shape` (rank <= 6). Serves
// write_slice (a[index] = b, e.g. a KV-cache append: dst is any non-broadcast view of a larger
// array, written in place) and concatenate (one dispatch per input into its slab of the output).
// Both sides take signed strides and element offsets; src may broadcast (stride 0). p.flags: FLAG_*
// defines (kernels/movement.py WRITE_FLAGS): src / dst contiguous (linear index, no math), src constant.
// Moved as raw words of WIDTH bytes (common/width.glsl): 8/16-bit storage writes single bytes and
// half-words at any alignment, so b1/b2 need no sub-word read-modify-write.
#include "common/width.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(set = 0, binding = 0) buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };

const uint BOTH_CONTIGUOUS = FLAG_SRC_CONTIGUOUS | FLAG_DST_CONTIGUOUS;

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o; uint off_a; float scale;
    int shape[6]; int sa[6]; int so[6];
} p;

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    int r = int(p.rank);
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        int src = int(p.off_a), dst = int(p.off_o);
        if ((p.flags & BOTH_CONTIGUOUS) == BOTH_CONTIGUOUS) {
            src += int(i);
            dst += int(i);
        } else {
            uint rest = i;
            for (int d = r - 1; d >= 0; --d) {
                uint nd = uint(p.shape[d]);
                int c = int(rest % nd);
                rest /= nd;
                src += c * p.sa[d];
                dst += c * p.so[d];
            }
            if ((p.flags & FLAG_SRC_CONSTANT) != 0u) src = int(p.off_a);
        }
        o[uint(dst)] = a[uint(src)];
    }
}
