#version 450
// Recurrent state updates of linear-attention / SSM decoders, each in one dispatch (kernels/recurrent.py,
// ops/recurrent.py).  Arithmetic in f32, inputs of dtype T (DT_*), the order of operations the
// FlashInfer-Bench Definitions' references use.
//
// MAMBA: Mamba2 selective state update.  One invocation per (head h, row p of head_dim), walking the
//   requests b0 .. b1 - 1 in order: slot = idx[b] (or b), s = state[slot, h, p, :] * exp(A dt') +
//   (dt' x) B[g] with dt' = softplus(dt + dt_bias), state[slot] = s (rounded to the state's dtype),
//   y = sum(s C[g]) + x D; a negative slot gives y = 0.  One invocation owns a state row for every
//   request, so a slot two requests share is updated in request order (the reference's loop).
//   A cache over one binding runs in windows of slots [slot_lo, slot_hi) (state bound from slot_lo):
//   a launch updates only its window's requests, and writes the zero outputs of skipped requests
//   when zero_skipped is set (once).
//   The state is updated in place (ops/recurrent.py passes a copy).
// GDN: gated delta rule (k-last state [rows, HV, V, K]).  One invocation per (sequence n, v head h,
//   row i of V) holding its state row (K floats) in registers across tokens t0 .. t1 - 1 of its
//   sequence (cu[n] .. cu[n + 1]): g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b),
//   old = g s, old_v = k . old, new_v = beta v + (1 - beta) old_v, s = old - k old_v + k new_v,
//   out = scale q . s.  Token windows longer than the loop budget run as several launches, the state
//   carried through state_out (src = 2).
#include "common/dtype.glsl"
#include "common/index.glsl"

layout(local_size_x = WG) in;

