#version 450
// GGML block formats: dequantize, quantize, fused quantized matvec (M == 1) and tiled matmul (M > 1).
// One source for every quant kernel so the block decoders exist once (build_shaders.py tracks
// only shaders/common/ as includes). MODE picks the kernel, KIND the block format:
//   KIND_Q4_0 q4_0  18 B / 32 elems: f16 d, 16 B nibbles        w = d * (q - 8)
//   KIND_Q8_0 q8_0  34 B / 32 elems: f16 d, 32 x int8            w = d * q
//   KIND_Q4_K q4_k 144 B / 256 elems: f16 d, f16 dmin, 12 B 6-bit scales/mins, 128 B nibbles
//                                                             w = (d * sc) * q - dmin * m
//   KIND_Q6_K q6_k 210 B / 256 elems: 128 B low nibbles, 64 B high 2-bit, 16 x int8 scales, f16 d
//                                                             w = (d * sc) * (q - 32)
// Every block size is even, so blocks are read (and written) as 16-bit words: half the loads of
// byte access and whole-word writes (no read-modify-write). Offsets are in words / elements.
// The products that define a dequantized value are `precise` (no fma contraction), so the values
// are bit-identical to gguf-py's numpy float32 arithmetic. f16 <-> f32 conversions and the
// divisions of quantize are done in integer arithmetic: Vulkan allows 2.5 ulp for OpFDiv and an
// implementation-chosen rounding for f32 -> f16, while gguf (numpy) rounds each correctly.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common/index.glsl"

// MODE_* and KIND_* are defines from the host's tables (kernels/quant.py MODES, KIND_IDS).

#if KIND == KIND_Q4_0
#define QK 32u
#define BW 9u
#elif KIND == KIND_Q8_0
#define QK 32u
#define BW 17u
#elif KIND == KIND_Q4_K
#define QK 256u
#define BW 72u
#elif KIND == KIND_Q6_K
#define QK 256u
#define BW 105u
#else
#error "KIND must be KIND_Q4_0, KIND_Q8_0, KIND_Q4_K or KIND_Q6_K"
#endif

// ---------------------------------------------------------------------------------------------
// Bindings and params per mode
#if MODE == MODE_QUANTIZE
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer QOut { uint16_t q[]; };
layout(set = 0, binding = 1) readonly buffer XIn { float x[]; };
layout(push_constant) uniform Params { uint n_elements; uint n_blocks; uint off_x; uint off_q; } p;
#else
layout(set = 0, binding = 1) readonly buffer QIn { uint16_t q[]; };
#endif

#if MODE == MODE_DEQUANT
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { uint n_blocks; uint out_elements; uint off_q; uint off_o; } p;
#elif MODE == MODE_QMATVEC
// A workgroup owns NR output rows; its 64 lanes stride over the 32-element sub-blocks of K, load
// each x chunk once (8 vec4) for all NR rows, then reduce (subgroupAdd, then shared memory).
#define NR 4u
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(set = 0, binding = 2) readonly buffer XIn { vec4 x4[]; };   // off_x is a multiple of 4
layout(push_constant) uniform Params { uint n; uint k; uint blocks_per_row; uint off_x; uint off_w; uint off_o; } p;
shared float red[64][NR];
#elif MODE == MODE_QMATMUL_TILED
// Workgroup tile TM x TN of C = A[M,K] . W[N,K]^T; per K chunk of 32 the W tile is decoded once
// into shared memory and reused by the TM rows; each invocation owns RM x RN outputs.
#define TM 16u
#define TN 64u
#define RM 2u
#define RN 4u
#define KC 32u
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(set = 0, binding = 2) readonly buffer XIn { float x[]; };
// k: the K span this launch sums; ldx: x's row stride (the whole K: the host splits long K into spans).
layout(push_constant) uniform Params {
    uint m; uint n; uint k; uint blocks_per_row; uint ldx; uint off_x; uint off_w; uint off_o;
} p;
shared float sa[TM][KC + 1u];
shared float sw[TN][KC + 1u];
#endif

// ---------------------------------------------------------------------------------------------
// Exact conversions
float half_to_float(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0u) return uintBitsToFloat(floatBitsToUint(float(m) * 5.9604644775390625e-8) | s);  // m * 2^-24, exact
    if (e == 31u) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

