// Double-precision exp / expm1 / log / sin / cos for f64 kernels: GLSL.std.450 has no double
// transcendentals. Cody-Waite range reduction + Taylor/atanh series carried past 2^-60, so results
// are within a few ulp of the correctly rounded value. sin/cos reduce by a three-part pi/2 below 2^12
// and by Payne-Hanek (2/pi to 2^-1152, integer limbs) above: exact quadrant, reduced argument to 2^-74.
#ifndef FUELVK_MATH64_GLSL
#define FUELVK_MATH64_GLSL
const double LN2_HI = 6.93147180369123816490e-01LF, LN2_LO = 1.90821492927058770002e-10LF;
const double INV_LN2 = 1.44269504088896338700e+00LF;
const double PIO2_1 = 1.57079632673412561417e+00LF, PIO2_2 = 6.07710050650619224932e-11LF;
const double PIO2_3 = 2.02226624879595063154e-21LF, TWO_OVER_PI = 6.36619772367581382433e-01LF;

// 1/i! for i = 0..25
const double INV_FACT[26] = double[](1.0LF, 1.0LF, 0.5LF, 0.16666666666666666LF, 0.041666666666666664LF, 0.008333333333333333LF, 0.001388888888888889LF, 0.0001984126984126984LF, 2.48015873015873e-05LF, 2.7557319223985893e-06LF, 2.755731922398589e-07LF, 2.505210838544172e-08LF, 2.08767569878681e-09LF, 1.6059043836821613e-10LF, 1.1470745597729725e-11LF, 7.647163731819816e-13LF, 4.779477332387385e-14LF, 2.8114572543455206e-15LF, 1.5619206968586225e-16LF, 8.22063524662433e-18LF, 4.110317623312165e-19LF, 1.9572941063391263e-20LF, 8.896791392450574e-22LF, 3.8681701706306835e-23LF, 1.6117375710961184e-24LF, 6.446950284384474e-26LF);

double ldexp2(double x, int k) {            // ldexp in two steps so 2^k never overflows alone
    int h = k / 2;
    return ldexp(ldexp(x, h), k - h);
}

double exp_poly(double r) {                 // e^r for |r| <= ln2/2, Taylor to r^16
    double p = INV_FACT[16];
    for (int i = 15; i >= 0; --i) p = p * r + INV_FACT[i];
    return p;
}

double exp64(double x) {
    if (isnan(x)) return x;
    if (x > 709.782712893384LF) return 1.0LF / 0.0LF;
    if (x < -745.1332191019412LF) return 0.0LF;
    double k = floor(x * INV_LN2 + 0.5LF);
    double r = (x - k * LN2_HI) - k * LN2_LO;
    return ldexp2(exp_poly(r), int(k));
}

double expm1_64(double x) {                 // e^x - 1 without cancellation near 0
    if (abs(x) >= 0.5LF) return exp64(x) - 1.0LF;
    double p = INV_FACT[18];
    for (int i = 17; i >= 2; --i) p = p * x + INV_FACT[i];
    return p * x * x + x;
}

double log64(double x) {
    if (isnan(x) || x < 0.0LF) return 0.0LF / 0.0LF;
    if (x == 0.0LF) return -1.0LF / 0.0LF;
    if (isinf(x)) return x;
    int e;
    double m = frexp(x, e);                  // x = m * 2^e, m in [0.5, 1)
    if (m < 0.70710678118654752440LF) { m *= 2.0LF; e -= 1; }
    double f = m - 1.0LF;
    double s = f / (2.0LF + f), z = s * s;   // log(1+f) = 2 atanh(s), |s| < 0.172
    double p = 1.0LF / 25.0LF;
    for (int i = 23; i >= 3; i -= 2) p = p * z + 1.0LF / double(i);
    double l = 2.0LF * s * (p * z + 1.0LF);
    return double(e) * LN2_HI + (l + double(e) * LN2_LO);
}

double sin_poly(double r) {                  // |r| <= pi/4, Taylor to r^23
    double z = r * r, p = -INV_FACT[23];     // sin r = r - r^3/3! + ... ; sign of r^i is (-1)^(i/2)
    for (int i = 21; i >= 3; i -= 2) p = p * z + ((i / 2) % 2 == 0 ? INV_FACT[i] : -INV_FACT[i]);
    return r + r * z * p;
}

double cos_poly(double r) {                  // |r| <= pi/4, Taylor to r^24
    double z = r * r, p = INV_FACT[24];
    for (int i = 22; i >= 2; i -= 2) p = p * z + ((i / 2) % 2 == 0 ? INV_FACT[i] : -INV_FACT[i]);
    return 1.0LF + z * p;
}

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

// Payne-Hanek for a >= 2^12 (the 3-part Cody-Waite reduction loses bits as k grows; PH takes a >= 2^-10):
// a = m 2^e (m: 53-bit integer); m times the 160 bits of 2/pi that reach weights 2^1 .. 2^-96 (the
// words above give multiples of 4, the ones below < 2^-74) in 32-bit limbs; the bits at weights 2^1,
// 2^0 are the quadrant, the 96 below the fraction. Returns r in [-pi/4, pi/4], a = q pi/2 + r.
double ph_reduce(double a, out int q) {
    uvec2 w = unpackDouble2x32(a);
    int e = int((w.y >> 20) & 0x7FFu) - 1075;
    uint m0 = w.x, m1 = (w.y & 0xFFFFFu) | 0x100000u;
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
    double f = ldexp(double(bits_at(qv, b - 96)), -96) + ldexp(double(bits_at(qv, b - 64)), -64);
    f += ldexp(double(bits_at(qv, b - 32)), -32);
    if (f >= 0.5LF) { f -= 1.0LF; q = (q + 1) & 3; }
    return f * 1.57079632679489655800LF + f * 6.12323399573676588613e-17LF;
}

double sincos64(double x, bool want_cos) {
    if (isnan(x) || isinf(x)) return 0.0LF / 0.0LF;
    double r;
    int q;
    if (abs(x) < 4096.0LF) {
        double k = floor(x * TWO_OVER_PI + 0.5LF);
        r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
        q = int(mod(k, 4.0LF));
    } else {
        r = ph_reduce(abs(x), q);             // sin(-a) = -sin(a): r and q's parity flip together
        if (x < 0.0LF) { r = -r; q = (4 - q) & 3; }
    }
    q = (q + (want_cos ? 1 : 0)) & 3;         // cos(x) = sin(x + pi/2)
    double v = (q & 1) == 0 ? sin_poly(r) : cos_poly(r);
    return (q & 2) == 0 ? v : -v;
}
#endif
