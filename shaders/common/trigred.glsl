#ifndef FUELVK_TRIGRED_GLSL
#define FUELVK_TRIGRED_GLSL
// Payne-Hanek argument reduction for sin / cos of huge arguments, in 32-bit integer limbs (no int64,
// no float64 needed): shared by the double (math64.glsl) and float32 (elementwise.comp) kernels.
// 2/pi = sum TWO_OVER_PI_W[i] 2^(-32(i+1)): the bits Payne-Hanek reduction multiplies by (to 2^-1152)
const uint TWO_OVER_PI_W[36] = uint[](0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u, 0xB7246E3Au, 0x424DD2E0u, 0x06492EEAu, 0x09D1921Cu, 0xFE1DEB1Cu, 0xB129A73Eu, 0xE88235F5u, 0x2EBB4484u, 0xE99C7026u, 0xB45F7E41u, 0x3991D639u, 0x835339F4u, 0x9C845F8Bu, 0xBDF9283Bu, 0x1FF897FFu, 0xDE05980Fu, 0xEF2F118Bu, 0x5A0A6D1Fu, 0x6D367ECFu, 0x27CB09B7u, 0x4F463F66u, 0x9E5FEA2Du, 0x7527BAC7u, 0xEBE5F17Bu, 0x3D0739F7u, 0x8A5292EAu, 0x6BFB5FB1u, 0x1F8D5D08u);

void acc_add(inout uint a0, inout uint a1, inout uint a2, uint hi, uint lo) {   // (a2 a1 a0) += (hi lo)
    uint c0, c1, c2;
    a0 = uaddCarry(a0, lo, c0);
    a1 = uaddCarry(a1, hi, c1);
    a1 = uaddCarry(a1, c0, c2);
    a2 += c1 + c2;
}

uint bits_at(uint qv[7], int pos) {           // the 32 bits of qv (little-endian limbs) from bit pos up
    int i = pos >> 5, sh = pos & 31;
    uint v = qv[i] >> sh;
    if (sh != 0 && i + 1 < 7) v |= qv[i + 1] << (32 - sh);
    return v;
}

// a = m 2^e (m < 2^53 in two limbs m1:m0, e >= -62): m times the 160 bits of 2/pi that reach weights
// 2^1 .. 2^-96 (the words above give multiples of 4, the ones below < 2^-74) in 32-bit limbs. q: the
// bits at weights 2^1, 2^0 (the quadrant); f: the 96 fraction bits below, most significant first.
void ph_bits(uint m0, uint m1, int e, out int q, out uvec3 f) {
    int i0 = e >= 2 ? (e - 2) / 32 : 0;
    uint qv[7];
    uint a0 = 0u, a1 = 0u, a2 = 0u;
    for (int k = 0; k < 7; ++k) {             // column k of m * F (F little-endian: F[j] = W[i0 + 4 - j])
        uint hi, lo;
        if (k < 5) { umulExtended(TWO_OVER_PI_W[i0 + 4 - k], m0, hi, lo); acc_add(a0, a1, a2, hi, lo); }
        if (k >= 1 && k <= 5) { umulExtended(TWO_OVER_PI_W[i0 + 5 - k], m1, hi, lo); acc_add(a0, a1, a2, hi, lo); }
        qv[k] = a0;
        a0 = a1; a1 = a2; a2 = 0u;
    }
    int b = 32 * (i0 + 5) - e;                // the bit of weight 2^0
    q = int(bits_at(qv, b) & 3u);
    f = uvec3(bits_at(qv, b - 32), bits_at(qv, b - 64), bits_at(qv, b - 96));
}
// ph_bits of a float32 argument (m1 = 0, e <= 104: i0 <= 3, so only W[0 .. 8] are read), the same bits
// with every table word and limb picked by selects: no dynamically indexed array. CPU drivers
// (lavapipe) run a divergent branch for every invocation, and ph_bits' indexed arrays (a gather per
// table word, the limbs in per-invocation scratch) made float32 sin / cos ~100x an exp even where no
// argument took this path.
uint ph_w9(int i) {                           // TWO_OVER_PI_W[i], 0 <= i <= 8
    uint v = TWO_OVER_PI_W[0];
    for (int j = 1; j <= 8; ++j) v = i == j ? TWO_OVER_PI_W[j] : v;
    return v;
}

uint ph_bits_at7(uint q0, uint q1, uint q2, uint q3, uint q4, uint q5, uint q6, int pos) {   // bits_at
    int i = pos >> 5, sh = pos & 31;
    uint lo = i == 0 ? q0 : i == 1 ? q1 : i == 2 ? q2 : i == 3 ? q3 : i == 4 ? q4 : i == 5 ? q5 : q6;
    uint hi = i == 0 ? q1 : i == 1 ? q2 : i == 2 ? q3 : i == 3 ? q4 : i == 4 ? q5 : q6;
    uint v = lo >> sh;
    if (sh != 0 && i + 1 < 7) v |= hi << (32 - sh);
    return v;
}

void ph_bits32(uint m0, int e, out int q, out uvec3 f) {
    int i0 = e >= 2 ? (e - 2) / 32 : 0;
    uint a0 = 0u, a1 = 0u, a2 = 0u, hi, lo;
    uint l[5];                                // columns 0 .. 4 (constant indices after unrolling)
    for (int k = 0; k < 5; ++k) {
        umulExtended(ph_w9(i0 + 4 - k), m0, hi, lo);
        acc_add(a0, a1, a2, hi, lo);
        l[k] = a0;
        a0 = a1; a1 = a2; a2 = 0u;
    }
    int b = 32 * (i0 + 5) - e;                // the bit of weight 2^0
    q = int(ph_bits_at7(l[0], l[1], l[2], l[3], l[4], a0, a1, b) & 3u);
    f = uvec3(ph_bits_at7(l[0], l[1], l[2], l[3], l[4], a0, a1, b - 32),
              ph_bits_at7(l[0], l[1], l[2], l[3], l[4], a0, a1, b - 64),
              ph_bits_at7(l[0], l[1], l[2], l[3], l[4], a0, a1, b - 96));
}
#endif
