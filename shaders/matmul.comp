#version 450
// The matmul / matvec family: one generic kernel, C[batch] = A[batch] @ B[batch], f32 accumulation.
//   A_DT / B_DT / C_DT: 0 = f32, 1 = f16, 2 = bf16 (element types as stored; compute is f32).
//   MODE: 0 = matvec (M == 1), 1 = register-tiled (no shared memory), 2 = shared-memory tiled,
//         3 = small scalar (one invocation per output element), 4 = FMA-throughput calibration
//         (benches/bench_matmul.py: the device's FMA roof that matmul is measured against).
// A and B are read through their strides (transposed / sliced / broadcast views need no copy) from
// element offsets off_a / off_b; up to 3 batch dims with their own strides (0 = broadcast, GQA
// n_rep is a split batch dim with B stride 0). C is contiguous [batch, M, N] from off_c.
// Out-of-range rows/columns are clamped for loads and never stored, so no access leaves a view.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common/index.glsl"

layout(local_size_x = 64) in;
// SG8: 1 when the device's subgroups are 8 wide (lavapipe): the 8 lanes sharing rows are one
// subgroup, so A is shared with subgroupBroadcast (a register move) instead of 8 loads; 2 when
// subgroups are a multiple of 8 (shuffle within the 8-lane group); 0: every lane loads A itself.
layout(constant_id = 0) const uint SG8 = 0;
layout(constant_id = 1) const uint TM = 4;      // rows per invocation (register-tiled)
layout(constant_id = 2) const uint KSPLIT = 0;  // matvec: 1 = lanes split K (B contiguous along K)
layout(constant_id = 3) const uint TN_REG = 4;  // columns per invocation (register-tiled)

#define F32 0
#define F16 1
#define BF16 2
#define DECL_BUF(bind, name, DT) \
    layout(set = 0, binding = bind) readonly buffer name##_ { ELEM_##DT name[]; };
#define ELEM_0 float
#define ELEM_1 float16_t
#define ELEM_2 uint16_t
#define TOF_0(x) (x)
#define TOF_1(x) float(x)
#define TOF_2(x) uintBitsToFloat(uint(x) << 16)
#define CAT(a, b) a##b
#define XCAT(a, b) CAT(a, b)

