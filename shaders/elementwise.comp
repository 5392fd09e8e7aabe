#version 450
// Elementwise unary / binary / affine (and the clamp / powi ops): one generic kernel.
// Inputs are strided + broadcast + offset capable (rank <= 6 after the host collapses dims);
// p.flags says per input whether it is contiguous (linear index), constant (every stride 0), a ROW
// or COL broadcast (one division by the run length p.inner: input_index), and
// whether b is the scalar s1 (x + 2.0 needs no buffer) or a the scalar s0: FLAG_* defines.
// OP_* (op ids) and FLAG_* are defines from kernels/elementwise.py (UNARY or BINARY by NIN, FLAGS).
// The output is contiguous. Each invocation handles EPT elements spaced one workgroup apart, so
// neighbouring invocations touch neighbouring addresses (coalesced on GPUs, vectorised on lavapipe).
#include "common/dtype.glsl"
#include "common/index.glsl"

// WG/EPT tuned on lavapipe (kernels/elementwise.py mirrors them for the grid size): the LINEAR
// path moves 4 * WG * EPT elements per workgroup, the strided path WG * EPT.
#define WG 256u
#define EPT 4u
layout(local_size_x = 256) in;

layout(constant_id = 1) const uint LINEAR = 0;  // 1: every input contiguous or scalar (no index math)
#ifdef FIXED_OP
const uint OP = FIXED_OP;
#else
layout(constant_id = 0) const uint OP = 0;
#endif

#if defined(W64)
// W64 (the *_w64 families, shaderInt64): the LINEAR path moves its 4 elements through 64-bit words
// (f32: two, f16 / bf16: one). Why: lavapipe pays per loaded / stored component whatever its width,
// so a 64-bit word costs what one f32 does. Same bits as the T4 path (same conversions, same RNE).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#if defined(DT_F32)
#define Q u64vec2
#define LOADQ(w) vec4(uintBitsToFloat(unpackUint2x32((w).x)), uintBitsToFloat(unpackUint2x32((w).y)))
#define STOREQ(v) u64vec2(packUint2x32(floatBitsToUint((v).xy)), packUint2x32(floatBitsToUint((v).zw)))
#elif defined(DT_F16)
#define Q uint64_t
#define LOADQ(w) vec4(f16x2_to_f32(unpackUint2x32(w).x), f16x2_to_f32(unpackUint2x32(w).y))
#define STOREQ(v) packUint2x32(uvec2(f32x2_to_f16x2((v).xy), f32x2_to_f16x2((v).zw)))
#elif defined(DT_BF16)
#define Q uint64_t
vec4 bf16x4_load(uvec2 u) {
    return uintBitsToFloat(uvec4(u.x << 16, u.x & 0xFFFF0000u, u.y << 16, u.y & 0xFFFF0000u));
}
uint64_t bf16x4_store(vec4 v) {
    return packUint2x32(uvec2(f32_to_bf16_bits(v.x) | (f32_to_bf16_bits(v.y) << 16),
                              f32_to_bf16_bits(v.z) | (f32_to_bf16_bits(v.w) << 16)));
}
#define LOADQ(w) bf16x4_load(unpackUint2x32(w))
#define STOREQ(v) bf16x4_store(v)
#else
#error "W64 is for f32 / f16 / bf16 (f64 elements already are 64-bit words)"
#endif
#else
#define Q T4
#define LOADQ(w) LOAD4(w)
#define STOREQ(v) STORE4(v)
#endif

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer InA { T a[]; };
// The same buffers seen in 4-element units Q, for the LINEAR path (offsets multiple of 4).
layout(set = 0, binding = 0) writeonly buffer Out4 { Q o4[]; };
layout(set = 0, binding = 1) readonly buffer InA4 { Q a4[]; };
#if NIN == 2
layout(set = 0, binding = 2) readonly buffer InB { T b[]; };
layout(set = 0, binding = 2) readonly buffer InB4 { Q b4[]; };
#endif

// TEX = 1 (LINEAR only): contiguous inputs are read through their rgba32ui texel views a_t / b_t
// (16 bytes per load) instead of a4 / b4, where the device reads texels faster (Device.texel_loads,
// runtime/loadpath.py). The host binds a 16-byte stub view for an input it reads otherwise (constant,
// scalar, or a buffer over maxTexelBufferElements: then TEX = 0). Tails stay on the storage buffers.
#ifdef NO_TEXEL
// NO_TEXEL (the *_ssbo twin families): no texel view bindings at all. launch_strided runs the twin
// when no chunk of a launch reads or writes through texels: a bound texel view costs a CPU driver
// per dispatch even where the kernel never reads it (lavapipe: ~8 us of a 16-element add's ~25 us).
const uint TEX = 0u;
const uint TEXW = 0u;
#define TEXQ(X, k) V4(0)
#define TEXSTORE(k, v) {}
#else
layout(constant_id = 2) const uint TEX = 0;
#if NIN == 2
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer a_t;
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer b_t;
#else
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer a_t;
#endif
// TEXW = 1 (LINEAR, f32 / f64 only: 4 elements are whole texels): the output is written through its
// rgba32ui texel view o_t where the device writes texels faster (Device.texel_stores); else a stub.
layout(constant_id = 3) const uint TEXW = 0;
#if NIN == 2
layout(set = 0, binding = 5, rgba32ui) uniform writeonly uimageBuffer o_t;
#else
layout(set = 0, binding = 3, rgba32ui) uniform writeonly uimageBuffer o_t;
#endif
#if defined(DT_F32)
#define TEXSTORE(k, v) imageStore(o_t, int(k), floatBitsToUint(v))
#elif defined(DT_F64)
#define TEXSTORE(k, v) { imageStore(o_t, int(2u * (k)), uvec4(unpackDouble2x32((v).x), unpackDouble2x32((v).y))); \
    imageStore(o_t, int(2u * (k) + 1u), uvec4(unpackDouble2x32((v).z), unpackDouble2x32((v).w))); }
