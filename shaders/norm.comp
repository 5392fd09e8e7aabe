#version 450
// RMSNorm (RMS) and LayerNorm (LN) over the last dim of contiguous [n_rows, n_cols] rows, forward
// and BACKWARD, with an optional weight (HAS_W) and bias (HAS_B, LN) applied in the same pass.
//   RMS: y = x * r * w,            r = 1 / sqrt(mean(x^2) + eps)
//   LN:  y = (x - mu) * r * w + b, r = 1 / sqrt(mean((x - mu)^2) + eps)   (two-pass variance)
// Backward (xh = normalized x, gw = g * w):
//   RMS: dx = r * (gw - xh * mean(gw * xh))
//   LN:  dx = r * (gw - mean(gw) - xh * mean(gw * xh))
// WGRAD: also the weight/bias-gradient partials dw = sum_rows g * xh, db = sum_rows g: workgroup
// `grp` owns rows [grp * rows_per_group, ...) and each invocation accumulates the columns it owns
// into part[(k * n_cols + col) * n_groups + grp] (k = 0: dw, 1: db), reduced over groups afterwards
// by reduce_last_dim (MODE 2). One workgroup per row group; sums are compensated + tree-reduced in
// the accumulator type (f32 for half types).
// ADD_RESIDUAL (RMS forward; FlashInfer's fused_add_rmsnorm): s = x + res in the accumulator type,
// res = s rounded to T (in place), y = s * r * w with r from the unrounded s. The first pass only
// reads; the second recomputes s from the same x and res elements (each invocation reads and writes
// only its own indices, so the rewrite of res cannot race) and writes res and y.
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint HAS_W = 0;
layout(constant_id = 2) const uint HAS_B = 0;
layout(constant_id = 3) const uint WGRAD = 0;
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
#ifdef BACKWARD
layout(set = 0, binding = 2) readonly buffer Grad { T g[]; };
layout(set = 0, binding = 3) readonly buffer Weight { T w[]; };
layout(set = 0, binding = 4) buffer Part { A part[]; };
#else
layout(set = 0, binding = 2) readonly buffer Weight { T w[]; };
#ifdef ADD_RESIDUAL
layout(set = 0, binding = 3) buffer Residual { T res[]; };
#define OFF_3 off_res
#else
layout(set = 0, binding = 3) readonly buffer Bias { T b[]; };
#define OFF_3 off_b
#endif
#endif
#ifndef OFF_3
#define OFF_3 off_b
#endif

layout(push_constant) uniform Params {
    uint n_rows; uint n_cols; uint off_out; uint off_x;
    uint off_g; uint off_w; uint OFF_3; uint rows_per_group;
    uint n_groups; uint eps[2];
} p;

A weight(uint i) { return HAS_W != 0u ? A(LOAD(w[p.off_w + i])) : A(1); }

void main() {
    uint grp = linear_group();
    if (grp >= p.n_groups) return;                    // uniform per workgroup
    uint t = gl_LocalInvocationID.x, n = p.n_cols;
    A eps = A(scalar_arg(p.eps)), inv_n = A(1) / A(n);
    uint r0 = grp * p.rows_per_group, r1 = min(r0 + p.rows_per_group, p.n_rows);
    for (uint row = r0; row < r1; ++row) {
        uint bx = p.off_x + row * n, bo = p.off_out + row * n;
        A mu = A(0);
#ifdef LN
        A s = A(0), c = A(0);
        for (uint i = t; i < n; i += WG) kahan_add(s, c, A(LOAD(x[bx + i])));
        mu = block_reduce(s, R_SUM) * inv_n;
#endif
#ifdef BACKWARD
        uint bg = p.off_g + row * n;
        // ss = sum (x - mu)^2, sg = sum gw, sgx = sum gw * (x - mu)
        A ss = A(0), cs = A(0), sg = A(0), cg = A(0), sgx = A(0), cgx = A(0);
        for (uint i = t; i < n; i += WG) {
            A d = A(LOAD(x[bx + i])) - mu, gw = A(LOAD(g[bg + i])) * weight(i);
            kahan_add(ss, cs, d * d);
            kahan_add(sg, cg, gw);
            kahan_add(sgx, cgx, gw * d);
        }
        block_sum3(ss, sg, sgx);
        A r = A(1) / sqrt(ss * inv_n + eps);
        A mgx = sgx * r * inv_n;                     // mean(gw * xh)
#ifdef LN
        A mg = sg * inv_n;
#else
        A mg = A(0);
#endif
        for (uint i = t; i < n; i += WG) {
            A xg = A(LOAD(g[bg + i]));
            A xh = (A(LOAD(x[bx + i])) - mu) * r;
            o[bo + i] = STORE(r * (xg * weight(i) - mg - xh * mgx));
            if (WGRAD != 0u) {
                uint k = i * p.n_groups + grp;
                part[k] = (row == r0 ? A(0) : part[k]) + xg * xh;
#ifdef LN
                uint kb = (n + i) * p.n_groups + grp;
                part[kb] = (row == r0 ? A(0) : part[kb]) + xg;
#endif
            }
        }
#elif defined(ADD_RESIDUAL)
        uint br = p.off_res + row * n;
        A ss = A(0), cs = A(0);
        for (uint i = t; i < n; i += WG) { A d = A(LOAD(x[bx + i])) + A(LOAD(res[br + i])); kahan_add(ss, cs, d * d); }
        A r = A(1) / sqrt(block_reduce(ss, R_SUM) * inv_n + eps);
        for (uint i = t; i < n; i += WG) {
            A d = A(LOAD(x[bx + i])) + A(LOAD(res[br + i]));
            res[br + i] = STORE(d);
            o[bo + i] = STORE(d * r * weight(i));
        }
#else
        A ss = A(0), cs = A(0);
        for (uint i = t; i < n; i += WG) { A d = A(LOAD(x[bx + i])) - mu; kahan_add(ss, cs, d * d); }
        A r = A(1) / sqrt(block_reduce(ss, R_SUM) * inv_n + eps);
        for (uint i = t; i < n; i += WG) {
            A y = (A(LOAD(x[bx + i])) - mu) * r * weight(i);
            if (HAS_B != 0u) y += A(LOAD(b[p.off_b + i]));
            o[bo + i] = STORE(y);
        }
#endif
    }
}
