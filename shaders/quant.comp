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
// Load paths (issue 18): dequantize, qmatvec and the tiled kernel fetch the bytes of a block (or of
// a 32-element sub-block) into registers at once (FETCH), either as 16-byte texels of the blocks' rgba32ui view
// (TEX bit 0; a block at any even byte offset is a funnel shift over the texels it touches) or as
// 16-bit storage-buffer words; the decoders then work on those registers, so both paths give the
// same bits. TEX bit 1: x (qmatvec) / the output (dequantize) through its texel view too.
// The products that define a dequantized value are `precise` (no fma contraction), so the values
// are bit-identical to gguf-py's numpy float32 arithmetic. The divisions of quantize are done in
// integer arithmetic (Vulkan allows 2.5 ulp for OpFDiv, gguf's numpy rounds correctly); f16 <-> f32
// through common/half.glsl, exact in either of its forms.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common/index.glsl"
#include "common/half.glsl"

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

#if MODE != MODE_QUANTIZE
// TEX bit 0: the blocks through q_t (the host binds their buffer's own view: its size a whole number
// of texels within maxTexelBufferElements); bit 1: x / the output through its view (offset a
// multiple of 4 elements); bit 2 (with bit 0): every fetch starts on a texel (see FETCH). A clear
// bit: storage-buffer access (q_t / o_t / x_t then show a stub).
layout(constant_id = 0) const uint TEX = 0;
#if MODE == MODE_DEQUANT
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer q_t;
#else
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer q_t;
#endif
#endif