#else
#define TEXSTORE(k, v) {}
#endif
// TEXQ(view, k): the 4 elements 4k .. 4k + 3 of a texel view, as V4 (the same values LOADQ gives).
#if defined(DT_F32)
#define TEXQ(X, k) uintBitsToFloat(imageLoad(X, int(k)))
#elif defined(DT_F64)
dvec4 f64x4_texels(uvec4 u, uvec4 w) {
    return dvec4(packDouble2x32(u.xy), packDouble2x32(u.zw), packDouble2x32(w.xy), packDouble2x32(w.zw));
}
#define TEXQ(X, k) f64x4_texels(imageLoad(X, int(2u * (k))), imageLoad(X, int(2u * (k) + 1u)))
#elif defined(DT_F16)
vec4 f16x4_texel(uvec4 u, uint h) {     // half h of a texel: 4 halves, widened exactly
    uvec2 w = h != 0u ? u.zw : u.xy;
    return vec4(f16x2_to_f32(w.x), f16x2_to_f32(w.y));
}
#define TEXQ(X, k) f16x4_texel(imageLoad(X, int((k) >> 1)), (k) & 1u)
#else
vec4 bf16x4_texel(uvec4 u, uint h) {
    uvec2 w = h != 0u ? u.zw : u.xy;
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
}
#define TEXQ(X, k) bf16x4_texel(imageLoad(X, int((k) >> 1)), (k) & 1u)
#endif
#endif  // NO_TEXEL

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o;
    uint off_a; uint off_b; uint s0[2]; uint s1[2];
    int shape[6]; int sa[6]; int sb[6];
    uint inner; uint magic; uint shift;   // ROW / COL operands: the run length, i / inner's divider
} p;

#if defined(DT_F64) && NIN == 2
// the exact fmod of the f64 binary family steps through 53-bit mantissas (the family needs shaderInt64)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if defined(DT_F64)
#include "common/math64.glsl"
V exp_v(V x) { return exp64(x); }
V log_v(V x) { return log64(x); }
V sin_v(V x) { return sincos64(x, false); }
V cos_v(V x) { return sincos64(x, true); }
V tanh_v(V x) {                               // -expm1(-2|x|) / (2 + expm1(-2|x|)): no cancellation near 0
    V m = expm1_64(-2.0 * abs(x));
    V t = -m / (2.0 + m);
    return x < 0.0 ? -t : t;
}
#else
#include "common/trigred.glsl"
// sin / cos: the builtins (Vulkan specifies them on [-pi, pi] only; lavapipe's cos(5.6e10) is 1.0) up to
// |x| < 256, Payne-Hanek beyond (trigred.glsl), the builtins then on r in [-pi/4, pi/4].
V sincos32(V x, bool want_cos) {
    if (abs(x) < V(256.0) || isnan(x) || isinf(x)) return want_cos ? cos(x) : sin(x);
    uint u = floatBitsToUint(abs(float(x)));
    int q;
    uvec3 fb;
    ph_bits32((u & 0x7FFFFFu) | 0x800000u, int(u >> 23) - 150, q, fb);
    float f = float(fb.x) * 2.3283064365386963e-10 + float(fb.y) * 5.421010862427522e-20;   // 2^-32, 2^-64
    if (f >= 0.5) { f -= 1.0; q = (q + 1) & 3; }
    float r = f * 1.5707963267948966;
    q = (q + (want_cos ? 1 : 0)) & 3;         // cos(a) = sin(a + pi/2); sin(-a) = -sin(a)
    float v = (q & 1) == 0 ? sin(r) : cos(r);
    v = (q & 2) == 0 ? v : -v;
    return V(!want_cos && x < V(0.0) ? -v : v);
}
V exp_v(V x) { return exp(x); }
// Near 1 the builtin log's error is absolute (GLSL allows 2^-21 in [0.5, 2]: ~300 ulp at 0.9995 on
// lavapipe, and log1p / asinh / atanh / acosh inherited it: ~2000 ulp at 1e-4): there the atanh series
// of s = (x - 1) / (x + 1) (x - 1 exact; |s| < 1/3, 8 terms: truncation < 2e-9 relative).
V log_near1(V x) {
    V s = (x - V(1.0)) / (x + V(1.0)), s2 = s * s;
    V p = V(1.0 / 15.0);
    p = p * s2 + V(1.0 / 13.0); p = p * s2 + V(1.0 / 11.0); p = p * s2 + V(1.0 / 9.0);
    p = p * s2 + V(1.0 / 7.0); p = p * s2 + V(1.0 / 5.0); p = p * s2 + V(1.0 / 3.0);
    return V(2.0) * s + V(2.0) * s * s2 * p;
}
bool near1(V x) { return x > V(0.5) && x < V(2.0); }
V log_v(V x) { return near1(x) ? log_near1(x) : log(x); }
V sin_v(V x) { return sincos32(x, false); }
V cos_v(V x) { return sincos32(x, true); }
V tanh_v(V x) {                               // stable for large |x| (builtin tanh may overflow); below 1/4
    V a = abs(x), t;                          // the odd series (1 - e would cancel: 3600 ulp at 1e-4)
    if (a < V(0.25)) {
        V a2 = a * a;
        t = a + a * a2 * (V(-1.0 / 3.0) + a2 * (V(2.0 / 15.0) + a2 * (V(-17.0 / 315.0) + a2 * (V(62.0 / 2835.0)
            + a2 * V(-1382.0 / 155925.0)))));
    } else {
        V e = exp(-2.0 * a);
        t = (1.0 - e) / (1.0 + e);
    }
    return x < 0.0 ? -t : t;
}
#endif

#if defined(DT_F64)
V copysign_v(V x, V y) {
    uvec2 a = unpackDouble2x32(x), b = unpackDouble2x32(y);
    return packDouble2x32(uvec2(a.x, (a.y & 0x7FFFFFFFu) | (b.y & 0x80000000u)));
}
#else
// Half types compute in f32: widening and rounding back keep the sign bit, so this is exact too.
V copysign_v(V x, V y) {
    return uintBitsToFloat((floatBitsToUint(x) & 0x7FFFFFFFu) | (floatBitsToUint(y) & 0x80000000u));
}
#endif

