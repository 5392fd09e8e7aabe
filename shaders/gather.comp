#version 450
// gather / take_along_axis: out[c] = x[c with c[axis] replaced by ids[c]] for every output
// coordinate c (rank <= 6). x and ids are strided views (element strides, 0 = broadcast, signed)
// with element offsets; out is contiguous. Raw WIDTH-byte words (bit-exact, any dtype).
// Indices u32 / i32 / i64 (IDX); negative ones count from the end; out-of-range ones are clamped
// into the axis (the public op raises IndexError before launching).
#include "common/width.glsl"
#include "common/index.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint IDX = 0;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer X { W x[]; };
layout(set = 0, binding = 2) readonly buffer Ids { uint ids[]; };
#include "index_fetch.glsl"

layout(push_constant) uniform Params {
    uint n; uint rank; uint axis; uint axis_len;
    uint off_out; uint off_x; uint off_idx; uint pad;
    int shape[6]; int sx[6]; int si[6];
} p;

void main() {
    uint e = linear_group() * 128u + gl_LocalInvocationID.x;
    if (e >= p.n) return;
    int xo = int(p.off_x), io = int(p.off_idx);
    uint r = e;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        int c = int(r % n);
        r /= n;
        io += c * p.si[d];
        if (uint(d) != p.axis) xo += c * p.sx[d];
    }
    bool ok;
    uint k = fetch_index(uint(io), p.axis_len, ok);
    o[p.off_out + e] = x[uint(xo + int(k) * p.sx[p.axis])];
}
