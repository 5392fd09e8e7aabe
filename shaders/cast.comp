#version 450
// Float casts between f8e4m3fn / f16 / bf16 / f32 / f64: one generic kernel for every src->dst pair
// (SRC, DST: FMT_* codes below). Conversions are done on the raw bits with integer arithmetic, so
// results are bit-exact on every driver: no reliance on the device's float rounding mode, denormal
// flushing or NaN canonicalization; f16 <-> f32 are common/half.glsl's, the device's own instructions
// where its probe found them exact and not slower (runtime/halfconv.py), NaNs still numpy's here.
//   widening (f8/f16/bf16 -> f32 -> f64) is exact;
//   narrowing rounds to nearest even once: f64 -> f32 directly, f64 -> f16/bf16/f8 via an f32 rounded
//   to odd (exact double rounding: f32 keeps >= 2 more bits than any narrower target);
//   overflow gives inf, except f8e4m3fn (no inf) which saturates to +-448 (torch's behaviour);
//   NaN stays NaN with its sign; payload per NAN_RULE (0 keep top bits, 1 keep and set the quiet
//   bit, 2 canonical quiet NaN), chosen per pair in kernels/casts.py to match numpy / ml_dtypes.
// Input: strided + broadcast + offset view, output contiguous; loads, stores and the LINEAR / texel
// paths are common/castio.glsl's (shared with icast.comp).
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
#if SRC == FMT_F64 || DST == FMT_F64 || defined(W64)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if SRC == FMT_F8
#define SBITS 8
#elif SRC == FMT_F16 || SRC == FMT_BF16
#define SBITS 16
#elif SRC == FMT_F32
#define SBITS 32
#else
#define SBITS 64
#endif
#if DST == FMT_F8
#define DBITS 8
#elif DST == FMT_F16 || DST == FMT_BF16
#define DBITS 16
#elif DST == FMT_F32
#define DBITS 32
#else
#define DBITS 64
#endif
#include "common/castio.glsl"
#if SRC == FMT_F16 || DST == FMT_F16
#include "common/half.glsl"
#endif

// The conversions below are branch-free (every case computed, then selected): lavapipe runs 8 lanes
// of a branch in lock step, and the early returns per special case cost more than the selects
// (f32 -> f16 ~1.6x).

// ---- f8e4m3fn / f16 / bf16 -> f32 bits (exact) ---------------------------------------------------
#if SRC == FMT_F8 || SRC == FMT_F16 || SRC == FMT_BF16
uint small_to_f32(uint h) {
#if SRC == FMT_BF16
    return h << 16;                       // bf16 is the top half of an f32 (NaN payload kept)
#elif SRC == FMT_F16
    return f16_to_f32_bits_numpy_nan(h, f16_to_f32_bits(h));   // common/half.glsl: exact, NAN_RULE 0
#else                                     // f8e4m3fn
    const uint SE = 4u, SM = 3u;
    const uint EMAX = (1u << SE) - 1u, MMASK = (1u << SM) - 1u;
    const int BIAS = int((1u << (SE - 1u)) - 1u);
    uint s = (h >> (SE + SM)) << 31;
    uint e = (h >> SM) & EMAX, m = h & MMASK;
    uint r = (uint(int(e) - BIAS + 127) << 23) | (m << (23u - SM));              // normal
    // subnormal (and zero): m * 2^(1 - BIAS - SM), exact in f32 arithmetic (m < 2^SM, a power of two
    // scale, a normal f32 result: no rounding on any driver); a vector findMSB cost AVX2 lavapipe ~15 ops
    uint sub = floatBitsToUint(float(m) * uintBitsToFloat(uint(128 - BIAS - int(SM)) << 23));
    r = e == 0u ? sub : r;
    r = (e == EMAX && m == MMASK) ? 0x7FC00000u : r;                               // e4m3fn's only NaN code
    return s | r;
#endif
}
#endif

