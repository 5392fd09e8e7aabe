#version 450
// RMSNorm (RMS) and LayerNorm (LN) over the last dim of contiguous [n_rows, n_cols] rows, forward
// and BACKWARD, with an optional weight (HAS_W) and bias (HAS_B, LN) applied in the same pass.
//   RMS: y = x * r * w,            r = 1 / sqrt(mean(x^2) + eps)
//   LN:  y = (x - mu) * r * w + b, r = 1 / sqrt(mean((x - mu)^2) + eps)   (two-pass variance)
// Backward (xh = normalized x, gw = g * w):
//   RMS: dx = r * (gw - xh * mean(gw * xh))
//   LN:  dx = r * (gw - mean(gw) - xh * mean(gw * xh))
// Rows go to units of rows_per_group consecutive rows (n_groups units): a unit is a workgroup
// (its invocations split each row, sums are compensated per invocation + tree-reduced) or, with
// LANE_ROWS (short rows, many of them), one invocation (a compensated serial sum, no barriers).
// WGRAD: also the weight/bias-gradient partials dw = sum_rows g * xh, db = sum_rows g: unit `grp`
// accumulates its rows into part[grp * n_grad * n_cols + k * n_cols + col] (k = 0: dw, 1: db), summed
// over the units afterwards by reduce_any_dim's MODE_FINAL (one invocation per column, coalesced).
// SPLIT (few long rows; not ADD_RESIDUAL): each row across `parts` invocations in two dispatches, see
// split_main. Sums are in the accumulator type (f32 for half types).
// Rows are read (and written) in texel chunks (common/rowchunks.glsl): TEX's bits (TEX_* defines
// from kernels/norm.py) say which operands have their texel view bound.
// ADD_RESIDUAL (RMS forward; FlashInfer's fused_add_rmsnorm): s = x + res in the accumulator type,
// res = s rounded to T (in place), y = s * r * w with r from the unrounded s. The first pass only
// reads; the second recomputes s from the same x and res elements (each invocation reads and writes
// only its own indices, so the rewrite of res cannot race) and writes res and y.
#ifdef SG_ROWS
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
#if defined(DT_F64)
#define A_BYTES 8
#else
#define A_BYTES 4
#endif
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint HAS_W = 0;
layout(constant_id = 2) const uint HAS_B = 0;
layout(constant_id = 3) const uint WGRAD = 0;
layout(constant_id = 4) const uint TEX = 0;        // TEX_X | TEX_G | TEX_W | TEX_R | TEX_O
layout(constant_id = 5) const uint LANE_ROWS = 0;  // 1: a unit is one invocation
layout(constant_id = 6) const uint ALIGN = 0;      // TEX's bits: operands with whole chunks only (rowchunks)
#ifdef SG_ROWS
// SG_ROWS families (subgroup twins): SG units a workgroup, a unit to a subgroup (its invocations split
// the unit's rows, sums by subgroupAdd: no barriers); 0: LANE_ROWS / a workgroup a unit as above.
layout(constant_id = 8) const uint SG = 0;
#else
const uint SG = 0u;
#endif
#ifndef ADD_RESIDUAL
// LANE_R (LANE_ROWS, every operand whole aligned chunks): an invocation normalizes LANE_R (<= LANE_R_MAX) rows
// side by side, so each weight / bias chunk is read once for them all (see lane_rows_main); backward,
// their weight / bias-gradient terms are summed in registers and stored once (lane_rows_backward_main).
layout(constant_id = 9) const uint LANE_R = 1;
#define LANE_R_MAX 4u
#endif
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
// The same buffers as 16-byte words (rowchunks.glsl's whole chunks on the storage-buffer path).
layout(set = 0, binding = 0) writeonly buffer Out4 { uvec4 o4[]; };
layout(set = 0, binding = 1) readonly buffer X4 { uvec4 x4[]; };
#ifdef BACKWARD
layout(set = 0, binding = 2) readonly buffer Grad { T g[]; };
layout(set = 0, binding = 3) readonly buffer Weight { T w[]; };
layout(set = 0, binding = 2) readonly buffer Grad4 { uvec4 g4[]; };
layout(set = 0, binding = 3) readonly buffer Weight4 { uvec4 w4[]; };
layout(set = 0, binding = 4) buffer Part { A part[]; };
layout(set = 0, binding = 4) buffer Part4 { uvec4 part4[]; };   // the same, as 16-byte words
layout(set = 0, binding = 5, rgba32ui) uniform readonly uimageBuffer g_t;
#define VIEWS 6                       // the first binding of the views below
#else
layout(set = 0, binding = 2) readonly buffer Weight { T w[]; };
layout(set = 0, binding = 2) readonly buffer Weight4 { uvec4 w4[]; };
#ifdef ADD_RESIDUAL
layout(set = 0, binding = 3) buffer Residual { T res[]; };
layout(set = 0, binding = 3) buffer Residual4 { uvec4 res4[]; };
#define R_ARR4 res4
#define OFF_3 off_res
#define R_ARR res
#else
layout(set = 0, binding = 3) readonly buffer Bias { T b[]; };
layout(set = 0, binding = 3) readonly buffer Bias4 { uvec4 b4[]; };
#define R_ARR4 b4
#define OFF_3 off_b
#define R_ARR b
#endif
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer r_t;   // bias or residual
#define VIEWS 5
#endif
#ifndef OFF_3
#define OFF_3 off_b
#endif
#ifndef ADD_RESIDUAL
// Few long rows (forward and backward): each row cut across `parts` invocations (chunks k, k + parts,
// ... of the row), no barriers. SPLIT 1 writes each part's compensated sums to sums (see split_main);
// SPLIT 2 (the next dispatch) combines the row's parts in order (every invocation of a row the same
// bits) and applies the formulas above over its chunks.
#define ROW_SPLIT 1
layout(constant_id = 7) const uint SPLIT = 0;
layout(set = 0, binding = VIEWS + 3) buffer Sums { A sums[]; };
#endif
layout(set = 0, binding = VIEWS, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = VIEWS + 1, rgba32ui) uniform readonly uimageBuffer w_t;
layout(set = 0, binding = VIEWS + 2, rgba32ui) uniform writeonly uimageBuffer o_t;
#include "common/texel16.glsl"
#define ROW_WHOLE ((ALIGN & TEX_X) != 0u)   // x's rows whole aligned chunks (ALIGN)
#include "common/rowchunks.glsl"
CHUNK_LOADER(load_x, x, x4, x_t, (TEX & TEX_X) != 0u, (ALIGN & TEX_X) != 0u)
CHUNK_LOADER(load_w, w, w4, w_t, (TEX & TEX_W) != 0u, (ALIGN & TEX_W) != 0u)
CHUNK_STORER(store_o, o, o4, o_t, (TEX & TEX_O) != 0u, (ALIGN & TEX_O) != 0u)
#ifdef BACKWARD
CHUNK_LOADER(load_g, g, g4, g_t, (TEX & TEX_G) != 0u, (ALIGN & TEX_G) != 0u)
#else
CHUNK_LOADER(load_r, R_ARR, R_ARR4, r_t, (TEX & TEX_R) != 0u, (ALIGN & TEX_R) != 0u)
#endif
#ifdef ADD_RESIDUAL
CHUNK_STORER(store_res, res, res4, o_t, false, (ALIGN & TEX_R) != 0u)   // the residual's update: storage-buffer stores
#endif