#if MODE == MODE_DEQUANT
// One invocation per 32-element sub-block: fetch its bytes, decode, store 8 vec4.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer Out { vec4 o4[]; };   // off_o is a multiple of 4
layout(set = 0, binding = 3, rgba32ui) uniform writeonly uimageBuffer o_t;
layout(push_constant) uniform Params { uint n_blocks; uint out_elements; uint off_q; uint off_o; } p;
#elif MODE == MODE_QMATVEC
// A workgroup owns NR output rows; its WG lanes stride over the 32-element sub-blocks of K, load
// each x chunk once (8 vec4) for all NR rows, then reduce: subgroupAdd, and across subgroups through
// shared memory. The host makes WG the subgroup width (at most 64): one subgroup a workgroup, no
// barrier (on CPU drivers a barrier is a coroutine switch per SIMD group: ~13% of a q4_0 matvec).
#define NR 16u
layout(constant_id = 2) const uint WG = 64;
layout(local_size_x_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(set = 0, binding = 2) readonly buffer XIn { vec4 x4[]; };   // off_x is a multiple of 4
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer x_t;
layout(push_constant) uniform Params { uint n; uint k; uint blocks_per_row; uint off_x; uint off_w; uint off_o; } p;
// PAIRS (q4_0 / q8_0, set by the host when off_w and blocks_per_row are even, so every pair of blocks
// starts on a 4-byte word): a lane step takes two adjacent blocks as whole words (pair_dot), no
// half-word realignment and compile-time nibble / byte positions.
layout(constant_id = 1) const uint PAIRS = 0;
shared float red[64][NR];
#elif MODE == MODE_QMATMUL_TILED
// Workgroup tile TM x TN of C = A[M,K] . W[N,K]^T; per K chunk of 32 the W tile is decoded once
// into shared memory (one 32-element sub-block per lane of the first TN) and reused by the TM rows;
// each invocation owns RM x RN outputs. TEX bit 0 only (x is read through its storage buffer).
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
// f16 <-> f32 (the block scales): shaders/common/half.glsl, the device's own conversion or integers as
// its probe chose (both exact; a NaN scale only ever reaches an output through a product, which quiets
// it the same way either form). quantize narrows the scales to numpy's bits, NaNs included.
float half_to_float(uint h) { return f16_to_f32(h); }

#if MODE == MODE_QUANTIZE
uint float_to_half(float f) {
    uint u = floatBitsToUint(f);
    return f32_to_f16_bits_numpy_nan(u, f32_bits_to_f16(u));
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
// Block decoding: every kernel fetches a block's (or sub-block's) bytes into registers first
// (FETCH) and decodes those (bb = first byte of the block); word(i) is the i-th 16-bit word.
#if MODE != MODE_QUANTIZE
uint word(uint i) { return uint(q[i]); }
// Byte i / 16-bit word i of registers w holding bytes as little-endian uints (i constant after unrolling).
#define BYTE(w, i) ((w[(i) >> 2] >> (8u * ((i) & 3u))) & 0xFFu)
#define HALF(w, i) ((w[(i) >> 1] >> (16u * ((i) & 1u))) & 0xFFFFu)
#define INT8(b) (int((b) << 24) >> 24)

#if KIND == KIND_Q4_K
// llama.cpp get_scale_min_k4: 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes
// (block bytes 4..15) held as 3 uints.
// (j is not a constant: bytes are picked by selects, not by indexing the registers.)
uint sc_byte(uint sc[3], uint i) { return ((i < 4u ? sc[0] : i < 8u ? sc[1] : sc[2]) >> (8u * (i & 3u))) & 0xFFu; }
uvec2 scale_min_k4(uint sc[3], uint j) {
    if (j < 4u) return uvec2(sc_byte(sc, j) & 63u, sc_byte(sc, 4u + j) & 63u);
    uint hi = sc_byte(sc, 4u + j);
    return uvec2((hi & 0xFu) | ((sc_byte(sc, j - 4u) >> 6) << 4), (hi >> 4) | ((sc_byte(sc, j) >> 6) << 4));
}
#endif

// FETCH(fn, NB) defines fn(b, w): w[i] = bytes [b + 4i, b + 4i + 4) of the blocks (a little-endian
// uint) for the NB bytes from byte b (b and NB even; bytes past NB read as 0). Texel path: the NT
// texels that can hold them (bytes b .. b + NB - 1 with b % 16 <= 14), then a funnel shift by
// b % 16 whose word indices are constants (selects on b % 16, no dynamically indexed registers);
// texels past the view that no wanted byte lies in are clamped to its last one. TEX bit 2 (q4_k
// blocks at a texel boundary: every fetch starts on a texel): whole texels, no shift.
#define FETCH(fn, NB) \
void fn(uint b, out uint w[(NB + 3u) / 4u]) { \
    const uint NU = (NB + 3u) / 4u, NT = (NB + 29u) / 16u, U = 4u * NT; \
    if ((TEX & 5u) == 5u) { \
        [[unroll]] for (uint t = 0u; t < (NB + 15u) / 16u; ++t) { \
            uvec4 v = imageLoad(q_t, int(b >> 4) + int(t)); \
            [[unroll]] for (uint j = 0u; j < 4u; ++j) if (4u * t + j < NU) w[4u * t + j] = v[j]; \
        } \
    } else if ((TEX & 1u) != 0u) { \
        uint u[U]; \
        int last = imageSize(q_t) - 1; \
        [[unroll]] for (uint t = 0u; t < NT; ++t) { \
            uvec4 v = imageLoad(q_t, min(int(b >> 4) + int(t), last)); \
            u[4u * t] = v.x; u[4u * t + 1u] = v.y; u[4u * t + 2u] = v.z; u[4u * t + 3u] = v.w; \
        } \
        uint c = (b >> 2) & 3u; \
        bool odd = (b & 2u) != 0u; \
        [[unroll]] for (uint i = 0u; i < NU; ++i) { \
            uint lo = c == 0u ? u[i] : c == 1u ? u[i + 1u] : c == 2u ? u[i + 2u] : u[min(i + 3u, U - 1u)]; \
            uint hi = c == 0u ? u[i + 1u] : c == 1u ? u[i + 2u] : c == 2u ? u[min(i + 3u, U - 1u)] \
                                                                         : u[min(i + 4u, U - 1u)]; \
            w[i] = odd ? (lo >> 16) | (hi << 16) : lo; \
        } \
    } else { \
        uint wo = b >> 1; \
        [[unroll]] for (uint i = 0u; i < NU; ++i) \
            w[i] = word(wo + 2u * i) | (2u * i + 1u < NB / 2u ? word(wo + 2u * i + 1u) << 16 : 0u); \
    } \
    if ((NB & 2u) != 0u) w[NU - 1u] &= 0xFFFFu; \
}
FETCH(fetch2, 2u)
#if KIND == KIND_Q4_0
FETCH(fetch18, 18u)
#elif KIND == KIND_Q8_0
FETCH(fetch34, 34u)
#else
FETCH(fetch32, 32u)
#if KIND == KIND_Q4_K
FETCH(fetch16, 16u)
#else
FETCH(fetch18, 18u)
#endif
#endif

// v = the 32 values of sub-block sb (elements 32 sb .. 32 sb + 31) of the block at byte bb, exactly
// as gguf computes them.
void decode32(uint bb, uint sb, out float v[32]) {
#if KIND == KIND_Q4_0
    uint w[5];
    fetch18(bb, w);
    float d = half_to_float(w[0] & 0xFFFFu);
    [[unroll]] for (uint e = 0u; e < 32u; ++e) {
        uint b = BYTE(w, 2u + (e & 15u));
        precise float x = d * float(int((e < 16u ? b : b >> 4) & 15u) - 8);
        v[e] = x;
    }
#elif KIND == KIND_Q8_0
    uint w[9];
    fetch34(bb, w);
    float d = half_to_float(w[0] & 0xFFFFu);
    [[unroll]] for (uint e = 0u; e < 32u; ++e) {
        precise float x = d * float(INT8(BYTE(w, 2u + e)));
        v[e] = x;
    }
#elif KIND == KIND_Q4_K
    uint h[4], n[8];
    fetch16(bb, h);
    fetch32(bb + 16u + (sb >> 1) * 32u, n);
    uint sc[3] = uint[3](h[1], h[2], h[3]);
    uvec2 sm = scale_min_k4(sc, sb);
    float d = half_to_float(h[0] & 0xFFFFu), dmin = half_to_float(h[0] >> 16);
    precise float ds = d * float(sm.x);
    precise float dm = dmin * float(sm.y);
    uint shift = (sb & 1u) * 4u;
    [[unroll]] for (uint e = 0u; e < 32u; ++e) {
        precise float p = ds * float((BYTE(n, e) >> shift) & 15u);
        precise float x = p - dm;
        // a NaN operand's bits as gguf's (x86) subtraction returns them: p's if p is NaN, else dm's, its
        // sign kept (the driver may lower p - dm to p + (-dm), which would flip a NaN dm's sign)
        v[e] = isnan(p) ? p : isnan(dm) ? dm : x;
    }
#else
    uint hh = sb >> 2, r0 = (sb & 3u) * 32u;       // the 128-element half and the sub-block's place in it
    uint lo[8], hi[8], sc[1], dw[1];
    fetch32(bb + hh * 64u + (r0 & 63u), lo);
    fetch32(bb + 128u + hh * 32u, hi);
    fetch2(bb + 192u + 2u * sb, sc);
    fetch2(bb + 208u, dw);
    float d = half_to_float(dw[0]);
    uint ls = 4u * (r0 >> 6), hs = 2u * (r0 >> 5);
    [[unroll]] for (uint e = 0u; e < 32u; ++e) {
        uint q6 = ((BYTE(lo, e) >> ls) & 15u) | (((BYTE(hi, e) >> hs) & 3u) << 4);
        precise float ds = d * float(INT8(BYTE(sc, e >> 4)));
        precise float x = ds * float(int(q6) - 32);
        v[e] = x;
    }
#endif
}
#endif

#if MODE == MODE_QMATVEC
// sum_j w[32 sb + j] * xv[j] over the SPS sub-blocks of a lane step, from sb, of the block at byte bb;
// xs[i] = sum of sub-block i's x (q4_k's min term; the same for every row, so summed once per step).
// k-quants take pairs that share their fetches: q4_k sub-blocks sb, sb + 1 (one 32-byte nibble run,
// low and high nibbles, one header); q6_k sb, sb + 2 (one 32-byte low-nibble run, one 32-byte
// high-bit run and the scales + d in one 18-byte fetch), XSTEP vec4 of x apart.
#if KIND == KIND_Q4_K || KIND == KIND_Q6_K
#define SPS 2u
#else
#define SPS 1u
#endif
#if KIND == KIND_Q6_K
#define XSTEP 16u
#else
#define XSTEP 8u
#endif
#define XV (8u * SPS)
float xe(vec4 xv[XV], uint j) { return xv[j >> 2][j & 3u]; }
float dot32(uint bb, uint sb, vec4 xv[XV], vec2 xs) {
#if KIND == KIND_Q4_0
    uint q4[5];
    fetch18(bb, q4);
    float acc = 0.0;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
        uint v = HALF(q4, 1u + w);
        uint j = 2u * w;
        acc += float(int(v & 15u) - 8) * xe(xv, j) + float(int((v >> 8) & 15u) - 8) * xe(xv, j + 1u)
             + float(int((v >> 4) & 15u) - 8) * xe(xv, j + 16u) + float(int((v >> 12) & 15u) - 8) * xe(xv, j + 17u);
    }
    return half_to_float(q4[0] & 0xFFFFu) * acc;
#elif KIND == KIND_Q8_0
    uint q8[9];
    fetch34(bb, q8);
    float acc = 0.0;
    [[unroll]] for (uint w = 0u; w < 16u; ++w) {
        uint v = HALF(q8, 1u + w);
        acc += float(int(v << 24) >> 24) * xe(xv, 2u * w) + float(int(v << 16) >> 24) * xe(xv, 2u * w + 1u);
    }
    return half_to_float(q8[0] & 0xFFFFu) * acc;
#elif KIND == KIND_Q4_K
    uint h[4], n[8];
    fetch16(bb, h);
    fetch32(bb + 16u + (sb >> 1) * 32u, n);
    uint sc[3] = uint[3](h[1], h[2], h[3]);
    uvec2 sm0 = scale_min_k4(sc, sb), sm1 = scale_min_k4(sc, sb + 1u);
    float a0 = 0.0, a1 = 0.0;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
        uint v0 = n[w] & 0x0F0F0F0Fu, v1 = (n[w] >> 4) & 0x0F0F0F0Fu;   // 4 nibbles of each sub-block
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            a0 += float((v0 >> (8u * j)) & 0xFFu) * xe(xv, 4u * w + j);
            a1 += float((v1 >> (8u * j)) & 0xFFu) * xe(xv, 32u + 4u * w + j);
        }
    }
    float d = half_to_float(h[0] & 0xFFFFu), dmin = half_to_float(h[0] >> 16);
    return (d * float(sm0.x) * a0 - dmin * float(sm0.y) * xs.x) + (d * float(sm1.x) * a1 - dmin * float(sm1.y) * xs.y);
