// The memory side of the cast kernels (cast.comp, icast.comp): bindings, Params, main(). The includer
// defines SBITS / DBITS (8, 16, 32, 64: raw widths of a source / destination element), WG / EPT and the
// FLAG_* defines, enables the 8/16/64-bit extensions its widths need, defines
// `DRAW cast_bits(RAW x)` on raw bits (RAW / DRAW: uint, or uint64_t for 64-bit elements), and
// includes this file last. W64 (the *_w64 twins and every variant with a 64-bit side; shaderInt64):
// 16- and 32-bit groups move through 64-bit words (lavapipe pays per loaded / stored component,
// whatever its width). Same bits either way.
// Input: strided + broadcast + offset view (the EW Params and FLAG_* of elementwise.comp); output contiguous.
#include "common/index.glsl"

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

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;
layout(constant_id = 1) const uint LINEAR = 0;  // 1: input contiguous or constant, offsets % 4 == 0

layout(set = 0, binding = 0) writeonly buffer Out { DT o[]; };
layout(set = 0, binding = 1) readonly buffer A { ST a[]; };

// The LINEAR path moves groups of 4 elements (offsets are multiples of 4), each group one word G:
// 4 x 8 bits one uint, 4 x 16 bits a uvec2 / uint64_t, 4 x 32 bits a uvec4 / u64vec2, 4 x 64 bits a
// u64vec4. Loads come as uvec4 words (two for 64-bit sources).
#if SBITS == 8
layout(set = 0, binding = 1) readonly buffer AG { uint ag[]; };
#define LOAD_G(k, all) uvec4(ag[k], ag[(k) + ((all) ? 1u : 0u)], ag[(k) + ((all) ? 2u : 0u)], ag[(k) + ((all) ? 3u : 0u)])   // 4 groups
#elif SBITS == 16 && defined(W64)
layout(set = 0, binding = 1) readonly buffer AG { uint64_t ag[]; };
#define LOAD_G(k, all) uvec4(unpackUint2x32(ag[k]), unpackUint2x32(ag[(k) + ((all) ? 1u : 0u)]))   // 2 groups
#elif SBITS == 16
layout(set = 0, binding = 1) readonly buffer AG { uvec2 ag[]; };
#define LOAD_G(k, all) uvec4(ag[k], ag[(k) + ((all) ? 1u : 0u)])
#elif SBITS == 32 && defined(W64)
layout(set = 0, binding = 1) readonly buffer AG { u64vec2 ag[]; };
#define LOAD_G(k, all) uvec4(unpackUint2x32(ag[k].x), unpackUint2x32(ag[k].y))
#elif SBITS == 32
layout(set = 0, binding = 1) readonly buffer AG { uvec4 ag[]; };
#define LOAD_G(k, all) ag[k]
#else
layout(set = 0, binding = 1) readonly buffer AG { u64vec4 ag[]; };
#endif

#if DBITS == 8
layout(set = 0, binding = 0) writeonly buffer OG { uint og[]; };
#define PACK8(r0, r1, r2, r3) ((r0) | ((r1) << 8) | ((r2) << 16) | ((r3) << 24))
#define STORE_G(k, r0, r1, r2, r3) og[k] = PACK8(r0, r1, r2, r3)
#if defined(W64) && SBITS <= 32
// W64, 8-bit destination, 8- / 16- / 32-bit source: a unit's 8 or 16 result bytes go out as one or
// two 64-bit words (half the stores of 32-bit groups; lavapipe pays per stored component) when the
// output offset is a multiple of 8 elements, else as 32-bit groups (a 32-bit source's unit is two
// texels, PAIR32 below, so that it fills a 64-bit word).
#define STORE8_W64 1
layout(set = 0, binding = 0) writeonly buffer OG8 { uint64_t og8[]; };
#endif
#elif DBITS == 16 && defined(W64)
layout(set = 0, binding = 0) writeonly buffer OG { uint64_t og[]; };
#define STORE_G(k, r0, r1, r2, r3) og[k] = packUint2x32(uvec2((r0) | ((r1) << 16), (r2) | ((r3) << 16)))
#elif DBITS == 16
layout(set = 0, binding = 0) writeonly buffer OG { uvec2 og[]; };
#define STORE_G(k, r0, r1, r2, r3) og[k] = uvec2((r0) | ((r1) << 16), (r2) | ((r3) << 16))
#elif DBITS == 32 && defined(W64)
layout(set = 0, binding = 0) writeonly buffer OG { u64vec2 og[]; };
#define STORE_G(k, r0, r1, r2, r3) og[k] = u64vec2(packUint2x32(uvec2(r0, r1)), packUint2x32(uvec2(r2, r3)))
#elif DBITS == 32
layout(set = 0, binding = 0) writeonly buffer OG { uvec4 og[]; };
#define STORE_G(k, r0, r1, r2, r3) og[k] = uvec4(r0, r1, r2, r3)
#else
layout(set = 0, binding = 0) writeonly buffer OG { u64vec4 og[]; };
#define STORE_G(k, r0, r1, r2, r3) og[k] = u64vec4(r0, r1, r2, r3)
#endif