// The array API's remaining real functions. Half types compute in f32 as every op here.
V log1p_v(V x) {                    // series near 0, else Kahan: log(u) * x / (u - 1), u = 1 + x
    if (abs(x) < V(1e-4)) return x * (V(1.0) - x * (V(0.5) - x * (V(1.0) / V(3.0) - x * V(0.25))));
    V u = V(1.0) + x;
    if (u == V(1.0) || isinf(x)) return u == V(1.0) ? x : log_v(u);
    return log_v(u) * (x / (u - V(1.0)));
}
#if defined(DT_F64)
V expm1_v(V x) { return isinf(x) ? (x > 0.0 ? x : V(-1.0)) : expm1_64(x); }
V exp2_v(V x) {                     // 2^k * e^(f ln 2), k = round(x): powers of two exact at integers
    if (isnan(x)) return x;
    V c = clamp(x, -1100.0LF, 1100.0LF), k = floor(c + 0.5LF);
    return ldexp2(exp_poly((c - k) * 0.69314718055994531LF), int(k));
}
V log2_v(V x) { return log64(x) * 1.4426950408889634LF; }
V log10_v(V x) { return log64(x) * 0.43429448190325182LF; }
V tan_v(V x) { return sincos64(x, false) / sincos64(x, true); }
V asinh_v(V x) {
    V a = abs(x);
    V r = a > 1e150LF ? log64(a) + 0.69314718055994531LF : log1p_v(a + a * a / (1.0LF + sqrt(1.0LF + a * a)));
    return x < 0.0LF ? -r : r;
}
V acosh_v(V x) {                    // NaN below 1 (the formula's terms would cancel to 0 far below -1)
    if (x < 1.0LF) return V(0.0) / V(0.0);
    return x > 1e150LF ? log64(x) + 0.69314718055994531LF : log1p_v((x - 1.0LF) + sqrt((x - 1.0LF) * (x + 1.0LF))); }
#else
V expm1_v(V x) {                    // Taylor to x^10 for |x| < 0.5 (rel. error < 3e-10), else e^x - 1
    if (!(abs(x) < 0.5)) return exp(x) - V(1.0);
    V p = V(1.0 / 3628800.0);
    for (int i = 9; i >= 2; --i) p = p * x + V(1.0) / V(i == 9 ? 362880.0 : i == 8 ? 40320.0 : i == 7 ? 5040.0
        : i == 6 ? 720.0 : i == 5 ? 120.0 : i == 4 ? 24.0 : i == 3 ? 6.0 : 2.0);
    return p * x * x + x;
}
V exp2_v(V x) {                     // as for f64; the builtin's polynomial is off by ~1e-6 on lavapipe
    if (isnan(x)) return x;
    float c = clamp(float(x), -160.0, 160.0), k = floor(c + 0.5), r = (c - k) * 0.69314718;
    float p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0
        + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    int h = int(k) / 2;                 // in two steps: 2^k alone may overflow where the result does not
    return V(ldexp(ldexp(p, h), int(k) - h));
}
V log2_v(V x) { return near1(x) ? log_near1(x) * V(1.4426950408889634) : log2(x); }
V log10_v(V x) { return near1(x) ? log_near1(x) * V(0.43429448190325182) : log2(x) * V(0.30102999566398120); }
V tan_v(V x) {                      // as sin / cos: the builtin only where its argument is not reduced badly
    return abs(x) < V(256.0) || isnan(x) || isinf(x) ? tan(x) : sincos32(x, false) / sincos32(x, true);
}
V asinh_v(V x) {
    V a = abs(x);
    V r = a > V(1e18) ? log(a) + V(0.69314718055994531) : log1p_v(a + a * a / (V(1.0) + sqrt(V(1.0) + a * a)));
    return x < 0.0 ? -r : r;
}
V acosh_v(V x) {                    // NaN below 1, as for f64
    if (x < V(1.0)) return V(0.0) / V(0.0);
    return x > V(1e18) ? log(x) + V(0.69314718055994531) : log1p_v((x - V(1.0)) + sqrt((x - V(1.0)) * (x + V(1.0)))); }
#endif
// atan by reduction to |t| <= tan(pi/8) and the odd series (NTERMS terms: f32 / f64 accuracy);
// asin, acos and atan2 build on it (lavapipe's float builtins are off by ~1e-4).
#if defined(DT_F64)
#define NTERMS 24
#else
#define NTERMS 10
#endif
const V PI_2 = V(1.5707963267948966), PI_4 = V(0.78539816339744831), PI_V = V(3.1415926535897932);
V atan_v(V x) {
    if (isnan(x)) return x;
    V a = abs(x), base = V(0.0);
    if (a > V(1.0)) { a = V(1.0) / a; base = PI_2; }       // atan(a) = pi/2 - atan(1/a)
    V off = V(0.0);
    if (a > V(0.41421356237309505)) { a = (a - V(1.0)) / (a + V(1.0)); off = PI_4; }
    V a2 = a * a, p = V(0.0);
    for (int k = NTERMS; k >= 0; --k) p = p * (-a2) + V(1.0) / V(2 * k + 1);
    V r = off + a * p;
    r = base != V(0.0) ? base - r : r;
    return x < 0.0 ? -r : r;
}
V atan2_v(V y, V x) {              // C99 atan2 special cases for zeros and infinities
    if (isnan(x) || isnan(y)) return x + y;
    bool ny = y < 0.0 || (y == 0.0 && copysign_v(V(1.0), y) < 0.0);
    bool nx = x < 0.0 || (x == 0.0 && copysign_v(V(1.0), x) < 0.0);
    V r;
    if (isinf(x) && isinf(y)) r = nx ? V(3.0) * PI_4 : PI_4;
    else if (isinf(x)) r = nx ? PI_V : V(0.0);
    else if (isinf(y) || x == 0.0) r = y == 0.0 ? (nx ? PI_V : V(0.0)) : PI_2;
    else if (y == 0.0) r = nx ? PI_V : V(0.0);
    else {
        V t = atan_v(abs(y) / abs(x));
        r = nx ? PI_V - t : t;
    }
    return ny ? -r : r;
}
V asin_v(V x) { return abs(x) > V(1.0) ? V(0.0) / V(0.0) : atan2_v(x, sqrt((V(1.0) - x) * (V(1.0) + x))); }
V acos_v(V x) {
    if (abs(x) > V(1.0)) return V(0.0) / V(0.0);
    return V(2.0) * atan2_v(sqrt(V(1.0) - x), sqrt(V(1.0) + x));
}

