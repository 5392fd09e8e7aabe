#version 450
// The matmul / matvec family: one generic kernel, C[batch] = A[batch] @ B[batch], f32 accumulation.
//   A_DT / B_DT / C_DT: 0 = f32, 1 = f16, 2 = bf16 (element types as stored; compute is f32).
//   MODE: 0 = matvec (M == 1), 1 = register-tiled (no shared memory), 2 = shared-memory tiled,
//         3 = small scalar (one invocation per output element).
// A and B are read through their strides (transposed / sliced / broadcast views need no copy) from
// element offsets off_a / off_b; up to 3 batch dims with their own strides (0 = broadcast, GQA
// n_rep is a split batch dim with B stride 0). C is contiguous [batch, M, N] from off_c.
// Out-of-range rows/columns are clamped for loads and never stored, so no access leaves a view.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#if MODE <= 1
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#include "common/index.glsl"

layout(local_size_x = 64) in;
// SG8: 1 when the device's subgroups are 8 wide (lavapipe): the 8 lanes sharing rows are one
// subgroup, so A is shared with subgroupBroadcast (a register move) instead of 8 loads; 2 when
// subgroups are a multiple of 8 (shuffle within the 8-lane group); 0: every lane loads A itself.
layout(constant_id = 0) const uint SG8 = 0;
layout(constant_id = 1) const uint TM = 4;      // rows per invocation (register-tiled / matvec)
layout(constant_id = 2) const uint KSPLIT = 0;  // matvec: 1 = lanes split K (B contiguous along K)
layout(constant_id = 3) const uint TNV = 1;     // 4-column groups per invocation (register-tiled)
// VEC bit 0: B is read 4 elements at a time through a vec4 view of its binding (the 4 elements are
// contiguous and 4-aligned: B rows along N for the register tile, along K for KSPLIT); bit 1: the
// same for A along K (KSPLIT). The host sets the bits only when strides/offsets allow; otherwise 4 scalar loads.
// Why: on lavapipe every SSBO load is a per-lane loop with a bounds check, so one 4-wide load costs
// little more than one scalar load.
layout(constant_id = 4) const uint VEC = 0;

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
#if MODE <= 1
// 4-element views of the same A / B bindings in 64-bit words (f32: two; f16 / bf16: one). Why 64-bit:
// lavapipe pays per loaded component whatever its width (matvec measured 1.7-1.8x faster than with
// vec4 / uvec2 views). Needs shaderInt64 (kernels/matmul.py: the matvec / register-tiled variants).
#define V4_0 u64vec2
#define V4_1 uint64_t
#define V4_2 uint64_t
#define TOF4_0(v) vec4(uintBitsToFloat(unpackUint2x32((v).x)), uintBitsToFloat(unpackUint2x32((v).y)))
#define TOF4_1(v) tof4_1(unpackUint2x32(v))
#define TOF4_2(v) tof4_2(unpackUint2x32(v))
vec4 tof4_1(uvec2 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
vec4 tof4_2(uvec2 v) { return vec4(uintBitsToFloat(v.x << 16), uintBitsToFloat(v.x & 0xFFFF0000u),
                                   uintBitsToFloat(v.y << 16), uintBitsToFloat(v.y & 0xFFFF0000u)); }
layout(set = 0, binding = 1) readonly buffer A4_ { XCAT(V4_, A_DT) a4[]; };
layout(set = 0, binding = 2) readonly buffer B4_ { XCAT(V4_, B_DT) b4[]; };
// Elements e.x .. e.w: one 4-wide load when VEC says e = e.x + (0, 1, 2, 3) with e.x % 4 == 0.
vec4 ld4a(ivec4 e) {
    if ((VEC & 2u) != 0u) return XCAT(TOF4_, A_DT)(a4[e.x >> 2]);
    return vec4(LA(e.x), LA(e.y), LA(e.z), LA(e.w));
}
vec4 ld4b(ivec4 e) {
    if ((VEC & 1u) != 0u) return XCAT(TOF4_, B_DT)(b4[e.x >> 2]);
    return vec4(LB(e.x), LB(e.y), LB(e.z), LB(e.w));
}
#endif

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

#if MODE <= 1
// ---- register tile (MODE 1; matvec MODE 0 with KSPLIT == 0 is its TM == 1 case) ---------------------
// Each invocation accumulates TM rows x 4 TNV columns; 8-lane groups: lane ln owns columns
// n0 + 4 ln + 32 j + (0..3), so the 8 lanes read contiguous 32-column segments of B's rows; all
// groups of a workgroup share the same TM rows. Per 8-deep K step the lanes load an 8 x 4 TNV slab of
// B once and then stream the TM rows over it: lane ln loads A[m, k + ln], share8 hands it to the other
// lanes. Why this shape (measured on lavapipe, where every SSBO element load is a per-lane loop and a
// subgroup broadcast a loop too, while FMAs and compiler spills are real 8-wide vector ops): each B
// element feeds TM FMAs and each broadcast 4 TNV vector FMAs; the slab and the TM x TNV accumulators
// live in LLVM's registers / stack (cheap vector spills), never in shared memory.
void regtile_main() {
    const uint GC = 32u * TNV, WC = 8u * GC;       // columns per 8-lane group / per workgroup
    uint tiles_n = (p.N + WC - 1u) / WC;
    uint tiles = tiles_n * ((p.M + TM - 1u) / TM);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;
    uint tile = g % tiles, z = g / tiles;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x, ln = l & 7u;
    uint m0 = (tile / tiles_n) * TM, nq = (tile % tiles_n) * WC + (l >> 3) * GC + 4u * ln;
    int arow[TM];
    [[unroll]] for (uint i = 0u; i < TM; ++i) arow[i] = ba + int(min(m0 + i, p.M - 1u)) * p.sa_m;
    ivec4 bcol[TNV];   // clamped columns (vector view: N % 4 == 0, so a clamped group stays whole)
    [[unroll]] for (uint j = 0u; j < TNV; ++j) {
        uint c0 = nq + 32u * j;
        bcol[j] = (VEC & 1u) != 0u ? ivec4(bb + int(min(c0, p.N - 4u)))
                                   : bb + ivec4(min(uvec4(c0) + uvec4(0u, 1u, 2u, 3u), uvec4(p.N - 1u))) * p.sb_n;
    }
    vec4 acc[TM][TNV];
    [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TNV; ++j) acc[i][j] = vec4(0.0);
    uint k = 0u;
    if (SG8 != 0u) {
        for (; k + 8u <= p.K; k += 8u) {
            vec4 bv[8][TNV];
            [[unroll]] for (uint kk = 0u; kk < 8u; ++kk)
                [[unroll]] for (uint j = 0u; j < TNV; ++j) bv[kk][j] = ld4b(bcol[j] + int(k + kk) * p.sb_k);
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                float av = LA(arow[i] + int(k + ln) * p.sa_k);
                [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) {
                    float x = share8(av, kk);
                    [[unroll]] for (uint j = 0u; j < TNV; ++j) acc[i][j] = fma(vec4(x), bv[kk][j], acc[i][j]);
                }
            }
        }
    }
    for (; k < p.K; ++k) {
        int kr = int(k) * p.sb_k;
        vec4 bv[TNV];
        [[unroll]] for (uint j = 0u; j < TNV; ++j) bv[j] = ld4b(bcol[j] + kr);
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
            float x = LA(arow[i] + int(k) * p.sa_k);
            [[unroll]] for (uint j = 0u; j < TNV; ++j) acc[i][j] = fma(vec4(x), bv[j], acc[i][j]);
        }
    }
    uint cb = p.off_c + z * p.M * p.N;
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        if (m0 + i >= p.M) break;
        [[unroll]] for (uint j = 0u; j < TNV; ++j) [[unroll]] for (uint q = 0u; q < 4u; ++q) {
            uint n = nq + 32u * j + q;
            if (n < p.N) STORE_C(cb + (m0 + i) * p.N + n, acc[i][j][q]);
        }
    }
}

