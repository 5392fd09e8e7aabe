#version 450
// Inclusive prefix sum (PROD: product) along one axis of a strided input (signed strides, element offset, up to
// MAX_RANK outer dims after the host collapses them), into a contiguous output of the input's shape.
// Running sums are compensated (Kahan, common/kahan.glsl: +-inf and NaN propagate as in numpy) in
// f32 (f64 for f64): element by element, each output rounded once, or with ROWS chunk-blocked (walk()),
// within the same compensated error bound; the rounding then depends on where x's texels cut the slice.
// SCAN == 0: one invocation per slice walks the axis serially (neighbouring invocations handle
// neighbouring slices: coalesced when the axis is not the innermost one). SCAN == 1 (long axes, few
// slices): a workgroup per slice, see main(). lavapipe caps an invocation at 65535 loop
// iterations, so the host picks SCAN for long axes.
#include "common/dtype.glsl"
#include "common/index.glsl"
#define A V
#include "common/kahan.glsl"
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SCAN = 0;  // 1: one workgroup per slice (long axes)
layout(constant_id = 2) const uint PROD = 0;  // 1: running products (the array API's cumulative_prod)
// 1: the axis has unit stride in x and in the output (s_ax == so_ax == 1): slices are read and written
// in 16-byte chunks (common/rowchunks.glsl), through the texel views where TEX has their bit (TEX_X,
// TEX_O: defines from kernels/reduction.py); the same chunks and arithmetic on both load paths.
layout(constant_id = 3) const uint ROWS = 0;
layout(constant_id = 4) const uint TEX = 0;
// 1 (SCAN == 0): each invocation walks PER adjacent slices at once (the innermost outer dim has unit
// strides and whole texels, as the axis stride and the offsets: the host checks), one 16-byte chunk
// per step along the axis; each slice's sum is the element-by-element walk's.
layout(constant_id = 5) const uint COLS = 0;
// 1 / 2 (long axes, few slices): each slice cut in `parts` segments, one invocation each, no barriers.
// SPLIT 1 writes each segment's total to part; SPLIT 2 (the next dispatch) starts each segment from
// the sum of its slice's earlier totals (compensated, in order) and walks it writing every prefix.
layout(constant_id = 6) const uint SPLIT = 0;
layout(constant_id = 7) const uint ALIGN = 0;      // TEX's bits: operands with whole chunks only (rowchunks)
// 1 (ROWS, not ALIGN): x's and the output's chunks coincide in every slice (their offsets and outer strides
// agree modulo PER; the host checks), so a walk's steps between its first and last one are whole chunks of
// both: they run through loaders compiled for whole chunks only, the slice's ends through the general ones.
// Same steps, same bits; without it every step carries the element-by-element path, which SIMD CPU
// drivers run under a mask (lavapipe [300, 1030] f32, driver CPU ms: 0.93, aligned [300, 1032]: 0.44).
layout(constant_id = 8) const uint PEEL = 0;
layout(local_size_x_id = 0) in;
// Where a running value starts: 1 for products; for sums -0, the identity of IEEE addition (-0 + y == y
// for every y, -0 included; +0 + -0 is +0), so a slice starting with -0s gives -0s as numpy's cumsum does.
#define START (PROD != 0u ? A(1) : A(-0.0))

layout(set = 0, binding = 0) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 1) readonly buffer X { T x[]; };
// The same buffers as 16-byte words (whole chunks on the storage-buffer path), and their texel views.
layout(set = 0, binding = 0) writeonly buffer Out4 { uvec4 o4[]; };
layout(set = 0, binding = 1) readonly buffer X4 { uvec4 x4[]; };
layout(set = 0, binding = 2, rgba32ui) uniform readonly uimageBuffer x_t;
layout(set = 0, binding = 3, rgba32ui) uniform writeonly uimageBuffer o_t;
layout(set = 0, binding = 4) buffer Part { A part[]; };      // SPLIT: segment totals [n_slices, parts]
#include "common/texel16.glsl"
#include "common/rowchunks.glsl"
CHUNK_LOADER(load_x, x, x4, x_t, (TEX & TEX_X) != 0u, (ALIGN & TEX_X) != 0u)
CHUNK_STORER(store_o, o, o4, o_t, (TEX & TEX_O) != 0u, (ALIGN & TEX_O) != 0u)
CHUNK_LOADER(load_x_whole, x, x4, x_t, (TEX & TEX_X) != 0u, true)       // PEEL's inner steps
CHUNK_STORER(store_o_whole, o, o4, o_t, (TEX & TEX_O) != 0u, true)