layout(push_constant) uniform Params {
    uint n_rows; uint n_cols; uint off_out; uint off_x;
    uint off_g; uint off_w; uint OFF_3; uint rows_per_group;
    uint n_groups; uint eps[2]; uint parts;
} p;

#ifdef BACKWARD
// The PER accumulator values part[k0 .. k0 + PER) (k0 a multiple of PER) as whole 16-byte words, and
// back: the weight-gradient partials of a whole chunk without a storage access per element.
const uint PART_WORDS = PER * uint(A_BYTES) / 16u;
void load_part(uint k0, out A a[PER]) {
    for (uint q = 0u; q < PART_WORDS; ++q) {
        uvec4 u = part4[k0 * uint(A_BYTES) / 16u + q];
#if defined(DT_F64)
        a[2u * q] = packDouble2x32(u.xy);
        a[2u * q + 1u] = packDouble2x32(u.zw);
#else
        for (uint j = 0u; j < 4u; ++j) a[4u * q + j] = uintBitsToFloat(u[j]);
#endif
    }
}
void store_part(uint k0, A a[PER]) {
    for (uint q = 0u; q < PART_WORDS; ++q) {
#if defined(DT_F64)
        uvec4 u = uvec4(unpackDouble2x32(a[2u * q]), unpackDouble2x32(a[2u * q + 1u]));
#else
        uvec4 u = floatBitsToUint(vec4(a[4u * q], a[4u * q + 1u], a[4u * q + 2u], a[4u * q + 3u]));
#endif
        part4[k0 * uint(A_BYTES) / 16u + q] = u;
    }
}

