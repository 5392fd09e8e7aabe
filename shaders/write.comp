#version 450
// Strided write: dst view <- src view, element for element over `shape` (rank <= 6). Serves
// write_slice (a[index] = b, e.g. a KV-cache append: dst is any non-broadcast view of a larger
// array, written in place) and concatenate (one dispatch per input into its slab of the output).
// Both sides take signed strides and element offsets; src may broadcast (stride 0). p.flags: FLAG_*
// defines (kernels/movement.py WRITE_FLAGS): src / dst contiguous (linear index, no math), src constant.
// Moved as raw words of WIDTH bytes (common/width.glsl): 8/16-bit storage writes single bytes and
// half-words at any alignment, so b1/b2 need no sub-word read-modify-write.
// ROWS defined (family write_rows): dst's last dim is contiguous (concatenate's column windows, slices
// of rows): one invocation per WORDS 16-byte words of one dst row, built in registers and stored whole
// (common/words.glsl); only the row's ragged first / last word is stored element by element. A launch
// never writes a word it does not own whole, so launches writing neighbouring windows of the same
// words (concatenate's pieces) store disjoint elements and never race. src: any strided view, read
// through a one-element-per-texel view where the device reads texels faster (else the _ssbo twin).
#include "common/width.glsl"
#include "common/index.glsl"
#ifdef ROWS
#include "common/words.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, WORDSU = WORDS;

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
W load_a(int i) { return a[uint(i)]; }
#endif

// rows: dst rows (outer dims shape[0 .. rank), rank <= 6, strides sa / so); len: elements per row
// (src stride sa_last, dst stride 1); chunks: invocations per row (WORDS words each).
layout(push_constant) uniform Params {
    uint rows; uint rank; uint len; uint chunks; uint off_o; uint off_a; int sa_last;
    int shape[6]; int sa[6]; int so[6];
} p;

void main() {
    uint g = linear_group() * WGU + gl_LocalInvocationID.x;
    uint row = g / p.chunks;
    if (row >= p.rows) return;
    uint chunk = g - row * p.chunks;
    int src = int(p.off_a), dst = int(p.off_o);
    uint rest = row;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint nd = uint(p.shape[d]);
        int c = int(rest % nd);
        rest /= nd;
        src += c * p.sa[d];
        dst += c * p.so[d];
    }
    int first = int(chunk * WORDSU * VEC) - int(uint(dst) % VEC);   // row element in the first word's slot 0
    int len = int(p.len);
    if (first >= len) return;
    uint word0 = uint(dst + first) / VEC;
    if (first >= 0 && first + int(WORDSU * VEC) <= len) {   // whole words inside the row: straight-line code
        [[unroll]] for (uint w = 0u; w < WORDSU; ++w) {
            uvec4 word = uvec4(0u);
            [[unroll]] for (uint j = 0u; j < VEC; ++j)
                put_word(word, j, load_a(src + (first + int(w * VEC + j)) * p.sa_last));
            o4[word0 + w] = word;
        }
        return;
    }
    for (uint w = 0u; w < WORDSU; ++w) {   // the row's ragged ends: whole words only where the row owns them
        int e0 = first + int(w * VEC);
        if (e0 >= len) return;
        bool whole = e0 >= 0 && e0 + int(VEC) <= len;
        uvec4 word = uvec4(0u);
        for (uint j = 0u; j < VEC; ++j) {
            int e = e0 + int(j);
            if (e < 0 || e >= len) continue;
            W v = load_a(src + e * p.sa_last);
            if (whole) put_word(word, j, v);
            else o[uint(dst + e)] = v;
        }
        if (whole) o4[word0 + w] = word;
    }
}
#else

layout(local_size_x = WG) in;
const uint WGU = WG, EPTU = EPT;

layout(set = 0, binding = 0) buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };

const uint BOTH_CONTIGUOUS = FLAG_SRC_CONTIGUOUS | FLAG_DST_CONTIGUOUS;

layout(push_constant) uniform Params {
    uint n; uint rank; uint flags; uint off_o; uint off_a; float scale;
    int shape[6]; int sa[6]; int so[6];
} p;

void main() {
    uint base = linear_group() * (WGU * EPTU) + gl_LocalInvocationID.x;
    int r = int(p.rank);
    for (uint j = 0u; j < EPTU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.n) return;
        int src = int(p.off_a), dst = int(p.off_o);
        if ((p.flags & BOTH_CONTIGUOUS) == BOTH_CONTIGUOUS) {
            src += int(i);
            dst += int(i);
        } else {
            uint rest = i;
            for (int d = r - 1; d >= 0; --d) {
                uint nd = uint(p.shape[d]);
                int c = int(rest % nd);
                rest /= nd;
                src += c * p.sa[d];
                dst += c * p.so[d];
            }
            if ((p.flags & FLAG_SRC_CONSTANT) != 0u) src = int(p.off_a);
        }
        o[uint(dst)] = a[uint(src)];
    }
}
#endif
