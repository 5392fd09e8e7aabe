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

layout(push_constant) uniform Params {
    uint n; uint inner; uint n_idx; uint axis_in;
    uint off_out; uint off_in; uint off_idx; uint pad;
} p;

void main() {
    uint e = linear_group() * 128u + gl_LocalInvocationID.x;
    if (e >= p.n) return;
    uint r = e / p.inner, b = e - r * p.inner;
    uint a = r / p.n_idx, j = r - a * p.n_idx;
    bool ok;
    uint k = fetch_index(p.off_idx + j, p.axis_in, ok);
    o[p.off_out + e] = x[p.off_in + (a * p.axis_in + k) * p.inner + b];
}
