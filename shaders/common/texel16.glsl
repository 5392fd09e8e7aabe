// Elements of a 16-byte rgba32ui texel view: PER elements of type T per texel, and texel(ti, v) giving
// them in the compute type V (the same values LOAD gives). Needs before inclusion: common/dtype.glsl
// and the view, `uimageBuffer x_t`. Texel views read ~20x faster than storage buffers on lavapipe
// (benches/bench_load_paths.py); kernels keep a storage-buffer path for runs that are not whole texels.
#ifndef FUELVK_TEXEL16_GLSL
#define FUELVK_TEXEL16_GLSL
#if defined(DT_F32)
const uint PER = 4u;
#elif defined(DT_F64)
const uint PER = 2u;
#else
const uint PER = 8u;
#endif

// The PER elements of one texel's bits u, in the compute type V.
void unpack16(uvec4 u, out V v[PER]) {
#if defined(DT_F32)
    for (uint j = 0u; j < 4u; ++j) v[j] = uintBitsToFloat(u[j]);
#elif defined(DT_F64)
    v[0] = packDouble2x32(u.xy);
    v[1] = packDouble2x32(u.zw);
#elif defined(DT_F16)
    for (uint j = 0u; j < 4u; ++j) { vec2 h = f16x2_to_f32(u[j]); v[2u * j] = h.x; v[2u * j + 1u] = h.y; }
#else
    for (uint j = 0u; j < 4u; ++j) { v[2u * j] = uintBitsToFloat(u[j] << 16); v[2u * j + 1u] = uintBitsToFloat(u[j] & 0xFFFF0000u); }
#endif
}

// The bits of one texel holding PER values, each rounded to T as STORE rounds it.
uvec4 pack16(V v[PER]) {
    uvec4 u;
#if defined(DT_F32)
    for (uint j = 0u; j < 4u; ++j) u[j] = floatBitsToUint(v[j]);
#elif defined(DT_F64)
    u.xy = unpackDouble2x32(v[0]);
    u.zw = unpackDouble2x32(v[1]);
#elif defined(DT_F16)
    for (uint j = 0u; j < 4u; ++j) u[j] = f32x2_to_f16x2(vec2(v[2u * j], v[2u * j + 1u]));
#else
    for (uint j = 0u; j < 4u; ++j) u[j] = f32_to_bf16_bits(v[2u * j]) | (f32_to_bf16_bits(v[2u * j + 1u]) << 16);
#endif
    return u;
}

#ifndef TEXEL16_NO_X
void texel(uint ti, out V v[PER]) { unpack16(imageLoad(x_t, int(ti)), v); }
#endif
#endif