V sinh_v(V x) {                     // (e - 1/e) / 2 through expm1 (no cancellation near 0)
    V a = abs(x);
    V e = expm1_v(a);
    V r = isinf(e) ? exp_v(a - V(0.69314718055994531)) : V(0.5) * (e + e / (e + V(1.0)));
    return x < 0.0 ? -r : r;
}
V cosh_v(V x) { V e = exp_v(abs(x)); return V(0.5) * e + V(0.5) / e; }
V atanh_v(V x) {                    // log1p(2x / (1 - x)) / 2
    V a = abs(x);
    V r = V(0.5) * log1p_v(V(2.0) * a / (V(1.0) - a));
    return x < 0.0 ? -r : r;
}
V hypot_v(V x, V y) {               // scaled: no overflow or underflow in the squares; inf wins over NaN
    V a = abs(x), b = abs(y);
    if (isinf(a) || isinf(b)) return V(1.0) / V(0.0);
    if (isnan(a) || isnan(b)) return a + b;
    V m = max(a, b), n = min(a, b);
    if (m == V(0.0)) return V(0.0);
    V r = n / m;
    return m * sqrt(V(1.0) + r * r);
}
V logaddexp_v(V x, V y) {           // max + log1p(exp(-|x - y|)); equal infinities give themselves
    if (isnan(x) || isnan(y)) return x + y;
    if (x == y && isinf(x)) return x;
    V m = max(x, y);
    return m + log1p_v(exp_v(-abs(x - y)));
}

#if defined(DT_F64)
V nextafter_v(V x, V y) {           // the neighbouring double of x toward y (64-bit integer step)
    if (isnan(x) || isnan(y)) return x + y;
    if (x == y) return y;
    if (x == 0.0LF) return packDouble2x32(uvec2(1u, y < 0.0LF ? 0x80000000u : 0u));
    uvec2 b = unpackDouble2x32(x);
    bool up = (x < y) == (x > 0.0LF);           // magnitude grows
    if (up) { b.x += 1u; if (b.x == 0u) b.y += 1u; }
    else { if (b.x == 0u) b.y -= 1u; b.x -= 1u; }
    return packDouble2x32(b);
}
#else
V nextafter_v(V x, V y) {           // f32 only (the ops refuse half types: their neighbours differ)
    if (isnan(x) || isnan(y)) return x + y;
    if (x == y) return y;
    if (x == 0.0) return uintBitsToFloat(y < 0.0 ? 0x80000001u : 1u);
    uint b = floatBitsToUint(x);
    return uintBitsToFloat((x < y) == (x > 0.0) ? b + 1u : b - 1u);
}
#endif

// Round half to even, and trunc. Doubles by hand: lavapipe's double roundEven rounds -1.5 to -1,
// its double trunc returns x unchanged from |x| ~ 2^30 on (floor and ceil are right).
#if defined(DT_F64)
V trunc_v(V x) { return x < 0.0LF ? ceil(x) : floor(x); }
V round_even_v(V x) {
    if (!(abs(x) < 4503599627370496.0LF)) return x;     // |x| >= 2^52, inf, NaN: already integral
    V r = floor(x + 0.5LF);                              // exact below 2^52
    if (r - x == 0.5LF && r != 2.0LF * floor(r * 0.5LF)) r -= 1.0LF;   // a tie went to the odd side
    return r;
}
#else
V trunc_v(V x) { return trunc(x); }
V round_even_v(V x) { return roundEven(x); }
#endif

#if NIN == 2
// -- floor_divide / remainder: numpy's divmod (npy_divmod, also ml_dtypes') on an exact fmod ----------
// fmod_abs(a, b) = a mod b for finite a >= b > 0, exact: the integer mantissas are reduced a few
// exponent bits per step (r = (r << s) mod m_b), and the remainder's bits are built directly (no
// rounding, subnormals included). Half types compute in f32, as numpy's and ml_dtypes' loops do.
#if defined(DT_F64)
V fmod_abs(V a, V b) {
    uvec2 ua = unpackDouble2x32(a), ub = unpackDouble2x32(b);
    int ea = int(ua.y >> 20), eb = int(ub.y >> 20);
    uint64_t ma = packUint2x32(uvec2(ua.x, ua.y & 0xFFFFFu)), mb = packUint2x32(uvec2(ub.x, ub.y & 0xFFFFFu));
    if (ea != 0) ma |= 1UL << 52; else ea = 1;          // value = m * 2^(e - 1075)
    if (eb != 0) mb |= 1UL << 52; else eb = 1;
    uint64_t r = ma % mb;
    for (int d = ea - eb; d > 0; d -= 11) r = (r << min(d, 11)) % mb;   // r < 2^53: 11 bits fit
    if (r == 0UL) return 0.0LF;
    uint hi = uint(r >> 32);
    int msb = hi != 0u ? 32 + findMSB(hi) : findMSB(uint(r));
    int s = min(52 - msb, eb - 1);                       // normalise, or stop at the subnormal exponent
    r <<= s;
    return packDouble2x32(unpackUint2x32(r + (uint64_t(eb - s - 1) << 52)));  // the leading bit adds 1
}
#else
V fmod_abs(V a, V b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7FFFFFu, mb = ub & 0x7FFFFFu;
    if (ea != 0) ma |= 0x800000u; else ea = 1;           // value = m * 2^(e - 150)
    if (eb != 0) mb |= 0x800000u; else eb = 1;
    uint r = ma % mb;
    for (int d = ea - eb; d > 0; d -= 8) r = (r << min(d, 8)) % mb;     // r < 2^24: 8 bits fit
    if (r == 0u) return V(0.0);
    int s = min(23 - findMSB(r), eb - 1);
    return uintBitsToFloat((r << s) + (uint(eb - s - 1) << 23));
}
#endif
// C's fmod for finite x and y != 0 (y may be infinite): exact, x's sign.
V fmod_v(V x, V y) {
    V ax = abs(x), ay = abs(y);
    return copysign_v(isinf(y) || ax < ay ? ax : fmod_abs(ax, ay), x);
}
// numpy's divmod for finite x and finite or infinite y != 0: the remainder (divisor's sign), and
// the floored quotient in q (snapped to the nearest integer, as numpy does).
V divmod_v(V x, V y, out V q) {
    V m = fmod_v(x, y);
    V div = (x - m) / y;
    if (m != V(0.0)) {
        if ((y < V(0.0)) != (m < V(0.0))) { m += y; div -= V(1.0); }
    } else {
        m = copysign_v(V(0.0), y);
    }
    if (div != V(0.0)) {
        q = floor(div);
        if (div - q > V(0.5)) q += V(1.0);
    } else {
        q = copysign_v(V(0.0), x / y);
    }
    return m;
}
// x // y: numpy's floor_divide, except where the array API's special cases differ from numpy's
// (an infinite operand: inf // finite is +-inf, finite // inf is +-0 -- numpy gives NaN and -1):
// there, and for y == 0 and NaNs, the quotient x / y is the answer.
V floor_divide_v(V x, V y) {
    if (y == V(0.0) || isinf(x) || isinf(y) || isnan(x) || isnan(y)) return x / y;
    V q;
    divmod_v(x, y, q);
    return q;
}
// x % y: numpy's remainder (the divisor's sign); NaN for y == 0 or an infinite x.
V remainder_v(V x, V y) {
    if (isnan(x) || isnan(y)) return x + y;
    if (y == V(0.0) || isinf(x)) return V(0.0) / V(0.0);
    V q;
    return divmod_v(x, y, q);
}

