#version 450
// The matmul / matvec family: one generic kernel, C[batch] = A[batch] @ B[batch], f32 accumulation.
//   A_DT / B_DT / C_DT: TYPE_F32, TYPE_F16, TYPE_BF16 (element types as stored; compute is f32).
//   MODE: MODE_MATVEC (M == 1), MODE_REGISTER_TILED (no shared memory), MODE_TILED (shared-memory
//         tiled), MODE_SMALL (small scalar: one invocation per output element).
//   The TYPE_* / MODE_* ids are defines from the host's tables (kernels/matmul.py).
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
#include "common/index.glsl"
#include "common/half.glsl"

layout(local_size_x = 64) in;
// SG8: 1 when the device's subgroups are 8 wide (lavapipe): the 8 lanes sharing rows are one
// subgroup, so A is shared with subgroupBroadcast (a register move) instead of 8 loads; 2 when
// subgroups are a multiple of 8 (shuffle within the 8-lane group); 0: every lane loads A itself.
layout(constant_id = 0) const uint SG8 = 0;
layout(constant_id = 1) const uint TM = 4;      // rows per invocation (register-tiled / matvec)
layout(constant_id = 2) const uint KSPLIT = 0;  // matvec: 1 = lanes split K (B contiguous along K)
layout(constant_id = 3) const uint TNV = 1;     // 4-column groups per invocation (register-tiled)
// TEXA / TEXB: how A / B are read (matvec / register tile). 0: scalar loads through the strides;
// TEXA 1: A along K through its texel view, TEXA 2 (register tile): A along M (its columns: a
// transposed A, as in a weight gradient dY.T @ X); TEXA 3 (register tile, SG8 != 0, TM % RPL == 0): A
// along K like TEXA 1, but each texel is loaded by one lane of the 8-lane group and handed to the others
// with share8: an eighth of the loads, a broadcast per A value. Which of 1 / 3 is faster is a property
// of the device, measured once (ops/matmul.py share_a): lavapipe on Mesa 25 calls a function per texel
// load (f32 512^3 ~18% faster shared), on Mesa 22 a broadcast is a loop over the lanes (2.7x slower).
// TEXB 1: B along N (its rows), TEXB 2: B along K (its columns).
// The host sets them only when the unit stride, offsets and other strides make every texel whole.
layout(constant_id = 4) const uint TEXA = 0;
layout(constant_id = 5) const uint TEXB = 0;
// GN (register tile): 8-lane groups of a workgroup side by side along N (8, 4, 2, 1); the other 8 / GN
// stack along M, TM rows each. Fewer than 8 when N is narrower than 8 groups' columns (attention's
// head-dim products, a GQA k/v projection): otherwise those lanes load and multiply clamped columns
// that are never stored.
layout(constant_id = 6) const uint GN = 8;
// CV4 (register tile): 1 when every 4-column quad of C starts a word (the host: N % 4 == 0
// and off_c % 4 == 0): each quad is one vec4 (f16 / bf16: uvec2) store. Why: on lavapipe (Mesa 22.3) a storage-buffer store
// is a loop over the lanes, so one vec4 store costs about one float store's loop; the K = 64 weight
// gradients of a small Llama (C 640 x 256, 256 x 640) measured 2.01 / 1.79 -> 1.70 / 1.64 ms of process CPU.
layout(constant_id = 7) const uint CV4 = 0;

#define DECL_BUF(bind, name, DT) \
    layout(set = 0, binding = bind) readonly buffer name##_ { ELEM_##DT name[]; };
// ELEM_<id> / TOF_<id>: element type and load of each TYPE_* id (pasted from A_DT / B_DT)
#define ELEM_0 float
#define ELEM_1 uint16_t
#define ELEM_2 uint16_t
#define TOF_0(x) (x)
#define TOF_1(x) f16_to_f32(uint(x))
#define TOF_2(x) uintBitsToFloat(uint(x) << 16)
#define CAT(a, b) a##b
#define XCAT(a, b) CAT(a, b)

