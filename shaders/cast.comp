#version 450
// Float casts between f8e4m3fn / f16 / bf16 / f32 / f64: one generic kernel for every src->dst pair
// (SRC, DST: FMT_* codes below). Conversions are done on the raw bits with integer arithmetic only,
// so results are bit-exact on every driver: no reliance on the device's float rounding mode,
// denormal flushing or NaN canonicalization.
//   widening (f8/f16/bf16 -> f32 -> f64) is exact;
//   narrowing rounds to nearest even once: f64 -> f32 directly, f64 -> f16/bf16/f8 via an f32 rounded
//   to odd (exact double rounding: f32 keeps >= 2 more bits than any narrower target);
//   overflow gives inf, except f8e4m3fn (no inf) which saturates to +-448 (torch's behaviour);
//   NaN stays NaN with its sign; payload per NAN_RULE (0 keep top bits, 1 keep and set the quiet
//   bit, 2 canonical quiet NaN), chosen per pair in kernels/casts.py to match numpy / ml_dtypes.
// Input: strided + broadcast + offset view (the EW Params and FLAG_* of elementwise.comp); output contiguous.
#define FMT_F8 0
#define FMT_F16 1
#define FMT_BF16 2
#define FMT_F32 3
#define FMT_F64 4

#if SRC == FMT_F8 || DST == FMT_F8
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#endif
#if SRC == FMT_F16 || SRC == FMT_BF16 || DST == FMT_F16 || DST == FMT_BF16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#if SRC == FMT_F64 || DST == FMT_F64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#include "common/index.glsl"

#if SRC == FMT_F8
#define ST uint8_t
#define ST4 u8vec4
#elif SRC == FMT_F16 || SRC == FMT_BF16
#define ST uint16_t
#define ST4 u16vec4
#elif SRC == FMT_F32
#define ST uint
#define ST4 uvec4
#else
#define ST uint64_t
#define ST4 u64vec4
#endif
#if DST == FMT_F8
#define DT uint8_t
#define DT4 u8vec4
#elif DST == FMT_F16 || DST == FMT_BF16
#define DT uint16_t
#define DT4 u16vec4
#elif DST == FMT_F32
#define DT uint
#define DT4 uvec4
#else
#define DT uint64_t
#define DT4 u64vec4
#endif

// WG / EPT come from kernels/elementwise.py (launch_strided sizes the grid with them).
layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;
layout(constant_id = 1) const uint LINEAR = 0;  // 1: input contiguous or constant, offsets % 4 == 0

layout(set = 0, binding = 0) writeonly buffer Out { DT o[]; };
layout(set = 0, binding = 1) readonly buffer A { ST a[]; };
layout(set = 0, binding = 0) writeonly buffer Out4 { DT4 o4[]; };
layout(set = 0, binding = 1) readonly buffer A4 { ST4 a4[]; };
// Narrow destinations stored as packed 32-bit words (lavapipe pays per stored component, whatever
// its width): 4 f16 / bf16 as a uvec2, 4 f8 as one uint. Same bits.
#if DST == FMT_F16 || DST == FMT_BF16
layout(set = 0, binding = 0) writeonly buffer OutW { uvec2 ow[]; };
#define STORE_Q(k, v) ow[k] = uvec2(uint((v).x) | (uint((v).y) << 16), uint((v).z) | (uint((v).w) << 16))
#elif DST == FMT_F8
layout(set = 0, binding = 0) writeonly buffer OutW { uint ow[]; };
#define STORE_Q(k, v) ow[k] = uint((v).x) | (uint((v).y) << 8) | (uint((v).z) << 16) | (uint((v).w) << 24)
#else
#define STORE_Q(k, v) o4[k] = (v)
#endif

// TEX = 1 (LINEAR only, input contiguous): the input's raw bits are read through its rgba32ui
// texel view a_t (16 bytes per load; Device.texel_loads, runtime/loadpath.py); else a 16-byte stub
// is bound there. The < 4 tail stays on the storage buffer.
#ifdef NO_TEXEL
// NO_TEXEL (the cast_ssbo twin): no texel view binding (see elementwise.comp's NO_TEXEL).
const uint TEX = 0u;
ST4 texq(uint k) { return ST4(0); }
#else
layout(constant_id = 2) const uint TEX = 0;
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer a_t;
// texq(k): source elements 4k .. 4k + 3 as ST4, from the texel view.
ST4 texq(uint k) {
#if SRC == FMT_F32
    return imageLoad(a_t, int(k));
#elif SRC == FMT_F64
    uvec4 u = imageLoad(a_t, int(2u * k)), w = imageLoad(a_t, int(2u * k + 1u));
    return u64vec4(packUint2x32(u.xy), packUint2x32(u.zw), packUint2x32(w.xy), packUint2x32(w.zw));
#elif SRC == FMT_F8
    uint w = imageLoad(a_t, int(k >> 2))[k & 3u];
    return u8vec4(uvec4(w, w >> 8, w >> 16, w >> 24) & 0xFFu);
#else
    uvec4 u = imageLoad(a_t, int(k >> 1));
    uvec2 w = (k & 1u) != 0u ? u.zw : u.xy;
    return u16vec4(uvec4(w.x, w.x >> 16, w.y, w.y >> 16) & 0xFFFFu);
#endif
}
#endif  // NO_TEXEL

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

