#version 450
// Scaled-dot-product attention, forward and backward: seven kernels from one source, chosen by KIND.
//   KIND_SINGLE      flash_attn_{f32,bf16,f16}   single pass: one workgroup per (b, hq, query row); the
//           visible score row (<= SKMAX keys) lives in shared memory.
//   KIND_TILED       flash_attention[_f16,_bf16] FlashAttention-2: one workgroup per (b, hkv, BR rows of
//           (query, GQA head) pairs), key/value tiles of BC keys streamed with an online softmax;
//           no score matrix beyond one BR x BC tile (in shared memory) exists anywhere.
//   KIND_DECODE      flash_decode_{f32,f16,bf16}   flash-decoding: the tiled kernel's online softmax
//           for few rows per kv head (decode), the keys split over nsplit workgroups per row block;
//           K and V read in 16-byte chunks (texel views where the device reads them faster).
//   KIND_COMBINE     flash_decode_combine_{f32,f16,bf16}: the exact log-sum-exp merge of the splits.
//   KIND_BACKWARD_Q/K/V  flash_attn_backward_{q,k,v}_f32: dQ per query row (also writes delta = rowsum(dO*O)),
//           dK / dV per key row, recomputing P from the forward's log-sum-exp.
// Semantics shared by all kinds (ops/attention.py documents them for users):
//   s = scale * q.k;  softcap: s = cap * tanh(s / cap);  ALiBi: s -= slope[h] * |j - i - (Sk - Sq)|;
//   query i sees key j iff -wl <= j - i - (Sk - Sq) <= wr (a negative bound is unbounded; causal is
//   wr = 0, i.e. bottom-right aligned). The visible keys of a row form one contiguous band, so no
//   kernel ever computes a masked score. Rows that see no key give O = 0 and lse = -inf.
// D (head dim) is specialization constant 0, so every shared/private array is sized exactly.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_ballot : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#include "common/dtype.glsl"
#include "common/index.glsl"

#define NEG_INF uintBitsToFloat(0xff800000u)
// KIND_* and the Params flag bits FLAG_* are defines from the host's tables (kernels/attention.py):
//   FLAG_ALIBI; tiled: FLAG_RESUME (a previous launch left (m, l, acc) in st), FLAG_PARTIAL (more
//   keys follow: store (m, l, acc) instead of o and lse); backward: FLAG_ACCUM (add to grad, a
//   previous launch covered other keys / rows).

layout(constant_id = 0) const uint D = 64;
layout(constant_id = 4) const uint SG8 = 0;   // 1: subgroups of 8, 2: a multiple of 8, 0: other
const uint D8 = D & ~7u;                      // dims done 8 at a time (the rest one by one)

// Kernels read shared vectors 8 at a time: each lane of an 8-lane group loads one of 8
// consecutive values and bcast8 hands them to the others (a register move on lavapipe, where a
// shared load at a per-lane address is an 8-way gather). Uniform control flow only.
float bcast8(float x, uint src) {
    return SG8 == 1u ? subgroupBroadcast(x, src) : subgroupShuffle(x, (gl_SubgroupInvocationID & ~7u) | src);
}

// acc += sum_d SH[d] * BUF[base + d] for a shared D-vector SH (uniform control flow).
#define DOT(acc, SH, BUF, base) {                                                          \
    uint d_ = 0u;                                                                          \
    if (SG8 != 0u) {                                                                       \
        uint ln_ = gl_SubgroupInvocationID & 7u;                                           \
        for (; d_ < D8; d_ += 8u) {                                                        \
            float sv_ = SH[d_ + ln_];                                                      \
            [[unroll]] for (uint x_ = 0u; x_ < 8u; ++x_) acc += bcast8(sv_, x_) * LOAD(BUF[(base) + d_ + x_]); \
        }                                                                                  \
    }                                                                                      \
    for (; d_ < D; ++d_) acc += SH[d_] * LOAD(BUF[(base) + d_]);                           \
}

#if KIND == KIND_SINGLE || KIND == KIND_TILED || KIND == KIND_DECODE || KIND == KIND_COMBINE
// nsplit, split_keys: KIND_DECODE's key splits (split s covers keys [jb + s * split_keys, ...)) and
// the partial states KIND_COMBINE merges; the other kinds take nsplit = 1.
layout(push_constant) uniform Params {
    uint B; uint Hq; uint Hkv; uint Sq; uint Sk; uint flags; int wl; int wr; float scale; float cap;
    uint off_q; uint off_k; uint off_v; uint off_o; uint off_a; uint sa_b;
    uint q_b; uint q_h; uint q_s; uint k_b; uint k_h; uint k_s; uint v_b; uint v_h; uint v_s;
    uint jb; uint je; uint nsplit; uint split_keys;
} p;
layout(set = 0, binding = 0) writeonly buffer OutO { T o[]; };
layout(set = 0, binding = 1) writeonly buffer OutLse { float lse[]; };
#if KIND == KIND_COMBINE
layout(set = 0, binding = 2) readonly buffer State { float st[]; };
#else
layout(set = 0, binding = 2) readonly buffer InQ { T q[]; };
layout(set = 0, binding = 3) readonly buffer InK { T k[]; };
layout(set = 0, binding = 4) readonly buffer InV { T v[]; };
layout(set = 0, binding = 5) readonly buffer InAlibi { float alibi[]; };
#endif
#if KIND == KIND_TILED
layout(set = 0, binding = 6) buffer State { float st[]; };
#elif KIND == KIND_DECODE
layout(set = 0, binding = 6) writeonly buffer State { float st[]; };
// K and V as 16-byte words (whole aligned chunks on the storage-buffer path) and as rgba32ui views.
layout(set = 0, binding = 3) readonly buffer InK4 { uvec4 k4[]; };
layout(set = 0, binding = 4) readonly buffer InV4 { uvec4 v4[]; };
layout(set = 0, binding = 7, rgba32ui) uniform readonly uimageBuffer k_t;
layout(set = 0, binding = 8, rgba32ui) uniform readonly uimageBuffer v_t;
// TEX_P: the score tile goes through this workgroup's slice of a global scratch buffer, read and
// written through its rgba32ui view, instead of shared memory (see SCORE below).
layout(set = 0, binding = 9, rgba32ui) uniform coherent uimageBuffer p_t;
#define TEXEL16_NO_X
#include "common/texel16.glsl"
#endif
#else
// Backward tensors are contiguous [B, H, S, D] (offsets allowed). Each launch covers a range of
// keys (dQ) or query rows (dK/dV) and adds to grad under FLAG_ACCUM: the host splits long ranges
// so no invocation's loops exceed lavapipe's iteration cap (Device.loop_budget).
// Bindings are dense per kind:
// dV needs 0-5, dK 0-7, dQ 0-8.
layout(push_constant) uniform Params {
    uint B; uint Hq; uint Hkv; uint Sq; uint Sk; uint flags; int wl; int wr; float scale; float cap;
    uint off_q; uint off_k; uint off_v; uint off_o; uint off_do; uint off_lse; uint off_a; uint sa_b;
    uint jb; uint je;     // this launch's keys (dQ) or query rows (dK, dV): [jb, je)
} p;
layout(set = 0, binding = 0) buffer OutGrad { float grad[]; };   // read back under FLAG_ACCUM
layout(set = 0, binding = 1) readonly buffer InQ { T q[]; };
layout(set = 0, binding = 2) readonly buffer InK { T k[]; };
layout(set = 0, binding = 3) readonly buffer InDO { T dout[]; };
layout(set = 0, binding = 4) readonly buffer InLse { float lse[]; };
layout(set = 0, binding = 5) readonly buffer InAlibi { float alibi[]; };
#if KIND != KIND_BACKWARD_V
layout(set = 0, binding = 6) readonly buffer InV { T v[]; };
#endif
#if KIND == KIND_BACKWARD_Q
layout(set = 0, binding = 7) writeonly buffer OutDelta { float delta[]; };
layout(set = 0, binding = 8) readonly buffer InO { T o[]; };
#elif KIND == KIND_BACKWARD_K
layout(set = 0, binding = 7) readonly buffer InDelta { float delta[]; };
#endif
#endif

