// Double-precision exp / expm1 / log / sin / cos for f64 kernels: GLSL.std.450 has no double
// transcendentals. Cody-Waite range reduction + Taylor/atanh series carried past 2^-60, so results
// are within a few ulp of the correctly rounded value. sin/cos reduce by a three-part pi/2 below 2^12
// and by Payne-Hanek (2/pi to 2^-1152, integer limbs) above: exact quadrant, reduced argument to 2^-74.
#ifndef FUELVK_MATH64_GLSL
#define FUELVK_MATH64_GLSL
#include "trigred.glsl"
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

// Payne-Hanek for a >= 2^12 (the 3-part Cody-Waite reduction loses bits as k grows; PH takes a >= 2^-10):
// r in [-pi/4, pi/4] with a = q pi/2 + r (trigred.glsl).
double ph_reduce(double a, out int q) {
    uvec2 w = unpackDouble2x32(a);
    uvec3 fb;
    ph_bits(w.x, (w.y & 0xFFFFFu) | 0x100000u, int((w.y >> 20) & 0x7FFu) - 1075, q, fb);
    double f = ldexp(double(fb.z), -96) + ldexp(double(fb.y), -64);
    f += ldexp(double(fb.x), -32);
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
