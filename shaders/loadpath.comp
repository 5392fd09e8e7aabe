#version 450
// Load-path micro-benchmark (kernels/loadpaths.py, benches/bench_load_paths.py): dst[i] = src[off + i]
// for i < p.n texels, where src is read through one of several descriptor kinds (PATH, one of the
// PATH_* defines of kernels/loadpaths.py) and dst is always a storage buffer of the same texel type,
// so paths differ only in how they load:
//   SSBO_F32 float   SSBO_U2 uvec2   SSBO_U4 uvec4
//   UTB_R32 uniform texel buffer texelFetch, R32_UINT   UTB_RGBA32 same, R32G32B32A32_UINT
//   STB_R32 storage texel buffer imageLoad, r32ui       STB_RGBA32 same, rgba32ui
//   SSBO_U64 uint64_t   SSBO_U64X2 u64vec2 (what matmul.comp's 4-wide views use: lavapipe's cost is
//   per component)   UTB_RG32 uniform texel buffer, R32G32_UINT   UTB_RGBA16F uniform texel buffer,
//   R16G16B16A16_SFLOAT (4 halves as a vec4, the f16 weights' case; repacked to 2 words for the store)
// Each invocation copies EPT texels WG apart (consecutive invocations touch consecutive texels).
// Spec constant READ = 1: loads dominate instead (what matvec does): each invocation combines RPT
// texels WG apart (xor; float: +) and stores one texel, dst[invocation].
#include "common/index.glsl"
// Uniform texel buffers are samplerless (textureBuffer): a sampled image of Dim Buffer is invalid
// SPIR-V from 1.6 on, and Mesa 25's front end rejects it.
#extension GL_EXT_samplerless_texture_functions : require
#define SSBO64 (PATH == PATH_SSBO_U64 || PATH == PATH_SSBO_U64X2)
#define SSBO (PATH == PATH_SSBO_F32 || PATH == PATH_SSBO_U2 || PATH == PATH_SSBO_U4 || SSBO64)
#if SSBO64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif

#if PATH == PATH_SSBO_F32
#define T float
#define COMBINE(a, b) ((a) + (b))
#elif PATH == PATH_SSBO_U2 || PATH == PATH_UTB_RG32 || PATH == PATH_UTB_RGBA16F
#define T uvec2
#elif PATH == PATH_SSBO_U4 || PATH == PATH_UTB_RGBA32 || PATH == PATH_STB_RGBA32
#define T uvec4
#elif PATH == PATH_SSBO_U64
#define T uint64_t
#elif PATH == PATH_SSBO_U64X2
#define T u64vec2
#else
#define T uint
#endif
#ifndef COMBINE
#define COMBINE(a, b) ((a) ^ (b))
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint READ = 0u;
const uint WG = 256u, EPT = 4u, RPT = 16u;
layout(set = 0, binding = 0) writeonly buffer Dst { T dst[]; };
#if SSBO
layout(set = 0, binding = 1) readonly buffer Src { T src[]; };
#define LOAD(k) src[k]
#elif PATH == PATH_UTB_R32
layout(set = 0, binding = 1) uniform utextureBuffer src;
#define LOAD(k) texelFetch(src, int(k)).x
#elif PATH == PATH_UTB_RGBA32
layout(set = 0, binding = 1) uniform utextureBuffer src;
#define LOAD(k) texelFetch(src, int(k))
#elif PATH == PATH_STB_R32
layout(set = 0, binding = 1, r32ui) uniform readonly uimageBuffer src;
#define LOAD(k) imageLoad(src, int(k)).x
#elif PATH == PATH_STB_RGBA32
layout(set = 0, binding = 1, rgba32ui) uniform readonly uimageBuffer src;
#define LOAD(k) imageLoad(src, int(k))
#elif PATH == PATH_UTB_RG32
layout(set = 0, binding = 1) uniform utextureBuffer src;
#define LOAD(k) texelFetch(src, int(k)).xy
#elif PATH == PATH_UTB_RGBA16F
layout(set = 0, binding = 1) uniform textureBuffer src;
uvec2 pack4h(vec4 v) { return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw)); }
#define LOAD(k) pack4h(texelFetch(src, int(k)))
#else
#error "PATH is not one of kernels/loadpaths.py's PATH_* ids"
#endif

layout(push_constant) uniform Params { uint n; uint off; } p;

void main() {
    if (READ != 0u) {
        uint g = linear_group(), base = g * (WG * RPT) + gl_LocalInvocationID.x;
        T acc = T(0);
        for (uint j = 0u; j < RPT; ++j) {
            uint i = base + j * WG;
            if (i < p.n) acc = COMBINE(acc, LOAD(p.off + i));
        }
        dst[g * WG + gl_LocalInvocationID.x] = acc;
        return;
    }
    uint base = linear_group() * (WG * EPT) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < EPT; ++j) {
        uint i = base + j * WG;
        if (i >= p.n) return;
        dst[i] = LOAD(p.off + i);
    }
}