// PAIR32 (W64, 32-bit source, 8- / 16-bit destination): a unit is two texels, 8 elements, so that
// each 64-bit word stored is whole (8-bit results) and a unit's fixed cost is shared by twice the
// elements (lavapipe, worker CPU: f32 -> f8 896x1024 -30%, f32 -> bf16 / f16 1024x1024 ~-10%).
#if defined(W64) && SBITS == 32 && DBITS <= 16
#define PAIR32 1
#endif
// PAIR16 (W64, 16-bit source, up to 32-bit destination): likewise two texels, 16 elements (worker
// CPU: bf16 / f16 -> f32 1024x1024 -12 / -14%, f16 -> bf16 -10%, bf16 / f16 -> f8 1792x1024 -13%).
#if defined(W64) && SBITS == 16 && DBITS <= 32
#define PAIR16 1
#endif

// A LINEAR step converts one UNIT of source elements: one whole 16-byte texel of a narrow source
// (16 x 8 bits, 8 x 16 bits), 4 elements of a wide one (one texel of 32-bit, two of 64-bit elements).
// (PAIR32 / PAIR16: 8 / 16 elements, two texels.)
#if defined(PAIR32)
const uint UNIT = 8u, NT = 2u;
#elif defined(PAIR16)
const uint UNIT = 16u, NT = 2u;
#else
const uint UNIT = SBITS == 8 ? 16u : SBITS == 16 ? 8u : 4u;
const uint NT = SBITS == 64 ? 2u : 1u;          // texels per unit
#endif
const uint STEPS = 4u * EPTU / UNIT;            // units per invocation: 4 * EPT elements, as the host sizes the grid

// TEX = 1 (LINEAR only, input contiguous): units are read through the input's rgba32ui texel view a_t
// (Device.texel_loads, runtime/loadpath.py); else a 16-byte stub is bound there. Tails stay on the
// storage buffer.
#ifdef NO_TEXEL
// NO_TEXEL (the *_ssbo twins): no texel view binding (see elementwise.comp's NO_TEXEL).
const uint TEX = 0u;
#define TEXLOAD(t) uvec4(0u)
#else
layout(constant_id = 2) const uint TEX = 0;
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer a_t;
#define TEXLOAD(t) imageLoad(a_t, int(t))
#endif

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
} p;

#if SBITS == 64
#define RAW uint64_t
#else
#define RAW uint
#endif
#if DBITS == 64
#define DRAW uint64_t
#else
#define DRAW uint
#endif

DRAW cast_bits(RAW x);

// Raw element j (a constant after unrolling) of a unit held in words w0 (and w1 for 64-bit sources).
#if SBITS == 8
#define ELEM(j) ((w0[(j) >> 2] >> (8u * ((j) & 3u))) & 0xFFu)
#elif SBITS == 16
#define ELEM(j) (((j) < 8u ? w0[((j) >> 1) & 3u] : w1[((j) >> 1) & 3u]) >> (16u * ((j) & 1u)) & 0xFFFFu)
#elif SBITS == 32
#define ELEM(j) ((j) < 4u ? w0[(j) & 3u] : w1[(j) & 3u])
#else
#define ELEM(j) packUint2x32((j) < 2u ? ((j) == 0u ? w0.xy : w0.zw) : ((j) == 2u ? w1.xy : w1.zw))
#endif