layout(push_constant) uniform Params {
    uint n_slices; uint d; uint rank; uint off_in;
    uint off_out; int s_ax; uint so_ax; uint parts; int shape[MAX_RANK];
    int s_in[MAX_RANK]; int s_out[MAX_RANK];
} p;

void slice_base(uint e, out int bi, out int bo) {
    bi = int(p.off_in);
    bo = int(p.off_out);
    for (int k = int(p.rank) - 1; k >= 0; --k) {
        uint n = uint(p.shape[k]);
        int c = int(e % n);
        e /= n;
        bi += c * p.s_in[k];
        bo += c * p.s_out[k];
    }
}

// One step of walk()'s ROWS sums: the two chunks at e0 (element indices of x) of the slice part [a0, a1).
// `whole` (a constant at each call: PEEL's inner steps) promises both chunks whole in x and the output.
void sum_step(uint e0, uint a0, uint a1, int bi, int bo, inout A s, inout A comp, bool write, bool whole) {
    A v[PER], w[PER];
    uint lo = 0u, hi = PER, hi2 = PER;
    bool second = true;
    if (whole) {
        load_x_whole(e0, 0u, PER, v);
        load_x_whole(e0 + PER, 0u, PER, w);
    } else {
        lo = a0 > e0 ? a0 - e0 : 0u;
        hi = min(PER, a1 - e0);
        load_x(e0, lo, hi, v);
        second = e0 + PER < a1;
        hi2 = second ? min(PER, a1 - e0 - PER) : 0u;
        for (uint j = 0u; j < PER; ++j) w[j] = A(-0.0);
        if (second) load_x(e0 + PER, 0u, hi2, w);
        if ((ALIGN & TEX_X) == 0u)                     // the loader's +0 outside the slice: -0, which adds nothing
            for (uint j = 0u; j < PER; ++j) {
                if (j < lo || j >= hi) v[j] = A(-0.0);
                if (j >= hi2) w[j] = A(-0.0);
            }
    }
    // the step's prefixes (from -0), and exactly (TwoSum) what rounding them lost in all: er
    A pr = A(-0.0), er = A(0);
    for (uint j = 0u; j < PER; ++j) {
        precise A t = pr + v[j];
        precise A bb = t - pr;
        precise A lost = (pr - (t - bb)) + (v[j] - bb);
        precise A en = er + lost;
        pr = t; er = en; v[j] = t;
    }
    for (uint j = 0u; j < PER; ++j) {
        precise A t = pr + w[j];
        precise A bb = t - pr;
        precise A lost = (pr - (t - bb)) + (w[j] - bb);
        precise A en = er + lost;
        pr = t; er = en; w[j] = t;
    }
    if (write) {
        for (uint j = 0u; j < PER; ++j) { precise A y = v[j] - comp; precise A t = s + y; v[j] = t; }
        for (uint j = 0u; j < PER; ++j) { precise A y = w[j] - comp; precise A t = s + y; w[j] = t; }
        if (whole) {
            store_o_whole(e0 - uint(bi) + uint(bo), 0u, PER, v);
            store_o_whole(e0 + PER - uint(bi) + uint(bo), 0u, PER, w);
        } else {
            store_o(e0 - uint(bi) + uint(bo), lo, hi, v);
            if (second) store_o(e0 + PER - uint(bi) + uint(bo), 0u, hi2, w);
        }
    }
    kahan_add(s, comp, pr);                            // the step's total, its lost part into the compensation
    precise A c2 = comp - er;
    comp = isinf(s) || isnan(c2) ? A(0) : c2;
}

