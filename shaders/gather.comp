#version 450
// gather / take_along_axis: out[c] = x[c with c[axis] replaced by ids[c]] for every output
// coordinate c (rank <= 6). x and ids are strided views (element strides, 0 = broadcast, signed)
// with element offsets; out is contiguous from its buffer's start. Raw WIDTH-byte words (bit-exact, any dtype).
// Indices u32 / i32 / i64 (IDX); negative ones count from the end; out-of-range ones are clamped
// into the axis (the public op raises IndexError before launching).
// One invocation per WORDS 16-byte words of the output (common/words.glsl: built in registers, one
// uvec4 store each): the row (every dim but the last) is split into coordinates once per invocation
// and again only where its elements cross into the next row; the output's partial last word goes
// element by element. x and the index words are read through one-element-per-texel views where the
// device reads texels faster (Device.texel_loads), else through the storage buffers (the `_ssbo`
// twin, NO_TEXEL).
#include "common/width.glsl"
#include "common/words.glsl"
#include "common/index.glsl"
layout(local_size_x = WG) in;
const uint WGU = WG, WORDSU = WORDS;
layout(constant_id = 0) const uint IDX = 0;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer X { W x[]; };
layout(set = 0, binding = 2) readonly buffer Ids { uint ids[]; };
layout(set = 0, binding = 3) writeonly buffer OutWords { uvec4 o4[]; };   // binding out, as words
#ifndef NO_TEXEL
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 4) uniform utextureBuffer x_t;     // x, one element per texel
layout(set = 0, binding = 5) uniform utextureBuffer ids_t;   // ids, one u32 word per texel
W load_x(uint i) {
#if WIDTH == 8
    return texelFetch(x_t, int(i)).xy;
#else
    return W(texelFetch(x_t, int(i)).x);
#endif
}
#define IDS_LOAD(i) texelFetch(ids_t, int(i)).x
#else
W load_x(uint i) { return x[i]; }
#endif
#include "index_fetch.glsl"

layout(push_constant) uniform Params {
    uint n; uint rank; uint axis; uint axis_len; uint off_x; uint off_idx;
    int shape[6]; int sx[6]; int si[6];
} p;

// A row's offsets in x (without the axis's term) and in ids.
void row_state(uint row, out int xo, out int io) {
    xo = int(p.off_x);
    io = int(p.off_idx);
    uint rest = row;
    for (int d = int(p.rank) - 2; d >= 0; --d) {
        uint nd = uint(p.shape[d]);
        int c = int(rest % nd);
        rest /= nd;
        io += c * p.si[d];
        if (uint(d) != p.axis) xo += c * p.sx[d];
    }
}

W value_at(int xo, int io, uint col) {
    int l = int(p.rank) - 1;
    bool ok;
    uint k = fetch_index(uint(io + int(col) * p.si[l]), p.axis_len, ok);
    int xc = uint(l) == p.axis ? 0 : int(col) * p.sx[l];
    return load_x(uint(xo + xc + int(k) * p.sx[p.axis]));
}

void main() {
    uint last = uint(p.shape[int(p.rank) - 1]);
    uint i = (linear_group() * WGU + gl_LocalInvocationID.x) * WORDSU * VEC;
    if (i >= p.n) return;
    uint row = i / last, col = i - row * last;
    int xo, io;
    row_state(row, xo, io);
    if (i + WORDSU * VEC <= p.n && col + WORDSU * VEC <= last) {
        // the common case: whole words inside one row, straight-line code
        [[unroll]] for (uint w = 0u; w < WORDSU; ++w) {
            uvec4 word = uvec4(0u);
            [[unroll]] for (uint j = 0u; j < VEC; ++j)
                put_word(word, j, value_at(xo, io, col + w * VEC + j));
            o4[i / VEC + w] = word;
        }
        return;
    }
    for (uint w = 0u; w < WORDSU; ++w) {      // words crossing rows, or the output's last one
        uint e0 = i + w * VEC;
        if (e0 >= p.n) return;
        bool whole = e0 + VEC <= p.n;
        uvec4 word = uvec4(0u);
        for (uint j = 0u; j < VEC && e0 + j < p.n; ++j) {
            W v = value_at(xo, io, col);
            if (whole) put_word(word, j, v);
            else o[e0 + j] = v;
            if (++col == last) {                  // into the next row
                col = 0u;
                if (e0 + j + 1u < p.n) row_state(++row, xo, io);
            }
        }
        if (whole) o4[e0 / VEC] = word;
    }
}
