#version 450
// Casts that involve an integer or bool dtype (float <-> float is cast.comp): SRC and DST are
// (SBITS, SKIND) / (DBITS, DKIND), KIND 0 unsigned / bool, 1 signed, 2 float (32 or 64 bits),
// 3 bool (DST: x != 0; NaN is true). numpy's rules: int -> int keeps the low DBITS bits of the
// sign- or zero-extended value; int -> float rounds to nearest even; bool -> 0 / 1. float -> int
// truncates toward zero and, where numpy's result is undefined (NaN, inf, out of range), gives 0
// for NaN and saturates the rest to the dtype's range. Computes in 64-bit integers (shaderInt64).
// Input: strided + broadcast + offset view, output contiguous; loads, stores and the LINEAR / texel
// paths are common/castio.glsl's (shared with cast.comp).
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define W64 1                              // every icast variant has shaderInt64: 64-bit-word groups
#include "common/castio.glsl"

#if SKIND == 2 && SBITS == 64 || DKIND == 2 && DBITS == 64
#define F double
#else
#define F float
#endif

#if SKIND == 2
F load_float(uint64_t raw) {
#if SBITS == 64
    return packDouble2x32(unpackUint2x32(raw));
#else
    return F(uintBitsToFloat(uint(raw)));
#endif
}
#endif

int64_t load_int(uint64_t raw) {          // the sign- or zero-extended source integer
#if SKIND == 1 && SBITS < 64
    return int64_t(raw << (64 - SBITS)) >> (64 - SBITS);
#else
    return int64_t(raw);
#endif
}

DT convert(uint64_t raw) {
#if DKIND == 3
#if SKIND == 2
    F f = load_float(raw);
    return DT(f != F(0) || isnan(f) ? 1 : 0);
#else
    return DT(raw != 0UL ? 1 : 0);
#endif
#elif DKIND == 2
#if SKIND == 1
    F f = F(load_int(raw));
#else
    F f = F(raw);                          // unsigned / bool
#endif
#if DBITS == 64
    return DT(packUint2x32(unpackDouble2x32(double(f))));
#else
    return DT(floatBitsToUint(float(f)));
#endif
#else  // integer destination
#if SKIND == 2
    F f = load_float(raw);
    if (isnan(f)) return DT(0);
    f = trunc(f);
#if DKIND == 1
    F lo = -F(exp2(float(DBITS - 1))), hi = F(exp2(float(DBITS - 1)));
    if (f <= lo) return DT(uint64_t(int64_t(1) << (DBITS - 1)) & (DBITS == 64 ? ~0UL : ((1UL << DBITS) - 1UL)));
    if (f >= hi) return DT(DBITS == 64 ? 0x7FFFFFFFFFFFFFFFUL : ((1UL << (DBITS - 1)) - 1UL));
    return DT(uint64_t(int64_t(f)));
#else
    F hi = F(exp2(float(DBITS)));
    if (f <= F(0)) return DT(0);
    if (f >= hi) return DT(~0UL);
    return DT(uint64_t(f));
#endif
#else
    return DT(uint64_t(load_int(raw)));     // keep the low DBITS bits
#endif
#endif
}

// Raw source bits -> raw destination bits (castio.glsl's RAW -> DRAW).
DRAW cast_bits(RAW x) { return DRAW(convert(uint64_t(x))); }
