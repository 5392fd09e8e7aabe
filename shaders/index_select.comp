#version 450
// index_select / take: out[a, j, b] = x[a, ids[j], b] over a contiguous [outer, axis_in, inner]
// input (element offset off_in); a pure data move (raw WIDTH-byte words, bit-exact). Indices:
// u32 / i32 / i64 (spec constant IDX), negative ones count from the end; out-of-range ones are
// clamped into the axis (the public op raises IndexError before launching).
#include "common/width.glsl"
#include "common/index.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint IDX = 0;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer X { W x[]; };
layout(set = 0, binding = 2) readonly buffer Ids { uint ids[]; };
#include "index_fetch.glsl"

// TEX = 1: rows are whole 16-byte texels (inner * WIDTH and off_in * WIDTH multiples of 16): each
// invocation moves one texel, read through x's rgba32ui view x_t (where the device reads texels
// faster: Device.texel_loads, runtime/loadpath.py), and the Params count texels (n, inner, off_in).
// NO_TEXEL (the index_select_ssbo twin) has no view binding: the element path, no view bound. The
// texel variant divides by multiply-high (p.magic_*: the host's dividers), the twin by division.
#ifdef NO_TEXEL
const uint TEX = 0u;
#define TEXROW(t) uvec4(0u)
#else
layout(constant_id = 1) const uint TEX = 0;
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = 0) writeonly buffer Out4 { uvec4 o4[]; };
#define TEXROW(t) imageLoad(x_t, int(t))
#endif

layout(push_constant) uniform Params {
    uint n; uint inner; uint n_idx; uint axis_in;
    uint off_out; uint off_in; uint off_idx; uint pad;
    uint magic_r; uint shift_r; uint magic_a; uint shift_a;   // TEX: i / inner and r / n_idx dividers
} p;

// (i * magic) >> shift == i / d for i < n <= 2^31 (ops/_core.divider): lavapipe has no vector
// integer division (8 scalar divides per 8 lanes)
uint divide(uint i, uint magic, uint shift) {
    uint hi, lo;
    umulExtended(i, magic, hi, lo);
    return shift >= 32u ? hi >> (shift - 32u) : (hi << (32u - shift)) | (lo >> shift);
}

void main() {
    uint e = linear_group() * 128u + gl_LocalInvocationID.x;
    if (e >= p.n) return;
#ifdef NO_TEXEL
    uint r = e / p.inner, a = r / p.n_idx;
#else
    uint r = divide(e, p.magic_r, p.shift_r), a = divide(r, p.magic_a, p.shift_a);
#endif
    uint b = e - r * p.inner, j = r - a * p.n_idx;
    bool ok;
    uint k = fetch_index(p.off_idx + j, p.axis_in, ok);
    uint src = p.off_in + (a * p.axis_in + k) * p.inner + b;
#ifndef NO_TEXEL
    if (TEX != 0u) { o4[p.off_out + e] = TEXROW(src); return; }
#endif
    o[p.off_out + e] = x[src];
}
