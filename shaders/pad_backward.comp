#version 450
// Pad backward for reflect (MODE_PAD_REFLECT) and replicate (MODE_PAD_REPLICATE): grad_in[c] = sum of grad_out over every
// padded position the forward pass read c from. One invocation per grad_in element gathers its
// preimage (per dim: itself plus <= 2 mirror positions for reflect; the whole edge run for
// replicate) and writes once: no atomics, so no value can be lost under contention and the result
// is deterministic. One invocation per run of RUN consecutive elements of a row (the last dim): the
// row's coordinates are split once per run, and where the row has a single preimage row (every row
// but those in the outer dims' padded bands) each element sums its <= 3 (reflect) or edge-run
// (replicate) sources along the last dim directly, in the same ascending order as the general
// odometer the other rows take. grad_out is any strided view (`sa`, off_a); grad_in contiguous. Half types
// accumulate in f32, f64 in f64. Params as remap.comp: shape = grad_in shape, dim = grad_out shape,
// lo = left pads (right pad = dim - shape - lo).
#extension GL_EXT_control_flow_attributes : require
#include "common/dtype.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, RUNU = RUN;

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer A { T a[]; };
#ifndef NO_TEXEL
// grad_out as one element per texel (R32_UINT, R32G32_UINT, R16_UINT by dtype): where the device
// reads texels faster, a's reads come through here (binding a stays bound, unread).
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 2) uniform utextureBuffer a_t;
V load_a(uint i) {
#if defined(DT_F64)
    return packDouble2x32(texelFetch(a_t, int(i)).xy);
#elif defined(DT_F16)
    return f16_to_f32(texelFetch(a_t, int(i)).x);
#elif defined(DT_BF16)
    return uintBitsToFloat(texelFetch(a_t, int(i)).x << 16);
#else
    return uintBitsToFloat(texelFetch(a_t, int(i)).x);
#endif
}
#else
V load_a(uint i) { return LOAD(a[i]); }
#endif

layout(push_constant) uniform Params {
    uint n; uint rank; uint off_o; uint off_a; uint runs_magic; uint runs_shift;
    int shape[6]; int sa[6]; int lo[6]; int dim[6];
} p;

// The sum over the whole preimage of grad_in element i, any rank: an odometer over the product of
// the per-dim runs.
V gather_element(uint i) {
    int r = int(p.rank);
    // per dim: up to 3 runs (start in grad_out coordinates, length), in ascending order. The local
    // int[6]-shaped arrays are uint: glslc would share the push block's int[6] type, whose ArrayStride
    // is invalid on a Function variable (VUID-StandaloneSpirv-None-10684).
    int rs[6][3], rl[6][3];
    uint nr[6];
    uint rest = i;
    for (int d = r - 1; d >= 0; --d) {
        int nin = p.shape[d];
        int c = int(rest % uint(nin));
        rest /= uint(nin);
        int lo = p.lo[d], hi = p.dim[d] - nin - lo;
        int cnt = 0;
#if MODE == MODE_PAD_REFLECT
        if (c >= 1 && c <= lo) { rs[d][cnt] = lo - c; rl[d][cnt] = 1; ++cnt; }
        rs[d][cnt] = lo + c; rl[d][cnt] = 1; ++cnt;
        if (c <= nin - 2 && c >= nin - 1 - hi) { rs[d][cnt] = lo + 2 * (nin - 1) - c; rl[d][cnt] = 1; ++cnt; }
#else
        int s0 = c == 0 ? 0 : lo + c;
        int e0 = c == nin - 1 ? p.dim[d] : lo + c + 1;
        rs[d][0] = s0; rl[d][0] = e0 - s0; cnt = 1;
#endif
        nr[d] = uint(cnt);
    }
    uint ri[6], t[6];
    for (int d = 0; d < r; ++d) { ri[d] = 0u; t[d] = 0u; }
    V acc = V(0.0);
    while (true) {
        int src = int(p.off_a);
        for (int d = 0; d < r; ++d) src += (rs[d][ri[d]] + int(t[d])) * p.sa[d];
        acc += load_a(uint(src));
        int d = r - 1;
        for (; d >= 0; --d) {
            if (int(++t[d]) < rl[d][ri[d]]) break;
            t[d] = 0u;
            if (++ri[d] < nr[d]) break;
            ri[d] = 0u;
        }
        if (d < 0) break;
    }
    return acc;
}

