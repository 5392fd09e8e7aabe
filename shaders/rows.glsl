// Shared by the row kernels (reduce, softmax, norms): workgroup reductions and exp in type A.
// Needs before inclusion: WG (spec constant, power of two), accumulator type A.
// Shared-memory tree: pairwise summation across invocations (log2(WG) levels), so the error of a
// row sum grows with log(WG), not WG. NaN-propagating max/min (numpy/torch semantics).
// Per-invocation serial sums use kahan_add (common/kahan.glsl: compensated, inf-safe).
#ifndef FUELVK_ROWS_GLSL
#define FUELVK_ROWS_GLSL
#include "common/kahan.glsl"
#define R_SUM 0u
#define R_MAX 1u
#define R_MIN 2u

shared A red_a[WG];
shared A red_b[WG];
shared A red_c[WG];

A combine(A x, A y, uint op) {
    if (op == R_SUM) return x + y;
    if (op == R_MAX) return (isnan(x) || x > y) ? x : y;
    return (isnan(x) || x < y) ? x : y;
}

A block_reduce(A v, uint op) {
    uint t = gl_LocalInvocationID.x;
    barrier();                          // a previous call may still be reading red_a[0]
    red_a[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red_a[t] = combine(red_a[t], red_a[t + s], op);
        barrier();
    }
    return red_a[0];
}

// Two sums at once (one set of barriers).
void block_sum2(inout A u, inout A v) {
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_a[t] = u;
    red_b[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) { red_a[t] += red_a[t + s]; red_b[t] += red_b[t + s]; }
        barrier();
    }
    u = red_a[0];
    v = red_b[0];
}

// Three sums at once.
void block_sum3(inout A u, inout A v, inout A w) {
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_a[t] = u;
    red_b[t] = v;
    red_c[t] = w;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) { red_a[t] += red_a[t + s]; red_b[t] += red_b[t + s]; red_c[t] += red_c[t + s]; }
        barrier();
    }
    u = red_a[0];
    v = red_b[0];
    w = red_c[0];
}
#endif

#ifndef FUELVK_ROWS_EXP
#define FUELVK_ROWS_EXP
#if defined(DT_F64)
// exp in double precision (GLSL has no double exp): x = k ln2 + r, |r| <= ln2/2, Taylor series of
// degree 13 (truncation < 1e-17 relative), scaled by 2^k. -inf -> 0, +inf -> inf, NaN -> NaN.
A exp_a(A x) {
    if (x < -745.2) return A(0);
    if (x > 709.8) return packDouble2x32(uvec2(0u, 0x7FF00000u));
    A k = roundEven(x * 1.4426950408889634LF);
    A r = (x - k * 6.93147180369123816490e-01LF) - k * 1.90821492927058770002e-10LF;
    A q = 1.0LF;
    for (int i = 13; i >= 1; --i) q = 1.0LF + q * r / A(i);
    int ki = int(k);
    if (ki < -1022) return ldexp(ldexp(q, ki + 600), -600);  // subnormal results in two steps
    return ldexp(q, ki);
}
#else
A exp_a(A x) { return exp(x); }
#endif
#endif