#else
    // 4 elements a word: low nibbles and high 2-bit pairs combined per byte; each 16-element quarter
    // of the pair has its own scale, applied to that quarter's sum
    uint hh = sb >> 2, k = sb & 1u;                // sb = 4 hh + k, k < 2: the pair is sb, sb + 2
    uint lo[8], hi[8], sd[5];
    fetch32(bb + hh * 64u + k * 32u, lo);
    fetch32(bb + 128u + hh * 32u, hi);
    fetch18(bb + 192u, sd);                        // 16 int8 scales, f16 d
    float a[4] = float[4](0.0, 0.0, 0.0, 0.0);
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
        uint qa = (lo[w] & 0x0F0F0F0Fu) | (((hi[w] >> (2u * k)) & 0x03030303u) << 4);
        uint qb = ((lo[w] >> 4) & 0x0F0F0F0Fu) | (((hi[w] >> (2u * k + 4u)) & 0x03030303u) << 4);
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            a[w >> 2] += float(int((qa >> (8u * j)) & 0xFFu) - 32) * xe(xv, 4u * w + j);
            a[2u + (w >> 2)] += float(int((qb >> (8u * j)) & 0xFFu) - 32) * xe(xv, 32u + 4u * w + j);
        }
    }
    // scales 2 sb, 2 sb + 1 (word 2 hh, bytes 2k, 2k + 1) and 2 sb + 4, 2 sb + 5 (word 2 hh + 1)
    uint ca = (hh == 0u ? sd[0] : sd[2]) >> (16u * k), cb = (hh == 0u ? sd[1] : sd[3]) >> (16u * k);
    float d = half_to_float(sd[4] & 0xFFFFu);
    float acc = ((d * float(INT8(ca & 0xFFu))) * a[0] + (d * float(INT8((ca >> 8) & 0xFFu))) * a[1])
              + ((d * float(INT8(cb & 0xFFu))) * a[2] + (d * float(INT8((cb >> 8) & 0xFFu))) * a[3]);
    return acc;
