#version 450
// Rotary position embedding, one invocation per row (or HEADS rows sharing table entries), in chunks of up to PER channels
// (common/rowchunks.glsl): NeoX rotates the chunk at j0 < rot/2 and its partner chunk at j0 + rot/2
// together, GPT-J each chunk of [0, rot) alone, then the pass-through channels are copied. Chunks
// that are whole aligned texels of their buffer are read (and written) as one 16-byte word, through
// the buffer's texel view where TEX has its bit; the rest element by element. Each output is the
// same expression on every path.
// x is viewed as [o0, o1, seq, head_dim] with any strides but a unit channel stride (so a lazy
// [0,2,1,3] permute runs without a copy; the host copies views whose channels are strided); cos/sin
// are [o0, o1, seq, table] views with unit channel strides (other strides may be 0 for broadcast).
// flags FLAG_INTERLEAVED: GPT-J interleaved pairs (2i, 2i+1), else NeoX rotate_half pairs (i, i + rot/2);
// FLAG_HALF_TABLE: half tables (rot/2 entries per row, cos[i] serves both members of pair i), else full
// tables of rot entries (the HF convention: cos = cat(freqs, freqs) or repeat_interleave).
// Channels rot..head_dim pass through. Output is contiguous [o0, o1, seq, head_dim].
// The rotation is computed in V (f32 for half types) with `precise` products, i.e. exactly
// torch's x * cos + rotate_half(x) * sin evaluated in V and rounded once on store.
// FLAG_*, TEX_* and WG are defines from kernels/rope.py.
#include "common/dtype.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
layout(set = 0, binding = 2) readonly buffer Cos { T tc[]; };
layout(set = 0, binding = 3) readonly buffer Sin { T ts[]; };
// The same buffers as 16-byte words (whole chunks on the storage-buffer path).
layout(set = 0, binding = 0) writeonly buffer Out4 { uvec4 o4[]; };
layout(set = 0, binding = 1) readonly buffer X4 { uvec4 x4[]; };
layout(set = 0, binding = 2) readonly buffer Cos4 { uvec4 tc4[]; };
layout(set = 0, binding = 3) readonly buffer Sin4 { uvec4 ts4[]; };
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = 5, rgba32ui) uniform readonly uimageBuffer c_t;
layout(set = 0, binding = 6, rgba32ui) uniform readonly uimageBuffer s_t;
layout(set = 0, binding = 7, rgba32ui) uniform writeonly uimageBuffer o_t;
layout(constant_id = 0) const uint TEX = 0;        // TEX_X | TEX_C | TEX_S | TEX_O
layout(constant_id = 1) const uint ALIGN = 0;      // TEX's bits: operands with whole chunks only (rowchunks)
// Rows per invocation: HEADS consecutive indices of x's dim o1 at one seq position (the host sets > 1 only
// when cos / sin do not vary over o1, so the rows share their table entries: read once, not per row).
layout(constant_id = 2) const uint HEADS = 1;
#include "common/texel16.glsl"
#include "common/rowchunks.glsl"
CHUNK_LOADER(load_x, x, x4, x_t, (TEX & TEX_X) != 0u, (ALIGN & TEX_X) != 0u)
CHUNK_LOADER(load_c, tc, tc4, c_t, (TEX & TEX_C) != 0u, (ALIGN & TEX_C) != 0u)
CHUNK_LOADER(load_s, ts, ts4, s_t, (TEX & TEX_S) != 0u, (ALIGN & TEX_S) != 0u)
CHUNK_STORER(store_o, o, o4, o_t, (TEX & TEX_O) != 0u, (ALIGN & TEX_O) != 0u)

layout(push_constant) uniform Params {
    uint o1; uint seq; uint head_dim; uint rot; uint flags; uint total;     // total: invocations
    uint off_x; uint off_c; uint off_s; int xs[3]; int cs[3]; int ss[3];
} p;

// The channels [j0, j0 + n) (n <= PER) of one row, rotated: x's chunk xv, its partner channels xp, the
// tables' entries cv / sv; `first`: the partner's term is subtracted (the first of each pair).
void rotate(V xv[PER], V xp[PER], V cv[PER], V sv[PER], bool first, bool inter, out V y[PER]) {
    for (uint j = 0u; j < PER; ++j) {
        bool sub = inter ? (j & 1u) == 0u : first;     // GPT-J: j0 is even, so the pair's parity is j's
        precise V a = xv[j] * cv[j], b = xp[j] * sv[j];
        precise V r = sub ? a - b : a + b;
        y[j] = r;
    }
}

