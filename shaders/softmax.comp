#version 450
// Softmax over the last dim of contiguous [n_rows, n_cols] rows (element offsets off_*), one
// workgroup per row: row max (NaN-propagating tree), compensated sum of exp(x - max), then
// exp(x - max) / sum. Stable for large values; a row of all -inf gives NaN (as torch: -inf - -inf).
// BACKWARD: dx = y * (g - dot(y, g)) with the dot product compensated + tree-reduced.
// Half types compute in f32; f64 uses a double-precision exp (rows.glsl).
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;
#include "rows.glsl"

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };   // forward: x, backward: y
#ifdef BACKWARD
layout(set = 0, binding = 2) readonly buffer Grad { T g[]; };
#endif

layout(push_constant) uniform Params {
    uint n_rows; uint n_cols; uint off_out; uint off_x; uint off_g; uint pad;
} p;

void main() {
    uint row = linear_group();
    if (row >= p.n_rows) return;                      // uniform per workgroup
    uint t = gl_LocalInvocationID.x, n = p.n_cols;
    uint bx = p.off_x + row * n, bo = p.off_out + row * n;
#ifdef BACKWARD
    uint bg = p.off_g + row * n;
    A s = A(0), c = A(0);
    for (uint i = t; i < n; i += WG) kahan_add(s, c, A(LOAD(x[bx + i])) * A(LOAD(g[bg + i])));
    A dot = block_reduce(s, R_SUM);
    for (uint i = t; i < n; i += WG) {
        A y = A(LOAD(x[bx + i]));
        o[bo + i] = STORE(y * (A(LOAD(g[bg + i])) - dot));
    }
#else
#if defined(DT_F64)
    A m = -packDouble2x32(uvec2(0u, 0x7FF00000u));
#else
    A m = -uintBitsToFloat(0x7F800000u);
#endif
    for (uint i = t; i < n; i += WG) m = combine(m, A(LOAD(x[bx + i])), R_MAX);
    m = block_reduce(m, R_MAX);
    A s = A(0), c = A(0);
    for (uint i = t; i < n; i += WG) kahan_add(s, c, exp_a(A(LOAD(x[bx + i])) - m));
    s = block_reduce(s, R_SUM);
    for (uint i = t; i < n; i += WG) o[bo + i] = STORE(exp_a(A(LOAD(x[bx + i])) - m) / s);
#endif
}