// torch's softplus (beta 1, threshold 20), log1p accurate for tiny exp(x).
float softplus(float x) {
    if (x > 20.0) return x;
    float e = exp(x), u = 1.0 + e;
    return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

#if defined(MAMBA)
layout(constant_id = 0) const uint STATE_F32 = 1;   // state float32 (else of dtype T)
layout(constant_id = 1) const uint VEC4 = 0;       // dstate and the state / A / B / C offsets are multiples of 4
layout(set = 0, binding = 0) buffer State { float st[]; } state;
layout(set = 0, binding = 0) buffer StateT { T st[]; } state_t;
layout(set = 0, binding = 0) buffer State4 { vec4 st[]; } state4;
layout(set = 0, binding = 0) buffer StateT4 { T4 st[]; } state_t4;
layout(set = 0, binding = 1) writeonly buffer Out { T v[]; } out_;
layout(set = 0, binding = 2) readonly buffer X { T v[]; } x;
layout(set = 0, binding = 3) readonly buffer Dt { T v[]; } dt;
layout(set = 0, binding = 4) readonly buffer Decay { float v[]; } decay;   // A [H, P, N]
layout(set = 0, binding = 4) readonly buffer Decay4 { vec4 v[]; } decay4;
layout(set = 0, binding = 5) readonly buffer Bm { T v[]; } b_in;
layout(set = 0, binding = 5) readonly buffer Bm4 { T4 v[]; } b_in4;
layout(set = 0, binding = 6) readonly buffer Cm { T v[]; } c_in;
layout(set = 0, binding = 6) readonly buffer Cm4 { T4 v[]; } c_in4;
layout(set = 0, binding = 7) readonly buffer Skip { float v[]; } skip;     // D [H, P]
layout(set = 0, binding = 8) readonly buffer DtBias { float v[]; } dt_bias;
layout(set = 0, binding = 9) readonly buffer Slots { int v[]; } slots;

layout(push_constant) uniform Params {
    uint n_heads; uint head_dim; uint dstate; uint ratio; uint n_groups; uint b0; uint b1; uint has_slots;
    int slot_lo; int slot_hi; uint zero_skipped;
    uint off_state; uint off_out; uint off_x; uint off_dt; uint off_decay; uint off_b; uint off_c;
    uint off_skip; uint off_dt_bias; uint off_slots;
} p;

void main() {
    // A workgroup per (head, block of WG rows): h and g are uniform, so B / C are read once for all
    // lanes (lavapipe loads a uniform address once, a varying one lane by lane).
    uint blocks = (p.head_dim + WG - 1u) / WG, grp = linear_group();
    uint h = grp / blocks, row_p = (grp % blocks) * WG + gl_LocalInvocationID.x;
    if (h >= p.n_heads || row_p >= p.head_dim) return;
    uint gid = h * p.head_dim + row_p, g = h / p.ratio;
    uint ab = p.off_decay + gid * p.dstate;          // A[h, p, :]
    float dtb = dt_bias.v[p.off_dt_bias + gid], dsk = skip.v[p.off_skip + gid];
    for (uint b = p.b0; b < p.b1; ++b) {
        uint row = b * p.n_heads * p.head_dim + gid;  // [b, h, p] of x / dt / out
        int slot = p.has_slots != 0u ? slots.v[p.off_slots + b] : int(b);
        if (slot < 0) { if (p.zero_skipped != 0u) out_.v[p.off_out + row] = STORE(0.0); continue; }
        if (slot < p.slot_lo || slot >= p.slot_hi) continue;   // another window's request
        slot -= p.slot_lo;
        float dtv = softplus(LOAD(dt.v[p.off_dt + row]) + dtb);
        float xv = LOAD(x.v[p.off_x + row]);
        float dtx = dtv * xv;
        uint sb = p.off_state + (uint(slot) * p.n_heads * p.head_dim + gid) * p.dstate;
        uint gb = (b * p.n_groups + g) * p.dstate;
        float acc = 0.0;
        if (VEC4 != 0u) {   // 4 elements a load (lavapipe pays per load instruction, lane by lane)
            vec4 acc4 = vec4(0.0);
            for (uint n = 0u; n < p.dstate / 4u; ++n) {
                uint s4 = sb / 4u + n, g4 = (p.off_b + gb) / 4u + n;
                vec4 s0 = STATE_F32 != 0u ? state4.st[s4] : LOAD4(state_t4.st[s4]);
                vec4 s = s0 * exp(decay4.v[ab / 4u + n] * dtv) + dtx * LOAD4(b_in4.v[g4]);
                if (STATE_F32 != 0u) state4.st[s4] = s; else state_t4.st[s4] = STORE4(s);
                acc4 += s * LOAD4(c_in4.v[(p.off_c + gb) / 4u + n]);
            }
            acc = ((acc4.x + acc4.y) + acc4.z) + acc4.w;
        } else for (uint n = 0u; n < p.dstate; ++n) {
            float s0 = STATE_F32 != 0u ? state.st[sb + n] : LOAD(state_t.st[sb + n]);
            float s = s0 * exp(decay.v[ab + n] * dtv) + dtx * LOAD(b_in.v[p.off_b + gb + n]);
            if (STATE_F32 != 0u) state.st[sb + n] = s; else state_t.st[sb + n] = STORE(s);
            acc += s * LOAD(c_in.v[p.off_c + gb + n]);
        }
        out_.v[p.off_out + row] = STORE(acc + xv * dsk);
    }
}

#elif defined(GDN)
layout(constant_id = 0) const uint K = 128;          // head size of q / k (a state row's length)
layout(set = 0, binding = 0) writeonly buffer Out { T v[]; } out_;
layout(set = 0, binding = 1) readonly buffer Q { T v[]; } q;
layout(set = 0, binding = 2) readonly buffer Kb { T v[]; } k;
layout(set = 0, binding = 3) readonly buffer Vb { T v[]; } v;
layout(set = 0, binding = 4) readonly buffer A { T v[]; } a;
layout(set = 0, binding = 5) readonly buffer Bb { T v[]; } b;
layout(set = 0, binding = 6) readonly buffer ALog { float v[]; } a_log;
layout(set = 0, binding = 7) readonly buffer DtBias { float v[]; } dt_bias;
layout(set = 0, binding = 8) readonly buffer StateIn { float v[]; } state_in;
layout(set = 0, binding = 9) buffer StateOut { float v[]; } state_out;
layout(set = 0, binding = 10) readonly buffer Cu { int v[]; } cu;
layout(set = 0, binding = 11) readonly buffer Rows { int v[]; } rows;   // [n_seq]: input, output rows

layout(push_constant) uniform Params {
    uint n_seq; uint hq; uint hk; uint hv; uint dv; uint t0; uint t1; uint src; uint rows_in; uint rows_out;
    float scale;
    uint off_out; uint off_q; uint off_k; uint off_v; uint off_a; uint off_b; uint off_a_log; uint off_dt_bias;
    uint off_state_in; uint off_state_out; uint off_cu; uint off_rows;
} p;

void main() {
    // A workgroup per (sequence, v head, block of WG rows): n and h are uniform, so the q / k loads of
    // the inner loops are one load for all lanes (lavapipe loads a varying address lane by lane).
    uint blocks = (p.dv + WG - 1u) / WG, grp = linear_group();
    uint nh = grp / blocks, i = (grp % blocks) * WG + gl_LocalInvocationID.x;
    if (nh >= p.n_seq * p.hv || i >= p.dv) return;
    uint h = nh % p.hv, n = nh / p.hv;
    uint c0 = uint(cu.v[p.off_cu + n]), len = uint(cu.v[p.off_cu + n + 1u]) - c0;
    uint lo = p.t0, hi = min(p.t1, len);
    uint r_in = p.rows_in != 0u ? uint(rows.v[p.off_rows + n]) : n;
    uint r_out = p.rows_out != 0u ? uint(rows.v[p.off_rows + n]) : n;
    uint sb_out = p.off_state_out + ((r_out * p.hv + h) * p.dv + i) * K;
    float s[K];
    if (p.src == 2u) {
        if (lo >= hi) return;                        // nothing left of this sequence: its row stays
        for (uint j = 0u; j < K; ++j) s[j] = state_out.v[sb_out + j];
    } else if (p.src == 1u && len > 0u) {            // an empty sequence ends with a zero state (the reference)
        uint sb_in = p.off_state_in + ((r_in * p.hv + h) * p.dv + i) * K;
        for (uint j = 0u; j < K; ++j) s[j] = state_in.v[sb_in + j];
    } else {
        for (uint j = 0u; j < K; ++j) s[j] = 0.0;
    }
    float ga = exp(a_log.v[p.off_a_log + h]), db = dt_bias.v[p.off_dt_bias + h];
    uint qh = h / (p.hv / p.hq), kh = h / (p.hv / p.hk);
    for (uint t = lo; t < hi; ++t) {
        uint tok = c0 + t, th = tok * p.hv + h;
        float gv = exp(-ga * softplus(LOAD(a.v[p.off_a + th]) + db));
        float beta = 1.0 / (1.0 + exp(-LOAD(b.v[p.off_b + th])));
        uint qb = p.off_q + (tok * p.hq + qh) * K, kb = p.off_k + (tok * p.hk + kh) * K;
        float ov = 0.0;
        for (uint j = 0u; j < K; ++j) {
            s[j] = gv * s[j];
            ov += LOAD(k.v[kb + j]) * s[j];
        }
        float nv = beta * LOAD(v.v[p.off_v + th * p.dv + i]) + (1.0 - beta) * ov;
        float o = 0.0;
        for (uint j = 0u; j < K; ++j) {
            float kj = LOAD(k.v[kb + j]);
            s[j] = (s[j] - kj * ov) + kj * nv;
            o += LOAD(q.v[qb + j]) * s[j];
        }
        out_.v[p.off_out + th * p.dv + i] = STORE(p.scale * o);
    }
    for (uint j = 0u; j < K; ++j) state_out.v[sb_out + j] = s[j];
}
#else
#error "one of MAMBA, GDN must be defined"
#endif
