// Loops over a chunk's elements run j over [0, PER) with a test for [lo, hi), never over [lo, hi):
// constant trip counts unroll, so v[j] stays in registers (lavapipe: dynamically indexed arrays go
// through scratch memory, several times slower).
// Rows read and written in chunks of one 16-byte texel (issue 18's load path for the row kernels:
// softmax, norms, rope, cumsum). A row of n elements at absolute element index bx of its primary
// operand is cut at that operand's texel boundaries: chunk c covers elements [c * PER, c * PER + PER)
// of the buffer, of which [lo, hi) lie in the row (chunk_span). Whole chunks whose texel is aligned
// in a buffer are read (or written) through that buffer's rgba32ui view, when the host enabled the
// view; the row's unaligned ends, other operands at other alignments and disabled views (slots past
// maxTexelBufferElements, devices where storage buffers read as fast) go through the storage buffer.
// Either way every invocation sees the same elements in the same order, so both load paths give the
// same bits. Needs before inclusion: common/dtype.glsl, common/texel16.glsl (PER, unpack16, pack16).
#ifndef FUELVK_ROWCHUNKS_GLSL
#define FUELVK_ROWCHUNKS_GLSL

// One past the last chunk of the row [bx, bx + n).
uint chunks_end(uint bx, uint n) { return (bx + n + PER - 1u) / PER; }

// ROW_WHOLE (defined by the includer, a constant expression; default false): every row the kernel
// cuts (its x rows) is whole aligned chunks, so chunk_span is [0, PER) at compile time and the kernels'
// per-element `j >= lo && j < hi` tests fold away (on SIMD CPU drivers they are masks per element).
#ifndef ROW_WHOLE
#define ROW_WHOLE false
#endif

// The part [lo, hi) of chunk c that lies in the row [bx, bx + n).
void chunk_span(uint c, uint bx, uint n, out uint lo, out uint hi) {
    if (ROW_WHOLE) { lo = 0u; hi = PER; return; }
    uint e0 = c * PER;
    lo = e0 < bx ? bx - e0 : 0u;
    hi = min(PER, bx + n - e0);
}

// CHUNK_LOADER(fn, arr, arr4, view, on, whole) defines `void fn(uint e0, uint lo, uint hi, out V v[PER])`:
// v[j] = arr[e0 + j] for j in [lo, hi) (absolute element indices of the storage buffer arr; uint
// arithmetic wraps, so e0 may stand below 0 when lo > 0), 0 elsewhere. A whole aligned chunk is one
// 16-byte load: from `view` when `on` (a constant expression: the host bound the buffer's own texel
// view), else from arr4, the same buffer declared as uvec4 words.
// `whole` (a constant expression: the host's ALIGN bit for the operand) promises that every chunk the
// kernel asks for is whole and aligned: the element-by-element path is then not compiled at all. It
// matters on SIMD CPU drivers: the test above differs per invocation, so both sides run under a mask,
// and the masked element path (a loop over lanes per element) cost lavapipe 2.5x the whole kernel
// (rms_norm [512, 512] f32: 1.38 -> 0.54 ms).
#define CHUNK_LOADER(fn, arr, arr4, view, on, whole) \
void fn(uint e0, uint lo, uint hi, out V v[PER]) { \
    if ((whole) || (lo == 0u && hi == PER && e0 % PER == 0u)) { \
        unpack16((on) ? imageLoad(view, int(e0 / PER)) : arr4[e0 / PER], v); \
        return; \
    } \
    for (uint j = 0u; j < PER; ++j) { v[j] = V(0); if (j >= lo && j < hi) v[j] = V(LOAD(arr[e0 + j])); } \
}

// CHUNK_STORER(fn, arr, arr4, view, on, whole) defines `void fn(uint e0, uint lo, uint hi, V v[PER])`:
// the stores matching CHUNK_LOADER's loads (each value rounded to T once, as STORE does).
#define CHUNK_STORER(fn, arr, arr4, view, on, whole) \
void fn(uint e0, uint lo, uint hi, V v[PER]) { \
    if ((whole) || (lo == 0u && hi == PER && e0 % PER == 0u)) { \
        if (on) imageStore(view, int(e0 / PER), pack16(v)); \
        else arr4[e0 / PER] = pack16(v); \
        return; \
    } \
    for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) arr[e0 + j] = STORE(v[j]); \
}
#endif