#if MODE == MODE_QUANTIZE
// f32 -> f16, round to nearest even (numpy's astype(float16)), overflow to inf, f16 subnormals.
uint float_to_half(float f) {
    uint u = floatBitsToUint(f);
    uint s = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return s | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
    if (a >= 0x477FF000u) return s | 0x7C00u;                 // >= 65520 rounds to inf
    if (a >= 0x38800000u) {                                   // normal f16 (>= 2^-14)
        uint r = a - 0x38000000u;
        return s | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
    }
    uint e = a >> 23;
    if (e < 102u) return s;                                   // < 2^-25: rounds to (signed) zero
    uint m = (a & 0x7FFFFFu) | 0x800000u;
    uint sh = 126u - e;                                       // 14..24
    uint qv = m >> sh, rem = m & ((1u << sh) - 1u), half_ = 1u << (sh - 1u);
    if (rem > half_ || (rem == half_ && (qv & 1u) != 0u)) qv += 1u;
    return s | qv;
}

// Correctly rounded a / b for finite a >= 0, b > 0 (normal or subnormal): 26-bit long division
// in integers, then round to nearest even at the result's precision (subnormal results too).
float div_rn(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    if (ua == 0u) return 0.0;
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7FFFFFu, mb = ub & 0x7FFFFFu;
    if (ea == 0) { int sh = 23 - findMSB(ma); ma <<= uint(sh); ea = 1 - sh; } else { ma |= 0x800000u; }
    if (eb == 0) { int sh = 23 - findMSB(mb); mb <<= uint(sh); eb = 1 - sh; } else { mb |= 0x800000u; }
    if (ma < mb) { ma <<= 1; ea -= 1; }
    int E = ea - eb + 127;                                    // biased exponent of the quotient
    uint r = ma, Q = 0u;
    for (int i = 0; i < 26; ++i) { Q <<= 1; if (r >= mb) { r -= mb; Q |= 1u; } r <<= 1; }
    bool sticky = r != 0u;                                    // Q = floor(ma / mb * 2^25)
    int s = E >= 1 ? 2 : 3 - E;
    if (s >= 28) return 0.0;
    uint qv = Q >> uint(s), rem = Q & ((1u << uint(s)) - 1u), half_ = 1u << uint(s - 1);
    if (rem > half_ || (rem == half_ && (sticky || (qv & 1u) != 0u))) qv += 1u;
    if (E < 1) return uintBitsToFloat(qv);
    uint bits = (uint(E - 1) << 23) + qv;
    return uintBitsToFloat(bits >= 0x7F800000u ? 0x7F800000u : bits);
}

// gguf's np_roundf: round half away from zero, with exact float operations only.
float roundf_away(float v) {
    float a = abs(v);
    float fl = floor(a);
    precise float b = fl + floor(2.0 * (a - fl));
    return v < 0.0 ? -b : b;
}
#endif

// ---------------------------------------------------------------------------------------------
// Block decoding (word-addressed; wb = first word of the block)
#if MODE != MODE_QUANTIZE
uint word(uint i) { return uint(q[i]); }
uint byte_at(uint wb, uint b) { uint w = word(wb + (b >> 1)); return ((b & 1u) != 0u ? w >> 8 : w) & 0xFFu; }

#if KIND == KIND_Q4_K
// llama.cpp get_scale_min_k4: 6-bit scale and min of sub-block j (0..7), scales at bytes 4..15
uvec2 scale_min_k4(uint wb, uint j) {
    if (j < 4u) return uvec2(byte_at(wb, 4u + j) & 63u, byte_at(wb, 8u + j) & 63u);
    uint hi = byte_at(wb, 8u + j);
    return uvec2((hi & 0xFu) | ((byte_at(wb, j) >> 6) << 4), (hi >> 4) | ((byte_at(wb, 4u + j) >> 6) << 4));
}
#endif

// The dequantized value of element e (0 <= e < QK) of the block at word wb, exactly as gguf.
float weight(uint wb, uint e) {
#if KIND == KIND_Q4_0
    float d = half_to_float(word(wb));
    uint b = byte_at(wb, 2u + (e & 15u));
    precise float v = d * float(int((e < 16u ? b : b >> 4) & 15u) - 8);
    return v;
#elif KIND == KIND_Q8_0
    float d = half_to_float(word(wb));
    precise float v = d * float(int(byte_at(wb, 2u + e) << 24) >> 24);
    return v;
#elif KIND == KIND_Q4_K
    float d = half_to_float(word(wb)), dmin = half_to_float(word(wb + 1u));
    uvec2 sm = scale_min_k4(wb, e >> 5);
    uint b = byte_at(wb, 16u + (e >> 6) * 32u + (e & 31u));
    precise float ds = d * float(sm.x);
    precise float dm = dmin * float(sm.y);
    precise float v = ds * float(((e >> 5) & 1u) != 0u ? b >> 4 : b & 15u) - dm;
    return v;
#else
    uint h = e >> 7, r = e & 127u;
    uint lo = (byte_at(wb, h * 64u + (r & 63u)) >> (4u * (r >> 6))) & 15u;
    uint hi = (byte_at(wb, 128u + h * 32u + (r & 31u)) >> (2u * (r >> 5))) & 3u;
    float d = half_to_float(word(wb + 104u));
    precise float ds = d * float(int(byte_at(wb, 192u + (e >> 4)) << 24) >> 24);
    precise float v = ds * float(int(lo | (hi << 4)) - 32);
    return v;
#endif
}
#endif