int diag() { return int(p.Sk) - int(p.Sq); }

// Visible keys of query row i: [lo, hi] (empty when hi < lo).
void key_band(uint i, out int lo, out int hi) {
    int c = int(i) + diag();
    lo = p.wl < 0 ? 0 : max(0, c - p.wl);
    hi = p.wr < 0 ? int(p.Sk) - 1 : min(int(p.Sk) - 1, c + p.wr);
}

// Queries that see key j: [lo, hi].
void query_band(uint j, out int lo, out int hi) {
    int c = int(j) - diag();
    lo = p.wr < 0 ? 0 : max(0, c - p.wr);
    hi = p.wl < 0 ? int(p.Sq) - 1 : min(int(p.Sq) - 1, c + p.wl);
}

float tanh_stable(float x) {
    float e = exp(-2.0 * abs(x));
    float t = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -t : t;
}

#if KIND != KIND_COMBINE
float slope_of(uint b, uint h) {
    return (p.flags & FLAG_ALIBI) != 0u ? alibi[p.off_a + b * p.sa_b + h] : 0.0;
}
#endif

// The logit of (i, j) from the raw dot product; th receives tanh(.) for the softcap gradient.
float logit(float dot_qk, uint i, uint j, float slope, out float th) {
    float s = dot_qk * p.scale;
    th = 0.0;
    if (p.cap > 0.0) {
        th = tanh_stable(s / p.cap);
        s = p.cap * th;
    }
    return s - slope * abs(float(int(j) - int(i) - diag()));
}

#if KIND != KIND_TILED && KIND != KIND_DECODE
#define WG 128u
layout(local_size_x = 128) in;
shared float s_red[WG];

float wg_sum(float x) {
    uint t = gl_LocalInvocationID.x;
    s_red[t] = x;
    barrier();
    [[unroll]] for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) s_red[t] += s_red[t + s];
        barrier();
    }
    float r = s_red[0];
    barrier();
    return r;
}

float wg_max(float x) {
    uint t = gl_LocalInvocationID.x;
    s_red[t] = x;
    barrier();
    [[unroll]] for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) s_red[t] = max(s_red[t], s_red[t + s]);
        barrier();
    }
    float r = s_red[0];
    barrier();
    return r;
}
#endif

#if KIND == KIND_SINGLE
// ---------------------------------------------------------------- single pass
layout(constant_id = 1) const uint SKMAX = 4096;   // score row capacity (host: >= Sk)
const uint NG = D >= WG ? 1u : WG / D;             // key groups in the P.V phase (fills idle threads)
const uint DL = D >= WG ? WG : D;                  // dims per key group
const uint DX = (D + DL - 1u) / DL;                // dims per invocation
shared float s_q[D];
shared float s_p[SKMAX];

void main() {
    uint row = linear_group();
    if (row >= p.B * p.Hq * p.Sq) return;           // whole workgroup: uniform
    uint t = gl_LocalInvocationID.x;
    uint i = row % p.Sq, bh = row / p.Sq, h = bh % p.Hq, b = bh / p.Hq;
    uint hk = h / (p.Hq / p.Hkv);
    uint qb = p.off_q + b * p.q_b + h * p.q_h + i * p.q_s;
    uint kb = p.off_k + b * p.k_b + hk * p.k_h;
    uint vb = p.off_v + b * p.v_b + hk * p.v_h;
    for (uint d = t; d < D; d += WG) s_q[d] = LOAD(q[qb + d]);
    barrier();
    int lo, hi;
    key_band(i, lo, hi);
    uint n = hi >= lo ? uint(hi - lo + 1) : 0u;
    float slope = slope_of(b, h), th, mx = NEG_INF;
    for (uint c0 = 0u; c0 < n; c0 += WG) {          // uniform loop (bcast8 needs every lane)
        uint c = c0 + t, j = uint(lo) + min(c, n - 1u), kr = kb + j * p.k_s;
        float acc = 0.0;
        uint d = 0u;
        if (SG8 != 0u) {
            uint ln = gl_SubgroupInvocationID & 7u;
            for (; d < D8; d += 8u) {
                float qv = s_q[d + ln];
                [[unroll]] for (uint x = 0u; x < 8u; ++x) acc += bcast8(qv, x) * LOAD(k[kr + d + x]);
            }
        }
        for (; d < D; ++d) acc += s_q[d] * LOAD(k[kr + d]);
        float s = logit(acc, i, j, slope, th);
        if (c < n) {
            s_p[c] = s;
            mx = max(mx, s);
        }
    }
    mx = wg_max(mx);
    float sum = 0.0;
    for (uint c = t; c < n; c += WG) {
        float e = exp(s_p[c] - mx);
        s_p[c] = e;
        sum += e;
    }
    sum = wg_sum(sum);   // its barriers also publish s_p
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    // P.V: invocation t owns dims dl, dl + DL, ... for key group g (keys g*8.. of each 8*NG
    // chunk when the groups are 8-lane aligned, else keys g, g + NG, ...); groups summed at the end.
    uint ob = p.off_o + row * D, dl = t % DL, g = t / DL;
    float acc[DX];
    [[unroll]] for (uint x = 0u; x < DX; ++x) acc[x] = 0.0;
    if (SG8 != 0u && DL % 8u == 0u) {                // uniform loop; idle lanes (g >= NG) add zeros
        uint ln = gl_SubgroupInvocationID & 7u;
        for (uint c0 = 0u; c0 < n; c0 += 8u * NG) {
            uint cl = c0 + g * 8u + ln;
            float pv = cl < n && g < NG ? s_p[cl] : 0.0;
            [[unroll]] for (uint y = 0u; y < 8u; ++y) {
                float pr = bcast8(pv, y);
                uint vr = vb + (uint(lo) + min(c0 + g * 8u + y, n - 1u)) * p.v_s;
                [[unroll]] for (uint x = 0u; x < DX; ++x) acc[x] += pr * LOAD(v[vr + min(dl + x * DL, D - 1u)]);
            }
        }
    } else if (g < NG) {
        for (uint c = g; c < n; c += NG) {
            uint vr = vb + (uint(lo) + c) * p.v_s;
            [[unroll]] for (uint x = 0u; x < DX; ++x) acc[x] += s_p[c] * LOAD(v[vr + min(dl + x * DL, D - 1u)]);
        }
    }
    if (NG == 1u) {
        [[unroll]] for (uint x = 0u; x < DX; ++x)
            if (dl + x * DL < D && g == 0u) o[ob + dl + x * DL] = STORE(acc[x] * inv);
    } else {                                         // DL = D < WG: one dim per invocation
        s_red[t] = acc[0];
        barrier();
        if (t < D) {
            float a = acc[0];
            for (uint k2 = 1u; k2 < NG; ++k2) a += s_red[t + k2 * D];
            o[ob + t] = STORE(a * inv);
        }
    }
    if (t == 0u) lse[row] = n > 0u ? mx + log(sum) : NEG_INF;
}

