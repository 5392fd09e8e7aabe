#version 450
// Texel-run copy: dst view <- src view where both are runs of whole 16-byte texels, element type
// irrelevant (raw bits: every width, NaN payloads too). The host (ops/movement.py texel_runs) takes a
// copy here when, after collapsing dims, both views' last dim is contiguous and every offset, outer
// stride and run length is a whole number of texels; Params are in texels (shape's last entry: texels
// per run). Serves strided_copy's contiguize (slices, .contiguous()), write_slice and concatenate.
// Reads go through the source's rgba32ui texel view a_t (chosen where the device reads texels faster
// than storage buffers: Device.texel_loads); writes through the destination's view o_t where TEXW = 1
// (Device.texel_stores), else through the storage buffer `out` as uvec4.
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(constant_id = 0) const uint TEXW = 0;

layout(set = 0, binding = 0) writeonly buffer Out { uvec4 o[]; };
layout(set = 0, binding = 1, rgba32ui) uniform readonly uimageBuffer a_t;
layout(set = 0, binding = 2, rgba32ui) uniform writeonly uimageBuffer o_t;

// run_magic / run_shift: i / run as a multiply-high and a shift (the host's texel_runs: exact for every
// i < n), since a per-element integer division costs more than the copy on CPU drivers.
layout(push_constant) uniform Params {
    uint n; uint rank; uint off_o; uint off_a; uint run_magic; uint run_shift;
    int shape[6]; int sa[6]; int so[6];
} p;

uint run_index(uint i) {
    uint hi, lo;
    umulExtended(i, p.run_magic, hi, lo);
    return p.run_shift >= 32u ? hi >> (p.run_shift - 32u) : (hi << (32u - p.run_shift)) | (lo >> p.run_shift);
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    int r = int(p.rank);
    uint run = uint(p.shape[r - 1]);
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint src = p.off_a + i, dst = p.off_o + i;   // rank 1: one run
        if (r > 1) {
            uint rest = run_index(i);
            uint c = i - rest * run;
            int si = int(p.off_a + c), di = int(p.off_o + c);
            for (int d = r - 2; d > 0; --d) {
                uint nd = uint(p.shape[d]);
                int k = int(rest % nd);
                rest /= nd;
                si += k * p.sa[d];
                di += k * p.so[d];
            }
            si += int(rest) * p.sa[0];   // the outermost index needs no wrap
            di += int(rest) * p.so[0];
            src = uint(si);
            dst = uint(di);
        }
        uvec4 v = imageLoad(a_t, int(src));
        if (TEXW != 0u) imageStore(o_t, int(dst), v);
        else o[dst] = v;
    }
}
