#version 450
// scatter_add / index_add (torch semantics): for every coordinate c of the iteration shape
// (rank <= 6), acc[c with c[axis] replaced by ids[c]] += src[c]. src and ids are strided views
// (index_add: ids strides are 0 except along axis); acc is the contiguous output (strides s_dst).
// Accumulation is atomic and never drops a value: native float atomics (ATOMIC_NATIVE, where the
// device has them) or an unbounded compare-and-swap loop, which always terminates because every
// failed CAS means another invocation's add succeeded (llvmpipe caps any invocation at 65535 loop
// iterations; a CAS would need that many consecutive losses, far beyond its 8-lane x n-thread
// contention). Half types accumulate in an f32 scratch
// (MODE_INIT widens base into it, MODE_FINISH rounds it into the output once), so they are rounded once,
// not once per addition. Out-of-range indices are skipped (never written out of bounds); the
// public op raises IndexError before launching. The accumulate pass runs an invocation per RUN
// consecutive elements of a row of the iteration shape (its last dim): the row's coordinates are
// split once per run (integer division is the expensive part on CPU drivers). src and the index
// words are read through one-element-per-texel views where the device reads texels faster
// (Device.texel_loads), else through the storage buffers (the `_ssbo` twin, NO_TEXEL, which the
// element-wise init / finish passes always take).
#include "common/dtype.glsl"
#include "common/index.glsl"
#if defined(DT_F64)
#define A double
#if !defined(ATOMIC_NATIVE)
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_EXT_shader_atomic_int64 : require
#endif
#else
#define A float
#endif
#if defined(ATOMIC_NATIVE)
#extension GL_EXT_shader_atomic_float : require
#endif
layout(local_size_x = WG) in;
const uint WGU = WG, RUNU = RUN;
layout(constant_id = 0) const uint IDX = 0;
layout(constant_id = 1) const uint MODE = 0;   // MODE_ACCUMULATE; MODE_INIT: acc = base; MODE_FINISH: out = acc

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer Src { T src[]; };
layout(set = 0, binding = 2) readonly buffer Ids { uint ids[]; };
#if defined(ATOMIC_NATIVE)
layout(set = 0, binding = 3) buffer Acc { A acc[]; };
#elif defined(DT_F64)
layout(set = 0, binding = 3) buffer Acc { uint64_t acc[]; };
#else
layout(set = 0, binding = 3) buffer Acc { uint acc[]; };
#endif
#ifndef NO_TEXEL
#extension GL_EXT_samplerless_texture_functions : require
layout(set = 0, binding = 4) uniform utextureBuffer src_t;   // src, one element per texel
layout(set = 0, binding = 5) uniform utextureBuffer ids_t;   // ids, one u32 word per texel
A load_src(uint i) {
#if defined(DT_F64)
    return packDouble2x32(texelFetch(src_t, int(i)).xy);
#elif defined(DT_F16)
    return f16_to_f32(texelFetch(src_t, int(i)).x);
#elif defined(DT_BF16)
    return uintBitsToFloat(texelFetch(src_t, int(i)).x << 16);
#else
    return uintBitsToFloat(texelFetch(src_t, int(i)).x);
#endif
}
#define IDS_LOAD(i) texelFetch(ids_t, int(i)).x
#else
A load_src(uint i) { return A(LOAD(src[i])); }
#endif
#include "index_fetch.glsl"

layout(push_constant) uniform Params {
    uint n; uint rank; uint axis; uint dst_axis_len;
    uint off_src; uint off_idx; uint off_acc;
    int shape[6]; int s_src[6]; int s_idx[6]; int s_dst[6];
} p;

A acc_get(uint i) {
#if defined(ATOMIC_NATIVE)
    return acc[i];
#elif defined(DT_F64)
    return uint64BitsToDouble(acc[i]);
#else
    return uintBitsToFloat(acc[i]);
#endif
}

void acc_set(uint i, A v) {
#if defined(ATOMIC_NATIVE)
    acc[i] = v;
#elif defined(DT_F64)
    acc[i] = doubleBitsToUint64(v);
#else
    acc[i] = floatBitsToUint(v);
#endif
}

void atomic_add(uint i, A v) {
#if defined(ATOMIC_NATIVE)
    atomicAdd(acc[i], v);
#elif defined(DT_F64)
    uint64_t old = acc[i];
    for (;;) {
        uint64_t want = doubleBitsToUint64(uint64BitsToDouble(old) + v);
        uint64_t seen = atomicCompSwap(acc[i], old, want);
        if (seen == old) break;
        old = seen;
    }
#else
    uint old = acc[i];
    for (;;) {
        uint want = floatBitsToUint(uintBitsToFloat(old) + v);
        uint seen = atomicCompSwap(acc[i], old, want);
        if (seen == old) break;
        old = seen;
    }
#endif
}

void main() {
    if (MODE != MODE_ACCUMULATE) {
        uint e = linear_group() * WGU + gl_LocalInvocationID.x;
        if (e >= p.n) return;
        if (MODE == MODE_INIT) acc_set(p.off_acc + e, A(LOAD(src[p.off_src + e])));
        else o[e] = STORE(acc_get(p.off_acc + e));
        return;
    }
    int l = int(p.rank) - 1;
    uint last = uint(p.shape[l]);
    uint runs = (last + RUNU - 1u) / RUNU;          // runs per row
    uint item = linear_group() * WGU + gl_LocalInvocationID.x;
    uint row = item / runs;
    if (row >= p.n / last) return;
    uint col0 = (item - row * runs) * RUNU;
    int so = int(p.off_src), io = int(p.off_idx), dst = int(p.off_acc);
    uint rest = row;
    for (int d = l - 1; d >= 0; --d) {
        uint n = uint(p.shape[d]);
        int c = int(rest % n);
        rest /= n;
        so += c * p.s_src[d];
        io += c * p.s_idx[d];
        if (uint(d) != p.axis) dst += c * p.s_dst[d];
    }
    int dst_col = uint(l) == p.axis ? 0 : p.s_dst[l];
    for (uint col = col0; col < min(col0 + RUNU, last); ++col) {
        int c = int(col);
        bool ok;
        uint k = fetch_index(uint(io + c * p.s_idx[l]), p.dst_axis_len, ok);
        if (ok) atomic_add(uint(dst + c * dst_col + int(k) * p.s_dst[p.axis]), load_src(uint(so + c * p.s_src[l])));
    }
}