// Dekker's exact product error a * b - p (Veltkamp splitting, no fma: lavapipe lowers fma to a
// multiply and an add). Halves of |a| > ~1e34 (f32) would overflow: no error term there (0).
#if defined(DT_F64)
const V SPLITTER = V(134217729.0), SPLIT_MAX = V(1e290);
#else
const V SPLITTER = V(4097.0), SPLIT_MAX = V(1e34);
#endif
void split_v(V a, out V hi, out V lo) {
    precise V c = SPLITTER * a;
    precise V h = c - (c - a);
    hi = h;
    lo = a - h;
}
V prod_err(V a, V b, V p) {
    if (!(abs(a) < SPLIT_MAX && abs(b) < SPLIT_MAX)) return V(0.0);
    V ah, al, bh, bl;
    split_v(a, ah, al);
    split_v(b, bh, bl);
    precise V e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return e;
}
// (ah, al) *= (bh, bl) in double-word arithmetic: ~2x the type's precision.
void dw_mul(inout V ah, inout V al, V bh, V bl) {
    precise V p = ah * bh;
    if (isinf(p) || p == V(0.0)) { ah = p; al = V(0.0); return; }
    precise V e = prod_err(ah, bh, p) + (ah * bl + al * bh);
    precise V h = p + e;
    al = e - (h - p);
    ah = h;
}
// a^n for finite a > 0 and an integer n, |n| < 2^31: repeated squaring in double-word arithmetic (from
// 1/a, with its residual, for n < 0), then one rounding: exact powers come out exact.
V pow_int(V a, V n) {
    V bh = a, bl = V(0.0);
    if (n < V(0.0)) {                                    // 1/a and its residual (1 - bh a exact: Sterbenz)
        bh = V(1.0) / a;
        precise V p = bh * a;
        precise V res = (V(1.0) - p) - prod_err(bh, a, p);
        bl = res / a;
    }
    V rh = V(1.0), rl = V(0.0);
    for (uint k = uint(abs(n)); k != 0u; k >>= 1) {
        if ((k & 1u) != 0u) dw_mul(rh, rl, bh, bl);
        if (k > 1u) dw_mul(bh, bl, bh, bl);
    }
    return rh + rl;
}

// |x|^y for finite a > 0 and finite y: exp(y log a), carrying the rounding error of the product y log a
// into the result. Accuracy is the logarithm's: a few ulp while |y log a| is small, growing
// with it (f64 ~1e-13 relative near overflow).
#if defined(DT_F64)
V pow_abs(V a, V y) {
    V l = log64(a);
    precise V t = y * l;
    V e = prod_err(y, l, t);
    V r = exp64(t);
    return isinf(r) || r == 0.0LF ? r : r + r * e;
}
#else
V pow_abs(V a, V y) {
    V l = log2(a);
    precise V t = y * l;
    V e = prod_err(y, l, t);
    V r = exp2_v(t);
    return isinf(r) || r == V(0.0) ? r : r + r * (e * V(0.69314718055994531));
}
#endif

// torch's CPU rounding (the PyTorch device's aten.floor_divide / aten.remainder): numpy's divmod except
// that a zero remainder keeps fmod's sign (x's) and an infinite x gives NaN, finite // inf floors
// to -1 for opposite signs (numpy's values there).
V torch_floor_divide_v(V x, V y) {
    if (y == V(0.0) || isnan(x) || isnan(y)) return x / y;
    if (isinf(x)) return V(0.0) / V(0.0);
    V q;
    divmod_v(x, y, q);
    return q;
}
V torch_remainder_v(V x, V y) {
    if (isnan(x) || isnan(y)) return x + y;
    if (y == V(0.0) || isinf(x)) return V(0.0) / V(0.0);
    V m = fmod_v(x, y);
    return m != V(0.0) && (y < V(0.0)) != (m < V(0.0)) ? m + y : m;
}

// -- pow: C99's / the array API's special cases, then |x|^y (pow_int for integer y, else exp(y log|x|)),
// with x's sign for odd y.
V pow_v(V x, V y) {
    if (y == V(0.0) || x == V(1.0)) return V(1.0);      // NaN ** 0 and 1 ** NaN included
    if (isnan(x) || isnan(y)) return x + y;
    V ax = abs(x);
    if (isinf(y)) {
        if (ax == V(1.0)) return V(1.0);
        return (ax < V(1.0)) == (y > V(0.0)) ? V(0.0) : y * y;    // +0 or +inf
    }
    bool yint = floor(y) == y;
    bool yodd = yint && floor(y * V(0.5)) * V(2.0) != y;
    bool xneg = x < V(0.0) || (x == V(0.0) && copysign_v(V(1.0), x) < V(0.0));
    V r;
    if (ax == V(0.0) || isinf(ax)) {
        r = (ax == V(0.0)) == (y > V(0.0)) ? V(0.0) : V(1.0) / V(0.0);
    } else {
        if (xneg && !yint) return V(0.0) / V(0.0);
        r = yint && ax != V(1.0) && abs(y) < V(2147483648.0) ? pow_int(ax, y) : pow_abs(ax, y);
    }
    return xneg && yodd ? -r : r;
}
#endif

