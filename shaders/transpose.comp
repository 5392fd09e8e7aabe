#version 450
// Transpose for copies whose source is contiguous along the output's second-to-last dim (x.T,
// x.transpose(0, 2, 1), ... to contiguous): out[b, r, c] = x[off_a + b * sb + r + c * sc], out
// contiguous [batch, rows, cols]. An invocation moves a VEC x VEC block (VEC = 16 / WIDTH,
// common/words.glsl): VEC output rows of one 16-byte word each, stored as uvec4s, read as VEC runs of
// VEC consecutive source elements; consecutive invocations take consecutive row blocks, so a SIMD
// lane group's loads fall in a few cache lines instead of one source column per lane (remap.comp's
// gather order), and no shared memory or barrier is needed (both cost more than they save on CPU
// drivers: measured 2.5x slower as a 32x32 shared tile). Blocks past the edges and output rows that
// do not start on a word (cols not a multiple of VEC) go element by element. The source is read
// through a one-element-per-texel view where the device reads texels faster (Device.texel_loads),
// else through the storage buffer (the `_ssbo` twin, NO_TEXEL). Raw words of the element's width:
// bit-exact for every dtype. Grid: one invocation per block over (row blocks, col blocks, batch).
#include "common/width.glsl"
#include "common/words.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG;
layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };
layout(set = 0, binding = 2) writeonly buffer OutWords { uvec4 o4[]; };   // binding out, as words
#ifndef NO_TEXEL
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 3) uniform utextureBuffer a_t;
W load_a(int i) {
#if WIDTH == 8
    return texelFetch(a_t, i).xy;
#else
    return W(texelFetch(a_t, i).x);
#endif
}
#else
W load_a(int i) { return a[i]; }
#endif

layout(push_constant) uniform Params {
    uint rows; uint cols; uint off_a; int sb; int sc; uint blocks_r; uint blocks_c; uint batch;
} p;

void main() {
    uint q = linear_group() * WGU + gl_LocalInvocationID.x;
    uint br = q % p.blocks_r, rest = q / p.blocks_r;
    uint bc = rest % p.blocks_c, b = rest / p.blocks_c;
    if (b >= p.batch) return;
    uint r0 = br * VEC, c0 = bc * VEC;
    int base = int(p.off_a) + int(b) * p.sb + int(r0) + int(c0) * p.sc;
    uint out0 = (b * p.rows + r0) * p.cols + c0;      // element index of the block's first output
    if (r0 + VEC <= p.rows && c0 + VEC <= p.cols && out0 % VEC == 0u && p.cols % VEC == 0u) {
        uvec4 words[VEC];
        [[unroll]] for (uint i = 0u; i < VEC; ++i) words[i] = uvec4(0u);
        [[unroll]] for (uint j = 0u; j < VEC; ++j) {      // source run j: output column c0 + j
            int s = base + int(j) * p.sc;
            [[unroll]] for (uint i = 0u; i < VEC; ++i) put_word(words[i], j, load_a(s + int(i)));
        }
        [[unroll]] for (uint i = 0u; i < VEC; ++i) o4[(out0 + i * p.cols) / VEC] = words[i];
        return;
    }
    for (uint i = 0u; i < VEC && r0 + i < p.rows; ++i)
        for (uint j = 0u; j < VEC && c0 + j < p.cols; ++j)
            o[out0 + i * p.cols + j] = load_a(base + int(i) + int(j) * p.sc);
}