#if C_DT == TYPE_F32
layout(set = 0, binding = 0) writeonly buffer C_ { float c[]; };
layout(set = 0, binding = 0) writeonly buffer C4_ { vec4 c4[]; };   // the same C as 16-byte words (CV4)
#define STORE_C(i, v) c[i] = (v)
#elif C_DT == TYPE_F16
layout(set = 0, binding = 0) writeonly buffer C_ { uint16_t c[]; };
layout(set = 0, binding = 0) writeonly buffer C4_ { uvec2 c4[]; };   // the same C as 8-byte words (CV4)
#define STORE_C(i, v) c[i] = uint16_t(f32_to_f16(v))
#else
layout(set = 0, binding = 0) writeonly buffer C_ { uint16_t c[]; };
layout(set = 0, binding = 0) writeonly buffer C4_ { uvec2 c4[]; };   // the same C as 8-byte words (CV4)
uint f32_to_bf16_bits(float f) {  // round to nearest even; NaN stays a quiet NaN
    uint u = floatBitsToUint(f);
    if (isnan(f)) return (u >> 16) | 0x40u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
#define STORE_C(i, v) c[i] = uint16_t(f32_to_bf16_bits(v))
#endif
#if C_DT == TYPE_F32
#define QUAD_C(v) (v)
#elif C_DT == TYPE_F16
#define QUAD_C(v) uvec2(f32x2_to_f16x2((v).xy), f32x2_to_f16x2((v).zw))
#elif C_DT == TYPE_BF16
#define QUAD_C(v) uvec2(f32_to_bf16_bits(v.x) | (f32_to_bf16_bits(v.y) << 16), \
                        f32_to_bf16_bits(v.z) | (f32_to_bf16_bits(v.w) << 16))
#endif
layout(set = 0, binding = 1) readonly buffer A_ { XCAT(ELEM_, A_DT) a[]; };
layout(set = 0, binding = 2) readonly buffer B_ { XCAT(ELEM_, B_DT) b[]; };
#define LA(i) XCAT(TOF_, A_DT)(a[i])
#define LB(i) XCAT(TOF_, B_DT)(b[i])
#if MODE == MODE_MATVEC || MODE == MODE_REGISTER_TILED
// The same A / B buffers again as storage texel buffers: one rgba32ui texel is 16 bytes, 4 f32 or 8
// f16 / bf16 elements. Why: on lavapipe (Mesa 22.3) an SSBO load is a loop over the lanes with a bounds
// check per component, an imageLoad one vector gather: read-mode load throughput measured 7.3 GB/s
// (rgba32ui imageLoad) vs 1.8 GB/s for the best SSBO load (benches/bench_load_paths.py).
layout(set = 0, binding = 3, rgba32ui) uniform readonly uimageBuffer a_t;
layout(set = 0, binding = 4, rgba32ui) uniform readonly uimageBuffer b_t;
const uint QB = B_DT == TYPE_F32 ? 1u : 2u;   // 4-column quads per texel of B
const uint APT = A_DT == TYPE_F32 ? 4u : 8u;  // A elements per texel (TEXA 2: rows per texel)
const uint LPR = A_DT == TYPE_F32 ? 2u : 1u;   // TEXA 3: lanes holding one row's 8-deep K step of A
const uint RPL = 8u / LPR;                      // TEXA 3: rows of A one texel load of the 8 lanes holds
const uint LC = 4u * QB;                 // register tile: columns per lane per column group (one B texel)
vec4 h4_0(uvec2 w) { return vec4(0.0); }   // (unused: f32 texels hold 4 elements)
vec4 h4_1(uvec2 w) { return vec4(f16x2_to_f32(w.x), f16x2_to_f32(w.y)); }
vec4 h4_2(uvec2 w) { return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xFFFF0000u),
                                 uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xFFFF0000u)); }
