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
// Half types accumulate in f32, f64 in f64; NaN propagates through max/min (numpy).
// OP_* and MODE_* are defines from kernels/reduction.py (REDUCE_OPS, MODES).
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint OP = OP_SUM;
layout(constant_id = 2) const uint MODE = MODE_DIRECT;  // in -> out; PARTIAL: in -> part; FINAL: part -> out
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
layout(set = 0, binding = 2) buffer Part { A part[]; };

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

#ifdef ANY_DIM
void main() {
    uint e = linear_group() * WG + gl_LocalInvocationID.x;    // chunk * n_out + output element
    if (e >= p.n_out * p.n_chunks) return;
    uint ch = e / p.n_out, oe = e - ch * p.n_out;
    uint outer = oe / p.n_inner, inner = oe - outer * p.n_inner;
    int b = int(p.off_in) + int(outer) * p.s_outer + int(inner) * p.s_inner;
    uint k0 = ch * p.chunk, k1 = min(k0 + p.chunk, p.d);
    A acc = identity(), c = A(0);
    for (uint k = k0; k < k1; ++k) {
        uint i = uint(b + int(k) * p.s_d);
        A v = MODE == MODE_FINAL ? part[i] : A(LOAD(x[i]));
        if (OP == OP_PROD) acc *= v;
        else if (OP == OP_MAX) acc = (isnan(acc) || acc > v) ? acc : v;
        else if (OP == OP_MIN) acc = (isnan(acc) || acc < v) ? acc : v;
        else kahan_add(acc, c, v);
    }
    if (MODE == MODE_PARTIAL) {
        part[e] = acc;
    } else {
        if (OP == OP_MEAN) acc /= A(p.denom);
        o[p.off_out + oe] = STORE(acc);
    }
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

A load(uint i) {
    if (MODE == MODE_FINAL) return part[i];
    return A(LOAD(x[p.off_in + i]));
}

void main() {
    uint g = linear_group();
    uint row = g / p.n_chunks, ch = g - row * p.n_chunks;
    if (row >= p.n_rows) return;                       // uniform per workgroup
    uint rop = OP == OP_MAX ? R_MAX : (OP == OP_MIN ? R_MIN : R_SUM);   // rows.glsl's combine
    uint t = gl_LocalInvocationID.x;
    uint base = row * p.n_cols;
    uint start = ch * p.chunk;
    uint end = min(start + p.chunk, p.n_cols);
    A acc = identity(), c = A(0);
    for (uint i = start + t; i < end; i += WG) {
        A v = load(base + i);
        if (OP == OP_PROD) acc *= v;
        else if (rop == R_SUM) kahan_add(acc, c, v);
        else acc = combine(acc, v, rop);
    }
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