V sigmoid(V x) { return 1.0 / (1.0 + exp_v(-x)); }

// FUSED (the ew_fused family, NIN 2): out = POST(OP(PRE(a), b)), PRE / POST unary ids (UNARY's, or
// FUSED_NONE: identity), OP a binary id; each intermediate is rounded to the element type, as the
// unfused ops' stored results are, so the fused kernel gives their bits with one pass over memory.
#ifdef FUSED
layout(constant_id = 4) const uint PRE = FUSED_NONE;
layout(constant_id = 5) const uint POST = FUSED_NONE;
#define UOP uop
#else
#define UOP OP
#endif

// Odd functions keep a zero's sign (f(-0) = -0, the standard's special cases; builtins may not).
#if NIN == 1 || defined(FUSED)
bool odd_zero_op(uint uop) {
    return UOP == OP_SIN || UOP == OP_TANH || UOP == OP_LOG1P || UOP == OP_EXPM1 || UOP == OP_TAN || UOP == OP_SINH
        || UOP == OP_ASINH || UOP == OP_ATANH || UOP == OP_ASIN || UOP == OP_ATAN;
}

V apply_unary_op(uint uop, V x) {
    if (odd_zero_op(uop) && x == V(0.0)) return x;
    switch (UOP) {
    case OP_NEGATIVE: return -x;
    case OP_SQUARE: return x * x;
    case OP_SQRT: return sqrt(x);
    case OP_EXP: return exp_v(x);
    case OP_LOG: return log_v(x);
    case OP_SIN: return sin_v(x);
    case OP_COS: return cos_v(x);
    case OP_TANH: return tanh_v(x);
    case OP_SIGMOID: return sigmoid(x);
    case OP_SILU: return x * sigmoid(x);
    case OP_GELU: return 0.5 * x * (1.0 + tanh_v(V(0.7978845608028654) * (x + V(0.044715) * x * x * x)));
    case OP_RELU: return isnan(x) || x >= 0.0 ? x : V(0.0);          // NaN stays NaN (NaN stays NaN)
    case OP_HEAVISIDE: return isnan(x) ? x : (x > 0.0 ? V(1.0) : (x < 0.0 ? V(0.0) : scalar_arg(p.s0)));
    case OP_ABS: return abs(x);
    // +0 for both zeros (the standard, numpy); abs(x) there: lavapipe compiles a literal 0.0 select
    // into a sign op that gives -0 for +0
    case OP_SIGN: return isnan(x) || x == 0.0 ? abs(x) : (x > 0.0 ? V(1.0) : V(-1.0));
    case OP_RECIPROCAL: return 1.0 / x;
    // torch's rsqrt: 1 / sqrt(x), two roundings in the compute type as torch CPU's; precise keeps a
    // compiler from turning it into an approximate reciprocal square root
    case OP_RSQRT: { precise V s = sqrt(x); precise V r = 1.0 / s; return r; }
    case OP_AFFINE: { precise V m = x * scalar_arg(p.s0); precise V r = m + scalar_arg(p.s1); return r; }
    case OP_CLAMP: {  // clip as numpy's: a NaN bound wins (lo first), NaN and -0 in x kept, lo > hi gives hi
        V lo = scalar_arg(p.s0), hi = scalar_arg(p.s1);
        if (isnan(lo)) return lo;
        if (isnan(hi)) return hi;
        // NaN explicitly: a compare-and-select may be compiled to the device's min/max, which drops
        // NaN (seen on NVIDIA: clip(NaN, -1, 2) gave -1)
        if (isnan(x)) return x;
        V m = x < lo ? lo : x;
        return m > hi ? hi : m;
    }
    // The rounding ops: exact in every float type. A result keeps x's sign (-0.5 -> -0): lavapipe's
    // double trunc / roundEven return +0 there.
    case OP_FLOOR: return copysign_v(floor(x), x);
    case OP_CEIL: return copysign_v(ceil(x), x);
    case OP_TRUNC: return copysign_v(trunc_v(x), x);
    case OP_ROUND: return copysign_v(round_even_v(x), x);  // numpy.round / the array API's round
    case OP_LOG1P: return log1p_v(x);
    case OP_EXPM1: return expm1_v(x);
    case OP_EXP2: return exp2_v(x);
    case OP_LOG2: return log2_v(x);
    case OP_LOG10: return log10_v(x);
    case OP_TAN: return tan_v(x);
    case OP_SINH: return sinh_v(x);
    case OP_COSH: return cosh_v(x);
    case OP_ASINH: return asinh_v(x);
    case OP_ACOSH: return acosh_v(x);
    case OP_ATANH: return atanh_v(x);
    case OP_ASIN: return asin_v(x);
    case OP_ACOS: return acos_v(x);
    case OP_ATAN: return atan_v(x);
    case OP_POWI: {
        int e = int(p.s0[0]);
        if (e == 0) return V(1.0);
        V base = e < 0 ? V(1.0) / x : x;
        uint k = uint(abs(e));
        V r = V(1.0);
        while (k != 0u) { if ((k & 1u) != 0u) r *= base; base *= base; k >>= 1; }
        return r;
    }
    }
    return x;   // not reached: the host launches only UNARY's ids (the fused kernels: FUSED_NONE)
}
V apply_unary(V x) { return apply_unary_op(OP, x); }
#endif
#if NIN == 2

