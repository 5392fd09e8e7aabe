#version 450
// im2col for conv2d: x NCHW (any strides, element offset) -> patches
// [batch * groups, cin_per_g * k_h * k_w, h_out * w_out], contiguous, zero where the window reads
// padding. A pure move, so it is keyed by element width (b2 serves bf16 and f16, b4 f32, b8 f64).
// Padding may be asymmetric: pad_t/pad_l are the top/left pads; h_out/w_out carry the rest.
// One invocation per WORDS 16-byte words of the output (common/words.glsl: built in registers, one
// uvec4 store each): a patch row's (image, channel, kernel tap) and the first output pixel are
// split out of the index once per invocation, later pixels stepped (integer division is the
// expensive part on CPU drivers); words crossing patch rows and the output's last partial word go
// element by element. x is read through a one-element-per-texel view where the device reads texels
// faster (Device.texel_loads), else through the storage buffer (the `_ssbo` twin, NO_TEXEL).
#include "common/width.glsl"
#include "common/words.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;   // WG, WORDS: defines from kernels/conv.py
const uint WGU = WG, WORDSU = WORDS;
// TWO_ROWS (ops/conv.py): 0 where patch rows are whole spans of WORDS words (no span crosses one:
// the next row's selects fold away), else 1.
layout(constant_id = 0) const uint TWO_ROWS = 1;
layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer X { W x[]; };
layout(set = 0, binding = 2) writeonly buffer OutWords { uvec4 o4[]; };   // binding out, as words
#ifndef NO_TEXEL
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 3) uniform utextureBuffer x_t;
W load_x(int i) {
#if WIDTH == 8
    return texelFetch(x_t, i).xy;
#else
    return W(texelFetch(x_t, i).x);
#endif
}
#else
W load_x(int i) { return x[i]; }
#endif

layout(push_constant) uniform Params {
    uint batch; uint c_in; uint h; uint w; uint h_out; uint w_out; uint k_h; uint k_w;
    uint stride_h; uint stride_w; uint pad_t; uint pad_l; uint dil_h; uint dil_w;
    uint n_groups; uint cin_per_g; uint total; uint off_x; int xs[4];
} p;

// A patch row (over batch * groups * cin_per_g * k_h * k_w): image b, group g, channel cl within the
// group, kernel tap (ki, kj); where it reads: its channel plane's offset and the tap's input position
// at output pixel (0, 0).
struct Row { uint b, g, cl, ki, kj; int plane, y0, x0; };

void place(inout Row q) {
    q.plane = int(p.off_x) + int(q.b) * p.xs[0] + int(q.g * p.cin_per_g + q.cl) * p.xs[1];
    q.y0 = int(q.ki * p.dil_h) - int(p.pad_t);
    q.x0 = int(q.kj * p.dil_w) - int(p.pad_l);
}

Row row_at(uint t) {
    Row q;
    uint kk = p.k_h * p.k_w;
    uint row = t % (p.cin_per_g * kk), bg = t / (p.cin_per_g * kk);
    q.b = bg / p.n_groups;
    q.g = bg - q.b * p.n_groups;
    q.cl = row / kk;
    uint tap = row - q.cl * kk;
    q.ki = tap / p.k_w;
    q.kj = tap - q.ki * p.k_w;
    place(q);
    return q;
}

// The next patch row, by carrying through the tap, channel, group and image (no division: rows
// shorter than a word cross often).
void next_row(inout Row q) {
    if (++q.kj == p.k_w) {
        q.kj = 0u;
        if (++q.ki == p.k_h) {
            q.ki = 0u;
            if (++q.cl == p.cin_per_g) {
                q.cl = 0u;
                if (++q.g == p.n_groups) { q.g = 0u; ++q.b; }
            }
        }
    }
    place(q);
}

// The padding test is a select after a load at the clamped position (always inside x), not a
// branch: straight-line code for the lanes of a SIMD CPU driver.
W value_at(int plane, int y0, int x0, uint oy, uint ox) {
    int iy = y0 + int(oy * p.stride_h), ix = x0 + int(ox * p.stride_w);
    bool inside = iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w);
    W v = load_x(plane + clamp(iy, 0, int(p.h) - 1) * p.xs[2] + clamp(ix, 0, int(p.w) - 1) * p.xs[3]);
    return inside ? v : zero_word();
}

void main() {
    uint hw = p.h_out * p.w_out;
    uint i = (linear_group() * WGU + gl_LocalInvocationID.x) * WORDSU * VEC;
    if (i >= p.total) return;
    uint t = i / hw, col = i - t * hw;
    uint oy = col / p.w_out, ox = col - oy * p.w_out;
    Row q = row_at(t);
    if (i + WORDSU * VEC <= p.total && hw >= WORDSU * VEC) {
        // the common case: whole words, patch rows at least as long as an invocation's span, so the
        // span enters the next patch row (q1) at most once. Straight-line code with selects, no
        // branch: on CPU drivers neighbouring invocations run as lanes of one SIMD program, and a
        // branch any lane takes costs every lane (7x7 images: every lane's span crosses somewhere).
        Row q1 = q;
        next_row(q1);        // read from only where the span enters it (inside the output)
        // past the row's last pixel the stepping goes on at (h_out, 0), (h_out, 1), ...: the next
        // row's pixel (oy - h_out, ox), so its top offset absorbs h_out rows of stride
        int y1 = q1.y0 - int(p.h_out * p.stride_h);
        [[unroll]] for (uint w = 0u; w < WORDSU; ++w) {
            uvec4 word = uvec4(0u);
            [[unroll]] for (uint j = 0u; j < VEC; ++j) {
                bool next = TWO_ROWS != 0u && col + w * VEC + j >= hw;
                put_word(word, j, value_at(next ? q1.plane : q.plane, next ? y1 : q.y0, next ? q1.x0 : q.x0, oy, ox));
                if (++ox == p.w_out) { ox = 0u; ++oy; }
            }
            o4[i / VEC + w] = word;
        }
        return;
    }
    for (uint w = 0u; w < WORDSU; ++w) {      // words crossing patch rows, or the output's last one
        uint e0 = i + w * VEC;
        if (e0 >= p.total) return;
        bool whole = e0 + VEC <= p.total;
        uvec4 word = uvec4(0u);
        [[unroll]] for (uint j = 0u; j < VEC; ++j) {
            if (e0 + j >= p.total) break;
            W v = value_at(q.plane, q.y0, q.x0, oy, ox);
            if (whole) put_word(word, j, v);
            else o[e0 + j] = v;
            if (++ox == p.w_out) { ox = 0u; ++oy; }
            if (++col == hw) {                    // into the next patch row
                col = 0u; ox = 0u; oy = 0u;
                next_row(q);
            }
        }
        if (whole) o4[e0 / VEC] = word;
    }
}
