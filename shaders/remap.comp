#version 450
// Coordinate-remapping gather for the byte-width movement families: flip, roll, triu/tril, pad
// (constant / reflect / replicate) and pad backward (constant). One invocation per run of RUN
// consecutive output elements of one row (the last dim; a row's runs are consecutive invocations):
// the row index is split into coordinates over `shape` (rank <= 6) once per run, not once per
// element (integer division is the expensive part on CPU drivers), each coordinate is mapped to a
// source coordinate by MODE, and the source is read through any strided view (`sa` strides,
// signed, element offset off_a). Output contiguous. n = the output's element count; the host
// launches ceil(rows * ceil(last / RUN) / WG) workgroups (ops/movement.py launch_remap).
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
const uint WGU = WG, RUNU = RUN;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };
#ifndef NO_TEXEL
// The same source as one element per texel (R8/R16/R32_UINT, R32G32_UINT by width): where the device
// reads texels faster, a's reads come through here (binding a stays bound, unread).
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 2) uniform utextureBuffer a_t;
W load_a(uint i) {
#if WIDTH == 8
    return texelFetch(a_t, int(i)).xy;
#else
    return W(texelFetch(a_t, int(i)).x);
#endif
}
#else
W load_a(uint i) { return a[i]; }
#endif

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

// One coordinate c of an output position mapped to its source coordinate along a dim of extent
// `dim` (shift / left pad lo); `inside` false where constant padding fills it.
int source_coord(int c, int lo, int dim, inout bool inside) {
#if MODE == MODE_ROLL
    c += lo;
    if (c >= dim) c -= dim;
#elif MODE == MODE_PAD_CONST
    c -= lo;
    inside = inside && c >= 0 && c < dim;
#elif MODE == MODE_PAD_REFLECT
    c -= lo;
    if (c < 0) c = -c;
    if (c >= dim) c = 2 * (dim - 1) - c;
#elif MODE == MODE_PAD_REPLICATE
    c = clamp(c - lo, 0, dim - 1);
#endif
    return c;
}

void main() {
    int r = int(p.rank);
    uint last = uint(p.shape[r - 1]);
    uint runs = (last + RUNU - 1u) / RUNU;          // runs per row
    uint item = linear_group() * WGU + gl_LocalInvocationID.x;
    uint row = item / runs;
    if (row >= p.n / last) return;
    uint col0 = (item - row * runs) * RUNU;
    // the row's source offset and (triu / tril) its index in the second-to-last dim
    uint rest = row;
    int src = int(p.off_a);
    bool row_inside = true;
    int row_c = 0;
    for (int d = r - 2; d >= 0; --d) {
        uint nd = uint(p.shape[d]);
        int c = int(rest % nd);
        rest /= nd;
        if (d == r - 2) row_c = c;
        src += source_coord(c, p.lo[d], p.dim[d], row_inside) * p.sa[d];
    }
    uint out_i = p.off_o + row * last;
    uint col_end = min(col0 + RUNU, last);
    for (uint col = col0; col < col_end; ++col) {
        bool inside = row_inside;
        int s = src + source_coord(int(col), p.lo[r - 1], p.dim[r - 1], inside) * p.sa[r - 1];
#if MODE == MODE_TRIU
        inside = int(col) - row_c >= p.k;
#elif MODE == MODE_TRIL
        inside = int(col) - row_c <= p.k;
#endif
#if MODE == MODE_TRIU || MODE == MODE_TRIL
        W v = load_a(uint(s));                  // in range everywhere: a select, not a branch
        o[out_i + col] = inside ? v : zero_value();
#elif MODE == MODE_PAD_CONST
        W v;
        if (inside) v = load_a(uint(s));         // never read outside the source
        else v = fill_value();
        o[out_i + col] = v;
#else
        o[out_i + col] = load_a(uint(s));
#endif
    }
}