#elif KIND == KIND_TILED
// ---------------------------------------------------------------- FlashAttention-2 (tiled)
// A workgroup owns BR query rows of one kv head: rows are (query i, head of the GQA group) pairs,
// i-major, so GQA heads and decode steps share every K/V tile. Invocation t owns key column
// j0 + t of each BC-key tile (scores of all BR rows in registers) and output dims t, t + BC, ...
// Every K/V element is read once per workgroup by exactly one invocation, straight from global
// memory; shared memory holds only the query tile and one score tile:
// 4 * BR * (D + BC + 2) bytes, linear in D (BR = 16, BC = 64: 64 * D + 4.1 KiB; 20.5 KiB at D = 256).
// Online softmax per tile: invocation r < BR owns row r's running max m and sum l (the row
// reductions cost BC steps on BR invocations, not BR * BC on all of them); the rescale factor and
// new max reach the others through shared memory.
// A launch covers the keys [jb, je): the host splits long key ranges over several launches so no
// invocation's loops exceed lavapipe's per-invocation iteration cap (Device.loop_budget); between
// launches (m, l, unnormalized acc) of each row wait in the f32 state buffer st [rows, D + 2].
// Shared reads in the two hot loops (q.k over D, p.v over the tile's keys) go 8 at a time through
// bcast8; SG8 = 0 (subgroups not a multiple of 8) reads shared memory directly.
layout(local_size_x_id = 3) in;
layout(constant_id = 2) const uint BR = 16;          // rows per workgroup (register block)
layout(constant_id = 3) const uint BC = 64;          // keys per tile = invocations (a multiple of 8)
const uint DPT = (D + BC - 1u) / BC;                 // output dims per invocation
shared float sQ[BR * D];                             // query tile (pre-scaled unless softcap)
shared float sS[BR * BC];                            // logits, then probabilities, of the tile
shared float sM[BR];                                 // new row max (then row sum l at the end)
shared float sA[BR];                                 // rescale factor exp(m_old - m_new)

