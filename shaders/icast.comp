#version 450
// Casts that involve an integer or bool dtype (float <-> float is cast.comp): SRC and DST are
// (SBITS, SKIND) / (DBITS, DKIND), KIND 0 unsigned / bool, 1 signed, 2 float (32 or 64 bits),
// 3 bool (DST: x != 0; NaN is true). numpy's rules: int -> int keeps the low DBITS bits of the
// sign- or zero-extended value; int -> float rounds to nearest even; bool -> 0 / 1. float -> int
// truncates toward zero and, where numpy's result is undefined (NaN, inf, out of range), gives 0
// for NaN and saturates the rest to the dtype's range. Computes in 64-bit integers (shaderInt64).
// Input: strided + broadcast + offset view (the EW Params and FLAG_* of elementwise.comp); output contiguous.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

#if SBITS == 8
#define ST uint8_t
#elif SBITS == 16
#define ST uint16_t
#elif SBITS == 32
#define ST uint
#else
#define ST uint64_t
#endif
#if DBITS == 8
#define DT uint8_t
#elif DBITS == 16
#define DT uint16_t
#elif DBITS == 32
#define DT uint
#else
#define DT uint64_t
#endif

layout(set = 0, binding = 0) writeonly buffer Out { DT o[]; };
layout(set = 0, binding = 1) readonly buffer A { ST a[]; };

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

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

uint strided(uint i, uint off, int st[6]) {
    int idx = int(off);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        idx += int(i % n) * st[d];
        i /= n;
    }
    return uint(idx);
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint src = (p.flags & FLAG_A_CONTIGUOUS) != 0u ? p.off_a + i : ((p.flags & FLAG_A_CONSTANT) != 0u ? p.off_a : strided(i, p.off_a, p.sa));
        o[p.off_o + i] = convert(uint64_t(a[src]));
    }
}
