#version 450
// Sampling from probabilities (ops/sampling.py): top-k, top-p, top-k-top-p and greedy, LANES invocations
// per row of probs [rows, vocab] (float32) doing the whole cut search and the draw on the device:
// LANES = WG (one row a workgroup, sums and scans through shared memory) or, for short rows, LANES = 1
// (one row an invocation, WG rows a workgroup, no barrier ever reached).
//
// Each row is a small state machine (its words in `state`, set up by the host) advanced one pass over
// the row at a time, at most `passes` passes a launch (the host splits the passes over launches within
// Device.loop_budget; a finished row exits at once):
//   K_BISECT  top-k cut: an NT-way search over float32 bit patterns (non-negative floats order as
//             their bits), each pass counting x >= each of NT edges (buckets per invocation, then
//             summed over the workgroup); stops when the set x >= lo is the top k or lo is the
//             k-th value.
//   K_TIES    the k-th value's ties kept in index order (the index of the take-th tie) and the kept mass
//             (the renormalization's denominator).
//   P_START   r = the top-k renormalized row (or x): its max and first argmax (greedy rows: every draw
//             takes it, torch.argmax), its positive mass; a row whose mass is <= p keeps everything.
//   P_BISECT  top-p cut, NT-way as K_BISECT: the least value w whose mass above it is <= p (count and
//             mass of r > each edge).
//   P_TIES    of w's ties, floor((p - mass above w) / w) + 1 kept in index order.
//   DRAW      inverse CDF in index order over the kept weights: the first position whose cumulative
//             weight passes u * total (u from the host's seeded generator), written as int64; `draws`
//             draws a row (each its own u), draw_batch of them a pass, the cut search done once: a draw
//             finds its lane by a binary search over the lanes' scanned sums and its sub-block (SUB a
//             chunk) by their running sums, then walks that sub-block only.
// Ordered passes (ties, draw) give each invocation a contiguous chunk of the row and scan the chunk
// sums across the workgroup; the unordered ones read the row strided (coalesced).
layout(constant_id = 0) const uint WG = 64;        // a power of two, <= MAX_WG
layout(constant_id = 1) const uint LANES = 64;     // invocations per row: WG or 1
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Probs { float x[]; };
layout(set = 0, binding = 1) readonly buffer RowArgs { uvec4 row_arg[]; };   // (k, p bits, unused, flags)
layout(set = 0, binding = 2) buffer State { uint st[]; };                     // STATE_WORDS per row
layout(set = 0, binding = 3) writeonly buffer Out { uint o[]; };              // int64 words, [rows, draws]
layout(set = 0, binding = 4) readonly buffer Uniforms { float uni[]; };      // [rows, draws] in [0, 1)

layout(push_constant) uniform Params {
    uint vocab; uint off; uint passes; uint n_rows;   // off: x's offset; n_rows: the rows of this window
    uint off_args; uint off_state; uint off_out;      // the window's first row in row_arg / st / o (words: uvec4s
    uint off_uni; uint draws; uint draw_batch;        // for row_arg) / uni; draws a row, draws a DRAW pass
} pc;

// Word layout of a row's state (ops/sampling.py writes the initial words).
#define S_PHASE 0u
#define S_LO 1u
#define S_HI 2u
#define S_CLO 3u
#define S_CHI 4u
#define S_MHI 5u
#define S_KT 6u       // top-k threshold bits: kept x > kt, and its ties up to index k_end
#define S_KEND 7u
#define S_DEN 8u
#define S_PT 9u       // top-p threshold bits: kept r > pt, and its ties up to index p_end
#define S_PEND 10u
#define S_TAKE 11u
#define S_DRAWN 12u   // draws done
#define STATE_WORDS 13u
#define SUB NT        // a DRAW pass's sub-blocks a chunk (their running sums in s_bm)