// part[k0 + j] (+)= add[j] for a chunk's [lo, hi) (k0: the chunk's first column's index; first: the
// unit's first row, which starts the sums). Whole chunks of aligned rows (ALIGN's x bit: k0 is then a
// multiple of PER) as 16-byte words, else element by element.
void accumulate(uint k0, uint lo, uint hi, bool first, A add[PER]) {
    if ((ALIGN & TEX_X) != 0u) {
        A a[PER];
        if (first) { for (uint j = 0u; j < PER; ++j) a[j] = A(0); } else load_part(k0, a);
        for (uint j = 0u; j < PER; ++j) a[j] += add[j];
        store_part(k0, a);
        return;
    }
    for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) part[k0 + j] = (first ? A(0) : part[k0 + j]) + add[j];
}
#endif

// Sums over the row: the workgroup's tree, or nothing to combine when one invocation has the row.
A row_sum(A v) {
#ifdef SG_ROWS
    if (SG != 0u) return subgroupAdd(v);
#endif
    return LANE_ROWS != 0u ? v : block_reduce(v, R_SUM);
}
void row_sum3(inout A u, inout A v, inout A s) {
#ifdef SG_ROWS
    if (SG != 0u) { u = subgroupAdd(u); v = subgroupAdd(v); s = subgroupAdd(s); return; }
#endif
    if (LANE_ROWS == 0u) block_sum3(u, v, s);
}

// The weight's chunk for the row chunk at e0 of a row at bx (1 without a weight).
void weights(uint e0, uint bx, uint lo, uint hi, out A wv[PER]) {
    if (HAS_W != 0u) { load_w(p.off_w + e0 - bx, lo, hi, wv); return; }
    for (uint j = 0u; j < PER; ++j) wv[j] = A(1);
}

#ifdef ROW_SPLIT
// Sums per part: (sum x^2 about the part's mean, [LN: sum x, element count], [BACKWARD: sum g w (x - part
// mean), LN: sum g w]); the row's parts are combined exactly as one set (Chan et al.: the parts' sums of
// squares about the row's mean are M2_k + n_k (mean_k - mu)^2).
#ifdef LN
#define NS_LN 2u
#else
#define NS_LN 0u
#endif
#if defined(BACKWARD) && defined(LN)
#define NS 5u                                    // ss, sx, count, sgx, sg
#elif defined(BACKWARD)
#define NS 2u                                    // ss, sgx
#else
#define NS (1u + NS_LN)                          // ss [, sx, count]
#endif
void split_main() {
    uint parts = p.parts, gid = linear_group() * WG + gl_LocalInvocationID.x;
    uint row = gid / parts, k = gid - row * parts;
    if (row >= p.n_rows) return;
    uint n = p.n_cols;
    A eps = A(scalar_arg(p.eps)), inv_n = A(1) / A(n);
    uint bx = p.off_x + row * n, bo = p.off_out + row * n, ce = chunks_end(bx, n), lo, hi;
    A v[PER], wv[PER], y[PER];
    A ss = A(0), cs = A(0), mu = A(0);
#ifdef BACKWARD
    uint bg = p.off_g + row * n;
    A gv[PER], sgx = A(0), cgx = A(0), sg = A(0), cg = A(0);
#endif
    if (SPLIT == 1u) {
        A mk = A(0), sx = A(0), cx = A(0);
#ifdef LN
        uint cnt = 0u;
        for (uint ch = bx / PER + k; ch < ce; ch += parts) {
            chunk_span(ch, bx, n, lo, hi);
            load_x(ch * PER, lo, hi, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) g += v[j];
            kahan_add(sx, cx, g);
            cnt += hi - lo;
        }
        mk = cnt > 0u ? sx / A(cnt) : A(0);
#endif
        for (uint ch = bx / PER + k; ch < ce; ch += parts) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
#ifdef BACKWARD
            load_g(e0 - bx + bg, lo, hi, gv);
            weights(e0, bx, lo, hi, wv);
            A qs = A(0), qg = A(0), qgx = A(0);          // the chunk's sums, then compensated across chunks
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) {
                A d = v[j] - mk, gw = gv[j] * wv[j];
                qs += d * d;
                qg += gw;
                qgx += gw * d;
            }
            kahan_add(ss, cs, qs);
            kahan_add(sg, cg, qg);
            kahan_add(sgx, cgx, qgx);
#else
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) { A d = v[j] - mk; g += d * d; }
            kahan_add(ss, cs, g);