void main() {
    uint G = p.Hq / p.Hkv, nrow = G * p.Sq, nblk = (nrow + BR - 1u) / BR;
    uint wgid = linear_group();
    if (wgid >= p.B * p.Hkv * nblk) return;          // whole workgroup: uniform
    uint t = gl_LocalInvocationID.x;
    uint blk = wgid % nblk, bk = wgid / nblk, hk = bk % p.Hkv, b = bk / p.Hkv;
    uint r0 = blk * BR, nr = min(BR, nrow - r0);
    uint kb = p.off_k + b * p.k_b + hk * p.k_h;
    uint vb = p.off_v + b * p.v_b + hk * p.v_h;
    bool resume = (p.flags & FLAG_RESUME) != 0u, partial = (p.flags & FLAG_PARTIAL) != 0u;
    float qs = p.cap > 0.0 ? 1.0 : p.scale;
    for (uint e = t; e < BR * D; e += BC) {
        uint r = e / D, d = e % D, R = r0 + r;
        sQ[e] = r < nr ? LOAD(q[p.off_q + b * p.q_b + (hk * G + R % G) * p.q_h + (R / G) * p.q_s + d]) * qs : 0.0;
    }
    int lo[BR], hi[BR];
    float slope[BR], acc[BR * DPT];
    uint qi[BR], orow[BR];
    int wlo = int(p.Sk), whi = -1;
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
        uint R = min(r0 + r, nrow - 1u);
        qi[r] = R / G;
        orow[r] = (b * p.Hq + hk * G + R % G) * p.Sq + R / G;
        key_band(qi[r], lo[r], hi[r]);
        lo[r] = max(lo[r], int(p.jb));
        hi[r] = min(hi[r], int(p.je) - 1);
        if (r >= nr) hi[r] = -1;                     // padding rows see nothing
        if (hi[r] >= lo[r]) { wlo = min(wlo, lo[r]); whi = max(whi, hi[r]); }
        slope[r] = slope_of(b, hk * G + R % G);
        [[unroll]] for (uint x = 0u; x < DPT; ++x) acc[r * DPT + x] = 0.0;
        if (resume && r < nr)
            [[unroll]] for (uint x = 0u; x < DPT; ++x)
                acc[r * DPT + x] = st[orow[r] * (D + 2u) + 2u + min(t + x * BC, D - 1u)];
    }
    // Invocation t < BR: row t's running max and sum.
    uint Rt = min(r0 + t, nrow - 1u), ro = (b * p.Hq + hk * G + Rt % G) * p.Sq + Rt / G;
    float m = NEG_INF, l = 0.0;
    if (resume && t < nr) {
        m = st[ro * (D + 2u)];
        l = st[ro * (D + 2u) + 1u];
    }
    barrier();
    for (int j0 = wlo; j0 <= whi; j0 += int(BC)) {
        int j = j0 + int(t);
        float s[BR];
        [[unroll]] for (uint r = 0u; r < BR; ++r) s[r] = 0.0;
        // No branch around the loop: shared loads stay in uniform control flow (lavapipe's scalar
        // path); columns past the band read a valid row and are masked below.
        uint kr = kb + uint(min(j, whi)) * p.k_s;
        uint d = 0u;
        if (SG8 != 0u) {
            uint ln = gl_SubgroupInvocationID & 7u;
            [[dont_unroll]] for (; d < D8; d += 8u) {
                float qv[BR];
                [[unroll]] for (uint r = 0u; r < BR; ++r) qv[r] = sQ[r * D + d + ln];
                [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                    float kv = LOAD(k[kr + d + x]);
                    [[unroll]] for (uint r = 0u; r < BR; ++r) s[r] += bcast8(qv[r], x) * kv;
                }
            }
        }
        [[dont_unroll]] for (; d < D; ++d) {
            float kv = LOAD(k[kr + d]);
            [[unroll]] for (uint r = 0u; r < BR; ++r) s[r] += sQ[r * D + d] * kv;
        }
        float th;
        [[unroll]] for (uint r = 0u; r < BR; ++r) {
            bool vis = j >= lo[r] && j <= hi[r];
            float x = p.cap > 0.0 ? logit(s[r], qi[r], uint(j), slope[r], th)
                                  : s[r] - slope[r] * abs(float(j - int(qi[r]) - diag()));
            s[r] = vis ? x : NEG_INF;
            sS[r * BC + t] = s[r];
        }
        barrier();                                   // logits published
        if (t < BR) {
            float mn = m;
            for (uint c = 0u; c < BC; ++c) mn = max(mn, sS[t * BC + c]);
            sM[t] = mn;
            sA[t] = m == NEG_INF ? 0.0 : exp(m - mn);
            m = mn;
        }
        barrier();                                   // new max and rescale published
        [[unroll]] for (uint r = 0u; r < BR; ++r) {
            sS[r * BC + t] = s[r] == NEG_INF ? 0.0 : exp(s[r] - sM[r]);
            float a = sA[r];
            [[unroll]] for (uint x = 0u; x < DPT; ++x) acc[r * DPT + x] *= a;
        }
        barrier();                                   // probabilities published
        if (t < BR) {
            float lt = 0.0;
            for (uint c = 0u; c < BC; ++c) lt += sS[t * BC + c];
            l = l * sA[t] + lt;
        }
        uint nc = uint(min(int(BC), whi - j0 + 1)), c = 0u;
        if (SG8 != 0u) {
            uint ln = gl_SubgroupInvocationID & 7u;
            [[dont_unroll]] for (; c + 8u <= nc; c += 8u) {
                float pv[BR];
                [[unroll]] for (uint r = 0u; r < BR; ++r) pv[r] = sS[r * BC + c + ln];
                [[unroll]] for (uint y = 0u; y < 8u; ++y) {
                    uint vr = vb + (uint(j0) + c + y) * p.v_s;
                    float vv[DPT];
                    [[unroll]] for (uint x = 0u; x < DPT; ++x)
                        vv[x] = LOAD(v[vr + min(t + x * BC, D - 1u)]);   // dims >= D: computed, never stored
                    [[unroll]] for (uint r = 0u; r < BR; ++r) {
                        float pr = bcast8(pv[r], y);
                        [[unroll]] for (uint x = 0u; x < DPT; ++x) acc[r * DPT + x] += pr * vv[x];
                    }
                }
            }
        }
        [[dont_unroll]] for (; c < nc; ++c) {
            uint vr = vb + (uint(j0) + c) * p.v_s;
            float vv[DPT];
            [[unroll]] for (uint x = 0u; x < DPT; ++x) vv[x] = LOAD(v[vr + min(t + x * BC, D - 1u)]);
            [[unroll]] for (uint r = 0u; r < BR; ++r) {
                float pr = sS[r * BC + c];
                [[unroll]] for (uint x = 0u; x < DPT; ++x) acc[r * DPT + x] += pr * vv[x];
            }
        }
        barrier();                                   // sS consumed before the next tile
    }
    if (partial) {                                   // more keys follow in a later launch
        if (t < nr) {
            st[ro * (D + 2u)] = m;
            st[ro * (D + 2u) + 1u] = l;
        }
        [[unroll]] for (uint r = 0u; r < BR; ++r)
            [[unroll]] for (uint x = 0u; x < DPT; ++x) {
                uint d = t + x * BC;
                if (r < nr && d < D) st[orow[r] * (D + 2u) + 2u + d] = acc[r * DPT + x];
            }
        return;
    }
    if (t < BR) sM[t] = l;
    if (t < nr) lse[ro] = l > 0.0 ? m + log(l) : NEG_INF;
    barrier();
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
        float inv = sM[r] > 0.0 ? 1.0 / sM[r] : 0.0;
        [[unroll]] for (uint x = 0u; x < DPT; ++x) {
            uint d = t + x * BC;
            if (r < nr && d < D) o[p.off_o + orow[r] * D + d] = STORE(acc[r * DPT + x] * inv);
        }
    }
}

#elif KIND == KIND_DECODE
// ---------------------------------------------------------------- flash-decoding (split keys)
// The tiled kernel's online softmax for few rows per kv head (decode: G * Sq <= BR), with the keys
// of each row block split over nsplit workgroups (flash-decoding, as ggml's split_k): split s covers
// keys [jb + s * split_keys, jb + (s + 1) * split_keys) of [jb, je). With nsplit = 1 the workgroup
// writes o and lse itself; else each writes its rows' (m, l, unnormalized acc) to
// st[(s * rows + row) * (D + 2)] and KIND_COMBINE merges them.
// K and V rows whose start and stride are whole 16-byte texels (TEX_KC / TEX_VC, from the host,
// V also needing D a multiple of a texel) are read a chunk at a time: through their rgba32ui views
// when TEX has their bit (devices where texel reads are faster, the host's probe), else as uvec4
// words of the storage buffer; other layouts and K's dims past the last 8 element by element. All
// paths see the same values, so they give the same bits. The choices are specialization constants:
// a CPU driver runs both sides of a branch it cannot prove uniform.
// q.k: invocation t owns key j0 + t of each BC-key tile (8 dims per step; the query values reach
// the lanes through bcast8). P.V: invocation t owns texel column t % DL (PER dims) of key group
// t / DL; the NG groups' sums meet in shared memory at the end.
// Shared memory holds the query tile and the score tile as vec4s over 4 rows (row group gi = rows
// 4 gi .. 4 gi + 3): a CPU driver's shared loads go lane by lane (lavapipe: a loop over the 8 lanes
// per load instruction), so one vec4 load serves 4 rows.
layout(local_size_x_id = 3) in;
layout(constant_id = 2) const uint BR = 4;           // rows per workgroup
layout(constant_id = 3) const uint BC = 64;          // keys per tile = invocations (a multiple of 8)
layout(constant_id = 5) const uint TEX = 0;          // TEX_K | TEX_V: views bound
const uint DT = (D + PER - 1u) / PER;                // texel columns of a row
const uint NG = DT >= BC ? 1u : BC / DT;             // key groups in P.V
const uint DL = DT >= BC ? BC : DT;                  // texel columns per key group
const uint DX = (DT + DL - 1u) / DL;                 // texel columns per invocation
const uint RG = (BR + 3u) / 4u;                      // row groups of 4
// The score tile (vec4 of 4 rows per key) is read by every lane at a uniform address. Shared loads
// at any address go lane by lane on a CPU driver (lavapipe: a loop over the 8 lanes per load, ~4x
// the cost of the 16 multiply-adds each load feeds); a texel view load is one gather. So where the
// host's probe picked texel loads (TEX_P), the tile lives in this workgroup's slice of a scratch
// buffer, stored and loaded through its view (coherent, published by memoryBarrierImage + barrier).
const bool TEX_P_ON = (TEX & TEX_P) != 0u;
// A workgroup's scratch slice (TEX_P): the score tile, then (QREG) the query tile its lanes load
// into registers (a view load per vec4 instead of a lane-by-lane shared load).
const uint SPS = RG * (BC + D);
// QREG: every invocation also holds the whole query tile in registers (RG * D8 vec4s, the same in
// every lane), so the q.k loop reads neither shared memory nor another lane: on a CPU driver both
// are lane-by-lane loops (lavapipe's subgroupBroadcast also searches the first active lane each
// time), costlier than the multiply-adds they feed. Its steps unroll (constant register indices);
// kept for tiles of at most 128 vec4s per lane (the register file of a GPU lane is small).
const uint QREG = RG * D8 <= 128u ? 1u : 0u;
const uint NQR = QREG * RG * D8 > 0u ? QREG * RG * D8 : 1u;   // at least 1 (D < 8: D8 = 0)
const bool PV_BCAST = false;
shared vec4 sQ4[RG * D];                             // query tile (pre-scaled unless softcap); then the groups' sums
shared vec4 sS4[TEX_P_ON ? 1u : RG * BC];            // logits, then probabilities, of the tile
shared float sM[BR];
shared uvec4 sIdx[2];
shared float sA[BR];