// v = elements e .. e + 7 of `img` holding DT elements; e is a multiple of the elements per texel.
#define TEX8(img, DT, e, v) \
    if (DT == TYPE_F32) { v[0] = uintBitsToFloat(imageLoad(img, (e) >> 2)); v[1] = uintBitsToFloat(imageLoad(img, ((e) >> 2) + 1)); } \
    else { uvec4 t_ = imageLoad(img, (e) >> 3); v[0] = XCAT(h4_, DT)(t_.xy); v[1] = XCAT(h4_, DT)(t_.zw); }
// v = elements e, e + s, ..., e + 7 s through the storage buffer (the scalar path).
#define SCALAR8(L, e, s, v) \
    v[0] = vec4(L(e), L((e) + (s)), L((e) + 2 * (s)), L((e) + 3 * (s))); \
    v[1] = vec4(L((e) + 4 * (s)), L((e) + 5 * (s)), L((e) + 6 * (s)), L((e) + 7 * (s)))
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

#if MODE == MODE_MATVEC || MODE == MODE_REGISTER_TILED
// ---- register tile (MODE_REGISTER_TILED; MODE_MATVEC with KSPLIT == 0 is its TM == 1 case) ---------------------
// Each invocation accumulates TM rows x LC TNV columns; 8-lane groups: lane ln owns columns
// n0 + LC (ln + 8 j) + (0 .. LC-1), one texel of a B row when TEXB == 1; all groups of a workgroup
// share the same TM rows. Per 8-deep K step the lanes load an 8 x LC TNV slab of B once and then stream
// the TM rows over it, 8 values of A per row: one or two texels (TEXA; the same address in every lane,
// one gather), else lane ln loads A[m, k + ln] and share8 hands it to the other lanes. Why this shape
// (measured on lavapipe, where loads and subgroup broadcasts cost per lane while FMAs and compiler
// spills are real 8-wide vector ops): each B value loaded feeds TM FMAs, each A value LC TNV; the slab
// and the accumulators live in LLVM's registers / stack, never in shared memory.
void regtile_main() {
    const uint GC = 8u * LC * TNV;                 // columns per 8-lane group; a workgroup has 8 groups
    const uint GM = 8u / GN;                       // groups along M
    uint tiles_n = (p.N + GN * GC - 1u) / (GN * GC);
    uint tiles = tiles_n * ((p.M + GM * TM - 1u) / (GM * TM));
    uint g = linear_group();
    if (g >= tiles * p.batch) return;
    uint tile = g % tiles, z = g / tiles;
    int ba, bb;
    batch_bases(z, ba, bb);
    uint l = gl_LocalInvocationID.x, ln = l & 7u, grp = l >> 3;
    uint m0 = (tile / tiles_n) * GM * TM + (grp / GN) * TM, nq = (tile % tiles_n) * GN * GC + (grp % GN) * GC + LC * ln;
    int arow[TM];
    [[unroll]] for (uint i = 0u; i < TM; ++i) arow[i] = ba + int(min(m0 + i, p.M - 1u)) * p.sa_m;
    // TEXA 3: the A texel(s) this lane loads for the lanes of its group, RPL rows a load
    int arl[(TM + RPL - 1u) / RPL];   // (at least one: TM is 1 in matvec)
    [[unroll]] for (uint r = 0u; r < TM / RPL; ++r)
        arl[r] = ba + int(min(m0 + RPL * r + ln / LPR, p.M - 1u)) * p.sa_m + int(4u * (ln % LPR));
    // Element index of each of the lane's columns at k = 0 (clamped; TEXB == 1: N % LC == 0, so a
    // clamped texel stays whole and column c of group j is bcol[j][0] + c).
    ivec4 bcol[TNV * QB];
    [[unroll]] for (uint j = 0u; j < TNV; ++j) [[unroll]] for (uint q = 0u; q < QB; ++q) {
        uint c0 = nq + 8u * LC * j + 4u * q;
        bcol[j * QB + q] = TEXB == 1u ? ivec4(bb + int(min(nq + 8u * LC * j, p.N - LC)) + int(4u * q))
                                      : bb + ivec4(min(uvec4(c0) + uvec4(0u, 1u, 2u, 3u), uvec4(p.N - 1u))) * p.sb_n;
    }
    // ACC_STEP: each accumulator is read into a local, takes the step's 8 FMAs and is stored back once
    // (same operations in the same order as 8 updates in place). Why: the driver keeps acc, an array,
    // in memory, and inside the K loop every store into it is a load, a blend with the loop's lane mask
    // and a store (read from lavapipe's JIT'd loop, Mesa 25.0: a vblendvps per FMA); 512^3 f32 measured
    // 20.5 -> 15.1 ms of process CPU there, 14.6 -> 11.8 on Mesa 22.3.
    vec4 acc[TM][TNV * QB];
    [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) acc[i][j] = vec4(0.0);
    uint k = 0u;
    for (; k + 8u <= p.K; k += 8u) {
        vec4 bv[8][TNV * QB];   // bv[kk][jq][c]: B[k + kk, column c of quad jq]
        [[unroll]] for (uint j = 0u; j < TNV; ++j) {
            if (TEXB == 1u) {
                [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) {
                    uvec4 t = imageLoad(b_t, int(uint(bcol[j * QB].x + int(k + kk) * p.sb_k) / LC));
                    if (QB == 1u) bv[kk][j] = uintBitsToFloat(t);
                    else { bv[kk][2u * j] = XCAT(h4_, B_DT)(t.xy); bv[kk][2u * j + 1u] = XCAT(h4_, B_DT)(t.zw); }
                }
            } else {
                [[unroll]] for (uint q = 0u; q < QB; ++q) [[unroll]] for (uint r = 0u; r < 4u; ++r) {
                    vec4 v[2];   // column r of quad (j, q) at k .. k + 7
                    if (TEXB == 2u) { TEX8(b_t, B_DT, bcol[j * QB + q][r] + int(k), v); }
                    else { SCALAR8(LB, bcol[j * QB + q][r] + int(k) * p.sb_k, p.sb_k, v); }
                    [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) bv[kk][j * QB + q][r] = v[kk >> 2][kk & 3u];
                }
            }
        }
        if (TEXA == 2u) {   // A along M: per 8-deep K step, TM / APT texels per k (the host: M % APT == 0)
            [[unroll]] for (uint iq = 0u; iq < TM / APT; ++iq) {
                int e0 = ba + int(min(m0 + APT * iq, p.M - APT)) + int(k) * p.sa_k;
                vec4 aq[8][APT / 4u];   // aq[kk][h][r]: A[m0 + APT iq + 4 h + r, k + kk]
                [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) {
                    uint e = uint(e0 + int(kk) * p.sa_k);
                    if (A_DT == TYPE_F32) aq[kk][0] = uintBitsToFloat(imageLoad(a_t, int(e >> 2)));
                    else {
                        uvec4 t = imageLoad(a_t, int(e >> 3));
                        aq[kk][0] = XCAT(h4_, A_DT)(t.xy);
                        aq[kk][APT / 4u - 1u] = XCAT(h4_, A_DT)(t.zw);
                    }
                }
                [[unroll]] for (uint h = 0u; h < APT / 4u; ++h) [[unroll]] for (uint r = 0u; r < 4u; ++r)
                    [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) {
                        vec4 t = acc[APT * iq + 4u * h + r][j];   // one store into acc a step (see ACC_STEP)
                        [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) t = fma(vec4(aq[kk][h][r]), bv[kk][j], t);
                        acc[APT * iq + 4u * h + r][j] = t;
                    }
            }
        } else if (TEXA == 3u) {   // A along K, each texel loaded by one lane and handed out
            [[unroll]] for (uint r = 0u; r < TM / RPL; ++r) {
                vec4 al[2];   // this lane's texel(s): A[m0 + RPL r + ln / LPR, k + 4 (ln % LPR) ..]
                uint e = uint(arl[r] + int(k));
                if (A_DT == TYPE_F32) al[0] = uintBitsToFloat(imageLoad(a_t, int(e >> 2)));
                else { uvec4 t = imageLoad(a_t, int(e >> 3)); al[0] = XCAT(h4_, A_DT)(t.xy); al[1] = XCAT(h4_, A_DT)(t.zw); }
                [[unroll]] for (uint ir = 0u; ir < RPL; ++ir) [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) {
                    uint i = RPL * r + ir;
                    vec4 t = acc[i][j];
                    [[unroll]] for (uint kk = 0u; kk < 8u; ++kk)
                        t = fma(vec4(share8(al[LPR == 2u ? 0u : kk >> 2][kk & 3u], LPR * ir + (LPR == 2u ? kk >> 2 : 0u))),
                                bv[kk][j], t);
                    acc[i][j] = t;
                }
            }
        } else
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
            vec4 av[2];   // A[m0 + i, k .. k + 7]
            if (TEXA == 1u) { TEX8(a_t, A_DT, arow[i] + int(k), av); }
            else if (SG8 != 0u) {
                float x = LA(arow[i] + int(k + ln) * p.sa_k);
                [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) av[kk >> 2][kk & 3u] = share8(x, kk);
            } else { SCALAR8(LA, arow[i] + int(k) * p.sa_k, p.sa_k, av); }
            [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) {
                vec4 t = acc[i][j];
                [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) t = fma(vec4(av[kk >> 2][kk & 3u]), bv[kk][j], t);
                acc[i][j] = t;
            }
        }
    }
    for (; k < p.K; ++k) {   // the K % 8 tail, scalar loads
        vec4 bv[TNV * QB];
        [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) {
            ivec4 e = TEXB == 1u ? bcol[j].x + ivec4(0, 1, 2, 3) : bcol[j];
            e += int(k) * p.sb_k;
            bv[j] = vec4(LB(e.x), LB(e.y), LB(e.z), LB(e.w));
        }
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
            float x = LA(arow[i] + int(k) * p.sa_k);
            [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) acc[i][j] = fma(vec4(x), bv[j], acc[i][j]);
        }
    }
    uint cb = p.off_c + z * p.M * p.N;
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        if (m0 + i >= p.M) break;
        if (CV4 == 1u) {   // quads lie wholly inside or outside N (N % 4 == 0)
            [[unroll]] for (uint j = 0u; j < TNV * QB; ++j) {
                uint n = nq + 8u * LC * (j / QB) + 4u * (j % QB);
                if (n < p.N) c4[(cb + (m0 + i) * p.N + n) >> 2] = QUAD_C(acc[i][j]);
            }
            continue;
        }
        [[unroll]] for (uint j = 0u; j < TNV; ++j) [[unroll]] for (uint q = 0u; q < LC; ++q) {
            uint n = nq + 8u * LC * j + q;
            if (n < p.N) STORE_C(cb + (m0 + i) * p.N + n, acc[i][j * QB + (q >> 2)][q & 3u]);
        }
    }
}

// ---- matvec with B contiguous along K (x @ W.T, the weight layout of a linear layer) ---------------
// Each 8-lane group owns NCG columns; its lanes walk K 64 elements at a time (8 each: texels of x and of
// every column when TEXA / TEXB allow) and the partial sums meet in a butterfly over the group.
#define NCG 8u
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
    uint k8 = p.K & ~7u;
    for (uint k = 8u * ln; k < k8; k += 64u) {
        vec4 x[2], w[2];
        if (TEXA == 1u) { TEX8(a_t, A_DT, ba + int(k), x); }
        else { SCALAR8(LA, ba + int(k) * p.sa_k, p.sa_k, x); }
        [[unroll]] for (uint j = 0u; j < NCG; ++j) {
            if (TEXB == 2u) { TEX8(b_t, B_DT, bcol[j] + int(k), w); }
            else { SCALAR8(LB, bcol[j] + int(k) * p.sb_k, p.sb_k, w); }
            acc[j] = fma(x[1], w[1], fma(x[0], w[0], acc[j]));
        }
    }
    uint kt = k8 + ln;   // the K % 8 tail: one element per lane
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

#elif MODE == MODE_TILED
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