#endif
        }
        uint b = NS * gid;
        sums[b] = ss;
#ifdef LN
        sums[b + 1u] = sx;
        sums[b + 2u] = A(cnt);
#endif
#ifdef BACKWARD
        sums[b + 1u + NS_LN] = sgx;
#ifdef LN
        sums[b + 4u] = sg;
#endif
#endif
        return;
    }
    // the row's parts, in order (every invocation of a row the same bits)
#ifdef LN
    A sx = A(0), cx = A(0);
    for (uint i = row * parts; i < row * parts + parts; ++i) kahan_add(sx, cx, sums[NS * i + 1u]);
    mu = sx * inv_n;
#endif
    for (uint i = row * parts; i < row * parts + parts; ++i) {
        uint b = NS * i;
        A dm = A(0);
#ifdef LN
        A ni = sums[b + 2u];
        dm = ni > A(0) ? sums[b + 1u] / ni - mu : A(0);     // the part's mean - the row's
        kahan_add(ss, cs, sums[b] + ni * dm * dm);
#else
        kahan_add(ss, cs, sums[b]);
#endif
#ifdef BACKWARD
#ifdef LN
        A sgi = sums[b + 4u];
        kahan_add(sg, cg, sgi);
        kahan_add(sgx, cgx, sums[b + 1u + NS_LN] + dm * sgi);
#else
        kahan_add(sgx, cgx, sums[b + 1u]);
#endif
#endif
    }
    A r = A(1) / sqrt(ss * inv_n + eps);
#ifdef BACKWARD
    A mgx = sgx * r * inv_n;                     // mean(gw * xh)
#ifdef LN
    A mg = sg * inv_n;
    uint n_grad = 2u;
#else
    A mg = A(0);
    uint n_grad = 1u;
#endif
#endif
    for (uint ch = bx / PER + k; ch < ce; ch += parts) {
        uint e0 = ch * PER;
        chunk_span(ch, bx, n, lo, hi);
        load_x(e0, lo, hi, v);
        weights(e0, bx, lo, hi, wv);
#ifdef BACKWARD
        load_g(e0 - bx + bg, lo, hi, gv);
        A gx[PER];
        for (uint j = 0u; j < PER; ++j) {
            A xh = (v[j] - mu) * r;
            y[j] = r * (gv[j] * wv[j] - mg - xh * mgx);
            gx[j] = gv[j] * xh;
        }
        if (WGRAD != 0u) {                       // a unit per row: part [rows, n_grad, n]
            uint k0 = row * n_grad * n + e0 - bx;
            accumulate(k0, lo, hi, true, gx);
#ifdef LN
            accumulate(k0 + n, lo, hi, true, gv);
#endif
        }
#else
        A bv[PER];
        if (HAS_B != 0u) load_r(p.off_b + e0 - bx, lo, hi, bv);
        for (uint j = 0u; j < PER; ++j) {
            y[j] = (v[j] - mu) * r * wv[j];
            if (HAS_B != 0u) y[j] += bv[j];
        }
#endif
        store_o(e0 - bx + bo, lo, hi, y);
    }
}
#endif