// Compensated running sum over [k0, k1) of one slice starting from (s, comp), writing every prefix.
// (PROD: a plain running product from s; comp stays 0.)
// With `write` false only the running value advances (SCAN's first pass, SPLIT 1).
// ROWS (unit strides) walks two 16-byte chunks a step, blocked: the step's own prefix sums P[j] of its
// <= 2 PER elements (the loader gives 0 outside [lo, hi)), every prefix is (s - comp) + P[j], and the
// compensated sum takes one step per two chunks, with the step's total and, exactly (TwoSum), what
// rounding the step's prefixes lost, so no step's rounding accumulates (without it test_reduction's
// cancelling rows drifted by ~u |x| a step). Each prefix's own rounding stays at the size of its step's
// elements; the serial chain of dependent additions is 2 PER times shorter than element by element: it
// bounded the kernel on SIMD CPU drivers (lavapipe [4, 128256] f32, one thread, device ms: element by
// element 1.17-1.19 -> 0.87-0.89; without the lost parts 0.77, but inaccurate as said).
void walk(int bi, int bo, uint k0, uint k1, inout A s, inout A comp, bool write) {
    if (ROWS != 0u) {                                  // unit strides: chunk by chunk
        uint a0 = uint(bi) + k0, a1 = uint(bi) + k1, lo, hi;
        A v[PER];
        if (PROD != 0u) {
            for (uint e0 = a0 / PER * PER; e0 < a1; e0 += PER) {
                lo = a0 > e0 ? a0 - e0 : 0u;
                hi = min(PER, a1 - e0);
                load_x(e0, lo, hi, v);
                for (uint j = 0u; j < PER; ++j) if (j >= lo && j < hi) { s *= v[j]; v[j] = s; }
                if (write) store_o(e0 - uint(bi) + uint(bo), lo, hi, v);
            }
            return;
        }
        uint e0 = a0 / PER * PER;
        if (PEEL != 0u) {
            if (e0 < a0 && e0 < a1) {                  // the slice's first step, cut at a0
                sum_step(e0, a0, a1, bi, bo, s, comp, write, false);
                e0 += 2u * PER;
            }
            for (; e0 + 2u * PER <= a1; e0 += 2u * PER) sum_step(e0, a0, a1, bi, bo, s, comp, write, true);
        }
        for (; e0 < a1; e0 += 2u * PER) sum_step(e0, a0, a1, bi, bo, s, comp, write, false);
        return;
    }
    for (uint k = k0; k < k1; ++k) {
        A v = A(LOAD(x[uint(bi + int(k) * p.s_ax)]));
        if (PROD != 0u) s *= v;
        else kahan_add(s, comp, v);
        if (write) o[uint(bo) + k * p.so_ax] = STORE(s - comp);
    }
}

shared A scan_s[WG];
shared A scan_e[WG];    // SCAN (sums): each scan_s value's low part, so the tree's additions lose nothing (TwoSum)

// (s, e) += (b, be) as a double-word sum (SCAN's tree): TwoSum of the high parts, the low parts added; an
// infinite sum keeps no low part (inf - inf is NaN).
void dw_add(inout A s, inout A e, A b, A be) {
    precise A t = s + b;
    precise A bb = t - s;
    precise A lost = (s - (t - bb)) + (b - bb);
    precise A lo = (e + be) + lost;
    s = t;
    e = isinf(t) ? A(0) : lo;
}

// The segment [k0, k1) of part k of a slice cut in `parts` (SCAN and SPLIT; whole chunks with ROWS).
void segment(uint k, uint parts, out uint k0, out uint k1) {
    uint len = (p.d + parts - 1u) / parts;
    if (ROWS != 0u) len = (len + PER - 1u) / PER * PER;    // segments of whole chunks (from the slice's start)
    k0 = min(k * len, p.d);
    k1 = min(k0 + len, p.d);
}

