#version 450
// Sum / max / min / mean / prod.
// Row kernel (reduce, reduce_last_dim): over the last dim of a contiguous [n_rows, n_cols] view (at
// element offset off_in). The full-tensor `reduce` is the n_rows == 1 case. Workgroup-per-chunk: each
// workgroup reduces `chunk` columns of one row; rows longer than a chunk are done in two passes
// (MODE_PARTIAL writes per-chunk partials in the accumulator type A, MODE_FINAL reduces the partial
// rows), so a 16M-element sum runs on every core and is pairwise-accurate: per invocation a short
// compensated serial sum, then a log2(WG) tree, then the same again over the partials.
// ANY_DIM (reduce_any_dim): short rows and leading / middle axes without a transpose copy. Logical
// view [n_out / n_inner, d, n_inner] with signed element strides (s_outer, s_d, s_inner) from
// off_in; one invocation per (output element, chunk of d) runs a compensated serial scan (coalesced
// across invocations when s_inner == 1; one short row per invocation when n_inner == 1), no barriers.
// A long d is split in n_chunks: MODE_PARTIAL writes part[chunk * n_out + e] and MODE_FINAL reduces
// those columns (the same kernel over the partials' [1, n_chunks, n_out] view).
// Sums (sum, mean) in the ANY_DIM kernel add each run of PER consecutive elements of d (counted from
// the chunk's start: one texel of a row) plainly, left to right from +0, and the run's total into the
// compensated sum (GROUPED): the compensation's instructions once per run, not per element (lavapipe:
// sum over [1024, 1024] 0.83 -> 0.56 ms of CPU, max's cost), the same runs on every path.
// Half types accumulate in f32, f64 in f64; NaN propagates through max/min (numpy).
// OP_* and MODE_* are defines from kernels/reduction.py (REDUCE_OPS, MODES).
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint OP = OP_SUM;
layout(constant_id = 2) const uint MODE = MODE_DIRECT;  // in -> out; PARTIAL: in -> part; FINAL: part -> out
// Read x through its rgba32ui texel view x_t (not in MODE_FINAL, which reads the partials). 1: the
// row kernel takes a row's whole texels that way and its unaligned head / tail from x; the strided
// kernel reads PER adjacent output columns per texel. 2 (strided kernel, s_d == 1): each invocation
// scans its stretch of d as texels. 3 (strided kernel, consecutive rows of d elements, d dividing
// PER, one chunk): each invocation reduces the PER / d rows of one texel (the array's last, partial
// texel through x). The host checks that those runs are whole texels.
layout(constant_id = 3) const uint TEX = 0;
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
layout(set = 0, binding = 2) buffer Part { A part[]; };
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer x_t;

#include "common/texel16.glsl"

#ifdef ANY_DIM
layout(push_constant) uniform Params {
    uint n_out; uint n_inner; uint d; uint off_in;
    uint off_out; int s_outer; int s_d; int s_inner;
    uint chunk; uint n_chunks; uint denom;
} p;
#else
layout(push_constant) uniform Params {
    uint n_rows; uint n_cols; uint chunk; uint n_chunks;
    uint off_in; uint off_out; uint denom; uint pad;
} p;
#endif

A identity() {
#if defined(DT_F64)
    A inf = packDouble2x32(uvec2(0u, 0x7FF00000u));
#else
    A inf = uintBitsToFloat(0x7F800000u);
#endif
    return OP == OP_MAX ? -inf : (OP == OP_MIN ? inf : (OP == OP_PROD ? A(1) : A(0)));
}

// acc (with its compensation c) op= v: a compensated sum, a product, NaN-propagating max / min.
void add(inout A acc, inout A c, A v) {
    if (OP == OP_PROD) acc *= v;
    else if (OP == OP_MAX) acc = (isnan(acc) || acc > v) ? acc : v;
    else if (OP == OP_MIN) acc = (isnan(acc) || acc < v) ? acc : v;
    else kahan_add(acc, c, v);
}

#ifdef ANY_DIM
const bool GROUPED = (OP == OP_SUM || OP == OP_MEAN) && MODE != MODE_FINAL;

void finish(uint ch, uint oe, A acc) {
    if (MODE == MODE_PARTIAL) {
        part[ch * p.n_out + oe] = acc;
    } else {
        if (OP == OP_MEAN) acc /= A(p.denom);
        o[p.off_out + oe] = STORE(acc);
    }
}

// TEX 3: rows r0 .. r0 + PER / d - 1, in the same order as the scalar path.
void short_rows(uint r0) {
    uint rows = PER / p.d, first = p.off_in + r0 * p.d;
    if (first + PER <= p.off_in + p.n_out * p.d) {
        A v[PER];
        texel(first / PER, v);
        for (uint r = 0u; r < rows; ++r) {
            A acc = identity(), c = A(0), g = A(0);
            if (GROUPED) {                                     // d <= PER: one run
                for (uint k = 0u; k < p.d; ++k) g += v[r * p.d + k];
                add(acc, c, g);
            } else for (uint k = 0u; k < p.d; ++k) add(acc, c, v[r * p.d + k]);
            finish(0u, r0 + r, acc);
        }
        return;
    }
    for (uint r = r0; r < p.n_out; ++r) {
        A acc = identity(), c = A(0), g = A(0);
        if (GROUPED) {
            for (uint k = 0u; k < p.d; ++k) g += A(LOAD(x[p.off_in + r * p.d + k]));
            add(acc, c, g);
        } else for (uint k = 0u; k < p.d; ++k) add(acc, c, A(LOAD(x[p.off_in + r * p.d + k])));
        finish(0u, r, acc);
    }
}

