#version 450
// argmax / argmin. Logical view [n_out / n_inner, d, n_inner] with signed element strides
// (s_outer, s_d, s_inner) from off_in, so any view that collapses to that shape runs without a copy.
// ANY_DIM: one invocation per (output element, chunk of the reduced dim) scans serially (coalesced
// across invocations when s_inner == 1; one short row per invocation when n_inner == 1); a long dim
// runs in n_chunks (MODE_PARTIAL writes each chunk's winner at [chunk * n_out + e], MODE_FINAL scans
// those columns). Otherwise (last dim): one workgroup per output element, each
// invocation scans a strided subset, then a tree on (value, index) pairs; rows longer than a chunk
// run workgroup-per-chunk (MODE_PARTIAL writes each chunk's winner) and then MODE_FINAL over the
// winners.
// Lowest index wins on ties; NaN wins over every number and the first NaN is returned (torch and
// numpy). Output: u32 indices, or int64 (two words, high word 0) when OUT64 is set.
// OP_* and MODE_* are defines from kernels/reduction.py (ARG_OPS, MODES).
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint OP = OP_ARGMAX;
layout(constant_id = 2) const uint OUT64 = 1;
layout(local_size_x_id = 0) in;

layout(constant_id = 3) const uint MODE = MODE_DIRECT;
layout(set = 0, binding = 0) writeonly buffer Out { uint o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
layout(set = 0, binding = 2) buffer PartV { A part_v[]; };
layout(set = 0, binding = 3) buffer PartI { uint part_i[]; };
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer x_t;
layout(constant_id = 4) const uint TEX = 0;
#include "common/texel16.glsl"

layout(push_constant) uniform Params {
    uint n_out; uint n_inner; uint d; uint off_in;
    uint off_out; int s_outer; int s_d; int s_inner;
    uint chunk; uint n_chunks;
} p;

const uint NONE = 0xFFFFFFFFu;

// Does (vb, ib) beat (va, ia)? ia/ib may be NONE (no candidate yet).
bool beats(A vb, uint ib, A va, uint ia) {
    if (ib == NONE) return false;
    if (ia == NONE) return true;
    bool na = isnan(va), nb = isnan(vb);
    if (nb) return !na || ib < ia;
    if (na) return false;
    if (vb == va) return ib < ia;
    return OP == OP_ARGMAX ? vb > va : vb < va;
}

void store(uint e, uint idx) {
    if (OUT64 != 0u) { o[2u * (p.off_out + e)] = idx; o[2u * (p.off_out + e) + 1u] = 0u; }
    else o[p.off_out + e] = idx;
}

int base_of(uint e) {
    uint outer = e / p.n_inner, inner = e - outer * p.n_inner;
    return int(p.off_in) + int(outer) * p.s_outer + int(inner) * p.s_inner;
}

#ifdef ANY_DIM
// Read x through its rgba32ui texel view (not in MODE_FINAL). ANY_DIM: 1: PER adjacent output
// columns per texel (s_inner == 1); 2: each invocation's stretch of d as texels (s_d == 1); 3:
// consecutive rows of d elements, d dividing PER, one chunk: the PER / d rows of one texel per
// invocation (the last, partial texel through x); the host checks that those runs are whole texels.
// Last dim: 1 (s_d == 1): a chunk's whole texels, its unaligned ends through x.

void finish(uint ch, uint oe, A best, uint bi) {
    if (MODE == MODE_PARTIAL) { part_v[ch * p.n_out + oe] = best; part_i[ch * p.n_out + oe] = bi; }
    else store(oe, bi == NONE ? 0u : bi);
}

// TEX 3: rows r0 .. r0 + PER / d - 1, in the same order as the scalar path.
void short_rows(uint r0) {
    uint rows = PER / p.d, first = p.off_in + r0 * p.d;
    bool whole = first + PER <= p.off_in + p.n_out * p.d;
    A v[PER];
    if (whole) texel(first / PER, v);
    for (uint r = r0; r < min(r0 + rows, p.n_out); ++r) {
        A best = A(0);
        uint bi = NONE;
        for (uint k = 0u; k < p.d; ++k) {
            A xv = whole ? v[(r - r0) * p.d + k] : A(LOAD(x[p.off_in + r * p.d + k]));
            if (beats(xv, k, best, bi)) { best = xv; bi = k; }
        }
        store(r, bi == NONE ? 0u : bi);
    }
}

void main() {
    const uint W = TEX == 1u && MODE != MODE_FINAL ? PER : 1u;   // adjacent outputs per invocation
    if (TEX == 3u && MODE != MODE_FINAL) {
        uint r0 = (linear_group() * WG + gl_LocalInvocationID.x) * (PER / p.d);
        if (r0 < p.n_out) short_rows(r0);
        return;
    }
    uint n_grp = p.n_out / W;
    uint e = linear_group() * WG + gl_LocalInvocationID.x;   // chunk * n_grp + output group
    if (e >= n_grp * p.n_chunks) return;
    uint ch = e / n_grp, oe = (e - ch * n_grp) * W;
    A best = A(0);
    uint bi = NONE;
    if (MODE == MODE_FINAL) {                        // column oe of the [d, n_out] chunk winners
        for (uint k = 0u; k < p.d; ++k) {
            uint j = k * p.n_out + oe;
            if (beats(part_v[j], part_i[j], best, bi)) { best = part_v[j]; bi = part_i[j]; }
        }
        finish(ch, oe, best, bi);
        return;
    }
    int b = base_of(oe);
    uint k0 = ch * p.chunk, k1 = min(k0 + p.chunk, p.d);
    A v[PER];
    if (TEX == 2u) {                                 // b + k0 and b + k1 are whole texels
        for (uint k = k0; k < k1; k += PER) {
            texel(uint(b + int(k)) / PER, v);
            for (uint j = 0u; j < PER; ++j)
                if (beats(v[j], k + j, best, bi)) { best = v[j]; bi = k + j; }
        }
    } else if (TEX == 1u) {
        A bv[PER];
        uint bk[PER];
        for (uint j = 0u; j < PER; ++j) { bv[j] = A(0); bk[j] = NONE; }
        for (uint k = k0; k < k1; ++k) {
            texel(uint(b + int(k) * p.s_d) / PER, v);
            for (uint j = 0u; j < PER; ++j)
                if (beats(v[j], k, bv[j], bk[j])) { bv[j] = v[j]; bk[j] = k; }
        }
        for (uint j = 0u; j < PER; ++j) finish(ch, oe + j, bv[j], bk[j]);
        return;
    } else {
        for (uint k = k0; k < k1; ++k) {
            A x1 = A(LOAD(x[uint(b + int(k) * p.s_d)]));
            if (beats(x1, k, best, bi)) { best = x1; bi = k; }
        }
    }
    finish(ch, oe, best, bi);
}
#else
shared A red_v[WG];
shared uint red_i[WG];

void main() {
    uint g = linear_group();
    uint e = g / p.n_chunks, ch = g - e * p.n_chunks;
    if (e >= p.n_out) return;                         // uniform per workgroup
    uint t = gl_LocalInvocationID.x;
    A best = A(0);
    uint bi = NONE;
    if (MODE == MODE_FINAL) {                         // a row of (value, index) chunk winners
        for (uint k = t; k < p.d; k += WG) {
            uint j = e * p.d + k;
            if (beats(part_v[j], part_i[j], best, bi)) { best = part_v[j]; bi = part_i[j]; }
        }
    } else {
        int b = base_of(e);
        uint k0 = ch * p.chunk, k1 = min(k0 + p.chunk, p.d);
        if (TEX == 1u) {                              // s_d == 1: elements b + k0 .. b + k1 - 1
            uint t0 = (uint(b) + k0 + PER - 1u) / PER, t1 = (uint(b) + k1) / PER;
            if (t0 < t1) {
                uint head = t0 * PER - uint(b);       // k of the first whole texel
                for (uint k = k0 + t; k < head; k += WG) {
                    A v = A(LOAD(x[uint(b) + k]));
                    if (beats(v, k, best, bi)) { best = v; bi = k; }
                }
                A v[PER];
                for (uint ti = t0 + t; ti < t1; ti += WG) {
                    texel(ti, v);
                    for (uint j = 0u; j < PER; ++j) {
                        uint k = ti * PER + j - uint(b);
                        if (beats(v[j], k, best, bi)) { best = v[j]; bi = k; }
                    }
                }
                k0 = t1 * PER - uint(b);              // the tail: the loop below
            }
        }
        for (uint k = k0 + t; k < k1; k += WG) {
            A v = A(LOAD(x[uint(b + int(k) * p.s_d)]));
            if (beats(v, k, best, bi)) { best = v; bi = k; }
        }
    }
    red_v[t] = best;
    red_i[t] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s && beats(red_v[t + s], red_i[t + s], red_v[t], red_i[t])) {
            red_v[t] = red_v[t + s];
            red_i[t] = red_i[t + s];
        }
        barrier();
    }
    if (t != 0u) return;
    if (MODE == MODE_PARTIAL) { part_v[g] = red_v[0]; part_i[g] = red_i[0]; }
    else store(e, red_i[0] == NONE ? 0u : red_i[0]);
}
#endif