#if defined(LANE_R_MAX) && defined(BACKWARD)
// Backward LANE_ROWS with LANE_R > 1 (the host's conditions as lane_rows_main's): rows u * LANE_R + k of
// invocation u, each row's sums in the same order as one row an invocation (dx: same bits); each weight
// chunk read once for them all; with WGRAD, unit u = invocation u: its rows' g * xh (and g) summed in
// registers in row order and stored once as part[u * n_grad * n + ...] (no read-modify-write of part: the
// same sums as rows_per_group = LANE_R). A row past n_rows recomputes the last row, stores nothing and
// adds nothing.
void lane_rows_backward_main() {
    uint u = linear_group() * WG + gl_LocalInvocationID.x, n = p.n_cols, nch = n / PER;
    if (u * LANE_R >= p.n_rows) return;
    A eps = A(scalar_arg(p.eps)), inv_n = A(1) / A(n);
    A v[PER], gv[PER], wv[PER], y[PER], dw[PER], db[PER];
    uint bx[LANE_R_MAX], bg[LANE_R_MAX], bo[LANE_R_MAX];
    A mu[LANE_R_MAX], ss[LANE_R_MAX], cs[LANE_R_MAX], sg[LANE_R_MAX], cg[LANE_R_MAX], sgx[LANE_R_MAX],
      cgx[LANE_R_MAX];
    bool live[LANE_R_MAX];
    for (uint k = 0u; k < LANE_R_MAX; ++k) {
        uint row = u * LANE_R + k;
        live[k] = k < LANE_R && row < p.n_rows;
        row = min(row, p.n_rows - 1u);
        bx[k] = p.off_x + row * n;
        bg[k] = p.off_g + row * n;
        bo[k] = p.off_out + row * n;
        mu[k] = A(0); ss[k] = A(0); cs[k] = A(0); sg[k] = A(0); cg[k] = A(0); sgx[k] = A(0); cgx[k] = A(0);
    }
#ifdef LN
    for (uint i = 0u; i < nch; ++i) {
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + i * PER, 0u, PER, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) g += v[j];
            kahan_add(ss[k], cs[k], g);
        }
    }
    for (uint k = 0u; k < LANE_R_MAX; ++k) { mu[k] = ss[k] * inv_n; ss[k] = A(0); cs[k] = A(0); }
#endif
    for (uint i = 0u; i < nch; ++i) {
        uint e0 = i * PER;
        weights(e0, 0u, 0u, PER, wv);
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + e0, 0u, PER, v);
            load_g(bg[k] + e0, 0u, PER, gv);
            A qs = A(0), qg = A(0), qgx = A(0);
            for (uint j = 0u; j < PER; ++j) {
                A d = v[j] - mu[k], gw = gv[j] * wv[j];
                qs += d * d;
                qg += gw;
                qgx += gw * d;
            }
            kahan_add(ss[k], cs[k], qs);
            kahan_add(sg[k], cg[k], qg);
            kahan_add(sgx[k], cgx[k], qgx);
        }
    }
#ifdef LN
    uint n_grad = 2u;
#else
    uint n_grad = 1u;
#endif
    for (uint k = 0u; k < LANE_R_MAX; ++k) {       // r, mean(gw * xh), [LN] mean(gw) in place of the sums
        A r = A(1) / sqrt(ss[k] * inv_n + eps);
        ss[k] = r;
        sgx[k] = sgx[k] * r * inv_n;
#ifdef LN
        sg[k] = sg[k] * inv_n;
#else
        sg[k] = A(0);
#endif
    }
    for (uint i = 0u; i < nch; ++i) {
        uint e0 = i * PER;
        weights(e0, 0u, 0u, PER, wv);
        for (uint j = 0u; j < PER; ++j) { dw[j] = A(0); db[j] = A(0); }
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + e0, 0u, PER, v);
            load_g(bg[k] + e0, 0u, PER, gv);
            for (uint j = 0u; j < PER; ++j) {
                A xh = (v[j] - mu[k]) * ss[k];
                y[j] = ss[k] * (gv[j] * wv[j] - sg[k] - xh * sgx[k]);
                if (live[k]) { dw[j] += gv[j] * xh; db[j] += gv[j]; }
            }
            if (live[k]) store_o(bo[k] + e0, 0u, PER, y);
        }
        if (WGRAD != 0u) {
            store_part(u * n_grad * n + e0, dw);
#ifdef LN
            store_part(u * n_grad * n + n + e0, db);
#endif
        }
    }
}
#endif