// ---- f32 bits -> f8e4m3fn / f16 / bf16 bits (RNE) ------------------------------------------------
#if DST == FMT_F8
// f8e4m3fn from the magnitude bits a of an f32 (a <= 0x7F800000; NaN is the caller's): normal targets
// (|x| >= 2^-6) round the rebiased bits to nearest even; below, the code is roundEven(|x| * 2^9)
// (subnormal codes count 2^-9 steps; 8 is the smallest normal's code, so a carry is right too),
// the * 2^9 made exact in integers by adding 9 to the exponent field. roundEven and the float ->
// uint conversion of an integer value are exact on every driver; an f32 subnormal a (exponent 0)
// reads as a wrong but < 2^-116 value there, which rounds to 0 as |x| does. Overflow and inf
// saturate to 448 (0x7E).
uint f8_from_f32_abs(uint a) {
    uint b = a - (120u << 23);
    uint r = (b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20;
    uint sub = uint(int(roundEven(uintBitsToFloat(a + (9u << 23)))));
    return min(a < (121u << 23) ? sub : r, 0x7Eu);
}
#endif
#if DST == FMT_F16
uint f32_to_small(uint u) {
    // common/half.glsl: RNE, NaN's top payload bits kept (NAN_RULE 0); rule 2 gives the canonical NaN
    uint r = f32_to_f16_bits_numpy_nan(u, f32_bits_to_f16(u));
#if NAN_RULE == 2
    r = (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u >> 16) & 0x8000u) | 0x7E00u : r;
#endif
    return r;
}
#elif DST == FMT_BF16
uint f32_to_small(uint u) {
    const uint DE = 8u, DM = 7u, MAXF = 0x7F7Fu, OVER = 0x7F80u;
    const uint SH = 23u - DM, REBIAS = 127u - ((1u << (DE - 1u)) - 1u);
    uint s = (u >> 31) << (DE + DM);
    uint a = u & 0x7FFFFFFFu;
    // normal in the target: round the rebiased bits; overflow and inf come out above MAXF
    uint b = a - (REBIAS << 23);
    uint r = (b + ((1u << (SH - 1u)) - 1u) + ((b >> SH) & 1u)) >> SH;
    if (REBIAS != 0u) {
        // target subnormal or zero (|x| below the smallest normal, 2^(REBIAS - 126)): the code is
        // roundEven(|x| / smallest subnormal), the division made exact in integers by adding to the
        // exponent field (f32 subnormal a: a wrong but tiny value there, which rounds to 0 as |x| does)
        uint rs = uint(int(roundEven(uintBitsToFloat(a + ((DM + 126u - REBIAS) << 23)))));
        r = a >= ((REBIAS + 1u) << 23) ? r : rs;
    }
    r = r > MAXF ? OVER : r;
#if DST == FMT_BF16 || NAN_RULE == 2
    const uint nan = OVER | (1u << (DM - 1u));
#else
    uint pm = (a & 0x7FFFFFu) >> SH;
    uint nan = OVER | (pm == 0u ? 1u : pm);
#endif
    return s | (a > 0x7F800000u ? nan : r);
}
#elif DST == FMT_F8
uint f32_to_small(uint u) {
    uint a = u & 0x7FFFFFFFu;
    return ((u >> 24) & 0x80u) | (a > 0x7F800000u ? 0x7Fu : f8_from_f32_abs(a));
}
#endif

// ---- f64 bits -> f32 bits: RNE, or round-to-odd as the first step of a double rounding ------------
#if SRC == FMT_F64
uint f64_to_f32(uint64_t u, bool odd) {
    uint s = uint(u >> 63) << 31;
    uint64_t a = u & 0x7FFFFFFFFFFFFFFFul;
    uint ef = uint(a >> 52);
    // f32 normal range (inf and overflow come out at or above 0x7F800000, clamped below)
    uint64_t b = a - (uint64_t(896u) << 52);
    uint64_t q = b >> 29, rem = b & 0x1FFFFFFFul, hlf = 0x10000000ul;
    // f32 subnormal or zero; shift 63: m < 2^53 lies below half an ulp
    uint shift = min(30u + 896u - ef, 63u);
    uint64_t m = (a & 0xFFFFFFFFFFFFFul) | (ef > 0u ? (uint64_t(1u) << 52) : uint64_t(0u));
    bool sub = ef <= 896u;
    q = sub ? m >> shift : q;
    rem = sub ? m & ((uint64_t(1u) << shift) - 1ul) : rem;
    hlf = sub ? uint64_t(1u) << (shift - 1u) : hlf;
    bool up = odd ? false : (rem > hlf || (rem == hlf && (q & 1ul) != 0ul));
    q = odd && rem != 0ul ? q | 1ul : q + (up ? 1ul : 0ul);
    uint r = uint(min(q, uint64_t(0x7F800000u)));
    // NaN: the payload's top 23 bits
    uint pm = uint((a & 0xFFFFFFFFFFFFFul) >> 29);
    uint nan = (!odd && NAN_RULE == 1) ? 0x7FC00000u | pm : 0x7F800000u | (pm == 0u ? 1u : pm);
    return s | (a > 0x7FF0000000000000ul ? nan : r);
}
#endif

// ---- f32 bits -> f64 bits (exact) -----------------------------------------------------------------
#if DST == FMT_F64
uint64_t f32_to_f64(uint u) {
    // in 32-bit words (the f64's high word carries sign, exponent and the mantissa's top 20 bits); a
    // subnormal's mantissa m is normalized by float(m), exact (m < 2^23), whose exponent is 149 too high
    uint a = u & 0x7FFFFFFFu, ef = a >> 23, m = a & 0x7FFFFFu;
    uint fm = floatBitsToUint(float(m));
    uint ex = ef == 0u ? (m == 0u ? 0u : (fm >> 23) + 747u) : (ef == 255u ? 2047u : ef + 896u);
    uint mt = ef == 0u ? fm & 0x7FFFFFu : m;
    uint quiet = (NAN_RULE == 1 && ef == 255u && m != 0u) ? 0x80000u : 0u;         // f64's quiet bit
    return packUint2x32(uvec2(mt << 29, (u & 0x80000000u) | (ex << 20) | (mt >> 3) | quiet));
}
#endif

