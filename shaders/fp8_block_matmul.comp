#version 450
// out[i, j] = sum over k in [k0, k1) of x[i, k] * (fp8(w[j, k]) * scale[j / block_n, k / block_k]):
// x @ W.T with W an e4m3fn block-scaled weight (DeepSeek-V3 / FlashInfer's fp8 block-scale layout)
// dequantized element by element as it is read, never expanded.  The dequantized value is the f32
// product fp8 * scale (exactly the value a reference that expands W computes), summed in f32.
// One invocation per MT rows of x and one row of W (each weight word decoded once for MT rows), K
// walked block by block (one scale load per block).  W's bytes
// are read from 32-bit words, so the kernel needs no 8-bit storage: with `aligned` (rows, offsets,
// k0, k1 and block_k all multiples of 4, set by ops/moe.py) one word and one vec4 of x per 4
// elements (lavapipe pays per load instruction), else byte by byte.  WG, MT from kernels/moe.py.
#include "common/index.glsl"

layout(local_size_x = WG) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 2) readonly buffer W { uint w[]; };      // e4m3fn bytes, 4 to a word
layout(set = 0, binding = 3) readonly buffer Scale { float s[]; };

// TEX = 1: x and w are read through rgba32ui texel views (4 floats / 16 fp8 codes a load; lavapipe's
// texel loads are several times faster than its storage-buffer loads), set by ops/moe.py when rows,
// offsets, k spans and block_k are whole texels; else 16-byte stubs are bound there.
layout(constant_id = 0) const uint TEX = 0;
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = 5, rgba32ui) uniform readonly uimageBuffer w_t;

layout(push_constant) uniform Params {
    uint m; uint n; uint k; uint k0; uint k1; uint block_n; uint block_k;
    uint off_o; uint off_x; uint off_w; uint off_s; uint x_row; uint w_row; uint s_row; uint aligned;
} p;

// e4m3fn bits -> f32, exact: no inf, 0x7F / 0xFF the only NaNs, subnormals m * 2^-9.
float fp8(uint b) {
    uint sgn = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    if (e == 15u && m == 7u) return uintBitsToFloat(sgn | 0x7FC00000u);
    if (e == 0u) return uintBitsToFloat(sgn | floatBitsToUint(float(m) * (1.0 / 512.0)));
    return uintBitsToFloat(sgn | ((e + 120u) << 23) | (m << 20));
}

void main() {
    uint t = linear_group() * WG + gl_LocalInvocationID.x;
    uint tiles = (p.m + MT - 1u) / MT;
    if (t >= tiles * p.n) return;
    uint i0 = (t / p.n) * MT, j = t % p.n;        // rows i0 .. i0 + MT - 1 of x, row j of w
    uint xb[MT];
    for (uint r = 0u; r < MT; ++r) xb[r] = p.off_x + min(i0 + r, p.m - 1u) * p.x_row;   // past m: reads row m - 1, not stored
    uint wb = p.off_w + j * p.w_row;               // w row j (bytes)
    uint sb = p.off_s + (j / p.block_n) * p.s_row; // scale row of w row j
    float acc[MT];
    for (uint r = 0u; r < MT; ++r) acc[r] = 0.0;
    for (uint b0 = p.k0; b0 < p.k1; b0 = (b0 / p.block_k + 1u) * p.block_k) {
        uint b1 = min((b0 / p.block_k + 1u) * p.block_k, p.k1);
        float sc = s[sb + b0 / p.block_k];
        if (TEX != 0u) {
            for (uint kk = b0; kk < b1; kk += 16u) {
                uvec4 q = imageLoad(w_t, int((wb + kk) >> 4));
                for (uint c = 0u; c < 4u; ++c) {
                    uint u = q[c];
                    vec4 v = vec4(fp8(u & 0xFFu), fp8((u >> 8) & 0xFFu), fp8((u >> 16) & 0xFFu), fp8(u >> 24)) * sc;
                    for (uint r = 0u; r < MT; ++r) {
                        vec4 xv = uintBitsToFloat(imageLoad(x_t, int((xb[r] + kk) >> 2) + int(c)));
                        acc[r] = fma(xv.x, v.x, fma(xv.y, v.y, fma(xv.z, v.z, fma(xv.w, v.w, acc[r]))));
                    }
                }
            }
        } else if (p.aligned != 0u) {
            for (uint kk = b0; kk < b1; kk += 4u) {
                uint q = w[(wb + kk) >> 2];
                vec4 v = vec4(fp8(q & 0xFFu), fp8((q >> 8) & 0xFFu), fp8((q >> 16) & 0xFFu), fp8(q >> 24)) * sc;
                for (uint r = 0u; r < MT; ++r) {
                    vec4 xv = x4[(xb[r] + kk) >> 2];
                    acc[r] = fma(xv.x, v.x, fma(xv.y, v.y, fma(xv.z, v.z, fma(xv.w, v.w, acc[r]))));
                }
            }
        } else {
            for (uint kk = b0; kk < b1; ++kk) {
                uint at = wb + kk;
                float v = fp8((w[at >> 2] >> ((at & 3u) * 8u)) & 0xFFu) * sc;
                for (uint r = 0u; r < MT; ++r) acc[r] = fma(x[xb[r] + kk], v, acc[r]);
            }
        }
    }
    for (uint r = 0u; r < MT && i0 + r < p.m; ++r) o[p.off_o + (i0 + r) * p.n + j] = acc[r];
}