void main() {
    int r = int(p.rank);
    int nin = p.shape[r - 1];
    uint last = uint(nin);
    uint runs = (last + RUNU - 1u) / RUNU;          // runs per row
    uint item = linear_group() * WGU + gl_LocalInvocationID.x;
    // row = item / runs as a multiply-high and a shift (ops/_core.py divider: exact below the launch's
    // item count; integer division is the expensive part on CPU drivers)
    uint q_hi, q_lo;
    umulExtended(item, p.runs_magic, q_hi, q_lo);
    uint row = p.runs_shift >= 32u ? q_hi >> (p.runs_shift - 32u) : (q_hi << (32u - p.runs_shift)) | (q_lo >> p.runs_shift);
    if (row * last >= p.n) return;
    uint col0 = (item - row * runs) * RUNU;
    uint col_end = min(col0 + RUNU, last);
    uint out_i = p.off_o + row * last;
    // the row's preimage in the outer dims: a single grad_out row (src) or several
    uint rest = row;
    int src = int(p.off_a);
    bool single = true;
    for (int d = r - 2; d >= 0; --d) {
        int nd = p.shape[d];
        int c = int(rest % uint(nd));
        rest /= uint(nd);
        int lo = p.lo[d], hi = p.dim[d] - nd - lo;
#if MODE == MODE_PAD_REFLECT
        single = single && !(c >= 1 && c <= lo) && !(c <= nd - 2 && c >= nd - 1 - hi);
        src += (lo + c) * p.sa[d];
#else
        int s0 = c == 0 ? 0 : lo + c;
        int e0 = c == nd - 1 ? p.dim[d] : lo + c + 1;
        single = single && e0 - s0 == 1;
        src += s0 * p.sa[d];
#endif
    }
    if (!single) {
        for (uint col = col0; col < col_end; ++col) o[out_i + col] = STORE(gather_element(row * last + col));
        return;
    }
    int s = p.sa[r - 1], lo = p.lo[r - 1], hi = p.dim[r - 1] - nin - lo;
#if MODE == MODE_PAD_REFLECT
    int in_lo = lo + 1, in_hi = nin - 2 - hi;   // columns [in_lo, in_hi] have no mirror: one source each
#else
    int in_lo = 1, in_hi = nin - 2;             // columns [1, nin - 2] have no edge run: one source each
#endif
    if (int(col0) >= in_lo && int(col0 + RUNU) - 1 <= in_hi) {
        // a run of such columns (most runs of a long row): straight-line code, no branch per element
        // (on CPU drivers neighbouring invocations are lanes of one SIMD program; a branch any lane
        // takes costs them all). V(0.0) + x as the general path sums (-0.0 becomes +0.0 there too).
        [[unroll]] for (uint j = 0u; j < RUNU; ++j)
            o[out_i + col0 + j] = STORE(V(0.0) + load_a(uint(src + (lo + int(col0 + j)) * s)));
        return;
    }
    for (uint col = col0; col < col_end; ++col) {
        int c = int(col);
        V acc = V(0.0);
#if MODE == MODE_PAD_REFLECT
        if (c >= 1 && c <= lo) acc += load_a(uint(src + (lo - c) * s));
        acc += load_a(uint(src + (lo + c) * s));
        if (c <= nin - 2 && c >= nin - 1 - hi) acc += load_a(uint(src + (lo + 2 * (nin - 1) - c) * s));
#else
        int s0 = c == 0 ? 0 : lo + c;
        int e0 = c == nin - 1 ? p.dim[r - 1] : lo + c + 1;
        for (int t = s0; t < e0; ++t) acc += load_a(uint(src + t * s));
#endif
        o[out_i + col] = STORE(acc);
    }
}