void main() {
    const uint W = TEX == 1u ? PER : 1u;                      // adjacent outputs per invocation
    if (TEX == 3u && MODE != MODE_FINAL) {
        uint r0 = (linear_group() * WG + gl_LocalInvocationID.x) * (PER / p.d);
        if (r0 < p.n_out) short_rows(r0);
        return;
    }
    uint n_grp = p.n_out / W;
    uint e = linear_group() * WG + gl_LocalInvocationID.x;    // chunk * n_grp + output group
    if (e >= n_grp * p.n_chunks) return;
    uint ch = e / n_grp, oe = (e - ch * n_grp) * W;
    uint outer = oe / p.n_inner, inner = oe - outer * p.n_inner;
    int b = int(p.off_in) + int(outer) * p.s_outer + int(inner) * p.s_inner;
    uint k0 = ch * p.chunk, k1 = min(k0 + p.chunk, p.d);
    if (TEX == 2u && MODE != MODE_FINAL) {                   // s_d == 1: b + k0, b + k1 whole texels
        A acc = identity(), c = A(0), v[PER];
        for (uint ti = uint(b + int(k0)) / PER; ti < uint(b + int(k1)) / PER; ++ti) {
            texel(ti, v);
            if (GROUPED) {
                A g = A(0);
                for (uint j = 0u; j < PER; ++j) g += v[j];
                add(acc, c, g);
            } else for (uint j = 0u; j < PER; ++j) add(acc, c, v[j]);
        }
        finish(ch, oe, acc);
        return;
    }
    if (TEX == 1u && MODE != MODE_FINAL) {                   // s_inner == 1, whole texels
        A acc[PER], c[PER], v[PER];
        for (uint j = 0u; j < PER; ++j) { acc[j] = identity(); c[j] = A(0); }
        if (GROUPED) {
            A g[PER];
            for (uint k = k0; k < k1; k += PER) {
                for (uint j = 0u; j < PER; ++j) g[j] = A(0);
                for (uint q = 0u; q < PER; ++q) if (k + q < k1) {
                    texel(uint(b + int(k + q) * p.s_d) / PER, v);
                    for (uint j = 0u; j < PER; ++j) g[j] += v[j];
                }
                for (uint j = 0u; j < PER; ++j) add(acc[j], c[j], g[j]);
            }
        } else for (uint k = k0; k < k1; ++k) {
            texel(uint(b + int(k) * p.s_d) / PER, v);
            for (uint j = 0u; j < PER; ++j) add(acc[j], c[j], v[j]);
        }
        for (uint j = 0u; j < PER; ++j) finish(ch, oe + j, acc[j]);
        return;
    }
    A acc = identity(), c = A(0);
    if (GROUPED) {
        for (uint k = k0; k < k1; k += PER) {
            A g = A(0);
            for (uint q = 0u; q < PER; ++q) if (k + q < k1) g += A(LOAD(x[uint(b + int(k + q) * p.s_d)]));
            add(acc, c, g);
        }
    } else for (uint k = k0; k < k1; ++k) {
        uint i = uint(b + int(k) * p.s_d);
        add(acc, c, MODE == MODE_FINAL ? part[i] : A(LOAD(x[i])));
    }
    finish(ch, oe, acc);
}
#else
// prod's tree (rows.glsl's combine knows sum / max / min only).
A block_prod(A v) {
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_a[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red_a[t] *= red_a[t + s];
        barrier();
    }
    return red_a[0];
}

// MODE_FINAL reads the partials, the other modes x (absolute element indices).
A load(uint i) {
    if (MODE == MODE_FINAL) return part[i];
    return A(LOAD(x[i]));
}

void main() {
    uint g = linear_group();
    uint row = g / p.n_chunks, ch = g - row * p.n_chunks;
    if (row >= p.n_rows) return;                       // uniform per workgroup
    uint rop = OP == OP_MAX ? R_MAX : (OP == OP_MIN ? R_MIN : R_SUM);   // rows.glsl's combine
    uint t = gl_LocalInvocationID.x;
    uint base = (MODE == MODE_FINAL ? 0u : p.off_in) + row * p.n_cols;
    uint i0 = base + ch * p.chunk;
    uint i1 = base + min(ch * p.chunk + p.chunk, p.n_cols);
    A acc = identity(), c = A(0);
    if (TEX != 0u && MODE != MODE_FINAL) {
        uint t0 = (i0 + PER - 1u) / PER, t1 = i1 / PER;  // the whole texels of [i0, i1)
        if (t0 < t1) {
            for (uint i = i0 + t; i < t0 * PER; i += WG) add(acc, c, load(i));   // head: < PER elements
            A v[PER];
            for (uint ti = t0 + t; ti < t1; ti += WG) {
                texel(ti, v);
                for (uint j = 0u; j < PER; ++j) add(acc, c, v[j]);
            }
            i0 = t1 * PER;                             // the tail: the loop below
        }
    }
    for (uint i = i0 + t; i < i1; i += WG) add(acc, c, load(i));
    A r = OP == OP_PROD ? block_prod(acc) : block_reduce(acc, rop);
    if (t != 0u) return;
    if (MODE == MODE_PARTIAL) {
        part[g] = r;
    } else {
        if (OP == OP_MEAN) r /= A(p.denom);
        o[p.off_out + row] = STORE(r);
    }
}
#endif
