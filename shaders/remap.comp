#version 450
// Coordinate-remapping gather for the byte-width movement families: flip, roll, triu/tril, pad
// (constant / reflect / replicate) and pad backward (constant). One invocation per WORDS
// consecutive 16-byte words of the contiguous output (common/words.glsl: VEC elements each, built in
// registers and stored as one uvec4; the output's partial first / last word element by element):
// the row index (all dims but the last, rank <= 6) is split into coordinates once per invocation
// and again only where its elements cross into the next row (integer division is the expensive
// part on CPU drivers), each coordinate is mapped to a source coordinate by MODE, and the source is
// read through any strided view (`sa` strides, signed, element offset off_a). n = the output's
// element count from element off_o; the host launches one invocation per WORDS words from the word
// holding off_o (ops/movement.py launch_remap).
// MODE is one of the MODE_* defines (kernels/movement.py REMAP_MODES):
//   MODE_GATHER        src = c                       (flip: the host passes the flipped strides)
//   MODE_ROLL          src = (c + lo) mod dim        (lo already in [0, dim))
//   MODE_TRIU / TRIL   keep where col - row >= k / <= k (last two dims), else 0
//   MODE_PAD_CONST     src = c - lo, outside [0, dim) -> fill  (pad backward const: lo = -left)
//   MODE_PAD_REFLECT   src = c - lo mirrored without repeating the edge (host: pads < dim)
//   MODE_PAD_REPLICATE src = clamp(c - lo, 0, dim - 1)
// Moves never interpret the bits (common/width.glsl), so every dtype of a width is bit-exact.
#include "common/width.glsl"
#include "common/words.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;
const uint WGU = WG, WORDSU = WORDS;
// TWO_ROWS (ops/movement.py launch_remap): 0 where every span of WORDS words lies inside one row (the
// rows are whole spans from a word boundary), else 1: the straight-line path then selects per element
// between the span's row and the next one.
layout(constant_id = 0) const uint TWO_ROWS = 1;

layout(set = 0, binding = 0) writeonly buffer Out { W o[]; };
layout(set = 0, binding = 1) readonly buffer A { W a[]; };
layout(set = 0, binding = 2) writeonly buffer OutWords { uvec4 o4[]; };   // binding out, as words
#ifndef NO_TEXEL
// The same source as one element per texel (R8/R16/R32_UINT, R32G32_UINT by width): where the device
// reads texels faster, a's reads come through here (binding a stays bound, unread).
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 3) uniform utextureBuffer a_t;
W load_a(uint i) {
#if WIDTH == 8
    return texelFetch(a_t, int(i)).xy;
#else
    return W(texelFetch(a_t, int(i)).x);
#endif
}
#else
W load_a(uint i) { return a[i]; }
#endif

layout(push_constant) uniform Params {
    uint n; uint rank; uint off_o; uint off_a; int k; uint fill[2];
    int shape[6]; int sa[6]; int lo[6]; int dim[6];
} p;

W fill_value() {
#if WIDTH == 8
    return uvec2(p.fill[0], p.fill[1]);
#else
    return W(p.fill[0]);
#endif
}

// One coordinate c of an output position mapped to its source coordinate along a dim of extent
// `dim` (shift / left pad lo); `inside` false where constant padding fills it.
int source_coord(int c, int lo, int dim, inout bool inside) {
#if MODE == MODE_ROLL
    c += lo;
    if (c >= dim) c -= dim;
#elif MODE == MODE_PAD_CONST
    c -= lo;
    inside = inside && uint(c) < uint(dim);    // 0 <= c < dim in one compare (dim >= 0)
#elif MODE == MODE_PAD_REFLECT
    c -= lo;
    if (c < 0) c = -c;
    if (c >= dim) c = 2 * (dim - 1) - c;
#elif MODE == MODE_PAD_REPLICATE
    c = clamp(c - lo, 0, dim - 1);
#endif
    return c;
}