#if defined(LANE_R_MAX) && !defined(BACKWARD)
// LANE_ROWS with LANE_R > 1: rows u * LANE_R + k (k < LANE_R) of invocation u, their sums in step (each
// row's sums in the same order as one row an invocation: same bits), then the weight and bias chunks
// loaded once per chunk for all of them. The host takes it only when every operand is whole aligned
// chunks (ALIGN), so each row's chunk i is its elements [i * PER, i * PER + PER) and the weight's chunk
// index is the same in every lane (a SIMD CPU driver gathers it from one place). A row past n_rows
// recomputes the last row and does not store.
void lane_rows_main() {
    uint u = linear_group() * WG + gl_LocalInvocationID.x, n = p.n_cols, nch = n / PER;
    if (u * LANE_R >= p.n_rows) return;
    A eps = A(scalar_arg(p.eps)), inv_n = A(1) / A(n);
    A v[PER], wv[PER], bv[PER], y[PER];
    uint bx[LANE_R_MAX], bo[LANE_R_MAX];
    A mu[LANE_R_MAX], ss[LANE_R_MAX], cs[LANE_R_MAX], r[LANE_R_MAX];
    bool live[LANE_R_MAX];
    for (uint k = 0u; k < LANE_R_MAX; ++k) {
        uint row = u * LANE_R + k;
        live[k] = k < LANE_R && row < p.n_rows;
        row = min(row, p.n_rows - 1u);
        bx[k] = p.off_x + row * n;
        bo[k] = p.off_out + row * n;
        mu[k] = A(0);
        ss[k] = A(0);
        cs[k] = A(0);
    }
#ifdef LN
    for (uint i = 0u; i < nch; ++i) {
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + i * PER, 0u, PER, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) g += v[j];
            kahan_add(ss[k], cs[k], g);
        }
    }
    for (uint k = 0u; k < LANE_R_MAX; ++k) { mu[k] = ss[k] * inv_n; ss[k] = A(0); cs[k] = A(0); }
#endif
    for (uint i = 0u; i < nch; ++i) {
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + i * PER, 0u, PER, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) { A d = v[j] - mu[k]; g += d * d; }
            kahan_add(ss[k], cs[k], g);
        }
    }
    for (uint k = 0u; k < LANE_R_MAX; ++k) r[k] = A(1) / sqrt(ss[k] * inv_n + eps);
    for (uint i = 0u; i < nch; ++i) {
        uint e0 = i * PER;
        if (HAS_W != 0u) load_w(p.off_w + e0, 0u, PER, wv); else for (uint j = 0u; j < PER; ++j) wv[j] = A(1);
        if (HAS_B != 0u) load_r(p.off_b + e0, 0u, PER, bv);
        for (uint k = 0u; k < LANE_R_MAX; ++k) if (k < LANE_R) {
            load_x(bx[k] + e0, 0u, PER, v);
            for (uint j = 0u; j < PER; ++j) {
                y[j] = (v[j] - mu[k]) * r[k] * wv[j];
                if (HAS_B != 0u) y[j] += bv[j];
            }
            if (live[k]) store_o(bo[k] + e0, 0u, PER, y);
        }
    }
}
#endif

void main() {
#if defined(LANE_R_MAX) && defined(BACKWARD)
    if (LANE_ROWS != 0u && LANE_R > 1u) { lane_rows_backward_main(); return; }
#elif defined(LANE_R_MAX)
    if (LANE_ROWS != 0u && LANE_R > 1u) { lane_rows_main(); return; }
#endif
#ifdef ROW_SPLIT
    if (SPLIT != 0u) { split_main(); return; }
#endif
    uint lane = LANE_ROWS != 0u ? 0u : gl_LocalInvocationID.x, lanes = LANE_ROWS != 0u ? 1u : WG;
    uint grp = LANE_ROWS != 0u ? linear_group() * WG + gl_LocalInvocationID.x : linear_group();
    uint g_end = grp + 1u, g_step = 1u;
#ifdef SG_ROWS
    if (SG != 0u) {                                   // this subgroup's units: uniform per subgroup
        lane = gl_SubgroupInvocationID;
        lanes = gl_SubgroupSize;
        grp = linear_group() * SG + gl_SubgroupID;
        g_end = linear_group() * SG + SG;
        g_step = gl_NumSubgroups;
    }
#endif
    g_end = min(g_end, p.n_groups);                   // uniform per workgroup unless LANE_ROWS / SG (no barriers)
    uint n = p.n_cols;
    A eps = A(scalar_arg(p.eps)), inv_n = A(1) / A(n);
    A v[PER], wv[PER];
    for (; grp < g_end; grp += g_step) {
    uint r0 = grp * p.rows_per_group, r1 = min(r0 + p.rows_per_group, p.n_rows);
    for (uint row = r0; row < r1; ++row) {
        uint bx = p.off_x + row * n, bo = p.off_out + row * n, ce = chunks_end(bx, n), lo, hi;
        A mu = A(0);
#ifdef LN
        A s = A(0), c = A(0);
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            chunk_span(ch, bx, n, lo, hi);
            load_x(ch * PER, lo, hi, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) g += v[j];
            kahan_add(s, c, g);
        }
        mu = row_sum(s) * inv_n;
#endif
#ifdef BACKWARD
        uint bg = p.off_g + row * n;
        A gv[PER];
        // ss = sum (x - mu)^2, sg = sum gw, sgx = sum gw * (x - mu)
        A ss = A(0), cs = A(0), sg = A(0), cg = A(0), sgx = A(0), cgx = A(0);
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            load_g(e0 - bx + bg, lo, hi, gv);
            weights(e0, bx, lo, hi, wv);
            A qs = A(0), qg = A(0), qgx = A(0);          // the chunk's sums, then compensated across chunks
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) {
                A d = v[j] - mu, gw = gv[j] * wv[j];
                qs += d * d;
                qg += gw;
                qgx += gw * d;
            }
            kahan_add(ss, cs, qs);
            kahan_add(sg, cg, qg);
            kahan_add(sgx, cgx, qgx);
        }
        row_sum3(ss, sg, sgx);
        A r = A(1) / sqrt(ss * inv_n + eps);
        A mgx = sgx * r * inv_n;                     // mean(gw * xh)
