#version 450
// Rotary position embedding, one invocation per channel pair of a row (writes both outputs).
// x is viewed as [o0, o1, seq, head_dim] with any strides (so a lazy [0,2,1,3] permute runs
// without a copy); cos/sin are [o0, o1, seq, table] views (strides may be 0 for broadcast).
// flags FLAG_INTERLEAVED: GPT-J interleaved pairs (2i, 2i+1), else NeoX rotate_half pairs (i, i + rot/2);
// FLAG_HALF_TABLE: half tables (rot/2 entries per row, cos[i] serves both members of pair i), else full
// tables of rot entries (the HF convention: cos = cat(freqs, freqs) or repeat_interleave).
// Channels rot..head_dim pass through. Output is contiguous [o0, o1, seq, head_dim].
// The rotation is computed in V (f32 for half types) with `precise` products, i.e. exactly
// torch's x * cos + rotate_half(x) * sin evaluated in V and rounded once on store.
// FLAG_* and WG are defines from kernels/rope.py.
#include "common/dtype.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
layout(set = 0, binding = 2) readonly buffer Cos { T tc[]; };
layout(set = 0, binding = 3) readonly buffer Sin { T ts[]; };

layout(push_constant) uniform Params {
    uint o1; uint seq; uint head_dim; uint rot; uint flags; uint total;
    uint off_x; uint off_c; uint off_s; int xs[4]; int cs[4]; int ss[4];
} p;

void main() {
    uint t = linear_group() * WG + gl_LocalInvocationID.x;
    if (t >= p.total) return;
    uint half_rot = p.rot / 2u;
    uint ppr = half_rot + (p.head_dim - p.rot + 1u) / 2u;   // pairs per row
    uint pr = t % ppr, row = t / ppr;
    uint s = row % p.seq, r2 = row / p.seq;
    int i1 = int(r2 % p.o1), i0 = int(r2 / p.o1);
    int xb = int(p.off_x) + i0 * p.xs[0] + i1 * p.xs[1] + int(s) * p.xs[2];
    uint ob = row * p.head_dim;
    if (pr < half_rot) {
        bool inter = (p.flags & FLAG_INTERLEAVED) != 0u;
        uint j0 = inter ? 2u * pr : pr, j1 = inter ? 2u * pr + 1u : pr + half_rot;
        uint c0 = (p.flags & FLAG_HALF_TABLE) != 0u ? pr : j0, c1 = (p.flags & FLAG_HALF_TABLE) != 0u ? pr : j1;
        int cb = int(p.off_c) + i0 * p.cs[0] + i1 * p.cs[1] + int(s) * p.cs[2];
        int sb = int(p.off_s) + i0 * p.ss[0] + i1 * p.ss[1] + int(s) * p.ss[2];
        V x0 = LOAD(x[xb + int(j0) * p.xs[3]]), x1 = LOAD(x[xb + int(j1) * p.xs[3]]);
        V cos0 = LOAD(tc[cb + int(c0) * p.cs[3]]), sin0 = LOAD(ts[sb + int(c0) * p.ss[3]]);
        V cos1 = LOAD(tc[cb + int(c1) * p.cs[3]]), sin1 = LOAD(ts[sb + int(c1) * p.ss[3]]);
        precise V a0 = x0 * cos0, b0 = x1 * sin0, a1 = x1 * cos1, b1 = x0 * sin1;
        precise V y0 = a0 - b0, y1 = a1 + b1;
        o[ob + j0] = STORE(y0);
        o[ob + j1] = STORE(y1);
    } else {
        uint j = p.rot + 2u * (pr - half_rot);
        o[ob + j] = x[xb + int(j) * p.xs[3]];
        if (j + 1u < p.head_dim) o[ob + j + 1u] = x[xb + int(j + 1u) * p.xs[3]];
    }
}
