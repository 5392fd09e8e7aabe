#version 450
// Concatenation of 2 to 4 pieces in one launch (concatenate took a launch per piece), where the output
// and every piece are rows of whole 16-byte texels: the output (fresh, contiguous) is rows of `row`
// texels, one per index of the dims before the axis (which the host collapses, for all pieces at once,
// to at most 3: sizes [.., outer[1], outer[0]]); piece k fills texels [start[k], start[k + 1]) of each
// row from its own row at off[k] + sum_d r_d * stride<d>[k] (its dims from the axis on contiguous: a
// rotate_half piece of a transposed q is one). Raw bits (any element width). Pieces are read
// through their rgba32ui texel views (the host takes this path where Device.texel_loads), writes go
// through the output's view o_t where TEXW = 1 (Device.texel_stores), else through `out` as uvec4.
// PIECES (2..4) compiles out the unused views; the host binds the first piece's view in their place.
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(constant_id = 0) const uint TEXW = 0;
layout(constant_id = 1) const uint PIECES = 2;

layout(set = 0, binding = 0) writeonly buffer Out { uvec4 o[]; };
layout(set = 0, binding = 1, rgba32ui) uniform readonly uimageBuffer p0_t;
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer p1_t;
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer p2_t;
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer p3_t;
layout(set = 0, binding = 5, rgba32ui) uniform writeonly uimageBuffer o_t;

// row_magic / row_shift: i / row as a multiply-high and a shift (exact for every i < n). start[0] = 0;
// start[k] of a piece past PIECES is never read.
layout(push_constant) uniform Params {
    uint n; uint row; uint row_magic; uint row_shift; uint outer[2];
    uint start[4]; uint off[4]; uint stride0[4]; uint stride1[4]; uint stride2[4];
} p;

uint row_index(uint i) {
    uint hi, lo;
    umulExtended(i, p.row_magic, hi, lo);
    return p.row_shift >= 32u ? hi >> (p.row_shift - 32u) : (hi << (32u - p.row_shift)) | (lo >> p.row_shift);
}

// piece k's texel for output row r, column c (c in its columns): every view is read, the others at
// their first texel (always in range), and the right one selected: no load outside a view, whatever
// a driver does with a divergent branch
uvec4 piece_texel(uint k, uint r, uint c) {
    uint r0 = r % p.outer[0], r12 = r / p.outer[0];
    uint src = p.off[k] + r0 * p.stride0[k] + (r12 % p.outer[1]) * p.stride1[k] + (r12 / p.outer[1]) * p.stride2[k]
        + (c - p.start[k]);
    uvec4 v = imageLoad(p0_t, int(k == 0u ? src : 0u));
    uvec4 w = imageLoad(p1_t, int(k == 1u ? src : 0u));
    v = k == 1u ? w : v;
    if (PIECES > 2u) {
        w = imageLoad(p2_t, int(k == 2u ? src : 0u));
        v = k == 2u ? w : v;
    }
    if (PIECES > 3u) {
        w = imageLoad(p3_t, int(k == 3u ? src : 0u));
        v = k == 3u ? w : v;
    }
    return v;
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint r = row_index(i);
        uint c = i - r * p.row;
        uint k = uint(c >= p.start[1]);
        if (PIECES > 2u) k += uint(c >= p.start[2]);
        if (PIECES > 3u) k += uint(c >= p.start[3]);
        uvec4 v = piece_texel(k, r, c);
        if (TEXW != 0u) imageStore(o_t, int(i), v);
        else o[i] = v;
    }
}
