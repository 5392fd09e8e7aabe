#version 450
// Complex elementwise ops (the array API's complex64 / complex128): arrays are interleaved (re, im)
// float pairs (C64: float, C128: double words). Every op computes in double (math64.glsl: GLSL has
// no double transcendentals), so complex64 results are rounded once from a double result.
// NIN 1: the unary family (OP_* from kernels/complex.py UNARY_OPS; abs writes one real word per
// element, the others a pair); NIN 2: the binary family (add sub mul div pow).
// Operands are contiguous; an operand with step 0 is one element broadcast to all (a scalar).
// Special values follow C99 Annex G, as the array API standard's special cases do (and numpy).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "common/math64.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;

#if defined(C128)
#define R double
#else
#define R float
#endif
#define D double
#define Z dvec2

layout(set = 0, binding = 0) writeonly buffer Out { R o[]; };
layout(set = 0, binding = 1) readonly buffer X { R x[]; };
#if NIN == 2
layout(set = 0, binding = 2) readonly buffer Y { R y[]; };
#endif

layout(push_constant) uniform Params {
    uint n; uint off_out; uint off_x; uint off_y; uint step_x; uint step_y;
} p;

const D PI = 3.14159265358979323846LF, PI_2 = 1.57079632679489661923LF, PI_4 = 0.78539816339744830962LF;
const D LN2 = 0.69314718055994530942LF;
D inf_() { return 1.0LF / 0.0LF; }
D nan_() { return 0.0LF / 0.0LF; }
bool neg_bit(D v) { return (unpackDouble2x32(v).y & 0x80000000u) != 0u; }
D copysign64(D v, D s) {
    uvec2 w = unpackDouble2x32(v);
    w.y = (w.y & 0x7FFFFFFFu) | (unpackDouble2x32(s).y & 0x80000000u);
    return packDouble2x32(w);
}
bool finite(D v) { return !isnan(v) && !isinf(v); }

D atan64(D v) {                       // reduction to |t| <= tan(pi/8), odd series
    if (isnan(v)) return v;
    D a = abs(v), base = 0.0LF, off = 0.0LF;
    if (a > 1.0LF) { a = 1.0LF / a; base = PI_2; }
    if (a > 0.41421356237309505LF) { a = (a - 1.0LF) / (a + 1.0LF); off = PI_4; }
    D a2 = a * a, s = 0.0LF;
    for (int k = 24; k >= 0; --k) s = s * (-a2) + 1.0LF / D(2 * k + 1);
    D r = off + a * s;
    r = base != 0.0LF ? base - r : r;
    return v < 0.0LF ? -r : r;
}
D atan2_64(D b, D a) {                // C99 atan2 (signed zeros, infinities)
    if (isnan(a) || isnan(b)) return a + b;
    bool nb = neg_bit(b), na = neg_bit(a);
    D r;
    if (isinf(a) && isinf(b)) r = na ? 3.0LF * PI_4 : PI_4;
    else if (isinf(a)) r = na ? PI : 0.0LF;
    else if (isinf(b) || a == 0.0LF) r = b == 0.0LF ? (na ? PI : 0.0LF) : PI_2;
    else if (b == 0.0LF) r = na ? PI : 0.0LF;
    else { D t = atan64(abs(b) / abs(a)); r = na ? PI - t : t; }
    return nb ? -r : r;
}
D log1p64(D v) {                      // Kahan: log(u) * v / (u - 1), u = 1 + v
    D u = 1.0LF + v;
    if (u == 1.0LF) return v;
    if (isinf(v) && v > 0.0LF) return v;
    return log64(u) * v / (u - 1.0LF);
}
D hypot64(D a, D b) {                 // scaled; inf wins over NaN
    a = abs(a); b = abs(b);
    if (isinf(a) || isinf(b)) return inf_();
    if (isnan(a) || isnan(b)) return a + b;
    D m = max(a, b), s = min(a, b);
    if (m == 0.0LF) return 0.0LF;
    D r = s / m;
    return m * sqrt(1.0LF + r * r);
}
D sinh64(D v) {
    D a = abs(v), e = expm1_64(a);
    D r = isinf(e) ? exp64(a - LN2) * 1.0LF : 0.5LF * (e + e / (e + 1.0LF));
    if (a > 709.0LF) { D h = exp64(0.5LF * a - LN2); r = h * exp64(0.5LF * a); }
    return copysign64(r, v);
}
D cosh64(D v) {
    D a = abs(v);
    if (a > 709.0LF) { D h = exp64(0.5LF * a - LN2); return h * exp64(0.5LF * a); }
    D e = exp64(a);
    return 0.5LF * e + 0.5LF / e;
}
D cos64(D v) { return sincos64(v, true); }
D sin64(D v) { return v == 0.0LF ? v : sincos64(v, false); }