#endif
}

#if KIND == KIND_Q4_0 || KIND == KIND_Q8_0
// A pair of blocks: q4_0 36 bytes (9 words), q8_0 68 (17 words); the lane step's x is 64 values.
#define PW ((4u * BW) / 2u)
// w[i] = word i of the pair at byte b (b % 4 == 0): texel path, the PT texels that can hold it and a
// select on the word within the first texel (b / 4 % 4); storage path, 16-bit words.
#define PT ((4u * PW + 27u) / 16u)
void fetch_pair(uint b, out uint w[PW]) {
    if ((TEX & 1u) != 0u) {
        uint u[4u * PT];
        int last = imageSize(q_t) - 1;
        [[unroll]] for (uint t = 0u; t < PT; ++t) {
            uvec4 v = imageLoad(q_t, min(int(b >> 4) + int(t), last));
            u[4u * t] = v.x; u[4u * t + 1u] = v.y; u[4u * t + 2u] = v.z; u[4u * t + 3u] = v.w;
        }
        uint c = (b >> 2) & 3u;
        [[unroll]] for (uint i = 0u; i < PW; ++i)
            w[i] = c == 0u ? u[i] : c == 1u ? u[i + 1u] : c == 2u ? u[i + 2u] : u[i + 3u];
    } else {
        uint wo = b >> 1;
        [[unroll]] for (uint i = 0u; i < PW; ++i) w[i] = word(wo + 2u * i) | (word(wo + 2u * i + 1u) << 16);
    }
}

