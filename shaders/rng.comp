#version 450
// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11; Random123's constants). Invocation i
// runs one Philox block on counter (i, ctr, 0, 0) under key (key0, key1): four independent u32 words,
// a pure function of (key, counter), so any run, device or split of the work draws the same bits.
// MODE_RAW: out holds the words (word 4i + j = the block's word j; n words).
// MODE_KEEP: a bernoulli mask of n bytes (bool): byte 4i + j = 1 when word j < thr (P = thr / 2^32),
// written four to a u32 (bytes past n are 0; the mask's slot holds whole words).
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG;

layout(set = 0, binding = 0) writeonly buffer Out { uint o[]; } out_;

layout(push_constant) uniform Params {
    uint n; uint key0; uint key1; uint ctr; uint thr;
} p;

uvec4 philox(uvec4 c, uvec2 k) {
    for (int r = 0; r < 10; ++r) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

void main() {
    uint i = linear_group() * WGU + gl_LocalInvocationID.x;
    if (i * 4u >= p.n) return;
    uvec4 r = philox(uvec4(i, p.ctr, 0u, 0u), uvec2(p.key0, p.key1));
#if MODE == MODE_RAW
    for (uint j = 0u; j < 4u; ++j)
        if (i * 4u + j < p.n) out_.o[i * 4u + j] = r[j];
#else
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j)
        if (i * 4u + j < p.n && r[j] < p.thr) word |= 1u << (8u * j);
    out_.o[i] = word;
#endif
}