vec4 bcast8v(vec4 x, uint src) {
    return SG8 == 1u ? subgroupBroadcast(x, src) : subgroupShuffle(x, (gl_SubgroupInvocationID & ~7u) | src);
}

// Rows 4 gi .. 4 gi + 3 of x[BR] as a vec4 (rows past BR: 0).
#define ROW4(x, r) ((r) < BR ? x[min((r), BR - 1u)] : 0.0)
#define rows4(x, gi) vec4(ROW4(x, (gi) * 4u), ROW4(x, (gi) * 4u + 1u), ROW4(x, (gi) * 4u + 2u), ROW4(x, (gi) * 4u + 3u))

// The score tile's entry i (keys of one row group) of the workgroup whose scratch slice starts at spb.
vec4 get_score(uint spb, uint i) {
    return TEX_P_ON ? uintBitsToFloat(imageLoad(p_t, int(spb + i))) : sS4[min(i, RG * BC - 1u)];
}
void put_score(uint spb, uint i, vec4 x) {
    if (TEX_P_ON) imageStore(p_t, int(spb + i), floatBitsToUint(x));
    else sS4[min(i, RG * BC - 1u)] = x;
}

// x = 8 consecutive K values from element e (e % 8 == 0 within the row).
void load8_k(uint e, out float x[8]) {
    if ((TEX & TEX_KC) != 0u) {
        [[unroll]] for (uint h = 0u; h < 8u / PER; ++h) {
            V c[PER];
            unpack16((TEX & TEX_K) != 0u ? imageLoad(k_t, int(e / PER + h)) : k4[e / PER + h], c);
            [[unroll]] for (uint j = 0u; j < PER; ++j) x[h * PER + j] = c[j];
        }
    } else {
        [[unroll]] for (uint j = 0u; j < 8u; ++j) x[j] = LOAD(k[e + j]);
    }
}

// x = V row vr's texel column c (dims c * PER ..; columns past the row read its last one, dims
// past D its last dim: they feed sums never stored).
void load_v(uint vr, uint c, out float x[PER]) {
    uint d0 = min(c, DT - 1u) * PER;
    if ((TEX & TEX_VC) != 0u) {
        V u[PER];
        unpack16((TEX & TEX_V) != 0u ? imageLoad(v_t, int((vr + d0) / PER)) : v4[(vr + d0) / PER], u);
        [[unroll]] for (uint j = 0u; j < PER; ++j) x[j] = u[j];
    } else {
        [[unroll]] for (uint j = 0u; j < PER; ++j) x[j] = LOAD(v[vr + min(d0 + j, D - 1u)]);
    }
}