// ---- matvec with B contiguous along K (x @ W.T, the weight layout of a linear layer) ---------------
// Each 8-lane group owns NCG columns; its lanes walk K 32 elements at a time (4 each, one 4-wide load
// of a and of every column when VEC allows) and the partial sums meet in a butterfly over the group.
#define NCG 4u
float reduce8(float x) {
    if (SG8 == 1u) return subgroupAdd(x);
    x += subgroupShuffleXor(x, 1u);
    x += subgroupShuffleXor(x, 2u);
    return x + subgroupShuffleXor(x, 4u);
}
void ksplit_main() {
    uint tiles = (p.N + 8u * NCG - 1u) / (8u * NCG);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;
    uint tile = g % tiles, z = g / tiles;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x, ln = l & 7u;
    uint n0 = tile * 8u * NCG + (l >> 3) * NCG;
    int bcol[NCG];
    vec4 acc[NCG];
    [[unroll]] for (uint j = 0u; j < NCG; ++j) { bcol[j] = bb + int(min(n0 + j, p.N - 1u)) * p.sb_n; acc[j] = vec4(0.0); }
    ivec4 q4 = ivec4(0, 1, 2, 3);
    uint k4 = p.K & ~3u;
    for (uint k = 4u * ln; k < k4; k += 32u) {
        vec4 x = ld4a(ba + (int(k) + q4) * p.sa_k);
        [[unroll]] for (uint j = 0u; j < NCG; ++j) acc[j] = fma(x, ld4b(bcol[j] + (int(k) + q4) * p.sb_k), acc[j]);
    }
    uint kt = k4 + ln;   // the K % 4 tail: one element per lane
    float xt = kt < p.K ? LA(ba + int(kt) * p.sa_k) : 0.0;
    for (uint j = 0u; j < NCG; ++j) {
        float s = dot(acc[j], vec4(1.0)) + (kt < p.K ? xt * LB(bcol[j] + int(kt) * p.sb_k) : 0.0);
        s = reduce8(s);
        if (ln == j && n0 + j < p.N) STORE_C(p.off_c + z * p.N + n0 + j, s);
    }
}

void main() {
    if (KSPLIT == 1u) ksplit_main();
    else regtile_main();
}

#elif MODE == 2
// ---- shared-memory tiled: 64 x 64 blocks, each invocation 8 x 8 outputs -------------------------------
// BK-deep slabs of A and B staged in shared memory (f32, 2 x 8 KiB + pad). Lanes l = 8 * rg + ln:
// ln picks columns (ln + 8 j), rg rows (rg + 8 i). For GPUs; CPU devices take the register tile.
#define TN 8u
#define TMT 8u
#define BM 64u
#define BN 64u
#define BK 32u
shared float As[BK][BM + 1u];
shared float Bs[BK][BN + 1u];

void main() {
    uint tiles_n = (p.N + BN - 1u) / BN;
    uint tiles = tiles_n * ((p.M + BM - 1u) / BM);
    uint g = linear_group();
    if (g >= tiles * p.batch) return;   // uniform per workgroup: barriers below stay legal
    uint tile = g % tiles, z = g / tiles;
    uint m_blk = (tile / tiles_n) * BM, n_blk = (tile % tiles_n) * BN;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x, ln = l & 7u, rg = l >> 3;
    float acc[TMT][TN];
    for (uint i = 0u; i < TMT; ++i) for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;
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