#ifdef FUSED
#define apply_binary binary_op
#endif
V apply_binary(V x, V y) {
    switch (OP) {
    case OP_ADD: return x + y;
    case OP_SUBTRACT: return x - y;
    case OP_MULTIPLY: return x * y;
    case OP_DIVIDE: return x / y;
    case OP_MAXIMUM: return (isnan(x) || x > y) ? x : y;   // NaN propagates (numpy)
    case OP_MINIMUM: return (isnan(x) || x < y) ? x : y;
    case OP_COPYSIGN: return copysign_v(x, y);             // |x| with y's sign bit, NaN included (exact)
    case OP_HYPOT: return hypot_v(x, y);
    case OP_LOGADDEXP: return logaddexp_v(x, y);
    case OP_ATAN2: return atan2_v(x, y);                   // atan2(x1, x2): the angle of (x2, x1)
    case OP_NEXTAFTER: return nextafter_v(x, y);           // exact in f32 and f64
    case OP_FLOOR_DIVIDE: return floor_divide_v(x, y);     // numpy's bits (the standard's inf cases)
    case OP_REMAINDER: return remainder_v(x, y);           // numpy's bits
    case OP_POW: return pow_v(x, y);
    case OP_TORCH_FLOOR_DIVIDE: return torch_floor_divide_v(x, y);
    case OP_TORCH_REMAINDER: return torch_remainder_v(x, y);
    }
    return x;   // not reached: the host launches only BINARY's ids
}
#ifdef FUSED
#undef apply_binary
V rounded(V v) { return LOAD(STORE(v)); }   // v as the element type stores it
V apply_binary(V x, V y) {
    V u = PRE == FUSED_NONE ? x : rounded(apply_unary_op(PRE, x));
    V r = binary_op(u, y);
    return POST == FUSED_NONE ? r : apply_unary_op(POST, rounded(r));
}
#endif
#endif

// STRIDED (the indexed path and LINEAR's BCAST one; the host sets it per launch): 0 when no input is strided (the
// strided index is not compiled in: lavapipe runs every side of a branch), 1 strided with integer
// division, 2 strided with p.n <= 2**20: i / n from a float estimate corrected by one either way
// (exact: the estimate is within 0.4 of i / n for i <= 2**20 at the spec's 2.5 ulp division), since
// lavapipe has no vector integer divide (8 scalar divisions per 8 lanes, per dim and input).
layout(constant_id = 7) const uint STRIDED = 1;
// The strides are read from the push constants where they are used (which 0: p.sa, 1: p.sb; a constant
// at every call): passed as an array argument they became a per-lane local copy, indexed per dim
// through scratch memory on lavapipe.
uint strided(uint i, uint off, uint which) {
    int idx = int(off);
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        uint q;
        if (STRIDED == 2u) {
            q = uint(float(i) * (1.0 / float(n)));
            int r = int(i) - int(q * n);
            q = r < 0 ? q - 1u : (r >= int(n) ? q + 1u : q);
        } else {
            q = i / n;
        }
        idx += int(i - q * n) * (which == 0u ? p.sa[d] : p.sb[d]);
        i = q;
    }
    return uint(idx);
}

// i / d as a multiply-high and a shift (magic, shift: the host's divider, exact for every i < n), since
// an integer division per element costs more than the op on CPU drivers (no vector divide).
uint div_magic(uint i, uint magic, uint shift) {
    uint hi, lo;
    umulExtended(i, magic, hi, lo);
    return shift >= 32u ? hi >> (shift - 32u) : (hi << (32u - shift)) | (lo >> shift);
}
uint div_inner(uint i) { return div_magic(i, p.magic, p.shift); }

// MID = 1: some input is a MID broadcast (FLAG_A_MID / FLAG_B_MID): contiguous runs of R elements, each
// repeated H times, one after another (cos [B, 1, S, D] against q [B, H, S, D]: R = S * D; g [B, 1, D]
// against h [B, S, D]: R = D), index (i / (H R)) R + i % R. Such an input has no strides to read, so its
// own stride words (p.sa / p.sb, which: 0 / 1) carry R, HR and their dividers: [R, magic, shift, H R,
// magic, shift] (ops/_core._mid_words). A specialization, so that launches without one compile as before;
// 2: some MID input is two-level (mid_pre below).
layout(constant_id = 8) const uint MID = 0;
uint mid_word(uint which, int k) { return uint(which == 0u ? p.sa[k] : p.sb[k]); }
uint mid_index(uint i, uint which) {
    uint r = mid_word(which, 0);
    uint outer = div_magic(i, mid_word(which, 4), mid_word(which, 5));
    return outer * r + (i - div_magic(i, mid_word(which, 1), mid_word(which, 2)) * r);
}
// A MID input that also has its ROW or COL flag (ops/_core._mid2_kind: stride-0 dims in two places) repeats
// its MID pattern over index i % p.inner (x [1, H, 1, D] against [B, H, S, D]) or reads it at i / p.inner
// ([B, 1, S, 1] against [B, H, S, D]): mid_index(mid_pre(i)). The run word p.inner is the chunk's one
// ROW / COL run, shared with any ROW / COL input beside it. Compiled in only where some input is one
// (MID = 2): lavapipe runs both sides of a branch on the flags, and plain MID reads would pay the division.
uint mid_pre(uint i, uint flags) {
    if (MID < 2u) return i;
    if ((flags & FLAG_A_ROW) != 0u) return i - div_inner(i) * p.inner;
    return (flags & FLAG_A_COL) != 0u ? div_inner(i) : i;
}

// flags: an input's bits at a's positions (b's shifted down by FLAG_B_SHIFT). A ROW operand repeats
// one contiguous run of p.inner elements (w [H] against x [T, H]: index i % inner), a COL operand
// holds one element per run (v [T, 1] against x [T, H]: index i / inner).
// (LINEAR's tail never sees ROW / COL / MID inputs: their runs are multiples of 4 there, so n is.)
uint input_index(uint i, uint flags, uint off, uint which) {
    if ((flags & FLAG_A_CONTIGUOUS) != 0u) return off + i;
    if ((flags & FLAG_A_CONSTANT) != 0u || LINEAR != 0u) return off;
    if (MID != 0u && (flags & FLAG_A_MID) != 0u) return off + mid_index(mid_pre(i, flags), which);
    if ((flags & FLAG_A_ROW) != 0u) return off + (i - div_inner(i) * p.inner);
    if ((flags & FLAG_A_COL) != 0u) return off + div_inner(i);
    return STRIDED == 0u ? off : strided(i, off, which);
}

