#version 450
// f16 conversion probe (runtime/halfconv.py, behind Device.half_native): the forms of common/half.glsl
// that HALF_NATIVE picks (bit 0: native widening, bit 1: native narrowing), on the same inputs.
// p.reps == 0 (check): invocation i widens the two halves of words[i] into wide[2i], wide[2i + 1]
//   (scalar form for the low half, pair form for the high) and narrows floats[2i], floats[2i + 1] into
//   narrow[i] (scalar form low, pair form high): the host compares the forms' bits.
// p.reps > 0 (timing): p.reps dependent round trips f16 -> f32 -> f16 of words[i] (an fma between, with
//   p.scale = 1 and p.shift = 0 from the host so that no compiler folds a trip away), into narrow[i].
#include "common/half.glsl"
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Words { uint words[]; };
layout(set = 0, binding = 1) readonly buffer Floats { float floats[]; };
layout(set = 0, binding = 2) writeonly buffer Wide { uint wide[]; };
layout(set = 0, binding = 3) writeonly buffer Narrow { uint narrow[]; };
layout(push_constant) uniform Params { uint n; uint reps; float scale; float shift; } p;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    uint w = words[i];
    if (p.reps == 0u) {
        wide[2u * i] = f16_to_f32_bits(w & 0xFFFFu);
        wide[2u * i + 1u] = floatBitsToUint(f16x2_to_f32(w).y);
        float lo = floats[2u * i], hi = floats[2u * i + 1u];
        narrow[i] = (f32_to_f16(lo) & 0xFFFFu) | (f32x2_to_f16x2(vec2(lo, hi)) & 0xFFFF0000u);
        return;
    }
    for (uint r = 0u; r < p.reps; ++r) w = f32x2_to_f16x2(f16x2_to_f32(w) * p.scale + p.shift);
    narrow[i] = w;
}
