#version 450
// Elementwise comparisons ==, !=, <, <=, >, >= of two operands of one dtype -> bool (one byte, 0/1).
// Every dtype is compared through its bits, with integer instructions only: an order-preserving key
// (unsigned: the value; signed: sign-extended; floats: sign-magnitude -> two's complement, so
// -0 == +0) plus a NaN test for floats (NaN is unordered: only != holds). Exact for every dtype,
// and immune to a device flushing float denormals to zero. Selected by BITS (8/16/32/64), KIND
// (0 unsigned / bool, 1 signed, 2 float) and, for floats, NANLIM (largest non-NaN magnitude bits).
// Inputs are strided + broadcast + offset views (the EW Params and FLAG_* of elementwise.comp; a
// scalar operand comes as element bits). OP_* and FLAG_* are defines from kernels/elementwise.py.
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
layout(constant_id = 0) const uint OP = 0;  // kernels/elementwise.py COMPARE: OP_EQUAL, ...
layout(constant_id = 1) const uint LINEAR = 0;  // 1: inputs contiguous or scalar, offsets % 4 == 0

#if BITS == 8
#define W uint8_t
#define W4 u8vec4
#elif BITS == 16
#define W uint16_t
#define W4 u16vec4
#elif BITS == 32
#define W uint
#define W4 uvec4
#else
#define W uint64_t
#define W4 u64vec4
#endif
#if BITS == 64
#define U uint64_t
#define S int64_t
#else
#define U uint
#define S int
#endif

layout(set = 0, binding = 0) writeonly buffer Out { uint8_t o[]; };
layout(set = 0, binding = 1) readonly buffer InA { W a[]; };
layout(set = 0, binding = 2) readonly buffer InB { W b[]; };
// The LINEAR path's views: 4 elements per load, 4 results packed into one 32-bit store.
layout(set = 0, binding = 0) writeonly buffer Out4 { uint o4[]; };
layout(set = 0, binding = 1) readonly buffer InA4 { W4 a4[]; };
layout(set = 0, binding = 2) readonly buffer InB4 { W4 b4[]; };

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

#if KIND == 0
#define K U
K key(U u) { return u; }
#elif KIND == 1
#define K S
#if BITS == 64
K key(U u) { return S(u); }
#else
K key(U u) { return S(u << (32 - BITS)) >> (32 - BITS); }
#endif
#else
#define K S
const U SIGN = U(1) << (BITS - 1);
K key(U u) { S m = S(u & (SIGN - U(1))); return (u & SIGN) != U(0) ? -m : m; }
#if BITS == 64
bool is_nan(U u) { return (u & (SIGN - U(1))) > 0x7FF0000000000000UL; }
#else
bool is_nan(U u) { return (u & (SIGN - U(1))) > U(NANLIM); }
#endif
#endif

bool compare(U x, U y) {
#if KIND == 2
    if (is_nan(x) || is_nan(y)) return OP == OP_NOT_EQUAL;
#endif
    K kx = key(x), ky = key(y);
    switch (OP) {
    case OP_EQUAL: return kx == ky;
    case OP_NOT_EQUAL: return kx != ky;
    case OP_LESS: return kx < ky;
    case OP_LESS_EQUAL: return kx <= ky;
    case OP_GREATER: return kx > ky;
    case OP_GREATER_EQUAL: return kx >= ky;
    }
    return false;   // not reached: the host launches only COMPARE's ids
}

U scalar(uint w[2]) {
#if BITS == 64
    return packUint2x32(uvec2(w[0], w[1]));
#else
    return w[0];
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

// flags: an input's bits at a's positions (b's shifted down by FLAG_B_SHIFT).
uint input_index(uint i, uint flags, uint off, int st[6]) {
    if ((flags & FLAG_A_CONTIGUOUS) != 0u) return off + i;
    if ((flags & FLAG_A_CONSTANT) != 0u) return off;
    return strided(i, off, st);
}

uint bit(U x, U y, uint k) { return compare(x, y) ? (1u << (8u * k)) : 0u; }

// LINEAR: every input contiguous (offset % 4 == 0) or a scalar / constant, output offset % 4 == 0.
void main_linear() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    uint nq = p.n / 4u;
    for (uint j = 0u; j < EPTU; ++j) {
        uint q = base + j * WGU;
        if (q < nq) {
            W4 x = (p.flags & FLAG_A_SCALAR) != 0u ? W4(scalar(p.s0))
                 : ((p.flags & FLAG_A_CONTIGUOUS) != 0u ? a4[p.off_a / 4u + q] : W4(a[p.off_a]));
            W4 y = (p.flags & FLAG_B_SCALAR) != 0u ? W4(scalar(p.s1))
                 : ((p.flags & FLAG_B_CONTIGUOUS) != 0u ? b4[p.off_b / 4u + q] : W4(b[p.off_b]));
            o4[p.off_o / 4u + q] = bit(U(x.x), U(y.x), 0u) | bit(U(x.y), U(y.y), 1u) | bit(U(x.z), U(y.z), 2u)
                                 | bit(U(x.w), U(y.w), 3u);
        }
    }
    if (linear_group() == 0u && gl_LocalInvocationID.x == 0u) {
        for (uint i = nq * 4u; i < p.n; ++i) {   // the < 4 tail elements
            U x = (p.flags & FLAG_A_SCALAR) != 0u ? scalar(p.s0) : U(a[input_index(i, p.flags, p.off_a, p.sa)]);
            U y = (p.flags & FLAG_B_SCALAR) != 0u ? scalar(p.s1) : U(b[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, p.sb)]);
            o[p.off_o + i] = compare(x, y) ? uint8_t(1) : uint8_t(0);
        }
    }
}

void main() {
    if (LINEAR != 0u) { main_linear(); return; }
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        U x = (p.flags & FLAG_A_SCALAR) != 0u ? scalar(p.s0) : U(a[input_index(i, p.flags, p.off_a, p.sa)]);
        U y = (p.flags & FLAG_B_SCALAR) != 0u ? scalar(p.s1) : U(b[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, p.sb)]);
        o[p.off_o + i] = compare(x, y) ? uint8_t(1) : uint8_t(0);
    }
}
