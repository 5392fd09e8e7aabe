// f16 <-> f32 conversions for every kernel that reads or writes float16: per direction, the device's own
// conversion or integer arithmetic on the bits, chosen per device by the HALF_NATIVE specialization
// constant (bit 0: widen natively, bit 1: narrow natively), which the runtime sets at pipeline creation
// from a measurement (runtime/halfconv.py: a micro-probe checks the device's conversions bit for bit and
// times each direction both ways; Device.half_native), never from a device name. Native is one
// instruction on GPUs; the integer forms (~5 / ~12 operations) are exact on every driver and faster
// where the driver emulates the conversion (lavapipe narrows ~25% faster in integers; it widens faster
// natively, with F16C).
// Both forms: f16 -> f32 exact; f32 -> f16 round to nearest even with subnormals, overflow to inf, -0
// kept: the same bits for every non-NaN (the probe checks the native form on every f16 pattern and at
// every rounding boundary). A NaN stays a NaN; its payload is numpy's in the integer forms (widening
// keeps it as it is; narrowing keeps its top 10 bits, 1 if they are all zero) and the device's in the
// native ones (x86 and most GPUs quiet a signalling NaN). Kernels that must give numpy's NaN bits on
// every device (cast.comp) select them after the conversion.
#ifndef FUELVK_HALF_GLSL
#define FUELVK_HALF_GLSL
layout(constant_id = 64) const uint HALF_NATIVE = 0;
const bool HALF_WIDEN_NATIVE = (HALF_NATIVE & 1u) != 0u;
const bool HALF_NARROW_NATIVE = (HALF_NATIVE & 2u) != 0u;

// ---- integer forms ---------------------------------------------------------------------------------
// f16 bits h (low 16 bits) -> f32 bits: a normal magnitude a is (a << 13) + (112 << 23); inf / NaN move
// under exponent 255 (+224 << 23, payload kept); a subnormal (and zero) is a * 2^-24, exact in f32
// arithmetic (a < 2^10 converts exactly, the power-of-two scale lands on a normal f32: no flushing).
uint f16_to_f32_bits_int(uint h) {
    uint a = h & 0x7FFFu;
    uint sub = floatBitsToUint(float(int(a)) * 5.9604644775390625e-8);   // int: x86 has no u32 -> f32
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
    uint rs = uint(int(roundEven(uintBitsToFloat(a + (24u << 23)))));   // int: x86 has no f32 -> u32
    r = a < (113u << 23) ? rs : min(r, 0x7C00u);
    r = a > 0x7F800000u ? f16_nan_of(a) : r;
    return ((u >> 16) & 0x8000u) | r;
}

// ---- the chosen form -------------------------------------------------------------------------------
// f16 bits h (low 16 bits; higher bits ignored) -> f32 bits.
uint f16_to_f32_bits(uint h) {
    if (HALF_WIDEN_NATIVE) return floatBitsToUint(unpackHalf2x16(h & 0xFFFFu).x);
    return f16_to_f32_bits_int(h);
}
float f16_to_f32(uint h) { return uintBitsToFloat(f16_to_f32_bits(h)); }

// The two halves of a 32-bit word (low half first) -> their f32 values.
vec2 f16x2_to_f32(uint w) {
    if (HALF_WIDEN_NATIVE) return unpackHalf2x16(w);
    return uintBitsToFloat(uvec2(f16_to_f32_bits_int(w), f16_to_f32_bits_int(w >> 16)));
}

// f32 bits u -> f16 bits (in the low 16 bits of the result, the high bits zero).
uint f32_bits_to_f16(uint u) {
    if (HALF_NARROW_NATIVE) return packHalf2x16(vec2(uintBitsToFloat(u), 0.0));
    return f32_to_f16_bits_int(u);
}
uint f32_to_f16(float f) { return f32_bits_to_f16(floatBitsToUint(f)); }

// Two f32 values -> one 32-bit word of f16 bits (v.x in the low half).
uint f32x2_to_f16x2(vec2 v) {
    if (HALF_NARROW_NATIVE) return packHalf2x16(v);
    uvec2 u = floatBitsToUint(v);
    return f32_to_f16_bits_int(u.x) | (f32_to_f16_bits_int(u.y) << 16);
}

// numpy's NaN bits for kernels that promise them on every device (casts): f32 bits from the f16 bits h,
// f16 bits from the f32 bits u, each with the converted bits r where the input is not a NaN. Nothing
// to select in the integer forms, which give them already.
uint f16_to_f32_bits_numpy_nan(uint h, uint r) {
    uint a = h & 0x7FFFu;
    return HALF_WIDEN_NATIVE && a > 0x7C00u ? ((h & 0x8000u) << 16) | 0x7F800000u | (a << 13) : r;
}
uint f32_to_f16_bits_numpy_nan(uint u, uint r) {
    uint a = u & 0x7FFFFFFFu;
    return HALF_NARROW_NATIVE && a > 0x7F800000u ? ((u >> 16) & 0x8000u) | f16_nan_of(a) : r;
}
#endif
