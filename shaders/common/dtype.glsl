// Element type T as stored, compute type V, and the LOAD/STORE conversions between them.
// Selected by one of DT_F32 / DT_F16 / DT_BF16 / DT_F64 (kernels/registry.py DTYPE_DEFINES).
// Half types are computed in f32 and rounded on store (f16: common/half.glsl, the device's conversion or
// integer arithmetic as probed per device, same bits; bf16: explicit round-to-nearest-even, NaN kept quiet).
#ifndef FUELVK_DTYPE_GLSL
#define FUELVK_DTYPE_GLSL
#if defined(DT_F32)
#define T float
#define V float
#define LOAD(x) (x)
#define STORE(v) (v)
#define T4 vec4
#define V4 vec4
#define LOAD4(x) (x)
#define STORE4(v) (v)
#elif defined(DT_F16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "half.glsl"
#define T uint16_t
#define V float
#define LOAD(x) f16_to_f32(uint(x))
#define STORE(v) uint16_t(f32_to_f16(v))
#define T4 u16vec4
#define V4 vec4
#define LOAD4(x) f16x4_to_f32(x)
#define STORE4(v) f32x4_to_f16x4(v)
vec4 f16x4_to_f32(u16vec4 h) {
    uvec4 u = uvec4(h);
    return vec4(f16x2_to_f32(u.x | (u.y << 16)), f16x2_to_f32(u.z | (u.w << 16)));
}
u16vec4 f32x4_to_f16x4(vec4 v) {
    uint lo = f32x2_to_f16x2(v.xy), hi = f32x2_to_f16x2(v.zw);
    return u16vec4(uvec4(lo & 0xFFFFu, lo >> 16, hi & 0xFFFFu, hi >> 16));
}
#elif defined(DT_BF16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define T uint16_t
#define V float
#define LOAD(x) uintBitsToFloat(uint(x) << 16)
#define STORE(v) uint16_t(f32_to_bf16_bits(v))
#define T4 u16vec4
#define V4 vec4
#define LOAD4(x) uintBitsToFloat(uvec4(x) << 16)
#define STORE4(v) u16vec4(f32_to_bf16_bits(v.x), f32_to_bf16_bits(v.y), f32_to_bf16_bits(v.z), f32_to_bf16_bits(v.w))
#elif defined(DT_F64)
#define T double
#define V double
#define LOAD(x) (x)
#define STORE(v) (v)
#define T4 dvec4
#define V4 dvec4
#define LOAD4(x) (x)
#define STORE4(v) (v)
#else
#error "one of DT_F32, DT_F16, DT_BF16, DT_F64 must be defined"
#endif

uint f32_to_bf16_bits(float f) {
    uint u = floatBitsToUint(f);
    if (isnan(f)) return (u >> 16) | 0x40u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// A scalar kernel argument passed as two u32 words (f64 needs both; f32 uses the first).
V scalar_arg(uint w[2]) {
#if defined(DT_F64)
    return packDouble2x32(uvec2(w[0], w[1]));
#else
    return uintBitsToFloat(w[0]);
#endif
}
#endif
