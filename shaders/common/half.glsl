// f16 <-> f32 conversions for every kernel that reads or writes float16: two implementations with the
// same bits, chosen per device by the HALF_NATIVE specialization constant, which the runtime sets at
// pipeline creation from a measurement (runtime/halfconv.py: a micro-probe checks the device's own
// conversion bit for bit and times both; Device.half_native), never from a device name:
//   HALF_NATIVE = 1: the device's conversions (unpackHalf2x16 / packHalf2x16): one instruction on GPUs;
//   HALF_NATIVE = 0: integer arithmetic on the bits (~10 operations): exact on every driver, and
//                    faster where the device emulates the conversion (lavapipe: 8-26% on f16 rows).
// Both: f16 -> f32 exact; f32 -> f16 round to nearest even with subnormals, overflow to inf, -0 kept.
// NaN stays NaN with its sign, by numpy's rule (what its casts give): widening keeps the payload as
// it is, narrowing keeps the payload's top 10 bits (1 if they are all zero), so a NaN copied through
// f32 comes back with its own bits. The native form's NaNs are rewritten to that (one select a value),
// so the two choices give identical bits everywhere and tests compare them with each other.
#ifndef FUELVK_HALF_GLSL
#define FUELVK_HALF_GLSL
layout(constant_id = 64) const uint HALF_NATIVE = 0;

// ---- integer forms ---------------------------------------------------------------------------------
// f16 bits h (low 16 bits) -> f32 bits: a normal magnitude a is (a << 13) + (112 << 23); inf / NaN move
// under exponent 255 (+224 << 23, payload kept); a subnormal (and zero) is a * 2^-24, exact in f32
// arithmetic (a < 2^10 converts exactly, the power-of-two scale lands on a normal f32: no flushing).
uint f16_to_f32_bits_int(uint h) {
    uint a = h & 0x7FFFu;
    uint sub = floatBitsToUint(float(a) * 5.9604644775390625e-8);
    uint big = (a << 13) + (a >= 0x7C00u ? (224u << 23) : (112u << 23));
    return ((h & 0x8000u) << 16) | (a < 0x400u ? sub : big);
}

// The f16 NaN of f32 NaN magnitude bits a (> 0x7F800000), sign not included: top payload bits kept.
uint f16_nan_of(uint a) { return 0x7C00u | max((a >> 13) & 0x3FFu, 1u); }

// f32 bits u -> f16 bits: normal targets round the rebiased bits to nearest even (overflow and inf come
// out above 0x7BFF and become inf); below 2^-14 the code is roundEven(|x| * 2^24), the scaling exact in
// integers (24 added to the exponent field; an f32 subnormal reads as a wrong but < 2^-100 value there,
// which rounds to 0 as |x| does); roundEven and the conversion of an integer value are exact.
uint f32_to_f16_bits_int(uint u) {
    uint a = u & 0x7FFFFFFFu;
    uint b = a - (112u << 23);
    uint r = (b + 0xFFFu + ((b >> 13) & 1u)) >> 13;
    uint rs = uint(roundEven(uintBitsToFloat(a + (24u << 23))));
    r = a < (113u << 23) ? rs : min(r, 0x7C00u);
    r = a > 0x7F800000u ? f16_nan_of(a) : r;
    return ((u >> 16) & 0x8000u) | r;
}

// ---- the chosen form -------------------------------------------------------------------------------
// f16 bits h (low 16 bits; higher bits ignored) -> f32 bits.
uint f16_to_f32_bits(uint h) {
    if (HALF_NATIVE != 0u) {
        uint a = h & 0x7FFFu;
        uint nan = ((h & 0x8000u) << 16) | 0x7F800000u | (a << 13);
        return a > 0x7C00u ? nan : floatBitsToUint(unpackHalf2x16(h & 0xFFFFu).x);
    }
    return f16_to_f32_bits_int(h);
}
float f16_to_f32(uint h) { return uintBitsToFloat(f16_to_f32_bits(h)); }

// The two halves of a 32-bit word (low half first) -> their f32 values.
vec2 f16x2_to_f32(uint w) {
    if (HALF_NATIVE != 0u) {
        uvec2 h = uvec2(w & 0xFFFFu, w >> 16);
        uvec2 a = h & 0x7FFFu;
        uvec2 nan = ((h & 0x8000u) << 16) | 0x7F800000u | (a << 13);
        return uintBitsToFloat(mix(floatBitsToUint(unpackHalf2x16(w)), nan, greaterThan(a, uvec2(0x7C00u))));
    }
    return uintBitsToFloat(uvec2(f16_to_f32_bits_int(w), f16_to_f32_bits_int(w >> 16)));
}

// f32 bits u -> f16 bits (in the low 16 bits of the result, the high bits zero).
uint f32_bits_to_f16(uint u) {
    if (HALF_NATIVE != 0u) {
        uint a = u & 0x7FFFFFFFu;
        uint nan = ((u >> 16) & 0x8000u) | f16_nan_of(a);
        return a > 0x7F800000u ? nan : packHalf2x16(vec2(uintBitsToFloat(u), 0.0));
    }
    return f32_to_f16_bits_int(u);
}
uint f32_to_f16(float f) { return f32_bits_to_f16(floatBitsToUint(f)); }

// Two f32 values -> one 32-bit word of f16 bits (v.x in the low half).
uint f32x2_to_f16x2(vec2 v) {
    uvec2 u = floatBitsToUint(v);
    if (HALF_NATIVE != 0u) {
        uvec2 a = u & 0x7FFFFFFFu;
        uvec2 nan = ((u >> 16) & 0x8000u) | 0x7C00u | max((a >> 13) & 0x3FFu, uvec2(1u));
        uint w = packHalf2x16(v);
        uvec2 h = mix(uvec2(w & 0xFFFFu, w >> 16), nan, greaterThan(a, uvec2(0x7F800000u)));
        return h.x | (h.y << 16);
    }
    return f32_to_f16_bits_int(u.x) | (f32_to_f16_bits_int(u.y) << 16);
}
#endif