Z cmul(Z a, Z b) { return Z(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
Z cdiv(Z a, Z b) {                    // Smith's algorithm (no overflow in |b|^2)
    if (b.x == 0.0LF && b.y == 0.0LF) return Z(a.x / abs(b.x), a.y / abs(b.x));   // C: z / 0 -> inf / NaN
    if (abs(b.x) >= abs(b.y)) {
        D r = b.y / b.x, d = b.x + b.y * r;
        return Z((a.x + a.y * r) / d, (a.y - a.x * r) / d);
    }
    D r = b.x / b.y, d = b.x * r + b.y;
    return Z((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}

Z cexp(Z z) {
    D a = z.x, b = z.y;
    if (isinf(a)) {
        if (a < 0.0LF) return finite(b) ? Z(0.0LF * cos64(b), 0.0LF * sin64(b)) : Z(0.0LF, 0.0LF);
        if (b == 0.0LF) return Z(a, b);
        if (!finite(b)) return Z(a, nan_());
        return Z(a * cos64(b), a * sin64(b));
    }
    if (isnan(a)) return b == 0.0LF ? Z(a, b) : Z(nan_(), nan_());
    if (!finite(b)) return Z(nan_(), nan_());
    if (b == 0.0LF) return Z(exp64(a), b);
    if (a > 709.0LF) { D h = exp64(0.5LF * a); return Z(h * cos64(b) * h, h * sin64(b) * h); }
    D e = exp64(a);
    return Z(e * cos64(b), e * sin64(b));
}
Z cexpm1(Z z) {                       // re = expm1(a) cos b - 2 sin^2(b/2): no cancellation near 0
    D a = z.x, b = z.y;
    if (!finite(a) || !finite(b) || a > 709.0LF) {
        Z e = cexp(z);
        return (isinf(a) && a < 0.0LF) ? Z(-1.0LF, 0.0LF) : Z(e.x - 1.0LF, e.y);
    }
    if (b == 0.0LF) return Z(expm1_64(a), b);
    D s = sin64(0.5LF * b);
    return Z(expm1_64(a) * cos64(b) - 2.0LF * s * s, exp64(a) * sin64(b));
}
Z clog(Z z) {
    D h = hypot64(z.x, z.y);
    D re;
    D m = max(abs(z.x), abs(z.y));
    if (m > 0.5LF && m < 2.0LF && finite(h)) {       // |z| near 1: log1p of |z|^2 - 1 (exact products)
        D s = min(abs(z.x), abs(z.y));
        re = 0.5LF * log1p64((m - 1.0LF) * (m + 1.0LF) + s * s);
    } else {
        re = log64(h);
    }
    return Z(re, atan2_64(z.y, z.x));
}
Z clog1p(Z z) {
    if (!finite(z.x) || !finite(z.y) || max(abs(z.x), abs(z.y)) > 1e150LF) return clog(Z(1.0LF + z.x, z.y));
    if (z.x == 0.0LF && z.y == 0.0LF) return z;
    return Z(0.5LF * log1p64(z.x * (2.0LF + z.x) + z.y * z.y), atan2_64(z.y, 1.0LF + z.x));
}
Z csqrt(Z z) {
    D a = z.x, b = z.y;
    if (isinf(b)) return Z(inf_(), b);
    if (isnan(a)) return Z(a, nan_());
    if (isinf(a)) {
        if (a > 0.0LF) return Z(a, isnan(b) ? b : copysign64(0.0LF, b));
        return Z(isnan(b) ? b : 0.0LF, copysign64(inf_(), b));
    }
    if (isnan(b)) return Z(nan_(), nan_());
    if (a == 0.0LF && b == 0.0LF) return Z(0.0LF, b);
    D scale = 1.0LF;
    if (max(abs(a), abs(b)) > 1e300LF) { a *= 0.25LF; b *= 0.25LF; scale = 2.0LF; }
    D t = sqrt(0.5LF * (abs(a) + hypot64(a, b)));
    if (a >= 0.0LF) return Z(scale * t, scale * (b / (2.0LF * t)));
    return Z(scale * (abs(b) / (2.0LF * t)), scale * copysign64(t, b));
}
Z csinh(Z z) {
    D a = z.x, b = z.y;
    if (finite(a) && finite(b)) {
        if (b == 0.0LF) return Z(sinh64(a), b);
        return Z(sinh64(a) * cos64(b), cosh64(a) * sin64(b));
    }
    if (a == 0.0LF) return Z(a, nan_());
    if (finite(a)) return Z(nan_(), nan_());
    if (isinf(a)) {
        if (b == 0.0LF) return Z(a, b);
        if (!finite(b)) return Z(a, nan_());
        return Z(a * cos64(b), inf_() * sin64(b));
    }
    return b == 0.0LF ? Z(a, b) : Z(nan_(), nan_());
}
Z ccosh(Z z) {
    D a = z.x, b = z.y;
    if (finite(a) && finite(b)) {
        if (b == 0.0LF) return Z(cosh64(a), a == 0.0LF ? b * copysign64(1.0LF, a) : copysign64(0.0LF, a) * copysign64(1.0LF, b));
        return Z(cosh64(a) * cos64(b), sinh64(a) * sin64(b));
    }
    if (a == 0.0LF) return Z(nan_(), 0.0LF);
    if (finite(a)) return Z(nan_(), nan_());
    if (isinf(a)) {
        if (b == 0.0LF) return Z(inf_(), b * copysign64(1.0LF, a));
        if (!finite(b)) return Z(inf_(), nan_());
        return Z(inf_() * cos64(b), a * sin64(b));
    }
    return b == 0.0LF ? Z(a, b) : Z(nan_(), nan_());
}
Z ctanh(Z z) {
    D a = z.x, b = z.y;
    if (isinf(a)) return Z(copysign64(1.0LF, a), copysign64(0.0LF, b));   // (C99 allows the sign of sin 2b)
    if (isnan(a)) return b == 0.0LF ? Z(a, b) : Z(nan_(), nan_());
    if (!finite(b)) return a == 0.0LF ? Z(a, nan_()) : Z(nan_(), nan_());
    if (abs(a) > 22.0LF) {
        D e = exp64(-2.0LF * abs(a));
        return Z(copysign64(1.0LF, a), 4.0LF * sin64(b) * cos64(b) * e);
    }
    D t = sin64(b) / cos64(b), beta = 1.0LF + t * t, s = sinh64(a), rho = sqrt(1.0LF + s * s);
    D den = 1.0LF + beta * s * s;
    return Z(beta * rho * s / den, t / den);
}
Z casinh(Z z) {                       // odd and conjugate-symmetric: first quadrant, signs restored
    D a = abs(z.x), b = abs(z.y);
    Z w;
    if (isnan(a)) w = b == 0.0LF ? Z(a, b) : (isinf(b) ? Z(inf_(), nan_()) : Z(nan_(), nan_()));
    else if (isnan(b)) w = isinf(a) ? Z(a, b) : Z(nan_(), nan_());
    else if (isinf(a) || isinf(b)) w = Z(inf_(), isinf(a) && isinf(b) ? PI_4 : (isinf(a) ? 0.0LF : PI_2));
    else if (max(a, b) > 1e150LF) { w = clog(Z(a, b)); w.x += LN2; }
    else if (max(a, b) < 1e-9LF) w = Z(a, b);
    else {
        Z s = csqrt(Z((a - b) * (a + b) + 1.0LF, 2.0LF * a * b));
        w = clog(Z(a + s.x, b + s.y));
    }
    if (isnan(w.x)) return Z(w.x, isnan(w.y) ? w.y : copysign64(w.y, z.y));
    return Z(copysign64(w.x, z.x), isnan(w.y) ? w.y : copysign64(w.y, z.y));
}
Z casin(Z z) { Z s = casinh(Z(-z.y, z.x)); return Z(s.y, -s.x); }     // asin z = -i asinh(iz)
Z cacos(Z z) {
    D a = z.x, b = z.y;
    if (isnan(a)) return isinf(b) ? Z(a, -b) : Z(nan_(), nan_());
    if (isnan(b)) return isinf(a) ? Z(b, inf_()) : (a == 0.0LF ? Z(PI_2, b) : Z(nan_(), nan_()));
    if (isinf(a) || isinf(b)) {
        D re = isinf(a) && isinf(b) ? (a < 0.0LF ? 3.0LF * PI_4 : PI_4) : (isinf(b) ? PI_2 : (a < 0.0LF ? PI : 0.0LF));
        return Z(re, b < 0.0LF ? inf_() : -inf_());
    }
    if (a == 0.0LF && b == 0.0LF) return Z(PI_2, -b);
    Z s = casin(z);                   // acos z = pi/2 - asin z
    return Z(PI_2 - s.x, -s.y);
}
Z cacosh(Z z) {                       // acosh z = (|Im acos z|, copysign(Re acos z, Im z)) (C99)
    Z w = cacos(z);
    return Z(abs(w.y), isnan(z.y) ? w.x : copysign64(w.x, z.y));
}
Z catanh(Z z) {
    D a = abs(z.x), b = abs(z.y);
    Z w;
    if (isnan(a)) w = isinf(b) ? Z(0.0LF, PI_2) : Z(nan_(), nan_());
    else if (isnan(b)) w = isinf(a) ? Z(0.0LF, b) : (a == 0.0LF ? Z(a, b) : Z(nan_(), nan_()));
    else if (isinf(a) || isinf(b)) w = Z(0.0LF, PI_2);
    else if (a == 1.0LF && b == 0.0LF) w = Z(inf_(), 0.0LF);
    else {
        D one_m = 1.0LF - a;
        w = Z(0.25LF * log1p64(4.0LF * a / (one_m * one_m + b * b)), 0.5LF * atan2_64(2.0LF * b, one_m * (1.0LF + a) - b * b));
    }
    return Z(isnan(w.x) ? w.x : copysign64(w.x, z.x), isnan(w.y) ? w.y : copysign64(w.y, z.y));
}
Z catan(Z z) { Z t = catanh(Z(-z.y, z.x)); return Z(t.y, -t.x); }    // atan z = -i atanh(iz)
Z csin(Z z) { Z s = csinh(Z(-z.y, z.x)); return Z(s.y, -s.x); }      // sin z = -i sinh(iz)
Z ccos(Z z) { return ccosh(Z(-z.y, z.x)); }                          // cos z = cosh(iz)
Z ctan(Z z) { Z t = ctanh(Z(-z.y, z.x)); return Z(t.y, -t.x); }      // tan z = -i tanh(iz)
Z csign(Z z) {
    if (isnan(z.x) || isnan(z.y)) return Z(nan_(), nan_());
    if (z.x == 0.0LF && z.y == 0.0LF) return Z(0.0LF, 0.0LF);
    if (isinf(z.x) || isinf(z.y)) {
        Z u = Z(isinf(z.x) ? copysign64(1.0LF, z.x) : 0.0LF, isinf(z.y) ? copysign64(1.0LF, z.y) : 0.0LF);
        return u / length(u);
    }
    return cdiv(z, Z(hypot64(z.x, z.y), 0.0LF));
}
Z cpow(Z a, Z b) {                    // exp(b log a); a ** 0 = 1, 0 ** b (Re b > 0) = 0
    if (b.x == 0.0LF && b.y == 0.0LF) return Z(1.0LF, 0.0LF);
    if (a.x == 0.0LF && a.y == 0.0LF && b.y == 0.0LF && b.x > 0.0LF) return Z(0.0LF, 0.0LF);
    if (b.y == 0.0LF && b.x == 1.0LF) return a;
    return cexp(cmul(b, clog(a)));
}

#if NIN == 1
Z unary(Z z) {
    switch (int(OP)) {
    case OP_NEGATIVE: return -z;
    case OP_SQUARE: return Z((z.x - z.y) * (z.x + z.y), 2.0LF * z.x * z.y);
    case OP_RECIPROCAL: return cdiv(Z(1.0LF, 0.0LF), z);
    case OP_SIGN: return csign(z);
    case OP_EXP: return cexp(z);
    case OP_EXPM1: return cexpm1(z);
    case OP_LOG: return clog(z);
    case OP_LOG1P: return clog1p(z);
    case OP_LOG2: { Z l = clog(z); return l * 1.44269504088896340736LF; }
    case OP_LOG10: { Z l = clog(z); return l * 0.43429448190325182765LF; }
    case OP_SQRT: return csqrt(z);
    case OP_SIN: return csin(z);
    case OP_COS: return ccos(z);
    case OP_TAN: return ctan(z);
    case OP_SINH: return csinh(z);
    case OP_COSH: return ccosh(z);
    case OP_TANH: return ctanh(z);
    case OP_ASIN: return casin(z);
    case OP_ACOS: return cacos(z);
    case OP_ATAN: return catan(z);
    case OP_ASINH: return casinh(z);
    case OP_ACOSH: return cacosh(z);
    case OP_ATANH: return catanh(z);
    default: return Z(hypot64(z.x, z.y), 0.0LF);       // OP_ABS (one real word out)
    }
}
#else
Z binary(Z a, Z b) {
    switch (int(OP)) {
    case OP_ADD: return a + b;
    case OP_SUBTRACT: return a - b;
    case OP_MULTIPLY: return cmul(a, b);
    case OP_DIVIDE: return cdiv(a, b);
    default: return cpow(a, b);                         // OP_POW
    }
}
#endif

void main() {
    uint i = linear_group() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    uint ix = p.off_x + 2u * i * p.step_x;
    Z a = Z(D(x[ix]), D(x[ix + 1u]));
#if NIN == 2
    uint iy = p.off_y + 2u * i * p.step_y;
    Z r = binary(a, Z(D(y[iy]), D(y[iy + 1u])));
#else
    Z r = unary(a);
    if (int(OP) == OP_ABS) { o[p.off_out + i] = R(r.x); return; }
#endif
    o[p.off_out + 2u * i] = R(r.x);
    o[p.off_out + 2u * i + 1u] = R(r.y);
}