void main() {
    uint G = p.Hq / p.Hkv, nrow = G * p.Sq, nblk = (nrow + BR - 1u) / BR, rows = p.B * p.Hq * p.Sq;
    uint wgid = linear_group();
    if (wgid >= p.B * p.Hkv * nblk * p.nsplit) return;   // whole workgroup: uniform
    uint t = gl_LocalInvocationID.x;
    uint sp = wgid % p.nsplit, bl = wgid / p.nsplit;
    uint blk = bl % nblk, bk = bl / nblk, hk = bk % p.Hkv, b = bk / p.Hkv;
    uint r0 = blk * BR, nr = min(BR, nrow - r0);
    uint kb = p.off_k + b * p.k_b + hk * p.k_h;
    uint vb = p.off_v + b * p.v_b + hk * p.v_h;
    int sjb = int(p.jb + sp * p.split_keys), sje = int(min(p.je, p.jb + (sp + 1u) * p.split_keys));
    float qs = p.cap > 0.0 ? 1.0 : p.scale;
    for (uint e = t; e < RG * D; e += BC) {
        uint gi = e / D, d = e % D;
        vec4 x = vec4(0.0);
        [[unroll]] for (uint c = 0u; c < 4u; ++c) {
            uint r = gi * 4u + c, R = min(r0 + r, nrow - 1u);
            float qv = LOAD(q[p.off_q + b * p.q_b + (hk * G + R % G) * p.q_h + (R / G) * p.q_s + d]) * qs;
            x[c] = r < nr ? qv : 0.0;
        }
        sQ4[e] = x;
        if (TEX_P_ON && QREG != 0u) imageStore(p_t, int(wgid * SPS + RG * BC + e), floatBitsToUint(x));
    }
    if (TEX_P_ON) memoryBarrierImage();
    // The divisions' results pass through shared memory: a CPU driver's coroutine lowering (lavapipe's
    // barriers) recomputes arithmetic live across a barrier after every barrier instead of keeping it,
    // and these are per-lane divisions; a loaded value is kept.
    if (t == 0u) {
        sIdx[0] = uvec4(G, b, hk, sp);
        sIdx[1] = uvec4(r0 / G, r0 % G, nr, 0u);
    }
    barrier();
    {
        uvec4 w0 = sIdx[0], w1 = sIdx[1];
        G = w0.x; b = w0.y; hk = w0.z; sp = w0.w;
        nr = w1.z;
    }
    uint i0 = sIdx[1].x, g0 = sIdx[1].y;
    kb = p.off_k + b * p.k_b + hk * p.k_h;
    vb = p.off_v + b * p.v_b + hk * p.v_h;
    sjb = int(p.jb + sp * p.split_keys);
    sje = int(min(p.je, p.jb + (sp + 1u) * p.split_keys));
    vec4 qr[NQR];
    if (QREG != 0u) {
        [[unroll]] for (uint i = 0u; i < NQR; ++i)
            qr[i] = TEX_P_ON ? uintBitsToFloat(imageLoad(p_t, int(wgid * SPS + RG * BC + (i % RG) * D + i / RG)))
                             : sQ4[(i % RG) * D + i / RG];
    }
    int lo[BR], hi[BR];
    float slope[BR], acc[BR * DX * PER];
    uint qi[BR], orow[BR];
    int wlo = int(p.Sk), whi = -1;
    uint iq = i0, gq = g0;                           // row r = (query iq, head hk * G + gq), i-major
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
        if (r > 0u && r < nr) {
            gq += 1u;
            if (gq == G) { gq = 0u; iq += 1u; }
        }
        qi[r] = iq;
        orow[r] = (b * p.Hq + hk * G + gq) * p.Sq + iq;
        key_band(qi[r], lo[r], hi[r]);
        lo[r] = max(lo[r], sjb);
        hi[r] = min(hi[r], sje - 1);
        if (r >= nr) hi[r] = -1;                     // padding rows see nothing
        if (hi[r] >= lo[r]) { wlo = min(wlo, lo[r]); whi = max(whi, hi[r]); }
        slope[r] = slope_of(b, hk * G + gq);
    }
    [[unroll]] for (uint x = 0u; x < BR * DX * PER; ++x) acc[x] = 0.0;
    uint Rt = min(r0 + t, nrow - 1u), ro = (b * p.Hq + hk * G + Rt % G) * p.Sq + Rt / G;
    float m = NEG_INF, l = 0.0;                      // row t's running max and sum (t < BR)
    uint g = t / DL, dl = t % DL, spb = wgid * SPS;
    barrier();
    for (int j0 = wlo; j0 <= whi; j0 += int(BC)) {
        int j = j0 + int(t);
        float s[BR];
        [[unroll]] for (uint r = 0u; r < BR; ++r) s[r] = 0.0;
        uint kr = kb + uint(min(j, whi)) * p.k_s;    // past the band: a valid row, masked below
        uint ln = gl_SubgroupInvocationID & 7u;
        uint d = 0u;
        if (QREG != 0u) {
            [[unroll]] for (uint i = 0u; i < D8 / 8u; ++i) {
                float kv[8];
                load8_k(kr + i * 8u, kv);
                [[unroll]] for (uint x = 0u; x < 8u; ++x)
                    [[unroll]] for (uint gi = 0u; gi < RG; ++gi) {
                        vec4 qx = qr[(i * 8u + x) * RG + gi];
                        [[unroll]] for (uint c = 0u; c < 4u; ++c)
                            if (gi * 4u + c < BR) s[min(gi * 4u + c, BR - 1u)] += qx[c] * kv[x];
                    }
            }
            d = D8;
        }
        [[dont_unroll]] for (; d < D8; d += 8u) {
            vec4 qv[RG];
            float kv[8];
            [[unroll]] for (uint gi = 0u; gi < RG; ++gi) qv[gi] = SG8 != 0u ? sQ4[gi * D + d + ln] : vec4(0.0);
            load8_k(kr + d, kv);
            [[unroll]] for (uint x = 0u; x < 8u; ++x)
                [[unroll]] for (uint gi = 0u; gi < RG; ++gi) {
                    vec4 qx = SG8 != 0u ? bcast8v(qv[gi], x) : sQ4[gi * D + d + x];
                    [[unroll]] for (uint c = 0u; c < 4u; ++c)
                        if (gi * 4u + c < BR) s[min(gi * 4u + c, BR - 1u)] += qx[c] * kv[x];
                }
        }
        [[dont_unroll]] for (; d < D; ++d) {
            float kv = LOAD(k[kr + d]);
            [[unroll]] for (uint gi = 0u; gi < RG; ++gi) {
                vec4 qx = sQ4[gi * D + d];
                [[unroll]] for (uint c = 0u; c < 4u; ++c)
                    if (gi * 4u + c < BR) s[min(gi * 4u + c, BR - 1u)] += qx[c] * kv;
            }
        }
        float th;
        [[unroll]] for (uint r = 0u; r < BR; ++r) {
            bool vis = j >= lo[r] && j <= hi[r];
            float x = p.cap > 0.0 ? logit(s[r], qi[r], uint(j), slope[r], th)
                                  : s[r] - slope[r] * abs(float(j - int(qi[r]) - diag()));
            s[r] = vis ? x : NEG_INF;
        }
        [[unroll]] for (uint gi = 0u; gi < RG; ++gi) put_score(spb, gi * BC + t, rows4(s, gi));
        if (TEX_P_ON) memoryBarrierImage();
        barrier();                                   // logits published
        if (t < BR) {
            float mn = m;
            for (uint c = 0u; c < BC; ++c) mn = max(mn, get_score(spb, (t / 4u) * BC + c)[t % 4u]);
            sM[t] = mn;
            sA[t] = m == NEG_INF ? 0.0 : exp(m - mn);
            m = mn;
        }
        barrier();                                   // new max and rescale published
        [[unroll]] for (uint r = 0u; r < BR; ++r) {
            s[r] = s[r] == NEG_INF ? 0.0 : exp(s[r] - sM[r]);
            float a = sA[r];
            [[unroll]] for (uint x = 0u; x < DX * PER; ++x) acc[r * DX * PER + x] *= a;
        }
        [[unroll]] for (uint gi = 0u; gi < RG; ++gi) put_score(spb, gi * BC + t, rows4(s, gi));
        if (TEX_P_ON) memoryBarrierImage();
        barrier();                                   // probabilities published
        if (t < BR) {
            float lt = 0.0;
            for (uint c = 0u; c < BC; ++c) lt += get_score(spb, (t / 4u) * BC + c)[t % 4u];
            l = l * sA[t] + lt;
        }
        uint nc = uint(min(int(BC), whi - j0 + 1));
        // P.V reads the probabilities at addresses uniform in each 8-lane group (DL % 8 == 0), one
        // vec4 load per 4 rows; PV_BCAST (not taken: lavapipe's broadcasts cost more than that load)
        // would hand them over by bcast8 instead.
        if (PV_BCAST && SG8 != 0u && DL % 8u == 0u) {   // uniform loop; idle lanes (g >= NG) add zeros
            [[dont_unroll]] for (uint c0 = 0u; c0 < nc; c0 += 8u * NG) {
                uint cl = c0 + g * 8u + ln;
                vec4 pv[RG];
                [[unroll]] for (uint gi = 0u; gi < RG; ++gi) {
                    vec4 x = get_score(spb, gi * BC + min(cl, BC - 1u));
                    pv[gi] = cl < nc && g < NG ? x : vec4(0.0);
                }
                [[unroll]] for (uint y = 0u; y < 8u; ++y) {
                    uint vr = vb + (uint(j0) + min(c0 + g * 8u + y, nc - 1u)) * p.v_s;
                    vec4 pr[RG];
                    [[unroll]] for (uint gi = 0u; gi < RG; ++gi) pr[gi] = bcast8v(pv[gi], y);
                    [[unroll]] for (uint x = 0u; x < DX; ++x) {
                        float vv[PER];
                        load_v(vr, dl + x * DL, vv);
                        [[unroll]] for (uint r = 0u; r < BR; ++r)
                            [[unroll]] for (uint e = 0u; e < PER; ++e) acc[(r * DX + x) * PER + e] += pr[r / 4u][r % 4u] * vv[e];
                    }
                }
            }
        } else if (g < NG) {
            [[dont_unroll]] for (uint c = g; c < nc; c += NG) {
                uint vr = vb + (uint(j0) + c) * p.v_s;
                vec4 pr[RG];
                [[unroll]] for (uint gi = 0u; gi < RG; ++gi) pr[gi] = get_score(spb, gi * BC + c);
                [[unroll]] for (uint x = 0u; x < DX; ++x) {
                    float vv[PER];
                    load_v(vr, dl + x * DL, vv);
                    [[unroll]] for (uint r = 0u; r < BR; ++r)
                        [[unroll]] for (uint e = 0u; e < PER; ++e) acc[(r * DX + x) * PER + e] += pr[r / 4u][r % 4u] * vv[e];
                }
            }
        }
        barrier();                                   // sS consumed before the next tile
    }
    // The key groups' sums meet in group 0 (sQ is free now: the loop ended on a barrier).
    for (uint gg = 1u; gg < NG; ++gg) {
        if (g == gg)
            [[unroll]] for (uint r = 0u; r < BR; ++r)
                [[unroll]] for (uint x = 0u; x < DX; ++x)
                    [[unroll]] for (uint e = 0u; e < PER; ++e) {
                        uint d = (dl + x * DL) * PER + e;
                        if (d < D) sQ4[(r / 4u) * D + d][r % 4u] = acc[(r * DX + x) * PER + e];
                    }
        barrier();
        if (g == 0u)
            [[unroll]] for (uint r = 0u; r < BR; ++r)
                [[unroll]] for (uint x = 0u; x < DX; ++x)
                    [[unroll]] for (uint e = 0u; e < PER; ++e) {
                        uint d = (dl + x * DL) * PER + e;
                        if (d < D) acc[(r * DX + x) * PER + e] += sQ4[(r / 4u) * D + d][r % 4u];
                    }
        barrier();
    }
    bool mine = g == 0u;
    if (p.nsplit > 1u) {                             // a partial state for KIND_COMBINE
        if (t < nr) {
            st[(sp * rows + ro) * (D + 2u)] = m;
            st[(sp * rows + ro) * (D + 2u) + 1u] = l;
        }
        [[unroll]] for (uint r = 0u; r < BR; ++r)
            [[unroll]] for (uint x = 0u; x < DX; ++x)
                [[unroll]] for (uint e = 0u; e < PER; ++e) {
                    uint d = (dl + x * DL) * PER + e;
                    if (mine && r < nr && d < D) st[(sp * rows + orow[r]) * (D + 2u) + 2u + d] = acc[(r * DX + x) * PER + e];
                }
        return;
    }
    if (t < BR) sM[t] = l;
    if (t < nr) lse[ro] = l > 0.0 ? m + log(l) : NEG_INF;
    barrier();
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
        float inv = sM[r] > 0.0 ? 1.0 / sM[r] : 0.0;
        [[unroll]] for (uint x = 0u; x < DX; ++x)
            [[unroll]] for (uint e = 0u; e < PER; ++e) {
                uint d = (dl + x * DL) * PER + e;
                if (mine && r < nr && d < D) o[p.off_o + orow[r] * D + d] = STORE(acc[(r * DX + x) * PER + e] * inv);
            }
    }
}

