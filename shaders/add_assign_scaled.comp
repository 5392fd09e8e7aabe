#version 450
// In-place scaled accumulate dst += src * scale (f32), the optimizer / gradient-accumulation step.
// Same Params, FLAG_* and indexing as write.comp: dst is any non-broadcast view (written in place), src any
// view broadcast to it. Two roundings (multiply, then add; `precise` forbids a fused multiply-add),
// exactly numpy's dst += src * np.float32(scale).
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };

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
        precise float m = a[uint(src)] * p.scale;
        precise float s = o[uint(dst)] + m;
        o[uint(dst)] = s;
    }
}
