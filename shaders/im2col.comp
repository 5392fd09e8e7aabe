#version 450
// im2col for conv2d: x NCHW (any strides, element offset) -> patches
// [batch * groups, cin_per_g * k_h * k_w, h_out * w_out], contiguous, zero where the window reads
// padding. A pure move, so it is keyed by element width (b2 serves bf16 and f16, b4 f32, b8 f64).
// Padding may be asymmetric: pad_t/pad_l are the top/left pads; h_out/w_out carry the rest.
#include "common/width.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;   // WG: a define from kernels/conv.py
layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer X { W x[]; };

layout(push_constant) uniform Params {
    uint batch; uint c_in; uint h; uint w; uint h_out; uint w_out; uint k_h; uint k_w;
    uint stride_h; uint stride_w; uint pad_t; uint pad_l; uint dil_h; uint dil_w;
    uint n_groups; uint cin_per_g; uint total; uint off_x; int xs[4];
} p;

void main() {
    uint i = linear_group() * WG + gl_LocalInvocationID.x;
    if (i >= p.total) return;
    uint hw = p.h_out * p.w_out, kk = p.k_h * p.k_w;
    uint col = i % hw;
    uint t = i / hw;
    uint row = t % (p.cin_per_g * kk);
    uint bg = t / (p.cin_per_g * kk);
    uint b = bg / p.n_groups, g = bg % p.n_groups;
    uint c = g * p.cin_per_g + row / kk;
    uint ki = (row % kk) / p.k_w, kj = row % p.k_w;
    int iy = int((col / p.w_out) * p.stride_h + ki * p.dil_h) - int(p.pad_t);
    int ix = int((col % p.w_out) * p.stride_w + kj * p.dil_w) - int(p.pad_l);
#if WIDTH == 8
    W v = uvec2(0u);
#else
    W v = W(0);
#endif
    if (iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w))
        v = x[int(p.off_x) + int(b) * p.xs[0] + int(c) * p.xs[1] + iy * p.xs[2] + ix * p.xs[3]];
    o[i] = v;
}
