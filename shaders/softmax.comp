#version 450
// Softmax over the last dim of contiguous [n_rows, n_cols] rows (element offsets off_*), one
// workgroup per row (LANE_ROWS: one invocation per row, for many short rows; no barriers): each
// invocation's max and compensated sum of exp(x - max) in one read of its chunks (online_max_sum),
// the row's max by a NaN-propagating tree and the sums rescaled to it by another, then one more read
// writing exp(x - max) * (1 / sum). Stable for large values; a row of all -inf gives NaN (as torch: -inf - -inf).
// BACKWARD: dx = y * (g - dot(y, g)) with the dot product compensated + tree-reduced (SPLIT: SPLIT 1
// writes each part's compensated dot to part, SPLIT 2 sums the row's parts in order and applies).
// SPLIT (few long rows): each row is cut across `parts` invocations, no barriers. Invocation k
// of a row takes the row's chunks k, k + parts, ... (neighbouring invocations read neighbouring
// texels). SPLIT 1 writes its chunks' max m_k and compensated sum of exp(x - m_k) to part (one read:
// the running sum is rescaled by exp(m_old - m_new) when a chunk raises the max); SPLIT 2
// (the next dispatch) combines the row's partials in order 0 .. parts-1 into M = max m_k and
// S = sum s_k exp(m_k - M) (every invocation of a row the same bits) and writes exp(x - M) * (1 / S) over
// its chunks. A part with no finite maximum adds nothing; -inf / NaN / +inf rows give NaN as above.
// Half types compute in f32; f64 uses a double-precision exp (rows.glsl).
// Rows are read and written in texel chunks (common/rowchunks.glsl): TEX's bits (TEX_* defines from
// kernels/norm.py) say which operands have their texel view bound.
#ifdef SG_ROWS
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint TEX = 0;        // TEX_X | TEX_G | TEX_O
layout(constant_id = 2) const uint LANE_ROWS = 0;  // 1: one invocation per row
layout(constant_id = 3) const uint SPLIT = 0;      // 1: per-part partials, 2: combine + apply
layout(constant_id = 4) const uint ALIGN = 0;      // TEX's bits: operands with whole chunks only (rowchunks)
#ifdef SG_ROWS
// SG_ROWS families (subgroup twins): SG rows a workgroup, a row to a subgroup (its invocations split
// the row; max and sums by subgroupMax / subgroupAdd, no barriers); 0: as above.
layout(constant_id = 5) const uint SG = 0;
#else
const uint SG = 0u;
#endif
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };   // forward: x, backward: y
// The same buffers as 16-byte words (rowchunks.glsl's whole chunks on the storage-buffer path).
layout(set = 0, binding = 0) writeonly buffer Out4 { uvec4 o4[]; };
layout(set = 0, binding = 1) readonly buffer X4 { uvec4 x4[]; };
#ifdef BACKWARD
layout(set = 0, binding = 2) readonly buffer Grad { T g[]; };
layout(set = 0, binding = 2) readonly buffer Grad4 { uvec4 g4[]; };
layout(set = 0, binding = 5, rgba32ui) uniform readonly uimageBuffer g_t;
layout(set = 0, binding = 6) buffer Part { A part[]; };      // SPLIT: the part's dot(y, g) per row and part
#define VIEWS 3                       // the first binding of the views below
#else
#define VIEWS 2
layout(set = 0, binding = 4) buffer Part { A part[]; };      // SPLIT: (m_k, s_k) per row and part
#endif
layout(set = 0, binding = VIEWS, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = VIEWS + 1, rgba32ui) uniform writeonly uimageBuffer o_t;
#include "common/texel16.glsl"
#define ROW_WHOLE ((ALIGN & TEX_X) != 0u)   // x's rows whole aligned chunks (ALIGN)
#include "common/rowchunks.glsl"
CHUNK_LOADER(load_x, x, x4, x_t, (TEX & TEX_X) != 0u, (ALIGN & TEX_X) != 0u)
CHUNK_STORER(store_o, o, o4, o_t, (TEX & TEX_O) != 0u, (ALIGN & TEX_O) != 0u)
#ifdef BACKWARD
CHUNK_LOADER(load_g, g, g4, g_t, (TEX & TEX_G) != 0u, (ALIGN & TEX_G) != 0u)
#endif

layout(push_constant) uniform Params {
    uint n_rows; uint n_cols; uint off_out; uint off_x; uint off_g; uint parts;
} p;

// A NaN in a row reaches the result through the sums even where subgroupMax drops it (s is NaN there).
A row_reduce(A v, uint op) {
#ifdef SG_ROWS
    if (SG != 0u) return op == R_SUM ? subgroupAdd(v) : subgroupMax(v);
#endif
    return LANE_ROWS != 0u ? v : block_reduce(v, op);
}

A neg_inf() {
#if defined(DT_F64)
    return -packDouble2x32(uvec2(0u, 0x7FF00000u));
#else
    return -uintBitsToFloat(0x7F800000u);
#endif
}