shared float s_f[WG];
shared uint s_u[WG];
shared uint s_i[WG];
shared uint s_found;
shared float s_bm[(NT + 1) * WG];   // the search's bucket masses and counts, bucket-major
shared uint s_bc[(NT + 1) * WG];

const float LAST_BELOW = 1.0 - 1.0 / 8388608.0;   // keeps a draw's target below the row's total

uint base;   // its first element in x
uint lid;    // the invocation in the workgroup
uint lane;   // ... in its row (0 when LANES = 1)
bool krow;
int kt, k_end;
float den;

// The top-k renormalized value of token i (x itself on rows without top-k).
float r_of(uint i) {
    float xi = x[base + i];
    if (!krow) return xi;
    int b = floatBitsToInt(xi);
    return (b > kt || (b == kt && int(i) <= k_end)) ? xi / den : 0.0;
}

// The bisections' NT-way buckets, this invocation's part, then (reduce_buckets) the workgroup's.
uint g_cnt[NT];
float g_mass[NT];
uint g_above;
float g_mabove;

void clear_buckets() {
    for (int j = 0; j < NT; j++) { g_cnt[j] = 0u; g_mass[j] = 0.0; }
    g_above = 0u; g_mabove = 0.0;
}

// Sums of (f, c) over the workgroup, returned to every invocation.
void reduce_sum(inout float f, inout uint c) {
    if (LANES == 1u) return;
    s_f[lid] = f; s_u[lid] = c;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) { s_f[lid] += s_f[lid + s]; s_u[lid] += s_u[lid + s]; }
        barrier();
    }
    f = s_f[0]; c = s_u[0];
    barrier();
}

// Sums of every bucket (and the one above the edges) over the workgroup, in one tree.
void reduce_buckets() {
    if (LANES == 1u) return;
    for (uint j = 0u; j < NT; j++) { s_bm[j * WG + lid] = g_mass[j]; s_bc[j * WG + lid] = g_cnt[j]; }
    s_bm[NT * WG + lid] = g_mabove; s_bc[NT * WG + lid] = g_above;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s)
            for (uint j = 0u; j <= NT; j++) { s_bm[j * WG + lid] += s_bm[j * WG + lid + s]; s_bc[j * WG + lid] += s_bc[j * WG + lid + s]; }
        barrier();
    }
    for (uint j = 0u; j < NT; j++) { g_mass[j] = s_bm[j * WG]; g_cnt[j] = s_bc[j * WG]; }
    g_mabove = s_bm[NT * WG]; g_above = s_bc[NT * WG];
    barrier();
}

// Inclusive scans of (f, c) over the lanes (Hillis-Steele: monotone in float for f >= 0, each step's
// sums never smaller than the previous lane's): this lane's inclusive and exclusive sums, the total.
void scan(float f, uint c, out float f_incl, out float f_excl, out float f_total, out uint c_incl) {
    if (LANES == 1u) { f_incl = f_total = f; f_excl = 0.0; c_incl = c; return; }
    s_f[lid] = f; s_u[lid] = c;
    barrier();
    for (uint s = 1u; s < WG; s <<= 1) {
        float tf = lid >= s ? s_f[lid - s] : 0.0;
        uint tc = lid >= s ? s_u[lid - s] : 0u;
        barrier();
        s_f[lid] += tf; s_u[lid] += tc;
        barrier();
    }
    f_incl = s_f[lid]; f_excl = lid > 0u ? s_f[lid - 1u] : 0.0; f_total = s_f[WG - 1u]; c_incl = s_u[lid];
    barrier();
}