void split_main() {
    uint gid = linear_group() * WG + gl_LocalInvocationID.x, e = gid / p.parts, k = gid - e * p.parts, k0, k1;
    if (e >= p.n_slices) return;
    int bi, bo;
    slice_base(e, bi, bo);
    segment(k, p.parts, k0, k1);
    A s = START, comp = A(0);
    if (SPLIT == 1u) {
        walk(bi, bo, k0, k1, s, comp, false);
        part[gid] = s - comp;
        return;
    }
    for (uint i = e * p.parts; i < gid; ++i) {
        if (PROD != 0u) s *= part[i];
        else kahan_add(s, comp, part[i]);
    }
    walk(bi, bo, k0, k1, s, comp, true);               // from the compensated (s, comp) as it stands
}

void main() {
    if (SPLIT != 0u) { split_main(); return; }
    int bi, bo;
    if (SCAN == 0u && COLS != 0u) {
        uint e = (linear_group() * WG + gl_LocalInvocationID.x) * PER;
        if (e >= p.n_slices) return;
        slice_base(e, bi, bo);
        A s[PER], comp[PER], v[PER];
        for (uint j = 0u; j < PER; ++j) { s[j] = START; comp[j] = A(0); }
        for (uint k = 0u; k < p.d; ++k) {
            load_x(uint(bi + int(k) * p.s_ax), 0u, PER, v);
            for (uint j = 0u; j < PER; ++j) {
                if (PROD != 0u) s[j] *= v[j];
                else kahan_add(s[j], comp[j], v[j]);
                v[j] = s[j] - comp[j];
            }
            store_o(uint(bo) + k * p.so_ax, 0u, PER, v);
        }
        return;
    }
    if (SCAN == 0u) {
        uint e = linear_group() * WG + gl_LocalInvocationID.x;
        if (e >= p.n_slices) return;
        slice_base(e, bi, bo);
        A s = START, comp = A(0);
        walk(bi, bo, 0u, p.d, s, comp, true);
        return;
    }
    // SCAN: one workgroup per slice. Invocation t owns a contiguous segment; segment sums are
    // exclusive-scanned across the workgroup (Blelloch tree: pairwise), then each segment is
    // re-walked from its prefix. Keeps every invocation's serial work at ~2 d / WG.
    uint e = linear_group(), t = gl_LocalInvocationID.x;
    if (e >= p.n_slices) return;                       // uniform per workgroup
    slice_base(e, bi, bo);
    uint k0, k1;
    segment(t, WG, k0, k1);
    A s = START, comp = A(0);
    walk(bi, bo, k0, k1, s, comp, false);
    scan_s[t] = s;
    scan_e[t] = PROD != 0u ? A(0) : -comp;            // the segment's total: s - comp, as (s, -comp)
    barrier();
    for (uint off = 1u; off < WG; off <<= 1) {
        uint i = (t + 1u) * off * 2u - 1u;
        if (i < WG) {
            if (PROD != 0u) scan_s[i] *= scan_s[i - off];
            else { A hs = scan_s[i], he = scan_e[i]; dw_add(hs, he, scan_s[i - off], scan_e[i - off]); scan_s[i] = hs; scan_e[i] = he; }
        }
        barrier();
    }
    if (t == 0u) { scan_s[WG - 1u] = START; scan_e[WG - 1u] = A(0); }
    barrier();
    for (uint off = WG / 2u; off > 0u; off >>= 1) {
        uint i = (t + 1u) * off * 2u - 1u;
        if (i < WG) {
            A l = scan_s[i - off], le = scan_e[i - off];
            scan_s[i - off] = scan_s[i];
            scan_e[i - off] = scan_e[i];
            if (PROD != 0u) scan_s[i] *= l;
            else { A hs = scan_s[i], he = scan_e[i]; dw_add(hs, he, l, le); scan_s[i] = hs; scan_e[i] = he; }
        }
        barrier();
    }
    s = scan_s[t];
    comp = scan_e[t] == A(0) ? A(0) : -scan_e[t];     // continue the compensated sum from (s, -e); a zero
                                                       // compensation stays +0 (s - -0 would turn -0 into +0)
    walk(bi, bo, k0, k1, s, comp, true);
}