#if KIND == KIND_Q4_0
// Bit of the pair's words holding element e (0..63) of the pair: block h = e / 32 starts at byte 18 h,
// its nibbles at byte 2 + j (j = e % 16), element j in the low nibble, j + 16 in the high one.
uint q4_bit(uint e) { return 8u * (18u * (e >> 5) + 2u + (e & 15u)) + 4u * ((e >> 4) & 1u); }
// 2^-(the nibble's bit position in its word) for element e, 1 for the top nibble (read by a shift):
// float(w & (15 << s)) is q * 2^s, so x scaled by 2^-s gives the exact product q * x (x ~ 2^-100 and
// smaller loses bits: the result is within the matvec's bound there as well, its absolute term).
float q4_scale(uint e) {
    uint s = q4_bit(e) & 31u;
    return s == 28u ? 1.0 : uintBitsToFloat((127u - s) << 23);
}
#endif

// sum_e W[e] * x[e] over the 64 elements of the pair at byte b. q4_0: xq[e] = x[e] * q4_scale(e),
// xs = each block's sum of x (the -8 offset: sum (q - 8) x = sum q x - 8 sum x); q8_0: xq = x, and each
// int8 is moved to the top of its word and shifted back (sign-extended) in two operations.
float pair_dot(uint b, vec4 xq[16], vec2 xs) {
    uint w[PW];
    fetch_pair(b, w);
    float a[2];
#if KIND == KIND_Q4_0
    [[unroll]] for (uint h = 0u; h < 2u; ++h) {
        float lo = 0.0, hi = 0.0;
        [[unroll]] for (uint j = 0u; j < 16u; ++j) {
            uint e0 = 32u * h + j, e1 = e0 + 16u;
            uint b0 = q4_bit(e0), b1 = q4_bit(e1);
            uint v0 = (b0 & 31u) == 28u ? w[b0 >> 5] >> 28 : w[b0 >> 5] & (15u << (b0 & 31u));
            uint v1 = (b1 & 31u) == 28u ? w[b1 >> 5] >> 28 : w[b1 >> 5] & (15u << (b1 & 31u));
            lo += float(int(v0)) * xq[e0 >> 2][e0 & 3u];
            hi += float(int(v1)) * xq[e1 >> 2][e1 & 3u];
        }
        a[h] = (lo + hi) - 8.0 * xs[h];
    }
    return half_to_float(w[0] & 0xFFFFu) * a[0] + half_to_float(w[4] >> 16) * a[1];
#else
    [[unroll]] for (uint h = 0u; h < 2u; ++h) {
        float lo = 0.0, hi = 0.0;
        [[unroll]] for (uint j = 0u; j < 32u; ++j) {
            uint bit = 8u * (34u * h + 2u + j), s = bit & 31u, e = 32u * h + j;
            float q = float(int(w[bit >> 5] << (24u - s)) >> 24);
            if ((j & 1u) == 0u) lo += q * xq[e >> 2][e & 3u];
            else hi += q * xq[e >> 2][e & 3u];
        }
        a[h] = lo + hi;
    }
    return half_to_float(w[0] & 0xFFFFu) * a[0] + half_to_float(w[8] >> 16) * a[1];
#endif
}
#endif
#endif
// ---------------------------------------------------------------------------------------------
void main() {
#if MODE == MODE_DEQUANT
    uint i = linear_group() * 64u + gl_LocalInvocationID.x;     // sub-block
    if (i >= p.out_elements / 32u) return;
    float v[32];
    decode32(2u * p.off_q + (i / (QK / 32u)) * (2u * BW), i % (QK / 32u), v);
    uint o0 = p.off_o / 4u + i * 8u;
    [[unroll]] for (uint t = 0u; t < 8u; ++t) {
        vec4 v4 = vec4(v[4u * t], v[4u * t + 1u], v[4u * t + 2u], v[4u * t + 3u]);
        if ((TEX & 2u) != 0u) imageStore(o_t, int(o0 + t), floatBitsToUint(v4));
        else o4[o0 + t] = v4;
    }

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
    uint rb[NR];                                  // first byte of each row's blocks
    float acc[NR];
    [[unroll]] for (uint r = 0u; r < NR; ++r) {
        rb[r] = 2u * (p.off_w + min(r0 + r, p.n - 1u) * p.blocks_per_row * BW);   // rows past N: clamped loads
        acc[r] = 0.0;
    }
#if KIND == KIND_Q4_0 || KIND == KIND_Q8_0
    if (PAIRS != 0u) {
        for (uint t = l; t < subs / 2u; t += WG) {   // a lane step: blocks 2t, 2t + 1 of every row
            vec4 xq[16];
            uint xo = p.off_x / 4u + t * 16u;
            [[unroll]] for (uint j = 0u; j < 16u; ++j)
                xq[j] = (TEX & 2u) != 0u ? uintBitsToFloat(imageLoad(x_t, int(xo + j))) : x4[xo + j];
            vec2 xs = vec2(0.0);
#if KIND == KIND_Q4_0
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                vec4 xt = ((xq[8u * h] + xq[8u * h + 1u]) + (xq[8u * h + 2u] + xq[8u * h + 3u]))
                        + ((xq[8u * h + 4u] + xq[8u * h + 5u]) + (xq[8u * h + 6u] + xq[8u * h + 7u]));
                xs[h] = (xt.x + xt.y) + (xt.z + xt.w);
            }
            [[unroll]] for (uint j = 0u; j < 16u; ++j)
                xq[j] *= vec4(q4_scale(4u * j), q4_scale(4u * j + 1u), q4_scale(4u * j + 2u), q4_scale(4u * j + 3u));
#endif
            uint boff = t * (4u * BW);
            [[unroll]] for (uint r = 0u; r < NR; ++r) acc[r] += pair_dot(rb[r] + boff, xq, xs);
        }
    } else