#if C_DT == F32
layout(set = 0, binding = 0) writeonly buffer C_ { float c[]; };
#define STORE_C(i, v) c[i] = (v)
#elif C_DT == F16
layout(set = 0, binding = 0) writeonly buffer C_ { float16_t c[]; };
#define STORE_C(i, v) c[i] = float16_t(v)
#else
layout(set = 0, binding = 0) writeonly buffer C_ { uint16_t c[]; };
uint f32_to_bf16_bits(float f) {  // round to nearest even; NaN stays a quiet NaN
    uint u = floatBitsToUint(f);
    if (isnan(f)) return (u >> 16) | 0x40u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
#define STORE_C(i, v) c[i] = uint16_t(f32_to_bf16_bits(v))
#endif
layout(set = 0, binding = 1) readonly buffer A_ { XCAT(ELEM_, A_DT) a[]; };
layout(set = 0, binding = 2) readonly buffer B_ { XCAT(ELEM_, B_DT) b[]; };
#define LA(i) XCAT(TOF_, A_DT)(a[i])
#define LB(i) XCAT(TOF_, B_DT)(b[i])

layout(push_constant) uniform Params {
    uint M; uint N; uint K; uint batch;
    uint off_a; uint off_b; uint off_c;
    int sa_m; int sa_k; int sb_k; int sb_n;
    uint bshape[3]; int sa_batch[3]; int sb_batch[3];
} p;

// Element offsets of batch z's A and B matrices (batch dims: bshape[0] outermost).
void batch_bases(uint z, out int ba, out int bb) {
    uint i2 = z % p.bshape[2]; z /= p.bshape[2];
    uint i1 = z % p.bshape[1]; uint i0 = z / p.bshape[1];
    ba = int(p.off_a) + int(i0) * p.sa_batch[0] + int(i1) * p.sa_batch[1] + int(i2) * p.sa_batch[2];
    bb = int(p.off_b) + int(i0) * p.sb_batch[0] + int(i1) * p.sb_batch[1] + int(i2) * p.sb_batch[2];
}

// x from lane `src` of this lane's 8-lane group.
float share8(float x, uint src) {
    if (SG8 == 1u) return subgroupBroadcast(x, src);
    return subgroupShuffle(x, (gl_SubgroupInvocationID & ~7u) | src);
}

#if MODE == 0
// ---- matvec: c[n] = sum_k a[k] * B[k, n] ------------------------------------------------------------
// KSPLIT == 0 (B contiguous along N, e.g. x @ W): lane owns columns n0 + lane + 64 j, a shared by the
// 8-lane groups. KSPLIT == 1 (B contiguous along K, e.g. x @ W.T): the workgroup owns NC columns,
// lanes stride over K and the partial sums are reduced (subgroups, then shared memory).
#define TNV 4u
#define NC 4u
shared float red[64][NC];  // one row per subgroup (any subgroup size)
void main() {
    uint tiles = KSPLIT == 1u ? (p.N + NC - 1u) / NC : (p.N + 64u * TNV - 1u) / (64u * TNV);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;
    uint tile = g % tiles, z = g / tiles;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x;
    if (KSPLIT == 0u) {
        uint n0 = tile * 64u * TNV + l;
        int col[TNV];
        float acc[TNV];
        for (uint j = 0u; j < TNV; ++j) { col[j] = int(min(n0 + 64u * j, p.N - 1u)) * p.sb_n; acc[j] = 0.0; }
        uint k = 0u;
        if (SG8 != 0u) {
            uint ln = l & 7u;
            for (; k + 8u <= p.K; k += 8u) {
                float av = LA(ba + int(k + ln) * p.sa_k);
                for (uint kk = 0u; kk < 8u; ++kk) {
                    float x = share8(av, kk);
                    int row = bb + int(k + kk) * p.sb_k;
                    for (uint j = 0u; j < TNV; ++j) acc[j] = fma(x, LB(row + col[j]), acc[j]);
                }
            }
        }
        for (; k < p.K; ++k) {
            float x = LA(ba + int(k) * p.sa_k);
            int row = bb + int(k) * p.sb_k;
            for (uint j = 0u; j < TNV; ++j) acc[j] = fma(x, LB(row + col[j]), acc[j]);
        }
        uint cb = p.off_c + z * p.N;
        for (uint j = 0u; j < TNV; ++j) if (n0 + 64u * j < p.N) STORE_C(cb + n0 + 64u * j, acc[j]);
    } else {
        uint n0 = tile * NC;
        int col[NC];
        float acc[NC];
        for (uint j = 0u; j < NC; ++j) { col[j] = int(min(n0 + j, p.N - 1u)) * p.sb_n; acc[j] = 0.0; }
        for (uint k = l; k < p.K; k += 64u) {
            float x = LA(ba + int(k) * p.sa_k);
            int row = bb + int(k) * p.sb_k;
            for (uint j = 0u; j < NC; ++j) acc[j] = fma(x, LB(row + col[j]), acc[j]);
        }
        for (uint j = 0u; j < NC; ++j) acc[j] = subgroupAdd(acc[j]);
        uint nsg = (64u + gl_SubgroupSize - 1u) / gl_SubgroupSize;
        if (subgroupElect())
            for (uint j = 0u; j < NC; ++j) red[gl_SubgroupID][j] = acc[j];
        barrier();
        if (l < NC && n0 + l < p.N) {
            float s = 0.0;
            for (uint q = 0u; q < nsg; ++q) s += red[q][l];
            STORE_C(p.off_c + z * p.N + n0 + l, s);
        }
    }
}

#elif MODE == 1 || MODE == 2
// ---- register tile: each invocation accumulates TM x TN outputs -------------------------------------
// Lanes l = 8 * rg + ln: ln picks columns (n0 + ln + 8 j), rg picks a row group. Register-tiled:
// the workgroup is TM rows x (64 * TN) columns, all row groups on the same rows (small M).
// Tiled: 64 x 64 blocks, BK-deep slabs of A and B staged in shared memory (f32, 2 x 8 KiB + pad).
#if MODE == 1
#define TN TN_REG
#define WROWS TM
#define WCOLS (64u * TN)
#else
#define TN 8u
#define TMT 8u
#define BM 64u
#define BN 64u
#define BK 32u
#define WROWS BM
#define WCOLS BN
shared float As[BK][BM + 1u];
shared float Bs[BK][BN + 1u];
#endif

void main() {
    uint tiles_n = (p.N + WCOLS - 1u) / WCOLS;
    uint tiles = tiles_n * ((p.M + WROWS - 1u) / WROWS);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;   // uniform per workgroup: barriers below stay legal
    uint tile = g % tiles, z = g / tiles;
    uint m_blk = (tile / tiles_n) * WROWS, n_blk = (tile % tiles_n) * WCOLS;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x, ln = l & 7u, rg = l >> 3;
#if MODE == 1
    const uint R = TM;
    uint n0 = n_blk + rg * (8u * TN) + ln;     // row groups side by side along N
    uint m0 = m_blk;
    int arow[TM];
    for (uint i = 0u; i < TM; ++i) arow[i] = ba + int(min(m0 + i, p.M - 1u)) * p.sa_m;
    int bcol[TN];
    for (uint j = 0u; j < TN; ++j) bcol[j] = bb + int(min(n0 + 8u * j, p.N - 1u)) * p.sb_n;
    float acc[TM][TN];
#else
    const uint R = TMT;
    float acc[TMT][TN];
#endif
    for (uint i = 0u; i < R; ++i) for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

#if MODE == 1
    uint k = 0u;
    if (SG8 != 0u) {
        for (; k + 8u <= p.K; k += 8u) {
            float ar[TM];
            for (uint i = 0u; i < TM; ++i) ar[i] = LA(arow[i] + int(k + ln) * p.sa_k);
            for (uint kk = 0u; kk < 8u; ++kk) {
                int krow = int(k + kk) * p.sb_k;
                float bv[TN];
                for (uint j = 0u; j < TN; ++j) bv[j] = LB(bcol[j] + krow);
                for (uint i = 0u; i < TM; ++i) {
                    float x = share8(ar[i], kk);
                    for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(x, bv[j], acc[i][j]);
                }
            }
        }
    }
    for (; k < p.K; ++k) {
        float bv[TN];
        for (uint j = 0u; j < TN; ++j) bv[j] = LB(bcol[j] + int(k) * p.sb_k);
        for (uint i = 0u; i < TM; ++i) {
            float x = LA(arow[i] + int(k) * p.sa_k);
            for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(x, bv[j], acc[i][j]);
        }
    }
    uint cb = p.off_c + z * p.M * p.N;
    for (uint i = 0u; i < TM; ++i) {
        if (m0 + i >= p.M) break;
        for (uint j = 0u; j < TN; ++j)
            if (n0 + 8u * j < p.N) STORE_C(cb + (m0 + i) * p.N + n0 + 8u * j, acc[i][j]);
    }
#else
    // Cooperative slab loads: 64 lanes fill BK x BM of A and BK x BN of B (clamped rows/cols,
    // zeros past K so the tail slab adds nothing).
    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
        for (uint e = l; e < BK * BM; e += 64u) {
            uint kk = e / BM, mm = e % BM;       // consecutive lanes walk M: A column reads
            uint k = k0 + kk;
            As[kk][mm] = k < p.K ? LA(ba + int(min(m_blk + mm, p.M - 1u)) * p.sa_m + int(k) * p.sa_k) : 0.0;
        }
        for (uint e = l; e < BK * BN; e += 64u) {
            uint kk = e / BN, nn = e % BN;
            uint k = k0 + kk;
            Bs[kk][nn] = k < p.K ? LB(bb + int(k) * p.sb_k + int(min(n_blk + nn, p.N - 1u)) * p.sb_n) : 0.0;
        }
        barrier();
        for (uint kk = 0u; kk < BK; ++kk) {
            float bv[TN];
            for (uint j = 0u; j < TN; ++j) bv[j] = Bs[kk][ln + 8u * j];
            for (uint i = 0u; i < TMT; ++i) {
                float x = As[kk][rg + 8u * i];
                for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(x, bv[j], acc[i][j]);
            }
        }
        barrier();
    }
    uint cb = p.off_c + z * p.M * p.N;
    for (uint i = 0u; i < TMT; ++i) {
        uint m = m_blk + rg + 8u * i;
        if (m >= p.M) break;
        for (uint j = 0u; j < TN; ++j) {
            uint n = n_blk + ln + 8u * j;
            if (n < p.N) STORE_C(cb + m * p.N + n, acc[i][j]);
        }
    }
#endif
}

