#version 450
// Sorting (fuelvk.argsort / sort): a bitonic network over [rows, P] (key, index) pairs, P the row
// length padded to a power of two. Keys are the elements' bits mapped to uint so that unsigned
// order is numeric order (floats: sign flip; -0 == +0; every NaN after +inf, as numpy); the index
// breaks ties, so the sort is stable. Descending inverts the real keys (ties keep index order).
// Padding (key and index all ones) sorts last. 64-bit elements (BITS 64) are keyed the same way on
// a uvec2 (high word, low word) compared high word first, so neither int64 nor float64 shader
// arithmetic is needed. Three modes (specialization constant MODE):
//   MODE_KEYS: build keys from the contiguous input rows x (elements of BITS bits, read from 32-bit
//              words, little-endian);
//   MODE_STEP: one compare-exchange step (k, j) of the network;
//   MODE_WRITE: write the first n indices of each row into out as int64 (the argsort result).
// KIND_*, MODE_* and WG are defines from kernels/sorting.py.
#include "common/index.glsl"
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = MODE_KEYS;

#if BITS == 64
#define KEY uvec2
#else
#define KEY uint
#endif
layout(set = 0, binding = 0) buffer Keys { KEY key[]; };
layout(set = 0, binding = 1) buffer Idx { uint idx[]; };
layout(set = 0, binding = 2) readonly buffer X { uint x[]; };      // MODE_KEYS: the input words
layout(set = 0, binding = 3) writeonly buffer Out { uint o[]; };   // MODE_WRITE: int64 words

layout(push_constant) uniform Params {
    uint n; uint p2; uint rows; uint j; uint k; uint off_in; uint desc; uint pad;
} p;

#if BITS == 64
uvec2 load_bits(uint e) { return uvec2(x[2u * e + 1u], x[2u * e]); }   // (high, low)

uvec2 make_key(uvec2 b) {
    const uint SIGN = 0x80000000u;
#if KIND == KIND_FLOAT
    uint hi = b.x & (SIGN - 1u);                // the magnitude's high word; INFBITS: +inf's
    if (hi > INFBITS || (hi == INFBITS && b.y != 0u)) return uvec2(0xFFFFFFFFu, 0xFFFFFFFEu);   // NaN
    if (hi == 0u && b.y == 0u) b = uvec2(0u);   // -0 sorts with +0
    return (b.x & SIGN) != 0u ? ~b : uvec2(b.x | SIGN, b.y);
#elif KIND == KIND_SIGNED
    return uvec2(b.x ^ SIGN, b.y);
#else
    return b;
#endif
}

bool key_less(uvec2 a, uvec2 b) { return a.x < b.x || (a.x == b.x && a.y < b.y); }
#else
uint load_bits(uint e) {
#if BITS == 32
    return x[e];
#elif BITS == 16
    return (x[e >> 1] >> ((e & 1u) * 16u)) & 0xFFFFu;
#else
    return (x[e >> 2] >> ((e & 3u) * 8u)) & 0xFFu;
#endif
}

uint make_key(uint b) {
    const uint SIGN = 1u << (BITS - 1);
#if KIND == KIND_FLOAT
    uint mag = b & (SIGN - 1u);
    if (mag > INFBITS) return 0xFFFFFFFEu;       // NaN (any sign, any payload): after +inf
    if (mag == 0u) b = 0u;                      // -0 sorts with +0 (the index keeps their order)
    uint k = (b & SIGN) != 0u ? ~b : (b | SIGN);
#elif KIND == KIND_SIGNED
    uint k = b ^ SIGN;
#else
    uint k = b;
#endif
#if BITS < 32
    k = (k & ((1u << BITS) - 1u)) << (32 - BITS);
#endif
    return k;
}

bool key_less(uint a, uint b) { return a < b; }
#endif

void main() {
    uint g = linear_group() * WG + gl_LocalInvocationID.x;
    if (MODE == MODE_KEYS) {
        if (g >= p.rows * p.p2) return;
        uint r = g / p.p2, c = g - r * p.p2;
        if (c < p.n) {
            KEY kk = make_key(load_bits(p.off_in + r * p.n + c));
            key[g] = p.desc != 0u ? ~kk : kk;
            idx[g] = c;
        } else {
            key[g] = KEY(0xFFFFFFFFu);
            idx[g] = 0xFFFFFFFFu;
        }
    } else if (MODE == MODE_STEP) {
        if (g >= p.rows * p.p2) return;
        uint r = g / p.p2, i = g - r * p.p2;
        uint l = i ^ p.j;
        if (l <= i) return;
        uint a = r * p.p2 + i, b = r * p.p2 + l;
        KEY ka = key[a], kb = key[b];
        uint ia = idx[a], ib = idx[b];
        bool greater = key_less(kb, ka) || (ka == kb && ia > ib);
        if (greater == ((i & p.k) == 0u)) {
            key[a] = kb; key[b] = ka; idx[a] = ib; idx[b] = ia;
        }
    } else {
        if (g >= p.rows * p.n) return;
        uint r = g / p.n, c = g - r * p.n;
        o[2u * g] = idx[r * p.p2 + c];
        o[2u * g + 1u] = 0u;
    }
}
