// Output in whole 16-byte words for the byte-width move kernels (needs width.glsl first): an
// invocation builds the VEC = 16 / WIDTH consecutive elements of one word in registers (put_word,
// the element index j constant after unrolling) and stores them as one uvec4, instead of VEC
// per-element stores with computed indices (the cost of a gather on CPU drivers). Words only
// partly inside the output (its first and last) are stored element by element.
#ifndef FUELVK_WORDS_GLSL
#define FUELVK_WORDS_GLSL
#extension GL_EXT_control_flow_attributes : require
const uint VEC = 16u / uint(WIDTH);

void put_word(inout uvec4 w, uint j, W v) {
#if WIDTH == 8
    w[2u * j] = v.x;
    w[2u * j + 1u] = v.y;
#elif WIDTH == 4
    w[j] = v;
#elif WIDTH == 2
    w[j >> 1u] |= uint(v) << (16u * (j & 1u));
#else
    w[j >> 2u] |= uint(v) << (8u * (j & 3u));
#endif
}

W zero_word() {
#if WIDTH == 8
    return uvec2(0u);
#else
    return W(0u);
#endif
}
#endif