#elif MODE == 4
// ---- calibration: 16 independent FMA chains per invocation, p.K iterations of 32 FMAs -------------
#define CH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
void main() {
    uint i = linear_group() * 64u + gl_LocalInvocationID.x;
    float x = float(i) * 1e-9, m = 0.999999 + x * 1e-12, q = 1e-7;
#define DECL(j) float s##j = x + float(j);
    CH(DECL)
    for (uint k = 0u; k < p.K; ++k) {
#define STEP(j) s##j = fma(s##j, m, q);
        CH(STEP) CH(STEP)
    }
    float s = 0.0;
#define SUM(j) s += s##j;
    CH(SUM)
    if (i < p.N) STORE_C(p.off_c + i, s);
}

#else
// ---- small: one invocation per output element, 16 x 16 outputs per workgroup (64 lanes x 4) -------
void main() {
    uint tiles_n = (p.N + 15u) / 16u;
    uint tiles = tiles_n * ((p.M + 15u) / 16u);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;
    uint tile = g % tiles, z = g / tiles;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x;
    for (uint q = 0u; q < 4u; ++q) {
        uint m = (tile / tiles_n) * 16u + (l >> 4) + 4u * q, n = (tile % tiles_n) * 16u + (l & 15u);
        if (m >= p.M || n >= p.N) continue;
        float acc = 0.0;
        int ar = ba + int(m) * p.sa_m, bc = bb + int(n) * p.sb_n;
        for (uint k = 0u; k < p.K; ++k) acc = fma(LA(ar + int(k) * p.sa_k), LB(bc + int(k) * p.sb_k), acc);
        STORE_C(p.off_c + z * p.M * p.N + m * p.N + n, acc);
    }
}
#endif
