#version 450
// Roof calibration for the bench suite (kernels/calibrate.py), one shader, two modes (constant MODE,
// MODE_* defines): MODE_FMA: arithmetic peak: 16 independent FMA chains per invocation in the arithmetic type A
//         (f32, or f16 with DT_F16), p.iters iterations of 32 FMAs; one word per invocation is
//         stored so the chains are live. MODE_COPY: copy bandwidth as a kernel sees it: one 16-byte
//         load + store per invocation, p.n of them.
#extension GL_EXT_control_flow_attributes : enable
#if defined(DT_F16)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define A float16_t
#else
#define A float
#endif
#include "common/index.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = MODE_FMA;
layout(set = 0, binding = 0) writeonly buffer Dst { uvec4 dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { uvec4 src[]; };

layout(push_constant) uniform Params { uint n; uint iters; } p;

#define CH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
void main() {
    uint i = linear_group() * 256u + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    if (MODE == MODE_COPY) {
        dst[i] = src[i];
        return;
    }
    // m < 1 and q small keep every chain finite for any iteration count, in f16 too.
    A x = A(float(i & 1023u) * 1e-4), m = A(0.9990234375), q = A(0.0009765625);
#define DECL(j) A s##j = x + A(j);
    CH(DECL)
    for (uint k = 0u; k < p.iters; ++k) {
#define STEP(j) s##j = fma(s##j, m, q);
        CH(STEP) CH(STEP)
    }
    float s = 0.0;
#define SUM(j) s += float(s##j);
    CH(SUM)
    dst[i] = uvec4(floatBitsToUint(s), 0u, 0u, 0u);
}