// A row's source offset, whether constant padding fills all of it, and (triu / tril) its index in
// the second-to-last dim.
void row_state(uint row, out int src, out bool row_inside, out int row_c) {
    int r = int(p.rank);
    uint rest = row;
    src = int(p.off_a);
    row_inside = true;
    row_c = 0;
    for (int d = r - 2; d >= 0; --d) {
        uint nd = uint(p.shape[d]);
        int c = int(rest % nd);
        rest /= nd;
        if (d == r - 2) row_c = c;
        src += source_coord(c, p.lo[d], p.dim[d], row_inside) * p.sa[d];
    }
}

W value_at(int src, bool row_inside, int row_c, uint col) {
    int r = int(p.rank);
    bool inside = row_inside;
    int s = src + source_coord(int(col), p.lo[r - 1], p.dim[r - 1], inside) * p.sa[r - 1];
#if MODE == MODE_TRIU || MODE == MODE_TRIL
#if MODE == MODE_TRIU
    inside = int(col) - row_c >= p.k;
#else
    inside = int(col) - row_c <= p.k;
#endif
    W v = load_a(uint(s));                  // in range everywhere: a select, not a branch
    return inside ? v : zero_word();
#elif MODE == MODE_PAD_CONST
    // a select, not a branch (lanes run in lockstep on CPU drivers): outside the source the load
    // reads the source's first element (off_a; the host never launches this on an empty source)
    W v = load_a(inside ? uint(s) : p.off_a);
    return inside ? v : fill_value();
#else
    return load_a(uint(s));
#endif
}

void main() {
    uint last = uint(p.shape[int(p.rank) - 1]);
    uint head = p.off_o % VEC;                           // slots of the first word before the output
    uint w0 = (linear_group() * WGU + gl_LocalInvocationID.x) * WORDSU;
    int first = int(w0 * VEC) - int(head);               // output element of the first word's slot 0
    uint i = uint(max(first, 0));
    if (i >= p.n) return;
    uint row = i / last, col = i - row * last;
    int src, row_c;
    bool row_inside;
    row_state(row, src, row_inside, row_c);
    // rows made of whole spans (TWO_ROWS = 0) never cross: the selects of a second row state fold
    // away (they cost 7-12% on lavapipe: 1024^2 triu / flip / roll)
    bool straight = TWO_ROWS != 0u ? last >= WORDSU * VEC : col + WORDSU * VEC <= last;
    if (first >= 0 && uint(first) + WORDSU * VEC <= p.n && straight) {
        // the common case: whole words, rows at least as long as an invocation's span, so the span
        // crosses into the next row at most once. Straight-line code with selects, no branch: on
        // CPU drivers neighbouring invocations run as lanes of one SIMD program, and a branch that
        // any lane takes costs every lane.
        int src1 = src, row_c1 = row_c;
        bool row_inside1 = row_inside;
        if (TWO_ROWS != 0u && col + WORDSU * VEC > last)   // skipped by a SIMD group of spans inside their rows
            row_state(row + 1u, src1, row_inside1, row_c1);   // read only where a span enters it
        [[unroll]] for (uint w = 0u; w < WORDSU; ++w) {
            uvec4 word = uvec4(0u);
            [[unroll]] for (uint j = 0u; j < VEC; ++j) {
                uint c = col + w * VEC + j;
                bool next = TWO_ROWS != 0u && c >= last;
                put_word(word, j, value_at(next ? src1 : src, next ? row_inside1 : row_inside,
                                           next ? row_c1 : row_c, next ? c - last : c));
            }
            o4[p.off_o / VEC + w0 + w] = word;
        }
        return;
    }
    for (uint w = 0u; w < WORDSU; ++w) {       // words crossing rows or partly outside the output
        int e0 = first + int(w * VEC);
        if (e0 >= int(p.n)) return;
        bool whole = e0 >= 0 && uint(e0) + VEC <= p.n;
        uvec4 word = uvec4(0u);
        for (uint j = 0u; j < VEC; ++j) {
            int e = e0 + int(j);
            if (e < 0 || uint(e) >= p.n) continue;       // only in a partial word
            W v = value_at(src, row_inside, row_c, col);
            if (whole) put_word(word, j, v);
            else o[p.off_o + uint(e)] = v;
            if (++col == last) {                         // into the next row
                col = 0u;
                ++row;
                if (uint(e) + 1u < p.n) row_state(row, src, row_inside, row_c);
            }
        }
        if (whole) o4[p.off_o / VEC + w0 + w] = word;
    }
}