#ifdef LN
        A mg = sg * inv_n;
        uint n_grad = 2u;
#else
        A mg = A(0);
        uint n_grad = 1u;
#endif
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            load_g(e0 - bx + bg, lo, hi, gv);
            weights(e0, bx, lo, hi, wv);
            A y[PER], gx[PER];
            for (uint j = 0u; j < PER; ++j) {
                A xh = (v[j] - mu) * r;
                y[j] = r * (gv[j] * wv[j] - mg - xh * mgx);
                gx[j] = gv[j] * xh;
            }
            if (WGRAD != 0u) {
                uint k0 = grp * n_grad * n + e0 - bx;
                accumulate(k0, lo, hi, row == r0, gx);
#ifdef LN
                accumulate(k0 + n, lo, hi, row == r0, gv);
#endif
            }
            store_o(e0 - bx + bo, lo, hi, y);
        }
        // The next row may hand this invocation's columns to another one (rows not whole texels):
        // its read of part[] must see these writes.
        if (WGRAD != 0u && LANE_ROWS == 0u) {
#ifdef SG_ROWS
            if (SG != 0u) { subgroupMemoryBarrierBuffer(); subgroupBarrier(); continue; }
#endif
            memoryBarrierBuffer(); barrier();
        }
#elif defined(ADD_RESIDUAL)
        uint br = p.off_res + row * n;
        A ss = A(0), cs = A(0), rv[PER];
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            load_r(e0 - bx + br, lo, hi, rv);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) { A d = v[j] + rv[j]; g += d * d; }
            kahan_add(ss, cs, g);
        }
        A r = A(1) / sqrt(row_sum(ss) * inv_n + eps);
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            load_r(e0 - bx + br, lo, hi, rv);      // this invocation's own elements: read before written
            weights(e0, bx, lo, hi, wv);
            A y[PER];
            for (uint j = 0u; j < PER; ++j) { rv[j] += v[j]; y[j] = rv[j] * r * wv[j]; }
            store_res(e0 - bx + br, lo, hi, rv);
            store_o(e0 - bx + bo, lo, hi, y);
        }
#else
        A ss = A(0), cs = A(0);
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            chunk_span(ch, bx, n, lo, hi);
            load_x(ch * PER, lo, hi, v);
            A g = A(0);
            for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) { A d = v[j] - mu; g += d * d; }
            kahan_add(ss, cs, g);
        }
        A r = A(1) / sqrt(row_sum(ss) * inv_n + eps);
        for (uint ch = bx / PER + lane; ch < ce; ch += lanes) {
            uint e0 = ch * PER;
            chunk_span(ch, bx, n, lo, hi);
            load_x(e0, lo, hi, v);
            weights(e0, bx, lo, hi, wv);
            A bv[PER];
            if (HAS_B != 0u) load_r(p.off_b + e0 - bx, lo, hi, bv);
            A y[PER];
            for (uint j = 0u; j < PER; ++j) {
                y[j] = (v[j] - mu) * r * wv[j];
                if (HAS_B != 0u) y[j] += bv[j];
            }
            store_o(e0 - bx + bo, lo, hi, y);
        }
#endif
    }
    }
}
