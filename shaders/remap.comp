#version 450
// Coordinate-remapping gather for the byte-width movement families: flip, roll, triu/tril, pad
// (constant / reflect / replicate) and pad backward (constant). One invocation per output element
// (EPT of them, one workgroup apart): the linear output index is split into coordinates over
// `shape` (rank <= 6), each coordinate is mapped to a source coordinate by MODE, and the source is
// read through any strided view (`sa` strides, signed, element offset off_a). Output contiguous.
// MODE is one of the MODE_* defines (kernels/movement.py REMAP_MODES):
//   MODE_GATHER        src = c                       (flip: the host passes the flipped strides)
//   MODE_ROLL          src = (c + lo) mod dim        (lo already in [0, dim))
//   MODE_TRIU / TRIL   keep where col - row >= k / <= k (last two dims), else 0
//   MODE_PAD_CONST     src = c - lo, outside [0, dim) -> fill  (pad backward const: lo = -left)
//   MODE_PAD_REFLECT   src = c - lo mirrored without repeating the edge (host: pads < dim)
//   MODE_PAD_REPLICATE src = clamp(c - lo, 0, dim - 1)
// Moves never interpret the bits (common/width.glsl), so every dtype of a width is bit-exact.
#include "common/width.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };

layout(push_constant) uniform Params {
    uint n; uint rank; uint off_o; uint off_a; int k; uint fill[2];
    int shape[6]; int sa[6]; int lo[6]; int dim[6];
} p;

W fill_value() {
#if WIDTH == 8
    return uvec2(p.fill[0], p.fill[1]);
#else
    return W(p.fill[0]);
#endif
}

W zero_value() {
#if WIDTH == 8
    return uvec2(0u);
#else
    return W(0u);
#endif
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    int r = int(p.rank);
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint rest = i;
        int src = int(p.off_a);
        bool inside = true;
        int col = 0, row = 0;
        for (int d = r - 1; d >= 0; --d) {
            uint nd = uint(p.shape[d]);
            int c = int(rest % nd);
            rest /= nd;
#if MODE == MODE_ROLL
            c += p.lo[d];
            if (c >= p.dim[d]) c -= p.dim[d];
#elif MODE == MODE_TRIU || MODE == MODE_TRIL
            if (d == r - 1) col = c;
            if (d == r - 2) row = c;
#elif MODE == MODE_PAD_CONST
            c -= p.lo[d];
            inside = inside && c >= 0 && c < p.dim[d];
#elif MODE == MODE_PAD_REFLECT
            c -= p.lo[d];
            if (c < 0) c = -c;
            if (c >= p.dim[d]) c = 2 * (p.dim[d] - 1) - c;
#elif MODE == MODE_PAD_REPLICATE
            c = clamp(c - p.lo[d], 0, p.dim[d] - 1);
#endif
            src += c * p.sa[d];
        }
#if MODE == MODE_TRIU
        inside = col - row >= p.k;
#elif MODE == MODE_TRIL
        inside = col - row <= p.k;
#endif
#if MODE == MODE_TRIU || MODE == MODE_TRIL || MODE == MODE_PAD_CONST
        W v;
        if (inside) v = a[uint(src)];       // never read outside the source
#if MODE == MODE_PAD_CONST
        else v = fill_value();
#else
        else v = zero_value();
#endif
        o[p.off_o + i] = v;
#else
        o[p.off_o + i] = a[uint(src)];
#endif
    }
}