void main() {
    // invocation g: the rows (i0, i1 + q, s) for q < HEADS (the host sets HEADS > 1 only for tables that do
    // not vary over o1: those rows share their cos / sin entries, read once for all of them)
    uint g = linear_group() * WG + gl_LocalInvocationID.x;
    if (g >= p.total) return;
    uint n1 = (p.o1 + HEADS - 1u) / HEADS;             // head groups per o0 index
    uint s = g % p.seq, r2 = g / p.seq;
    uint i1 = r2 % n1 * HEADS, i0 = r2 / n1;
    uint xb = uint(int(p.off_x) + int(i0) * p.xs[0] + int(i1) * p.xs[1] + int(s) * p.xs[2]);
    uint cb = uint(int(p.off_c) + int(i0) * p.cs[0] + int(i1) * p.cs[1] + int(s) * p.cs[2]);
    uint sb = uint(int(p.off_s) + int(i0) * p.ss[0] + int(i1) * p.ss[1] + int(s) * p.ss[2]);
    uint hd = p.head_dim, rot = p.rot, h = rot / 2u, ob = ((i0 * p.o1 + i1) * p.seq + s) * hd;
    uint heads = min(HEADS, p.o1 - i1);
    int xq = p.xs[1];                                  // x's and the output's step to the next head
    uint oq = p.seq * hd;
    bool inter = (p.flags & FLAG_INTERLEAVED) != 0u, half_table = (p.flags & FLAG_HALF_TABLE) != 0u;
    V xv[PER], xp[PER], cv[PER], sv[PER], c2[PER], s2[PER], y[PER];
    if (inter) {                                       // GPT-J: pairs (2i, 2i + 1) inside each chunk
        for (uint j0 = 0u; j0 < rot; j0 += PER) {
            uint n = min(PER, rot - j0);
            if (half_table) {
                load_c(cb + j0 / 2u, 0u, n / 2u, c2);
                load_s(sb + j0 / 2u, 0u, n / 2u, s2);
                for (uint j = 0u; j < PER; ++j) { cv[j] = c2[j / 2u]; sv[j] = s2[j / 2u]; }
            } else {
                load_c(cb + j0, 0u, n, cv);
                load_s(sb + j0, 0u, n, sv);
            }
            for (uint q = 0u; q < HEADS; ++q) if (q < heads) {
                uint xr = uint(int(xb) + int(q) * xq);
                load_x(xr + j0, 0u, n, xv);
                for (uint j = 0u; j < PER; ++j) xp[j] = xv[j ^ 1u];
                rotate(xv, xp, cv, sv, true, true, y);
                store_o(ob + q * oq + j0, 0u, n, y);
            }
        }
    } else {                                           // NeoX: channels k and k + h, chunk by chunk
        for (uint j0 = 0u; j0 < h; j0 += PER) {
            uint n = min(PER, h - j0);
            load_c(cb + j0, 0u, n, cv);
            load_s(sb + j0, 0u, n, sv);
            if (!half_table) {                         // full tables: entries k + h for the second
                load_c(cb + j0 + h, 0u, n, c2);
                load_s(sb + j0 + h, 0u, n, s2);
            } else {
                c2 = cv;
                s2 = sv;
            }
            for (uint q = 0u; q < HEADS; ++q) if (q < heads) {
                uint xr = uint(int(xb) + int(q) * xq), orow = ob + q * oq;
                load_x(xr + j0, 0u, n, xv);
                load_x(xr + j0 + h, 0u, n, xp);
                rotate(xv, xp, cv, sv, true, false, y);
                store_o(orow + j0, 0u, n, y);
                rotate(xp, xv, c2, s2, false, false, y);
                store_o(orow + j0 + h, 0u, n, y);
            }
        }
    }
    // channels rot .. hd pass through: x's bits
    for (uint q = 0u; q < HEADS; ++q) if (q < heads) {
        uint xr = uint(int(xb) + int(q) * xq), orow = ob + q * oq;
        for (uint j0 = rot; j0 < hd; j0 += PER) {
            uint n = min(PER, hd - j0);
            if (((ALIGN & TEX_X) != 0u && (ALIGN & TEX_O) != 0u) || (n == PER && (xr + j0) % PER == 0u && (orow + j0) % PER == 0u)) {
                uint k = (xr + j0) / PER;
                uvec4 u = (TEX & TEX_X) != 0u ? imageLoad(x_t, int(k)) : x4[k];
                if ((TEX & TEX_O) != 0u) imageStore(o_t, int((orow + j0) / PER), u);
                else o4[(orow + j0) / PER] = u;
            } else {
                for (uint j = 0u; j < PER; ++j) if (j < n) o[orow + j0 + j] = x[xr + j0 + j];
            }
        }
    }
}