// One unit u: load it (texel view or storage buffer), convert, store its UNIT / 4 groups. A constant
// input (every stride 0: contig false, c its element) is handled without a branch, which would cost
// lavapipe ~2x here: the loads read a valid place (texel 0 of the stub bound for it, the group
// holding its element: bindings are whole 256-byte slots or windows, runtime/memory.py) and every
// element is replaced by c (its bits repeated over the unit's words: one select per word, not per element).
void unit(uint u, bool contig, uvec4 cw) {
    uvec4 w0, w1 = uvec4(0u);
    if (TEX != 0u) {
        // the unit's first texel, and its start within it in 32-bit words (a narrow source's offset
        // is a multiple of 4 elements, not necessarily of a texel: then the unit spans two texels)
        uint byte0 = p.off_a * (SBITS / 8u);
        uint t = contig ? byte0 / 16u + u * NT : 0u, sh = contig ? (byte0 / 4u) & 3u : 0u;
        w0 = TEXLOAD(t);
        if (NT == 2u) {
            w1 = TEXLOAD(t + (contig ? 1u : 0u));
            if (SBITS == 16 && sh != 0u) {      // PAIR16 half a texel in (sh == 2): three texels
                uvec4 nx = TEXLOAD(t + 2u);
                w0 = uvec4(w0.zw, w1.xy);
                w1 = uvec4(w1.zw, nx.xy);
            }
        } else if (SBITS < 32 && sh != 0u) {
            uvec4 nx = TEXLOAD(t + 1u);
            w0 = sh == 1u ? uvec4(w0.yzw, nx.x) : sh == 2u ? uvec4(w0.zw, nx.xy) : uvec4(w0.w, nx.xyz);
        }
    } else {
#if SBITS == 64
        u64vec4 v = ag[contig ? p.off_a / 4u + u : p.off_a / 4u];
        w0 = uvec4(unpackUint2x32(v.x), unpackUint2x32(v.y));
        w1 = uvec4(unpackUint2x32(v.z), unpackUint2x32(v.w));
#else
        w0 = LOAD_G(contig ? p.off_a / 4u + u * (UNIT / 4u) : p.off_a / 4u, contig);
#if defined(PAIR32) || defined(PAIR16)
        w1 = LOAD_G(contig ? p.off_a / 4u + u * (UNIT / 4u) + (SBITS == 16 ? 2u : 1u) : p.off_a / 4u, contig);
#endif
#endif
    }
    w0 = contig ? w0 : cw;                      // a constant input: its bits in every element's place
    w1 = contig ? w1 : cw;
    uint ko = p.off_o / 4u + u * (UNIT / 4u);
    // unrolled by hand (constant word / component indices on any compiler)
#define CVT(j) cast_bits(ELEM(j))
#define GROUP(g) STORE_G(ko + (g), CVT(4u * (g)), CVT(4u * (g) + 1u), CVT(4u * (g) + 2u), CVT(4u * (g) + 3u))
#ifdef STORE8_W64
#define PACKED(g) PACK8(CVT(4u * (g)), CVT(4u * (g) + 1u), CVT(4u * (g) + 2u), CVT(4u * (g) + 3u))
    if ((p.off_o & 7u) == 0u) {                 // uniform: the same for every invocation
        uint k8 = p.off_o / 8u + u * (UNIT / 8u);
        og8[k8] = packUint2x32(uvec2(PACKED(0u), PACKED(1u)));
#if SBITS == 8 || defined(PAIR16)
        og8[k8 + 1u] = packUint2x32(uvec2(PACKED(2u), PACKED(3u)));
#endif
        return;
    }
#endif
    GROUP(0u);
#if SBITS <= 16 || defined(PAIR32)
    GROUP(1u);
#endif
#if SBITS == 8 || defined(PAIR16)
    GROUP(2u);
    GROUP(3u);
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

// LINEAR path: whole units, STEPS per invocation, neighbouring invocations on neighbouring units; the
// < UNIT tail by one invocation.
void main_linear() {
    uint g = linear_group(), lid = gl_LocalInvocationID.x;
    bool contig = (p.flags & FLAG_A_CONTIGUOUS) != 0u;
    RAW c = RAW(a[p.off_a]);
#if SBITS == 8
    uvec4 cw = uvec4(c * 0x01010101u);          // c's bits in every element's place of a texel
#elif SBITS == 16
    uvec4 cw = uvec4(c * 0x00010001u);
#elif SBITS == 32
    uvec4 cw = uvec4(c);
#else
    uvec4 cw = uvec4(unpackUint2x32(c), unpackUint2x32(c));
#endif
    uint nu = p.n / UNIT;
    for (uint s = 0u; s < STEPS; ++s) {
        uint u = g * (WGU * STEPS) + s * WGU + lid;
        if (u < nu) unit(u, contig, cw);
    }
    if (g == 0u && lid == 0u) {
        for (uint i = nu * UNIT; i < p.n; ++i)   // the < UNIT tail elements (kept out of the hot loop)
            o[p.off_o + i] = DT(cast_bits(RAW(a[contig ? p.off_a + i : p.off_a])));
    }
}

void main() {
    if (LINEAR != 0u) { main_linear(); return; }
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        uint src = (p.flags & FLAG_A_CONTIGUOUS) != 0u ? p.off_a + i : ((p.flags & FLAG_A_CONSTANT) != 0u ? p.off_a : strided(i));
        o[p.off_o + i] = DT(cast_bits(RAW(a[src])));
    }
}