#if MODE == MODE_QMATVEC
// sum_j w[e0 + j] * xv[j] over the 32-element sub-block starting at element e0 of block wb.
float xe(vec4 xv[8], uint j) { return xv[j >> 2][j & 3u]; }
float dot32(uint wb, uint e0, vec4 xv[8]) {
#if KIND == KIND_Q4_0
    float acc = 0.0;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
        uint v = word(wb + 1u + w);
        uint j = 2u * w;
        acc += float(int(v & 15u) - 8) * xe(xv, j) + float(int((v >> 8) & 15u) - 8) * xe(xv, j + 1u)
             + float(int((v >> 4) & 15u) - 8) * xe(xv, j + 16u) + float(int((v >> 12) & 15u) - 8) * xe(xv, j + 17u);
    }
    return half_to_float(word(wb)) * acc;
#elif KIND == KIND_Q8_0
    float acc = 0.0;
    [[unroll]] for (uint w = 0u; w < 16u; ++w) {
        uint v = word(wb + 1u + w);
        acc += float(int(v << 24) >> 24) * xe(xv, 2u * w) + float(int(v << 16) >> 24) * xe(xv, 2u * w + 1u);
    }
    return half_to_float(word(wb)) * acc;
#elif KIND == KIND_Q4_K
    uint sb = e0 >> 5;
    uvec2 sm = scale_min_k4(wb, sb);
    uint shift = (sb & 1u) * 4u, base = 8u + (sb >> 1) * 16u;
    float acc = 0.0, xs = 0.0;
    [[unroll]] for (uint w = 0u; w < 16u; ++w) {
        uint v = word(wb + base + w) >> shift;
        float x0 = xe(xv, 2u * w), x1 = xe(xv, 2u * w + 1u);
        acc += float(v & 15u) * x0 + float((v >> 8) & 15u) * x1;
        xs += x0 + x1;
    }
    return half_to_float(word(wb)) * float(sm.x) * acc - half_to_float(word(wb + 1u)) * float(sm.y) * xs;
#else
    float acc = 0.0;
    [[unroll]] for (uint j = 0u; j < 32u; ++j) acc += weight(wb, e0 + j) * xe(xv, j);
    return acc;
#endif
}
#endif

// ---------------------------------------------------------------------------------------------
void main() {
#if MODE == MODE_DEQUANT
    uint i = linear_group() * 256u + gl_LocalInvocationID.x;
    if (i >= p.out_elements) return;
    o[p.off_o + i] = weight(p.off_q + (i / QK) * BW, i % QK);

#elif MODE == MODE_QUANTIZE
    // One invocation per 32-element block (gguf's arithmetic, serial over the block).
    uint blk = linear_group() * 64u + gl_LocalInvocationID.x;
    if (blk >= p.n_blocks) return;
    uint xb = p.off_x + blk * 32u, qb = p.off_q + blk * BW;
#if KIND == KIND_Q8_0
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(x[xb + j]));
    float d = div_rn(amax, 127.0);
    float id = d == 0.0 ? 0.0 : div_rn(1.0, d);
    q[qb] = uint16_t(float_to_half(d));
    for (uint w = 0u; w < 16u; ++w) {
        precise float v0 = x[xb + 2u * w] * id;
        precise float v1 = x[xb + 2u * w + 1u] * id;
        uint b0 = uint(int(roundf_away(v0))) & 0xFFu, b1 = uint(int(roundf_away(v1))) & 0xFFu;
        q[qb + 1u + w] = uint16_t(b0 | (b1 << 8));
    }