#endif
    for (uint s = l; s < subs / SPS; s += WG) {   // a lane step: SPS sub-blocks (subs % SPS == 0: whole blocks)
        vec4 xv[XV];
        uint blk = s / (QK / 32u / SPS), t = s % (QK / 32u / SPS);
#if KIND == KIND_Q6_K
        uint sb = (t >> 1) * 4u + (t & 1u);
#else
        uint sb = t * SPS;
#endif
        uint xo = p.off_x / 4u + blk * (QK / 4u) + sb * 8u;
        [[unroll]] for (uint j = 0u; j < XV; ++j) {
            uint xj = xo + (j >> 3) * XSTEP + (j & 7u);
            xv[j] = (TEX & 2u) != 0u ? uintBitsToFloat(imageLoad(x_t, int(xj))) : x4[xj];
        }
        uint boff = blk * (2u * BW);
        vec2 xs = vec2(0.0);
#if KIND == KIND_Q4_K
        [[unroll]] for (uint i = 0u; i < SPS; ++i) {
            vec4 xt = ((xv[8u * i] + xv[8u * i + 1u]) + (xv[8u * i + 2u] + xv[8u * i + 3u]))
                    + ((xv[8u * i + 4u] + xv[8u * i + 5u]) + (xv[8u * i + 6u] + xv[8u * i + 7u]));
            xs[i] = (xt.x + xt.y) + (xt.z + xt.w);
        }
#endif
        [[unroll]] for (uint r = 0u; r < NR; ++r) acc[r] += dot32(rb[r] + boff, sb, xv, xs);
    }
    for (uint r = 0u; r < NR; ++r) acc[r] = subgroupAdd(acc[r]);
    if (gl_NumSubgroups == 1u) {                  // uniform: the workgroup is one subgroup
        if (subgroupElect())
            [[unroll]] for (uint r = 0u; r < NR; ++r) if (r0 + r < p.n) o[p.off_o + r0 + r] = acc[r];
    } else {
        if (subgroupElect())
            for (uint r = 0u; r < NR; ++r) red[gl_SubgroupID][r] = acc[r];
        barrier();
        for (uint r = l; r < NR && r0 + r < p.n; r += WG) {
            float t = 0.0;
            for (uint q2 = 0u; q2 < gl_NumSubgroups; ++q2) t += red[q2][r];
            o[p.off_o + r0 + r] = t;
        }
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
        // W tile: TN x KC decoded once: lane r < TN fetches and decodes row r's 32-element sub-block
        if (tid < TN) {
            float v[32];
            if (n0 + tid < p.n)
                decode32(2u * (p.off_w + (n0 + tid) * p.blocks_per_row * BW + (k0 / QK) * BW), (k0 % QK) / 32u, v);
            else
                [[unroll]] for (uint c = 0u; c < KC; ++c) v[c] = 0.0;
            [[unroll]] for (uint c = 0u; c < KC; ++c) sw[tid][c] = v[c];
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