// ---- f8e4m3fn / f16 / bf16 -> f32 bits (exact) ---------------------------------------------------
#if SRC == FMT_F8 || SRC == FMT_F16 || SRC == FMT_BF16
uint small_to_f32(uint h) {
#if SRC == FMT_BF16
    return h << 16;                       // bf16 is the top hlf of an f32 (NaN payload kept)
#else
#if SRC == FMT_F16
    const uint SE = 5u, SM = 10u;
#else
    const uint SE = 4u, SM = 3u;
#endif
    const uint EMAX = (1u << SE) - 1u, MMASK = (1u << SM) - 1u;
    const int BIAS = int((1u << (SE - 1u)) - 1u);
    uint s = (h >> (SE + SM)) << 31;
    uint e = (h >> SM) & EMAX, m = h & MMASK;
#if SRC == FMT_F8
    if (e == EMAX && m == MMASK) return s | 0x7FC00000u;           // e4m3fn's only NaN code
#else
    if (e == EMAX) return s | 0x7F800000u | (m << (23u - SM));     // inf / NaN (payload kept)
#endif
    if (e == 0u) {
        if (m == 0u) return s;
        uint sh = SM - uint(findMSB(m));                               // normalize the subnormal
        return s | (uint(1 - int(sh) - BIAS + 127) << 23) | (((m << sh) & MMASK) << (23u - SM));
    }
    return s | (uint(int(e) - BIAS + 127) << 23) | (m << (23u - SM));
#endif
}
#endif

// ---- f32 bits -> f8e4m3fn / f16 / bf16 bits (RNE) ------------------------------------------------
#if DST == FMT_F8 || DST == FMT_F16 || DST == FMT_BF16
uint f32_to_small(uint u) {
#if DST == FMT_F8
    const uint DE = 4u, DM = 3u, MAXF = 0x7Eu, OVER = 0x7Eu;      // saturate (no inf in e4m3fn)
#elif DST == FMT_F16
    const uint DE = 5u, DM = 10u, MAXF = 0x7BFFu, OVER = 0x7C00u;
#else
    const uint DE = 8u, DM = 7u, MAXF = 0x7F7Fu, OVER = 0x7F80u;
#endif
    const uint SH = 23u - DM, REBIAS = 127u - ((1u << (DE - 1u)) - 1u);
    uint s = (u >> 31) << (DE + DM);
    uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {                                             // NaN
#if DST == FMT_F8
        return s | 0x7Fu;
#elif DST == FMT_BF16 || NAN_RULE == 2
        return s | (OVER | (1u << (DM - 1u)));
#else
        uint m = (a & 0x7FFFFFu) >> SH;
        return s | OVER | (m == 0u ? 1u : m);
#endif
    }
    if (a == 0x7F800000u) return s | OVER;                             // inf
    uint r;
    uint ef = a >> 23;
    if (ef > REBIAS || REBIAS == 0u) {                                 // normal in the target
        uint b = a - (REBIAS << 23);
        r = (b + ((1u << (SH - 1u)) - 1u) + ((b >> SH) & 1u)) >> SH;
    } else {                                                           // target subnormal or zero
        uint shift = SH + 1u + REBIAS - ef;
        uint m = (a & 0x7FFFFFu) | 0x800000u;
        if (shift > 24u) {
            r = 0u;                                                    // below hlf the smallest subnormal
        } else {
            uint q = m >> shift, rem = m & ((1u << shift) - 1u), hlf = 1u << (shift - 1u);
            r = q + ((rem > hlf || (rem == hlf && (q & 1u) != 0u)) ? 1u : 0u);
        }
    }
    return s | (r > MAXF ? OVER : r);
}
#endif