// Raw source bits -> raw destination bits (castio.glsl's RAW -> DRAW).
DRAW cast_bits(RAW x) {
#if SRC == FMT_F64
#if DST == FMT_F32
    return f64_to_f32(x, false);
#else
    return f32_to_small(f64_to_f32(x, true));
#endif
#else
#if (SRC == FMT_F16 || SRC == FMT_BF16) && DST == FMT_F8
    // straight from the 16-bit pattern (h: the magnitude bits): bf16 is an f32's top half
    uint h = x & 0x7FFFu;
#if SRC == FMT_BF16
    // in the bf16 domain: a normal f8 target (exponent field >= 121) rebiases by 120 and rounds at
    // bit 4 (inf comes out above 0x7E and saturates); below, roundEven(|x| * 2^9) as for f32
    uint b = h - (120u << 7);
    uint r = (b + 7u + ((b >> 4) & 1u)) >> 4;
    uint sub = uint(int(roundEven(uintBitsToFloat((h << 16) + (9u << 23)))));
    r = min(h < (121u << 7) ? sub : r, 0x7Eu);
    return ((x >> 8) & 0x80u) | (h > 0x7F80u ? 0x7Fu : r);
#else
    // rounded in the f16 domain: a normal f8 target (h >= 2^-6, exponent field 9) rebiases by 8 and
    // rounds at bit 7 (inf comes out above 0x7E and saturates); below, roundEven(|x| * 2^9) of the
    // f32 (h << 13) + (121 << 23) = |x| * 2^9 (an f16 subnormal reads as < 2^-5 there: code 0, right)
    uint b = h - (8u << 10);
    uint r = (b + 0x3Fu + ((b >> 7) & 1u)) >> 7;
    uint sub = uint(int(roundEven(uintBitsToFloat((h << 13) + (121u << 23)))));
    r = min(h < (9u << 10) ? sub : r, 0x7Eu);
    return ((x >> 8) & 0x80u) | (h > 0x7C00u ? 0x7Fu : r);
#endif
#elif SRC == FMT_F16 && DST == FMT_BF16
    // straight from the 16-bit pattern: a normal f16 magnitude h is the f32 (h << 13) + (112 << 23),
    // whose bf16 rounding (at f32 bit 16) is h's at bit 3, the bias added after it (a carry into the
    // exponent is right; 65504 rounds to 65536); an f16 subnormal is the exact f32 m * 2^-24 rounded
    // to bf16; inf stays inf, NaN is bf16's canonical quiet NaN (NAN_RULE 2), signs kept
    uint h = x & 0x7FFFu;
    uint nrm = ((h + 3u + ((h >> 3) & 1u)) >> 3) + (112u << 7);
    uint f = floatBitsToUint(float(h) * 5.9604644775390625e-8);
    uint sub = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
    uint r = h < 0x400u ? sub : (h == 0x7C00u ? 0x7F80u : (h > 0x7C00u ? 0x7FC0u : nrm));
    return (x & 0x8000u) | r;
#elif SRC == FMT_F8 && (DST == FMT_F16 || DST == FMT_F32)
    // straight from the 8-bit pattern: a normal f8e4m3fn magnitude h is f16 (h << 7) + (8 << 10) /
    // f32 (h << 20) + (120 << 23) exactly; a subnormal (and zero) m * 2^-9 is float(m) * 2^-9 exactly,
    // and float(m) * 2^-121 (an f32 normal for m > 0) carries the f16 bits of m * 2^-9 in its top
    // (f32 exponent - 112 = f16 exponent); 0x7F is NaN (canonical quiet, signed)
    uint h = x & 0x7Fu;
#if DST == FMT_F16
    uint sub = floatBitsToUint(float(h) * uintBitsToFloat(6u << 23)) >> 13;
    uint r = h < 8u ? sub : (h == 0x7Fu ? 0x7E00u : (h << 7) + (8u << 10));
    return ((x & 0x80u) << 8) | r;
#else
    uint sub = floatBitsToUint(float(h) * 0.001953125);
    uint r = h < 8u ? sub : (h == 0x7Fu ? 0x7FC00000u : (h << 20) + (120u << 23));
    return ((x & 0x80u) << 24) | r;
#endif
#elif SRC == FMT_F8 && DST == FMT_BF16
    // straight from the 8-bit pattern: a normal f8e4m3fn magnitude h is bf16 (h << 4) + (120 << 7)
    // exactly; a subnormal (and zero) is the exact f32 m * 2^-9's top half; 0x7F is NaN (canonical quiet)
    uint h = x & 0x7Fu;
    uint sub = floatBitsToUint(float(h) * 0.001953125) >> 16;
    uint r = h < 8u ? sub : (h == 0x7Fu ? 0x7FC0u : (h << 4) + (120u << 7));
    return ((x & 0x80u) << 8) | r;
#else
#if SRC == FMT_F32
    uint f = x;
#else
    uint f = small_to_f32(x);
#endif
#if DST == FMT_F32
    return f;
#elif DST == FMT_F64
    return f32_to_f64(f);
#else
    return f32_to_small(f);
#endif
#endif
#endif
}