#elif KIND == KIND_COMBINE
// ---------------------------------------------------------------- merge of KIND_DECODE's splits
// One workgroup per output row: M = max m_s, L = sum l_s exp(m_s - M), o = sum acc_s exp(m_s - M) / L,
// lse = M + log L (the exact log-sum-exp merge); splits that saw no key (m_s = -inf) add nothing, a
// row no split saw gives zeros and lse = -inf.
void main() {
    uint row = linear_group(), rows = p.B * p.Hq * p.Sq;
    if (row >= rows) return;
    uint t = gl_LocalInvocationID.x;
    float M = NEG_INF, L = 0.0;
    for (uint s = 0u; s < p.nsplit; ++s) M = max(M, st[(s * rows + row) * (D + 2u)]);
    for (uint s = 0u; s < p.nsplit; ++s) {
        float ms = st[(s * rows + row) * (D + 2u)];
        L += ms == NEG_INF ? 0.0 : st[(s * rows + row) * (D + 2u) + 1u] * exp(ms - M);
    }
    float inv = L > 0.0 ? 1.0 / L : 0.0;
    for (uint d = t; d < D; d += WG) {
        float a = 0.0;
        for (uint s = 0u; s < p.nsplit; ++s) {
            float ms = st[(s * rows + row) * (D + 2u)];
            a += ms == NEG_INF ? 0.0 : st[(s * rows + row) * (D + 2u) + 2u + d] * exp(ms - M);
        }
        o[p.off_o + row * D + d] = STORE(a * inv);
    }
    if (t == 0u) lse[row] = L > 0.0 ? M + log(L) : NEG_INF;
}

#elif KIND == KIND_BACKWARD_Q
// ---------------------------------------------------------------- dQ (and delta)
const uint DR = (D + WG - 1u) / WG;
shared float s_q[D];
shared float s_do[D];
shared float s_x[WG];