// BCAST = 1 (LINEAR only): some input is ROW, COL, MID or a strided unit. A specialization, so that the plain LINEAR path
// (BCAST = 0) compiles to exactly the loads it had (a uniform branch on p.flags cost lavapipe ~35% of
// a contiguous f32 multiply).
layout(constant_id = 6) const uint BCAST = 0;
// LINEAR: the 4-element unit of a contiguous, ROW or MID input holding elements 4q .. 4q + 3 (a ROW or
// MID run's length and offset are multiples of 4 there, so the 4 lie in one run), or of a strided unit input
// (STRIDED != 0 and none of its flags: its innermost stride is 1, and that dim's extent, its offset
// and its other strides are multiples of 4 -- a transposed view such as the rotary q -- so the 4 are
// one aligned unit: one strided index per 4 elements).
uint unit_index(uint q, uint flags, uint off, uint which) {
    if (MID != 0u && (flags & FLAG_A_MID) != 0u) return off / 4u + mid_index(mid_pre(4u * q, flags), which) / 4u;
    if (STRIDED != 0u && (flags & (FLAG_A_CONTIGUOUS | FLAG_A_ROW)) == 0u) return strided(4u * q, off, which) / 4u;
    uint k = (flags & FLAG_A_ROW) != 0u ? q - div_inner(4u * q) * (p.inner / 4u) : q;
    return off / 4u + k;
}
#define LOAD_UNIT(X4, XT, k) (TEX != 0u ? TEXQ(XT, k) : LOADQ(X4[k]))
// LINEAR: the element a COL input (a COL + MID one too) holds for elements 4q .. 4q + 3.
uint col_index(uint q, uint flags, uint which) {
    uint j = div_inner(4u * q);
    return MID >= 2u && (flags & FLAG_A_MID) != 0u ? mid_index(j, which) : j;   // COL + MID: two-level only
}
// LINEAR: elements 4q .. 4q + 3 of input X (flags at a's positions, offset off; X4 / XT its 4-element
// and texel views; which: 0 for a, 1 for b): contiguous, ROW, MID (ROW + MID) and strided unit inputs one
// 4-element load, COL (COL + MID; runs of a multiple of 4 elements) and constant ones one element.
#define LOAD_IN4(X, X4, XT, flags, off, q, which) \
    (BCAST == 0u \
        ? (((flags) & FLAG_A_CONTIGUOUS) != 0u ? LOAD_UNIT(X4, XT, (off) / 4u + (q)) : V4(LOAD(X[off]))) \
        : ((((flags) & (FLAG_A_CONTIGUOUS | FLAG_A_ROW)) != 0u || MID != 0u && ((flags) & FLAG_A_MID) != 0u \
            || STRIDED != 0u && ((flags) & FLAG_A_CONSTANT) == 0u) && ((flags) & FLAG_A_COL) == 0u \
            ? LOAD_UNIT(X4, XT, unit_index(q, flags, off, which)) \
            : V4(LOAD(X[(off) + (((flags) & FLAG_A_COL) != 0u ? col_index(q, flags, which) : 0u)]))))

// LINEAR: elements 4q .. 4q + 3.
void linear_unit(uint q) {
#if NIN == 2
    V4 x = (p.flags & FLAG_A_SCALAR) != 0u ? V4(scalar_arg(p.s0)) : LOAD_IN4(a, a4, a_t, p.flags, p.off_a, q, 0u);
    V4 y = (p.flags & FLAG_B_SCALAR) != 0u ? V4(scalar_arg(p.s1))
         : LOAD_IN4(b, b4, b_t, p.flags >> FLAG_B_SHIFT, p.off_b, q, 1u);
    V4 r = V4(apply_binary(x.x, y.x), apply_binary(x.y, y.y), apply_binary(x.z, y.z), apply_binary(x.w, y.w));
#else
    V4 x = LOAD_IN4(a, a4, a_t, p.flags, p.off_a, q, 0u);
    V4 r = V4(apply_unary(x.x), apply_unary(x.y), apply_unary(x.z), apply_unary(x.w));
#endif
    if (TEXW != 0u) { TEXSTORE(p.off_o / 4u + q, r); }
    else o4[p.off_o / 4u + q] = STOREQ(r);
}

// LINEAR path: every input contiguous (offset % 4 == 0), constant, ROW or MID (run and offset multiples
// of 4), COL (run a multiple of 4) or a strided unit; 4 elements per access. No per-unit bounds test: an
// invocation past the last unit redoes the last one (q clamped), storing the bytes its owner stores
// (the output is a fresh array, never an input: every caller's). lavapipe runs a divergent `if` as
// masked code, and the test cost ~10% of a contiguous f32 add, ~15% of a unary op (interleaved,
// LP_NUM_THREADS=1); a workgroup-uniform split into full and partial groups ran both sides (+60%).
void main_linear() {
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    uint nq = p.n / 4u;
    if (nq != 0u) {
        for (uint j = 0u; j < EPT; ++j) linear_unit(min(base + j * WG, nq - 1u));
    }
    if (linear_group() == 0u && gl_LocalInvocationID.x == 0u) {
        for (uint i = nq * 4u; i < p.n; ++i) {   // the < 4 tail elements (kept out of the hot loop)
#if NIN == 2
            V x = (p.flags & FLAG_A_SCALAR) != 0u ? scalar_arg(p.s0) : LOAD(a[input_index(i, p.flags, p.off_a, 0u)]);
            V y = (p.flags & FLAG_B_SCALAR) != 0u ? scalar_arg(p.s1) : LOAD(b[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, 1u)]);
            o[p.off_o + i] = STORE(apply_binary(x, y));
#else
            o[p.off_o + i] = STORE(apply_unary(LOAD(a[input_index(i, p.flags, p.off_a, 0u)])));
#endif
        }
    }
}

void main() {
    if (LINEAR != 0u) { main_linear(); return; }
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPT; ++j) {
        uint i = base + j * WG;
        if (i >= p.n) return;
#if NIN == 2
        V x = (p.flags & FLAG_A_SCALAR) != 0u ? scalar_arg(p.s0) : LOAD(a[input_index(i, p.flags, p.off_a, 0u)]);
        V y = (p.flags & FLAG_B_SCALAR) != 0u ? scalar_arg(p.s1) : LOAD(b[input_index(i, p.flags >> FLAG_B_SHIFT, p.off_b, 1u)]);
        o[p.off_o + i] = STORE(apply_binary(x, y));
#else
        V x = LOAD(a[input_index(i, p.flags, p.off_a, 0u)]);
        o[p.off_o + i] = STORE(apply_unary(x));
#endif
    }
}
