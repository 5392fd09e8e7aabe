#version 450
// Integer elementwise ops, exact, for every integer dtype (BITS 8/16/32/64, KIND 0 unsigned /
// 1 signed): the binary family (OP: + - * // % ** max min & | ^ << >>) and the unary family
// (NIN 1; OP: negative abs square sign invert). numpy's integer semantics: results wrap modulo
// 2^BITS; x // 0 == 0 and x % 0 == 0; // rounds toward -inf and % takes the divisor's sign;
// shifts by a count outside [0, BITS) give 0 (>> of a negative: -1); x ** y by repeated squaring
// (the host refuses a negative y, as numpy; the kernel's answer there is 1 / x^|y| truncated).
// Narrow types compute in 32 bits and store the low BITS bits. Inputs are strided + broadcast + offset views (the EW Params
// and FLAG_* of elementwise.comp). OP_* (kernels/intops.py INT_BINARY or INT_UNARY, by NIN) and
// FLAG_* are defines.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#if BITS == 16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#if BITS == 64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;
layout(constant_id = 0) const uint OP = 0;

#if BITS == 8
#define W uint8_t
#elif BITS == 16
#define W uint16_t
#elif BITS == 32
#define W uint
#else
#define W uint64_t
#endif
#if BITS == 64
#define U uint64_t
#define S int64_t
#define ONE 1UL
#else
#define U uint
#define S int
#define ONE 1u
#endif

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer InA { W a[]; };
#if NIN == 2
layout(set = 0, binding = 2) readonly buffer InB { W b[]; };
#endif

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

// Values are held as U (two's complement bits, sign- or zero-extended to the compute width).
U widen(U u) {
#if KIND == 1 && BITS < 32
    return U(S(u << (32 - BITS)) >> (32 - BITS));
#else
    return u;
#endif
}
U scalar_bits(uint w[2]) {
#if BITS == 64
    return packUint2x32(uvec2(w[0], w[1]));
#else
    return widen(U(w[0]));
#endif
}
bool neg(U x) {
#if KIND == 1
    return S(x) < S(0);
#else
    return false;
#endif
}
bool less_v(U x, U y) {
#if KIND == 1
    return S(x) < S(y);
#else
    return x < y;
#endif
}

U floordiv(U x, U y) {
    if (y == U(0)) return U(0);
#if KIND == 1
    if (S(y) == S(-1)) return U(-S(x));                  // wraps for the most negative value (numpy)
    S q = S(x) / S(y);
    if (S(x) - q * S(y) != S(0) && ((S(x) < S(0)) != (S(y) < S(0)))) q -= S(1);
    return U(q);
#else
    return x / y;
#endif
}

U rem(U x, U y) {
    if (y == U(0)) return U(0);
#if KIND == 1
    if (S(y) == S(-1)) return U(0);
#endif
    return x - floordiv(x, y) * y;
}

#if NIN == 2
U apply_binary(U x, U y) {
    switch (OP) {
    case OP_ADD: return x + y;
    case OP_SUBTRACT: return x - y;
    case OP_MULTIPLY: return x * y;
    case OP_FLOOR_DIVIDE: return floordiv(x, y);
    case OP_REMAINDER: return rem(x, y);
    case OP_MAXIMUM: return less_v(x, y) ? y : x;
    case OP_MINIMUM: return less_v(y, x) ? y : x;
    case OP_BITWISE_AND: return x & y;
    case OP_BITWISE_OR: return x | y;
    case OP_BITWISE_XOR: return x ^ y;
    case OP_BITWISE_LEFT_SHIFT: return (neg(y) || y >= U(BITS)) ? U(0) : x << y;
    case OP_POW: {                                        // repeated squaring, wrapping as numpy's
        if (neg(y)) return x == ONE ? ONE : (x == ~U(0) ? ((y & ONE) != U(0) ? x : ONE) : U(0));  // 1 / x^|y|, truncated
        U r = ONE;
        for (U e = y, b = x; e != U(0); e >>= 1) { if ((e & ONE) != U(0)) r *= b; b *= b; }
        return r;
    }
    case OP_BITWISE_RIGHT_SHIFT: {                        // arithmetic for signed types
        if (neg(y) || y >= U(BITS)) return neg(x) ? ~U(0) : U(0);
#if KIND == 1
        return U(S(x) >> S(y));
#else
        return x >> y;
#endif
    }
    }
    return x;   // not reached: the host launches only INT_BINARY's ids
}
#else
U apply_unary(U x) {
    switch (OP) {
    case OP_NEGATIVE: return U(0) - x;
    case OP_ABS: return neg(x) ? U(0) - x : x;
    case OP_SQUARE: return x * x;
    case OP_SIGN: return neg(x) ? ~U(0) : (x == U(0) ? U(0) : ONE);
    case OP_BITWISE_INVERT: return ~x;
    }
    return x;   // not reached: the host launches only INT_UNARY's ids
}
#endif

uint strided(uint i, uint off, int st[6]) {
    int idx = int(off);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        idx += int(i % n) * st[d];
        i /= n;
    }
    return uint(idx);
}

// flags: an input's bits at a's positions (b's shifted down by FLAG_B_SHIFT).
uint input_index(uint i, uint flags, uint off, int st[6]) {
    if ((flags & FLAG_A_CONTIGUOUS) != 0u) return off + i;
    if ((flags & FLAG_A_CONSTANT) != 0u) return off;
    return strided(i, off, st);
}

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
#if NIN == 2
        U x = (p.flags & FLAG_A_SCALAR) != 0u ? scalar_bits(p.s0) : widen(U(a[input_index(i, p.flags, p.off_a, p.sa)]));
        U y = (p.flags & FLAG_B_SCALAR) != 0u ? scalar_bits(p.s1) : widen(U(b[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, p.sb)]));
        o[p.off_o + i] = W(apply_binary(x, y));
#else
        o[p.off_o + i] = W(apply_unary(widen(U(a[input_index(i, p.flags, p.off_a, p.sa)]))));
#endif
    }
}