// The index of the take-th (1-based) token of value bits `t` in index order (of r when use_r, else
// of x), or vocab - 1 when there are fewer.
int nth_tie(int t, uint take, bool use_r, uint c0, uint c1) {
    uint c = 0u, incl;
    float unused;
    for (uint i = c0; i < c1; i++) c += uint(floatBitsToInt(use_r ? r_of(i) : x[base + i]) == t);
    scan(0.0, c, unused, unused, unused, incl);
    uint excl = incl - c, found = pc.vocab - 1u;
    if (excl < take && take <= incl) {
        uint need = take - excl;
        for (uint i = c0; i < c1; i++) {
            if (floatBitsToInt(use_r ? r_of(i) : x[base + i]) == t && --need == 0u) { found = i; break; }
        }
    }
    if (LANES == 1u) return int(found);
    if (lid == 0u) s_found = pc.vocab - 1u;
    barrier();
    if (excl < take && take <= incl) s_found = found;
    barrier();
    found = s_found;
    barrier();
    return int(found);
}

void main() {
    lid = gl_LocalInvocationID.x;
    lane = LANES == 1u ? 0u : lid;
    uint rw = LANES == 1u ? gl_GlobalInvocationID.x : gl_WorkGroupID.x;   // the row in this window
    if (rw >= pc.n_rows) return;                  // LANES = 1 only: a whole row a workgroup otherwise
    base = pc.off + rw * pc.vocab;
    uint sb = pc.off_state + rw * STATE_WORDS;
    uvec4 a = row_arg[pc.off_args + rw];
    uint k = a.x;
    float top_p = uintBitsToFloat(a.y);
    krow = (a.w & FLAG_K) != 0u;
    uint phase = st[sb + S_PHASE];
    int lo = int(st[sb + S_LO]), hi = int(st[sb + S_HI]);
    uint c_lo = st[sb + S_CLO], c_hi = st[sb + S_CHI], take = st[sb + S_TAKE];
    float m_hi = uintBitsToFloat(st[sb + S_MHI]);
    kt = int(st[sb + S_KT]); k_end = int(st[sb + S_KEND]); den = uintBitsToFloat(st[sb + S_DEN]);
    int pt = int(st[sb + S_PT]), p_end = int(st[sb + S_PEND]);
    uint drawn = st[sb + S_DRAWN];
    uint chunk = (pc.vocab + LANES - 1u) / LANES;
    uint c0 = min(lane * chunk, pc.vocab), c1 = min(c0 + chunk, pc.vocab);   // this lane's ordered chunk

    for (uint pass = 0u; pass < pc.passes && phase != PH_DONE; pass++) {
        if (phase == PH_K_BISECT) {
            // NT-way split of [lo, hi): edge j = lo + j step; count(x >= edge j) from the buckets
            int step = (hi - lo + NT - 1) / NT;
            clear_buckets();
            for (uint i = lane; i < pc.vocab; i += LANES) {
                int b = floatBitsToInt(x[base + i]);
                if (b >= hi) g_above++;
                else if (b >= lo) g_cnt[(b - lo) / step]++;
            }
            reduce_buckets();
            uint c = g_above;
            int nlo = lo, nhi = hi;
            for (int j = NT - 1; j >= 0; j--) {
                int e = lo + j * step;
                if (e >= hi) continue;
                c += g_cnt[j];                    // count(x >= e)
                if (c >= k) { nlo = e; c_lo = c; break; }
                nhi = e; c_hi = c;
            }
            lo = nlo; hi = nhi;
            if (c_lo == k || hi - lo <= 1) {     // the set x >= lo is the top k, or lo is the k-th value
                kt = lo;
                take = c_lo > k ? k - c_hi : pc.vocab;
                phase = PH_K_TIES;
            }
        } else if (phase == PH_K_TIES) {
            // kept: x > kt and the first `take` ties at kt; den = their sum
            float m = 0.0;
            uint c = 0u;
            for (uint i = lane; i < pc.vocab; i += LANES) {
                float xi = x[base + i];
                if (floatBitsToInt(xi) > kt) m += xi;
            }
            reduce_sum(m, c);
            k_end = take >= pc.vocab ? int(pc.vocab) : nth_tie(kt, take, false, c0, c1);
            uint ties = 0u;
            float unused = 0.0;
            for (uint i = c0; i < c1; i++) ties += uint(floatBitsToInt(x[base + i]) == kt && int(i) <= k_end);
            reduce_sum(unused, ties);
            den = m + float(ties) * intBitsToFloat(kt);
            phase = PH_P_START;
        } else if (phase == PH_P_START) {
            float mx = -1.0 / 0.0, m = 0.0;
            uint arg = pc.vocab - 1u, c = 0u;
            for (uint i = lane; i < pc.vocab; i += LANES) {
                float ri = r_of(i);
                if (ri > mx) { mx = ri; arg = i; }       // strided ascending: the first of this invocation's maxima
                if (floatBitsToInt(ri) > 0) { m += ri; c++; }
            }
            if (LANES > 1u) {
                s_f[lid] = mx; s_i[lid] = arg;
                barrier();
                for (uint s = WG / 2u; s > 0u; s >>= 1) {
                    if (lid < s) {
                        float om = s_f[lid + s];
                        uint oa = s_i[lid + s];
                        if (om > s_f[lid] || (om == s_f[lid] && oa < s_i[lid])) { s_f[lid] = om; s_i[lid] = oa; }
                    }
                    barrier();
                }
                mx = s_f[0]; arg = s_i[0];
                barrier();
            }
            reduce_sum(m, c);
            if ((a.w & FLAG_GREEDY) != 0u) {
                pt = floatBitsToInt(mx); p_end = int(arg);   // every draw takes arg (DRAW)
                phase = PH_DRAW;
            } else if ((a.w & FLAG_P) != 0u && m > top_p) {
                lo = -1; hi = floatBitsToInt(mx); c_lo = c; c_hi = 0u; m_hi = 0.0;   // mass(r > lo) > p >= mass(r > hi)
                phase = PH_P_BISECT;
            } else {
                pt = -1; p_end = -1;             // keep every r >= 0
                phase = PH_DRAW;
            }
        } else if (phase == PH_P_BISECT) {
            // NT-way split of (lo, hi]: edge j = lo + j step; mass and count of r > edge j from the buckets
            int step = (hi - lo + NT - 1) / NT;
            clear_buckets();
            for (uint i = lane; i < pc.vocab; i += LANES) {
                float ri = r_of(i);
                int b = floatBitsToInt(ri);
                if (b > hi) { g_above++; g_mabove += ri; }
                else if (b > lo) { uint j = uint(b - lo - 1) / uint(step); g_cnt[j]++; g_mass[j] += ri; }
            }
            reduce_buckets();
            uint c = g_above;
            float m = g_mabove;
            int nlo = lo, nhi = hi;
            for (int j = NT - 1; j >= 1; j--) {
                int e = lo + j * step;
                if (e >= hi) continue;
                c += g_cnt[j]; m += g_mass[j];    // count and mass of r > e
                if (m <= top_p) { nhi = e; c_hi = c; m_hi = m; }
                else { nlo = e; c_lo = c; break; }
            }
            lo = nlo; hi = nhi;
            if (c_lo - c_hi <= 1u) {            // one token in (lo, hi]: keep r > lo
                pt = lo; p_end = -1;
                phase = PH_DRAW;
            } else if (hi - lo <= 1) {          // w = hi's value: its c_lo - c_hi ties, some kept
                float w = intBitsToFloat(hi);
                take = uint(clamp(floor((top_p - m_hi) / w) + 1.0, 1.0, float(c_lo - c_hi)));
                pt = hi;
                phase = PH_P_TIES;
            }
        } else if (phase == PH_P_TIES) {
            p_end = nth_tie(pt, take, true, c0, c1);   // kept: r > pt, and ties at pt up to p_end
            phase = PH_DRAW;
        } else {    // PH_DRAW: draws [drawn, drawn + draw_batch) of the row's `draws`
            // Kept weight of this lane's chunk, and the running sum at the end of each of its SUB
            // sub-blocks (sequential, as the walk below adds: a walk started at a sub-block's start
            // from the sum before it reaches the bits a walk over the whole chunk would).
            float w = 0.0;
            uint sub = (c1 - c0 + SUB - 1u) / SUB;
            for (uint i = c0; i < c1; i++) {
                float ri = r_of(i);
                int b = floatBitsToInt(ri);
                if (b > pt || (b == pt && int(i) <= p_end)) w += ri;
            }
            float incl, excl, total;
            uint unused;
            scan(w, 0u, incl, excl, total, unused);
            float acc = excl;
            uint last = c1 - 1u;     // the last positive kept weight: the pick when rounding leaves the
            for (uint j = 0u; j < SUB; j++) {   // chunk's running sum at or below target
                for (uint i = c0 + j * sub; i < min(c0 + (j + 1u) * sub, c1); i++) {
                    float ri = r_of(i);
                    int b = floatBitsToInt(ri);
                    if (b > pt || (b == pt && int(i) <= p_end)) { acc += ri; if (ri > 0.0) last = i; }
                }
                s_bm[j * WG + lid] = acc;
            }
            s_i[lid] = last;
            if (LANES > 1u) { s_f[lid] = incl; barrier(); }
            uint d1 = min(drawn + pc.draw_batch, pc.draws);
            for (uint d = drawn + lane; d < d1; d += LANES) {
                float u = uni[pc.off_uni + rw * pc.draws + d];
                float target = min(total * u, total * LAST_BELOW);
                uint pick = pc.vocab - 1u;
                if ((a.w & FLAG_GREEDY) != 0u) {
                    pick = uint(p_end);
                } else if (total > 0.0) {
                    // the lane whose [excl, incl) holds target (the first incl > target), then the
                    // first of its sub-blocks whose running sum passes target (none: rounding kept the
                    // chunk's sum at or below target: its last positive weight), then the token
                    uint L = lid;
                    if (LANES > 1u) {
                        uint lo = 0u, hi = WG - 1u;
                        while (lo < hi) { uint m = (lo + hi) / 2u; if (s_f[m] > target) hi = m; else lo = m + 1u; }
                        L = lo;
                    }
                    uint a0 = min((LANES == 1u ? 0u : L) * chunk, pc.vocab), a1 = min(a0 + chunk, pc.vocab);
                    float s = LANES > 1u && L > 0u ? s_f[L - 1u] : 0.0;
                    uint j = 0u;
                    while (j < SUB && !(s_bm[j * WG + L] > target)) j++;
                    uint subl = (a1 - a0 + SUB - 1u) / SUB;
                    if (j > 0u) s = s_bm[(j - 1u) * WG + L];
                    uint i0 = min(a0 + j * subl, a1);
                    pick = s_i[L];
                    for (uint i = i0; i < min(i0 + subl, a1); i++) {   // none when j = SUB
                        float ri = r_of(i);
                        int b = floatBitsToInt(ri);
                        if (b > pt || (b == pt && int(i) <= p_end)) {
                            s += ri;
                            if (s > target) { pick = i; break; }
                        }
                    }
                }
                uint at = pc.off_out + 2u * (rw * pc.draws + d);
                o[at] = pick; o[at + 1u] = 0u;
            }
            if (LANES > 1u) barrier();
            drawn = d1;
            if (drawn >= pc.draws) phase = PH_DONE;
        }
    }
    if (lane == 0u) {
        st[sb + S_PHASE] = phase; st[sb + S_LO] = uint(lo); st[sb + S_HI] = uint(hi);
        st[sb + S_CLO] = c_lo; st[sb + S_CHI] = c_hi; st[sb + S_TAKE] = take; st[sb + S_MHI] = floatBitsToUint(m_hi);
        st[sb + S_KT] = uint(kt); st[sb + S_KEND] = uint(k_end); st[sb + S_DEN] = floatBitsToUint(den);
        st[sb + S_PT] = uint(pt); st[sb + S_PEND] = uint(p_end); st[sb + S_DRAWN] = drawn;
    }
}
