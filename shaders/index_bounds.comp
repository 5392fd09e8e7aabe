#version 450
// Device-side bounds check of an index array (ops/indexing.py _bounds), one launch: each invocation
// tests PER indices against [lo, n) (lo = -n when negative_ok, else 0) and only for a bad one records
// it atomically into `found`, a host-visible slot the host set to {0, INT_MAX, INT_MIN}: the count of
// bad indices, the smallest one below lo, the largest one at or above n (in-range indices touch no
// atomics). Indices u32 / i32 / i64 (two u32 words) as index_fetch.glsl's IDX kinds, at element offset
// off_idx; the verdict is exact for every value, the recorded values saturate to int32 (the host says so).
// has_ignore: indices equal to the value `ignore` (two u32 words, an i64's; low word for 32-bit kinds)
// pass (nll_loss's ignore_index).
#include "common/index.glsl"
layout(local_size_x = WG) in;
const uint WGU = WG, PERU = PER;
layout(constant_id = 0) const uint IDX = 0;

layout(set = 0, binding = 0) buffer Found { uint bad; int lowest; int highest; } found;
layout(set = 0, binding = 1) readonly buffer Ids { uint ids[]; };

layout(push_constant) uniform Params {
    uint count; uint off_idx; uint n; uint negative_ok;
    uint has_ignore; uint ignore[2];
} p;

void test(uint pos) {
    bool neg, fits;
    uint mag;      // |value| when it fits in 32 bits
    int shown;     // the value saturated to int32
    if (IDX == IDX_INT64) {
        uint lo = ids[2u * pos], hi = ids[2u * pos + 1u];
        if (p.has_ignore != 0u && lo == p.ignore[0] && hi == p.ignore[1]) return;
        neg = int(hi) < 0;
        fits = neg ? (hi == 0xFFFFFFFFu && lo != 0u) : hi == 0u;
        mag = neg ? 0u - lo : lo;
        bool small = (hi == 0u && lo < 0x80000000u) || (hi == 0xFFFFFFFFu && lo >= 0x80000000u);
        shown = small ? int(lo) : (neg ? int(0x80000000u) : 0x7FFFFFFF);
    } else if (IDX == IDX_INT32) {
        if (p.has_ignore != 0u && ids[pos] == p.ignore[0]) return;
        shown = int(ids[pos]);
        neg = shown < 0;
        fits = true;
        mag = neg ? 0u - uint(shown) : uint(shown);
    } else {
        mag = ids[pos];
        if (p.has_ignore != 0u && mag == p.ignore[0]) return;
        neg = false;
        fits = true;
        shown = mag < 0x80000000u ? int(mag) : 0x7FFFFFFF;
    }
    if (neg && (p.negative_ok == 0u || !fits || mag > p.n)) {
        atomicAdd(found.bad, 1u);
        atomicMin(found.lowest, shown);
    } else if (!neg && (!fits || mag >= p.n)) {
        atomicAdd(found.bad, 1u);
        atomicMax(found.highest, shown);
    }
}

void main() {
    uint base = linear_group() * (WGU * PERU) + gl_LocalInvocationID.x;
    for (uint j = 0u; j < PERU; ++j) {
        uint i = base + j * WGU;
        if (i >= p.count) return;
        test(p.off_idx + i);
    }
}