void main() {
    uint row = linear_group();
    if (row >= p.B * p.Hq * p.Sq) return;
    uint t = gl_LocalInvocationID.x;
    uint i = row % p.Sq, bh = row / p.Sq, h = bh % p.Hq, b = bh / p.Hq;
    uint hk = h / (p.Hq / p.Hkv);
    uint kb = p.off_k + (b * p.Hkv + hk) * p.Sk * D;
    uint vb = p.off_v + (b * p.Hkv + hk) * p.Sk * D;
    float part = 0.0;
    for (uint d = t; d < D; d += WG) {
        s_q[d] = LOAD(q[p.off_q + row * D + d]);
        float g = LOAD(dout[p.off_do + row * D + d]);
        s_do[d] = g;
        part += g * LOAD(o[p.off_o + row * D + d]);
    }
    float dl = wg_sum(part);                          // also publishes s_q / s_do
    if (t == 0u) delta[row] = dl;
    float li = lse[p.off_lse + row];
    int lo, hi;
    key_band(i, lo, hi);
    lo = max(lo, int(p.jb));
    hi = min(hi, int(p.je) - 1);
    float slope = slope_of(b, h), th;
    float acc[DR];
    [[unroll]] for (uint x = 0u; x < DR; ++x) acc[x] = 0.0;
    for (int c0 = lo; c0 <= hi; c0 += int(WG)) {
        int j = min(c0 + int(t), hi);                 // uniform control flow for bcast8; masked below
        uint kr = kb + uint(j) * D, vr = vb + uint(j) * D;
        float sd = 0.0, dp = 0.0;
        DOT(sd, s_q, k, kr);
        DOT(dp, s_do, v, vr);
        float pij = exp(logit(sd, i, uint(j), slope, th) - li);
        s_x[t] = c0 + int(t) <= hi ? pij * (dp - dl) * (p.cap > 0.0 ? 1.0 - th * th : 1.0) : 0.0;
        barrier();
        uint n = uint(min(int(WG), hi - c0 + 1));
        [[unroll]] for (uint x = 0u; x < DR; ++x) {
            uint d = min(t + x * WG, D - 1u);           // dims >= D: computed, never stored
            float a = acc[x];
            uint c = 0u;
            if (SG8 != 0u) {
                uint ln = gl_SubgroupInvocationID & 7u;
                for (; c + 8u <= n; c += 8u) {
                    float xv = s_x[c + ln];
                    [[unroll]] for (uint y = 0u; y < 8u; ++y) a += bcast8(xv, y) * LOAD(k[kb + (uint(c0) + c + y) * D + d]);
                }
            }
            for (; c < n; ++c) a += s_x[c] * LOAD(k[kb + (uint(c0) + c) * D + d]);
            acc[x] = a;
        }
        barrier();
    }
    [[unroll]] for (uint x = 0u; x < DR; ++x) {
        uint d = t + x * WG;
        if (d < D) grad[row * D + d] = acc[x] * p.scale + ((p.flags & FLAG_ACCUM) != 0u ? grad[row * D + d] : 0.0);
    }
}

#else
// ---------------------------------------------------------------- dK (KIND_BACKWARD_K) / dV (KIND_BACKWARD_V)
// One workgroup per (b, hkv, key j); the (query head in the group, query row) pairs that see j
// are processed WG at a time: each thread recomputes one p (and ds), then threads sum over them.
const uint DR = (D + WG - 1u) / WG;
shared float s_k[D];
#if KIND == KIND_BACKWARD_K
shared float s_v[D];
#endif
shared float s_x[WG];
shared uint s_row[WG];
#if KIND == KIND_BACKWARD_K
#define GSRC q                 // dK = scale * sum ds * q
#define GOFF p.off_q
#else
#define GSRC dout              // dV = sum p * dO
#define GOFF p.off_do
#endif

void main() {
    uint kr = linear_group();
    if (kr >= p.B * p.Hkv * p.Sk) return;
    uint t = gl_LocalInvocationID.x;
    uint j = kr % p.Sk, bhk = kr / p.Sk, hk = bhk % p.Hkv, b = bhk / p.Hkv;
    uint G = p.Hq / p.Hkv;
    for (uint d = t; d < D; d += WG) {
        s_k[d] = LOAD(k[p.off_k + kr * D + d]);
#if KIND == KIND_BACKWARD_K
        s_v[d] = LOAD(v[p.off_v + kr * D + d]);
#endif
    }
    barrier();
    int lo, hi;
    query_band(j, lo, hi);
    lo = max(lo, int(p.jb));
    hi = min(hi, int(p.je) - 1);
    uint nq = hi >= lo ? uint(hi - lo + 1) : 0u, total = nq * G;
    float th;
    float acc[DR];
    [[unroll]] for (uint x = 0u; x < DR; ++x) acc[x] = 0.0;
    for (uint c0 = 0u; c0 < total; c0 += WG) {
        uint e = min(c0 + t, total - 1u);              // uniform control flow for bcast8; masked below
        uint g = e / nq, i = uint(lo) + e % nq, h = hk * G + g;
        uint qrow = (b * p.Hq + h) * p.Sq + i;
        float sd = 0.0;
        DOT(sd, s_k, q, p.off_q + qrow * D);
#if KIND == KIND_BACKWARD_K
        float dp = 0.0;
        DOT(dp, s_v, dout, p.off_do + qrow * D);
#endif
        float pij = exp(logit(sd, i, j, slope_of(b, h), th) - lse[p.off_lse + qrow]);
#if KIND == KIND_BACKWARD_K
        float xv = pij * (dp - delta[qrow]) * (p.cap > 0.0 ? 1.0 - th * th : 1.0);
#else
        float xv = pij;
#endif
        s_x[t] = c0 + t < total ? xv : 0.0;
        s_row[t] = qrow;
        barrier();
        uint n = min(WG, total - c0);
        [[unroll]] for (uint x = 0u; x < DR; ++x) {
            uint d = min(t + x * WG, D - 1u);           // dims >= D: computed, never stored
            float a = acc[x];
            uint c = 0u;
            if (SG8 != 0u) {
                uint ln = gl_SubgroupInvocationID & 7u;
                for (; c + 8u <= n; c += 8u) {
                    float xv8 = s_x[c + ln], rw8 = uintBitsToFloat(s_row[c + ln]);
                    [[unroll]] for (uint y = 0u; y < 8u; ++y)
                        a += bcast8(xv8, y) * LOAD(GSRC[GOFF + floatBitsToUint(bcast8(rw8, y)) * D + d]);
                }
            }
            for (; c < n; ++c) a += s_x[c] * LOAD(GSRC[GOFF + s_row[c] * D + d]);
            acc[x] = a;
        }
        barrier();
    }
    [[unroll]] for (uint x = 0u; x < DR; ++x) {
        uint d = t + x * WG;
#if KIND == KIND_BACKWARD_K
        float g = acc[x] * p.scale;
#else
        float g = acc[x];
#endif
        if (d < D) grad[kr * D + d] = g + ((p.flags & FLAG_ACCUM) != 0u ? grad[kr * D + d] : 0.0);
    }
}
#endif