#ifndef BACKWARD
// The max m and compensated sum s of exp(x - m) over the chunks first, first + step, ... of the row
// [bx, bx + n), in one read: the running sum is rescaled by exp(m_old - m_new) when a chunk raises
// the max. m = -inf, s = 0 when every element is -inf (or none); NaN / +inf give s = NaN.
void online_max_sum(uint bx, uint n, uint first, uint step, out A m, out A s) {
    uint ce = chunks_end(bx, n), lo, hi;
    A v[PER], c = A(0);
    m = neg_inf();
    s = A(0);
    for (uint ch = bx / PER + first; ch < ce; ch += step) {
        chunk_span(ch, bx, n, lo, hi);
        load_x(ch * PER, lo, hi, v);
        // max(), not the NaN-propagating combine: a NaN reaches s through exp either way (x - m or
        // m - nm is NaN); measured 8% of the kernel on lavapipe (softmax [32, 4096] f32)
        A nm = m;
        for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) nm = max(nm, v[j]);
        if (nm != m) {                             // a larger max (or NaN: then s is NaN too)
            A f = exp_a(m - nm);
            s *= f;
            c *= f;
            m = nm;
        }
        // every element so far -inf (m = -inf): exp(-inf - 0) adds 0 (no -inf - -inf = NaN); no branch
        A mz = m == neg_inf() ? A(0) : m, g = A(0);
        for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) g += exp_a(v[j] - mz);
        kahan_add(s, c, g);
    }
}
#endif

void split_main() {
    uint parts = p.parts, gid = linear_group() * WG + gl_LocalInvocationID.x;
    uint row = gid / parts, k = gid - row * parts;
    if (row >= p.n_rows) return;
    uint n = p.n_cols;
    uint bx = p.off_x + row * n, bo = p.off_out + row * n, ce = chunks_end(bx, n), lo, hi;
    A v[PER], y[PER];
#ifdef BACKWARD
    uint bg = p.off_g + row * n;
    A gv[PER], s = A(0), c = A(0);
    if (SPLIT == 1u) {                                 // this part's compensated dot(y, g)
        for (uint ch = bx / PER + k; ch < ce; ch += parts) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            load_g(e0 - bx + bg, lo, hi, gv);
            A q = A(0);                                   // the chunk's dot, compensated across chunks
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) q += v[j] * gv[j];
            kahan_add(s, c, q);
        }
        part[gid] = s;
        return;
    }
    for (uint i = 0u; i < parts; ++i) kahan_add(s, c, part[row * parts + i]);   // in order: every invocation the same
    for (uint ch = bx / PER + k; ch < ce; ch += parts) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        load_g(e0 - bx + bg, lo, hi, gv);
        for (uint j = 0u; j < PER; ++j) y[j] = v[j] * (gv[j] - s);
        store_o(e0 - bx + bo, lo, hi, y);
    }
#else
    A m, s;
    if (SPLIT == 1u) {
        online_max_sum(bx, n, k, parts, m, s);
        part[2u * gid] = m;
        part[2u * gid + 1u] = s;
        return;
    }
    uint b = 2u * row * parts;
    A c = A(0);
    m = neg_inf();
    s = A(0);
    for (uint i = 0u; i < parts; ++i) m = combine(m, part[b + 2u * i], R_MAX);
    for (uint i = 0u; i < parts; ++i) {
        A mi = part[b + 2u * i];
        if (mi != neg_inf()) kahan_add(s, c, part[b + 2u * i + 1u] * exp_a(mi - m));
    }
    A inv_s = A(1) / s;                                // one divide a row: the writes multiply
    for (uint ch = bx / PER + k; ch < ce; ch += parts) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        for (uint j = 0u; j < PER; ++j) y[j] = exp_a(v[j] - m) * inv_s;
        store_o(e0 - bx + bo, lo, hi, y);
    }
#endif
}

void main() {
    if (SPLIT != 0u) { split_main(); return; }
    uint lane = LANE_ROWS != 0u ? 0u : gl_LocalInvocationID.x, lanes = LANE_ROWS != 0u ? 1u : WG;
    uint row = LANE_ROWS != 0u ? linear_group() * WG + gl_LocalInvocationID.x : linear_group();
    uint r_end = row + 1u, r_step = 1u;
#ifdef SG_ROWS
    if (SG != 0u) {                                   // this subgroup's rows: uniform per subgroup
        lane = gl_SubgroupInvocationID;
        lanes = gl_SubgroupSize;
        row = linear_group() * SG + gl_SubgroupID;
        r_end = linear_group() * SG + SG;
        r_step = gl_NumSubgroups;
    }
#endif
    r_end = min(r_end, p.n_rows);                     // uniform per workgroup unless LANE_ROWS / SG (no barriers)
    uint n = p.n_cols;
    A v[PER], y[PER];
    for (; row < r_end; row += r_step) {
    uint bx = p.off_x + row * n, bo = p.off_out + row * n, ce = chunks_end(bx, n), lo, hi;
#ifdef BACKWARD
    uint bg = p.off_g + row * n;
    A gv[PER];
    A s = A(0), c = A(0);
    for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        load_g(e0 - bx + bg, lo, hi, gv);
        A q = A(0);                                   // the chunk's dot, compensated across chunks
        for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) q += v[j] * gv[j];
        kahan_add(s, c, q);
    }
    A dot = row_reduce(s, R_SUM);
    for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        load_g(e0 - bx + bg, lo, hi, gv);
        for (uint j = 0u; j < PER; ++j) y[j] = v[j] * (gv[j] - dot);
        store_o(e0 - bx + bo, lo, hi, y);
    }
#else
    A m, s;                                           // one read for max and sum (online_max_sum)
    online_max_sum(bx, n, lane, lanes, m, s);
    if (LANE_ROWS == 0u) {                            // the workgroup's parts: rescaled to the row's max
        A mr = row_reduce(m, R_MAX);
        s = row_reduce(m != neg_inf() ? s * exp_a(m - mr) : A(0), R_SUM);
        m = mr;
    }
    A inv_s = A(1) / s;                                // one divide a row: the writes multiply
    for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        for (uint j = 0u; j < PER; ++j) y[j] = exp_a(v[j] - m) * inv_s;
        store_o(e0 - bx + bo, lo, hi, y);
    }
#endif
    }
}