// ---- f64 bits -> f32 bits: RNE, or round-to-odd as the first step of a double rounding ------------
#if SRC == FMT_F64
uint f64_to_f32(uint64_t u, bool odd) {
    uint s = uint(u >> 63) << 31;
    uint64_t a = u & 0x7FFFFFFFFFFFFFFFul;
    if (a > 0x7FF0000000000000ul) {                                    // NaN: payload's top 23 bits
        uint m = uint((a & 0xFFFFFFFFFFFFFul) >> 29);
        if (!odd && NAN_RULE == 1) return s | 0x7FC00000u | m;
        return s | 0x7F800000u | (m == 0u ? 1u : m);
    }
    if (a == 0x7FF0000000000000ul) return s | 0x7F800000u;
    uint ef = uint(a >> 52);
    uint64_t q, rem, hlf;
    if (ef > 896u) {                                                   // f32 normal range
        uint64_t b = a - (uint64_t(896u) << 52);
        q = b >> 29;
        rem = b & 0x1FFFFFFFul;
        hlf = 0x10000000ul;
    } else {
        uint shift = 30u + 896u - ef;
        uint64_t m = (a & 0xFFFFFFFFFFFFFul) | (ef > 0u ? (uint64_t(1u) << 52) : uint64_t(0u));
        if (shift >= 64u) {
            q = 0ul; rem = m; hlf = 0xFFFFFFFFFFFFFFFFul;             // m < 2^53: below hlf an ulp
        } else {
            q = m >> shift;
            rem = m & ((uint64_t(1u) << shift) - 1ul);
            hlf = uint64_t(1u) << (shift - 1u);
        }
    }
    if (odd) {
        if (rem != 0ul) q |= 1ul;
    } else if (rem > hlf || (rem == hlf && (q & 1ul) != 0ul)) {
        q += 1ul;
    }
    return s | uint(min(q, uint64_t(0x7F800000u)));
}
#endif

// ---- f32 bits -> f64 bits (exact) -----------------------------------------------------------------
#if DST == FMT_F64
uint64_t f32_to_f64(uint u) {
    uint64_t s = uint64_t(u >> 31) << 63;
    uint a = u & 0x7FFFFFFFu;
    if (a == 0u) return s;
    uint ef = a >> 23, m = a & 0x7FFFFFu;
    if (ef == 255u) {
        uint64_t r = s | 0x7FF0000000000000ul | (uint64_t(m) << 29);
        return (m != 0u && NAN_RULE == 1) ? (r | 0x8000000000000ul) : r;
    }
    int e = int(ef);
    if (ef == 0u) {                                                    // normalize the subnormal
        uint sh = 23u - uint(findMSB(m));
        m = (m << sh) & 0x7FFFFFu;
        e = 1 - int(sh);
    }
    return s | (uint64_t(e + 896) << 52) | (uint64_t(m) << 29);
}
#endif

DT convert(ST x) {
#if SRC == FMT_F64
#if DST == FMT_F32
    return f64_to_f32(x, false);
#else
    return DT(f32_to_small(f64_to_f32(x, true)));
#endif
#else
#if SRC == FMT_F32
    uint f = x;
#else
    uint f = small_to_f32(uint(x));
#endif
#if DST == FMT_F32
    return f;
#elif DST == FMT_F64
    return f32_to_f64(f);
#else
    return DT(f32_to_small(f));
#endif
#endif
}

uint strided(uint i) {
    int idx = int(p.off_a);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        idx += int(i % n) * p.sa[d];
        i /= n;
    }
    return uint(idx);
}

// LINEAR path: 4 elements per access (the vectorized loads/stores lavapipe needs for bandwidth).
void main_linear() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    uint nq = p.n / 4u;
    for (uint j = 0u; j < EPTU; ++j) {
        uint q = base + j * WGU;
        if (q < nq) {
            ST4 x = (p.flags & FLAG_A_CONTIGUOUS) != 0u ? (TEX != 0u ? texq(p.off_a / 4u + q) : a4[p.off_a / 4u + q]) : ST4(a[p.off_a]);
            STORE_Q(p.off_o / 4u + q, DT4(convert(x.x), convert(x.y), convert(x.z), convert(x.w)));
        } else if (q == nq) {
            for (uint i = nq * 4u; i < p.n; ++i)   // the < 4 tail elements
                o[p.off_o + i] = convert(a[(p.flags & FLAG_A_CONTIGUOUS) != 0u ? p.off_a + i : p.off_a]);
        }
    }
}

void main() {
    if (LINEAR != 0u) { main_linear(); return; }
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint src = (p.flags & FLAG_A_CONTIGUOUS) != 0u ? p.off_a + i : ((p.flags & FLAG_A_CONSTANT) != 0u ? p.off_a : strided(i));
        o[p.off_o + i] = convert(a[src]);
    }
}