#elif KIND == KIND_Q4_0
    float amax = -1.0, mx = 0.0;                 // first element of largest magnitude (numpy argmax)
    for (uint j = 0u; j < 32u; ++j) {
        float v = x[xb + j];
        if (abs(v) > amax) { amax = abs(v); mx = v; }
    }
    precise float d = mx * -0.125;                // == mx / -8 exactly (keeps the sign of zero)
    float id = d == 0.0 ? 0.0 : (d < 0.0 ? -div_rn(1.0, -d) : div_rn(1.0, d));
    q[qb] = uint16_t(float_to_half(d));
    for (uint w = 0u; w < 8u; ++w) {
        uint nib[4];
        uint idx[4] = uint[4](2u * w, 2u * w + 1u, 2u * w + 16u, 2u * w + 17u);
        for (uint t = 0u; t < 4u; ++t) {
            precise float s = x[xb + idx[t]] * id;
            precise float v = s + 8.5;
            nib[t] = min(uint(trunc(v)), 15u);
        }
        q[qb + 1u + w] = uint16_t(nib[0] | (nib[1] << 8) | (nib[2] << 4) | (nib[3] << 12));
    }
#else
#error "quantize supports q4_0 and q8_0"
#endif

#elif MODE == MODE_QMATVEC
    uint l = gl_LocalInvocationID.x;
    uint r0 = linear_group() * NR;
    uint subs = p.k / 32u;                        // 32-element sub-blocks per row
    uint rb[NR];
    float acc[NR];
    for (uint r = 0u; r < NR; ++r) {
        rb[r] = p.off_w + min(r0 + r, p.n - 1u) * p.blocks_per_row * BW;   // rows past N: clamped loads
        acc[r] = 0.0;
    }
    for (uint s = l; s < subs; s += 64u) {
        vec4 xv[8];
        uint xo = p.off_x / 4u + s * 8u;
        [[unroll]] for (uint j = 0u; j < 8u; ++j) xv[j] = x4[xo + j];
        uint boff = (s / (QK / 32u)) * BW, e0 = (s % (QK / 32u)) * 32u;
        [[unroll]] for (uint r = 0u; r < NR; ++r) acc[r] += dot32(rb[r] + boff, e0, xv);
    }
    for (uint r = 0u; r < NR; ++r) acc[r] = subgroupAdd(acc[r]);
    if (subgroupElect())
        for (uint r = 0u; r < NR; ++r) red[gl_SubgroupID][r] = acc[r];
    barrier();
    if (l < NR && r0 + l < p.n) {
        uint nsg = (64u + gl_SubgroupSize - 1u) / gl_SubgroupSize;
        float t = 0.0;
        for (uint q2 = 0u; q2 < nsg; ++q2) t += red[q2][l];
        o[p.off_o + r0 + l] = t;
    }

#elif MODE == MODE_QMATMUL_TILED
    uint tid = gl_LocalInvocationID.x;
    uint g = linear_group();
    uint tiles_n = (p.n + TN - 1u) / TN;
    uint m0 = (g / tiles_n) * TM, n0 = (g % tiles_n) * TN;
    uint tc = tid % (TN / RN), tr = tid / (TN / RN);  // 16 x 8 invocations
    float acc[RM][RN];
    for (uint i = 0u; i < RM; ++i) for (uint j = 0u; j < RN; ++j) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < p.k; k0 += KC) {
        // A tile: TM x KC, 4 per invocation (rows past M read as 0)
        for (uint t = tid; t < TM * KC; t += 128u) {
            uint r = t / KC, c = t % KC;
            sa[r][c] = m0 + r < p.m ? x[p.off_x + (m0 + r) * p.ldx + k0 + c] : 0.0;
        }
        // W tile: TN x KC decoded once, 16 per invocation (one half block per invocation)
        for (uint t = tid; t < TN * KC; t += 128u) {
            uint r = t / KC, c = t % KC;
            uint kk = k0 + c;
            sw[r][c] = n0 + r < p.n ? weight(p.off_w + (n0 + r) * p.blocks_per_row * BW + (kk / QK) * BW, kk % QK)
                                     : 0.0;
        }
        barrier();
        for (uint c = 0u; c < KC; ++c) {
            float a[RM], w[RN];
            for (uint i = 0u; i < RM; ++i) a[i] = sa[tr + i * (TM / RM)][c];
            for (uint j = 0u; j < RN; ++j) w[j] = sw[tc + j * (TN / RN)][c];
            for (uint i = 0u; i < RM; ++i) for (uint j = 0u; j < RN; ++j) acc[i][j] += a[i] * w[j];
        }
        barrier();
    }
    for (uint i = 0u; i < RM; ++i) {
        uint r = m0 + tr + i * (TM / RM);
        if (r >= p.m) continue;
        for (uint j = 0u; j < RN; ++j) {
            uint c = n0 + tc + j * (TN / RN);
            if (c < p.n) o[p.off_o + r * p.n + c] = acc[i][j];
        }
    }
#endif
}
