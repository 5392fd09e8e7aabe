#version 450
// The linalg extension's factorizations (fuelvk.linalg): one workgroup factorizes one matrix of a
// batch (the batch index is the workgroup), in its output buffers, in steps: a launch runs steps
// [s0, s1) with a workgroup barrier between them, so the host splits long factorizations over
// launches that each stay within the device's loop budget (kernels/linalg.py step_costs). State
// between steps lives in the buffers (w, v, t, r, info), never in registers.
//   MODE_CHOLESKY  w = L (lower; upper zeroed). Steps 0..n-1 (column k). info[b] = 1: not positive
//                  definite (a pivot <= 0 or NaN).
//   MODE_LU        w = L\U of P A (partial pivoting, rows swapped in place). Steps 0..n-1: column k;
//                  step n: t[b] = sign of det (perm parity times the phases of U's diagonal, 0 when a
//                  pivot is 0), r[b*n + i] = |U_ii|. With k > 0 columns of B in v (or FLAG_INV: v
//                  starts as I), steps n+1..2n solve L y = P B and 2n+1..3n U x = y in place.
//                  info[b] = 1: a pivot was exactly 0 (singular); info[batch + b] = swap parity.
//   MODE_QR        Householder: w = R (m x n), t = the reflectors (m x kk), r = their tau;
//                  steps 0..kk-1 reflect column j; kk..2kk-1 accumulate Q = H_0..H_kk-1 I[:, :k]
//                  into v (m x k) backwards; step 2kk makes R's diagonal real and >= 0 (Q's columns
//                  take the phases), so the factorization is unique where A has full rank.
//   MODE_EIGH      cyclic Jacobi on the symmetric w (from A's lower triangle), rotations in the
//                  round-robin order (n/2 disjoint pairs per round, rounds are steps), t = V.
//                  Step 0: init; steps 1..k*(N-1): rounds (k sweeps, N = n rounded up to even);
//                  last: r = eigenvalues ascending, v = the eigenvectors in that order.
//   MODE_SVD       one-sided (Hestenes) Jacobi on the columns of w = A (m >= n), t = V; same steps;
//                  last: r = column norms (singular values) descending, v = w's columns in that
//                  order (A V, orthogonal columns: the host's QR of it gives U), o2 = V^T (Vh).
//   MODE_PRODUCT   w = a @ t (m x k times k x n: matmul of the dtypes the matmul kernels lack, and the
//                  compositions' products); `blocks` workgroups per matrix, each a block of rows; step
//                  s adds the inner indices [s KCHUNK, (s + 1) KCHUNK).
// Jacobi works on A / max|A| (sums of squares cannot overflow) and scales the values back.
// Jacobi: a sweep that rotates nothing sets info[b] = 1 (converged: later rounds return at once);
// info[batch + b] counts the current sweep's rotations.
// Tags: R1 (float32) / R2 (float64) real; C1 (complex64) / C2 (complex128) interleaved pairs
// (every mode: the Jacobi rotations carry the phase of apq, eigh takes Hermitian matrices).
#include "common/index.glsl"
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint MODE = MODE_LU;

#if defined(R2) || defined(C2)
#define R double
#define EPS 2.220446049250313e-16LF
#define TINY 2.2250738585072014e-308LF
#else
#define R float
#define EPS 1.1920929e-07
#define TINY 1.1754944e-38
#endif

#if defined(C1) || defined(C2)
#define IS_COMPLEX 1
#if defined(C2)
#define S dvec2
#else
#define S vec2
#endif
#define LD(buf, i) S(buf[2u * (i)], buf[2u * (i) + 1u])
#define ST(buf, i, z) { S z_ = (z); buf[2u * (i)] = z_.x; buf[2u * (i) + 1u] = z_.y; }
#define ZERO S(0.0, 0.0)
#define ONE S(1.0, 0.0)
#define MUL(a, b) S((a).x * (b).x - (a).y * (b).y, (a).x * (b).y + (a).y * (b).x)
#define CONJ(a) S((a).x, -(a).y)
#define REAL(a) ((a).x)
// |z| and z / w scaled by the larger component, so that squares cannot overflow
R cabs(S z) { R s = max(abs(z.x), abs(z.y)); return s > R(0.0) && !isinf(s) ? s * length(z / s) : s; }
S cdiv(S a, S b) {
    R s = max(abs(b.x), abs(b.y));
    S bs = b / s, as_ = a / s;
    return S(as_.x * bs.x + as_.y * bs.y, as_.y * bs.x - as_.x * bs.y) / dot(bs, bs);
}
#define ABS(a) cabs(a)
#define DIV(a, b) cdiv(a, b)
#define PHASE(a) ((a) / cabs(a))
#else
#define IS_COMPLEX 0
#define S R
#define LD(buf, i) buf[i]
#define ST(buf, i, z) { buf[i] = (z); }
#define ZERO R(0.0)
#define ONE R(1.0)
#define MUL(a, b) ((a) * (b))
#define CONJ(a) (a)
#define REAL(a) (a)
#define ABS(a) abs(a)
#define DIV(a, b) ((a) / (b))
#define PHASE(a) ((a) < R(0.0) ? R(-1.0) : R(1.0))
#endif

layout(set = 0, binding = 0) readonly buffer A { R a[]; };
layout(set = 0, binding = 1) coherent buffer W { R w[]; };
layout(set = 0, binding = 2) coherent buffer V { R v[]; };
layout(set = 0, binding = 3) coherent buffer T { R t[]; };
layout(set = 0, binding = 4) coherent buffer Vals { R r[]; };
layout(set = 0, binding = 5) coherent buffer Info { uint info[]; };
layout(set = 0, binding = 6) coherent buffer O2 { R o2[]; };

layout(push_constant) uniform Params {
    uint batch; uint m; uint n; uint k; uint s0; uint s1; uint off_a; uint flags; uint blocks;
} p;

shared uint sh_flag;
shared uint sh_piv;
shared uint sh_pa[MAXP];
shared uint sh_pb[MAXP];
shared R sh_c[MAXP];
shared R sh_s[MAXP];
shared uint sh_perm[MAXN];
shared R sh_vals[MAXN];
shared S sh_ph[MAXP];

#define SYNC() { memoryBarrierBuffer(); memoryBarrierShared(); barrier(); }

uint b;            // this workgroup's matrix
uint lid;          // invocation in the workgroup

// ---------------------------------------------------------------------------- Cholesky
void cholesky_step(uint k) {
    uint n = p.n, base = b * n * n;
    if (k == 0u) {
        for (uint e = lid; e < n * n; e += WG) {
            uint i = e / n, j = e - i * n;
            ST(w, base + e, j <= i ? LD(a, p.off_a + base + e) : ZERO);
        }
        if (lid == 0u) info[b] = 0u;
        SYNC();
    }
    if (lid == 0u) {
        R d = REAL(LD(w, base + k * n + k));
        if (!(d > R(0.0))) info[b] = 1u;
        ST(w, base + k * n + k, S(sqrt(d)) * ONE);
    }
    SYNC();
    S dk = LD(w, base + k * n + k);
    for (uint i = k + 1u + lid; i < n; i += WG) ST(w, base + i * n + k, DIV(LD(w, base + i * n + k), dk));
    SYNC();
    uint rest = n - k - 1u;
    for (uint e = lid; e < rest * rest; e += WG) {
        uint i = k + 1u + e / rest, j = k + 1u + e % rest;
        if (j <= i) ST(w, base + i * n + j, LD(w, base + i * n + j) - MUL(LD(w, base + i * n + k), CONJ(LD(w, base + j * n + k))));
    }
}

// ---------------------------------------------------------------------------- LU, det, solve
void lu_step(uint s) {
    uint n = p.n, nb = p.k, base = b * n * n, vb = b * n * nb;
    if (s == 0u) {
        for (uint e = lid; e < n * n; e += WG) ST(w, base + e, LD(a, p.off_a + base + e));
        if ((p.flags & FLAG_INV) != 0u)
            for (uint e = lid; e < n * nb; e += WG) ST(v, vb + e, (e / nb == e % nb) ? ONE : ZERO);
        if (lid == 0u) { info[b] = 0u; info[p.batch + b] = 0u; }
        SYNC();
    }
    if (s < n) {
        uint k = s;
        if (lid == 0u) {                                   // the pivot: the largest |a_ik|, i >= k
            uint best = k;
            R big = ABS(LD(w, base + k * n + k));
            for (uint i = k + 1u; i < n; ++i) {
                R x = ABS(LD(w, base + i * n + k));
                if (x > big) { big = x; best = i; }
            }
            sh_piv = best;
            if (big == R(0.0)) info[b] = 1u;
            if (best != k) info[p.batch + b] ^= 1u;
        }
        SYNC();
        uint pv = sh_piv;
        if (pv != k) {
            for (uint j = lid; j < n; j += WG) {
                S x = LD(w, base + k * n + j); ST(w, base + k * n + j, LD(w, base + pv * n + j)); ST(w, base + pv * n + j, x);
            }
            for (uint j = lid; j < nb; j += WG) {
                S x = LD(v, vb + k * nb + j); ST(v, vb + k * nb + j, LD(v, vb + pv * nb + j)); ST(v, vb + pv * nb + j, x);
            }
            SYNC();
        }
        S d = LD(w, base + k * n + k);
        if (ABS(d) == R(0.0)) return;                      // a zero column: nothing to eliminate
        for (uint i = k + 1u + lid; i < n; i += WG) ST(w, base + i * n + k, DIV(LD(w, base + i * n + k), d));
        SYNC();
        uint rest = n - k - 1u;
        for (uint e = lid; e < rest * rest; e += WG) {
            uint i = k + 1u + e / rest, j = k + 1u + e % rest;
            ST(w, base + i * n + j, LD(w, base + i * n + j) - MUL(LD(w, base + i * n + k), LD(w, base + k * n + j)));
        }
    } else if (s == n) {                                   // det's sign and |U_ii|
        if (lid == 0u) {
            S sg = (info[p.batch + b] & 1u) != 0u ? -ONE : ONE;
            for (uint i = 0u; i < n; ++i) {
                S d = LD(w, base + i * n + i);
                sg = ABS(d) == R(0.0) ? ZERO : MUL(sg, PHASE(d));
            }
            ST(t, b, sg);
        }
        for (uint i = lid; i < n; i += WG) r[b * n + i] = ABS(LD(w, base + i * n + i));
    } else if (s <= 2u * n) {                              // L y = P B (unit lower), column i
        uint i = s - n - 1u, rest = n - i - 1u;
        for (uint e = lid; e < rest * nb; e += WG) {
            uint row = i + 1u + e / nb, c = e % nb;
            ST(v, vb + row * nb + c, LD(v, vb + row * nb + c) - MUL(LD(w, base + row * n + i), LD(v, vb + i * nb + c)));
        }
    } else {                                               // U x = y, column i from the last
        uint i = 3u * n - s;
        S d = LD(w, base + i * n + i);
        for (uint c = lid; c < nb; c += WG) ST(v, vb + i * nb + c, DIV(LD(v, vb + i * nb + c), d));
        SYNC();
        for (uint e = lid; e < i * nb; e += WG) {
            uint row = e / nb, c = e % nb;
            ST(v, vb + row * nb + c, LD(v, vb + row * nb + c) - MUL(LD(w, base + row * n + i), LD(v, vb + i * nb + c)));
        }
    }
}

// ---------------------------------------------------------------------------- Householder QR
void qr_step(uint s) {
    uint m = p.m, n = p.n, qc = p.k, kk = min(m, n);
    uint base = b * m * n, tb = b * m * kk, vb = b * m * qc;
    if (s == 0u) {
        for (uint e = lid; e < m * n; e += WG) ST(w, base + e, LD(a, p.off_a + base + e));
        for (uint e = lid; e < m * qc; e += WG) ST(v, vb + e, (e / qc == e % qc) ? ONE : ZERO);
        SYNC();
    }
    if (s < kk) {                                          // reflect column j: H x = alpha e_j
        uint j = s;
        if (lid == 0u) {                                   // the norm scaled by max|x_i| (no overflow)
            R big = R(0.0), ssq = R(0.0);
            for (uint i = j; i < m; ++i) big = max(big, ABS(LD(w, base + i * n + j)));
            if (big > R(0.0) && !isinf(big))
                for (uint i = j; i < m; ++i) { S x = LD(w, base + i * n + j) / big; ssq += REAL(MUL(CONJ(x), x)); }
            S x0 = LD(w, base + j * n + j);
            R nrm = big * sqrt(ssq), a0 = ABS(x0);
            R tau = R(0.0);
            S alpha = x0, v0 = ONE;
            if (nrm > R(0.0)) {                            // v = (x - alpha e_j) / v0 with v0 = x0 - alpha:
                S ph = a0 > R(0.0) ? PHASE(x0) : ONE;      // |v_i| <= 1, H = I - tau v v^H
                alpha = -nrm * ph;
                v0 = ph * (a0 + nrm);
                tau = (a0 + nrm) / nrm;
            }
            r[b * kk + j] = tau;
            ST(t, tb + j * kk + j, ONE);
            for (uint i = j + 1u; i < m; ++i) ST(t, tb + i * kk + j, DIV(LD(w, base + i * n + j), v0));
            ST(w, base + j * n + j, alpha);
            for (uint i = j + 1u; i < m; ++i) ST(w, base + i * n + j, ZERO);
        }
        SYNC();
        R tau = r[b * kk + j];
        if (tau == R(0.0)) return;
        for (uint c = j + 1u + lid; c < n; c += WG) {     // y -= tau v (v^H y), one column each
            S d = ZERO;
            for (uint i = j; i < m; ++i) d += MUL(CONJ(LD(t, tb + i * kk + j)), LD(w, base + i * n + c));
            d *= tau;
            for (uint i = j; i < m; ++i) ST(w, base + i * n + c, LD(w, base + i * n + c) - MUL(LD(t, tb + i * kk + j), d));
        }
    } else if (s < 2u * kk) {                              // Q = H_j Q, j from the last
        uint j = 2u * kk - 1u - s;
        R tau = r[b * kk + j];
        if (tau == R(0.0)) return;
        for (uint c = lid; c < qc; c += WG) {
            S d = ZERO;
            for (uint i = j; i < m; ++i) d += MUL(CONJ(LD(t, tb + i * kk + j)), LD(v, vb + i * qc + c));
            d *= tau;
            for (uint i = j; i < m; ++i) ST(v, vb + i * qc + c, LD(v, vb + i * qc + c) - MUL(LD(t, tb + i * kk + j), d));
        }
    } else {                                               // R_jj real >= 0: Q_j *= phase, R_j *= conj
        for (uint e = lid; e < m * kk; e += WG) {
            uint i = e / kk, j = e % kk;
            S d = LD(w, base + j * n + j);
            if (ABS(d) > R(0.0)) ST(v, vb + i * qc + j, MUL(LD(v, vb + i * qc + j), PHASE(d)));
        }
        SYNC();
        for (uint j = lid; j < kk; j += WG) {
            S d = LD(w, base + j * n + j);
            if (!(ABS(d) > R(0.0))) continue;
            S ph = CONJ(PHASE(d));
            for (uint c = j + 1u; c < n; ++c) ST(w, base + j * n + c, MUL(LD(w, base + j * n + c), ph));
            ST(w, base + j * n + j, S(ABS(d)) * ONE);
        }
    }
}

// ---------------------------------------------------------------------------- product
void product_step(uint s) {                                // this workgroup: rows [r0, r1) of matrix mat
    uint mat = b / p.blocks, per = (p.m + p.blocks - 1u) / p.blocks;
    uint r0 = (b % p.blocks) * per, r1 = min(p.m, r0 + per);
    uint m = p.m, n = p.n, kd = p.k, l0 = s * KCHUNK, l1 = min(kd, l0 + KCHUNK);
    uint ab = mat * m * kd, bb = mat * kd * n, cb = mat * m * n;
    for (uint e = r0 * n + lid; e < r1 * n; e += WG) {
        uint i = e / n, j = e - i * n;
        S acc = s == 0u ? ZERO : LD(w, cb + e);
        for (uint l = l0; l < l1; ++l) acc += MUL(LD(a, p.off_a + ab + i * kd + l), LD(t, bb + l * n + j));
        ST(w, cb + e, acc);
    }
}

// ---------------------------------------------------------------------------- Jacobi (eigh, svd)
// Round `rd` of the round-robin tournament over N players: pair q's two columns (lo, hi); N - 1
// rounds meet every pair once.
void pair_of(uint q, uint rd, uint N, out uint lo, out uint hi) {
    uint x, y;
    if (q == 0u) { x = 0u; y = (rd % (N - 1u)) + 1u; }
    else { x = ((q + rd) % (N - 1u)) + 1u; y = ((N - 1u - q + rd) % (N - 1u)) + 1u; }
    lo = min(x, y); hi = max(x, y);
}

// a < b in the order NaN-last, ties by index (a strict total order: ranks are a permutation).
bool before(R x, uint i, R y, uint j, bool ascending) {
    if (isnan(x) || isnan(y)) return !isnan(x) && isnan(y) || (isnan(x) && isnan(y) && i < j);
    if (x != y) return ascending ? x < y : x > y;
    return i < j;
}

// Pair q's rotation J on columns (lo, hi): J = [[c, s], [-s ph, c ph]] (ph = e^{-i arg apq}; real: the
// sign of apq). Columns: x' = c x - s ph y, y' = s x + c ph y; rows (J^H W): ph conjugated.
void rotate(inout S x, inout S y, R c, R sn, S ph) {
    S x0 = x, yp = MUL(ph, y);
    x = c * x0 - sn * yp;
    y = sn * x0 + c * yp;
}

void jacobi_step(uint s) {
    bool svd = MODE == MODE_SVD;
    uint m = svd ? p.m : p.n, n = p.n, N = n + (n & 1u), P = N / 2u;
    uint base = b * m * n, tb = b * n * n;
    uint rounds = p.k * (N - 1u);
    if (s == 0u) {                                        // w = A / max|A| (no overflow in the sums of squares)
        R mx = R(0.0);
        for (uint e = lid; e < m * n; e += WG) mx = max(mx, ABS(LD(a, p.off_a + base + e)));
        sh_c[lid] = mx;
        SYNC();
        if (lid == 0u) {
            for (uint i = 1u; i < WG; ++i) mx = max(mx, sh_c[i]);
            sh_s[0] = mx > R(0.0) && !isinf(mx) ? mx : R(1.0);
            r[b * n] = sh_s[0];                           // the scale, read back by the finish
        }
        SYNC();
        R inv_scale = R(1.0) / sh_s[0];
        for (uint e = lid; e < m * n; e += WG) {          // eigh: the Hermitian matrix of the lower triangle
            uint i = e / n, j = e - i * n;
            S x = svd || j < i ? LD(a, p.off_a + base + e) : j == i ? REAL(LD(a, p.off_a + base + e)) * ONE
                                                                    : CONJ(LD(a, p.off_a + base + j * n + i));
            ST(w, base + e, inv_scale * x);
        }
        for (uint e = lid; e < n * n; e += WG) ST(t, tb + e, e / n == e % n ? ONE : ZERO);
        if (lid == 0u) { info[b] = n < 2u ? 1u : 0u; info[p.batch + b] = 0u; }
        return;
    }
    if (s <= rounds) {
        if (lid == 0u) sh_flag = info[b];
        SYNC();
        if (sh_flag != 0u) return;
        uint rd = (s - 1u) % (N - 1u);
        for (uint q = lid; q < P; q += WG) {
            uint lo, hi;
            pair_of(q, rd, N, lo, hi);
            R c = R(1.0), sn = R(0.0);
            S ph = ONE;
            if (hi < n) {
                R app, aqq;
                S apq;
                if (svd) {
                    app = R(0.0); aqq = R(0.0); apq = ZERO;
                    for (uint i = 0u; i < m; ++i) {
                        S x = LD(w, base + i * n + lo), y = LD(w, base + i * n + hi);
                        app += REAL(MUL(CONJ(x), x)); aqq += REAL(MUL(CONJ(y), y)); apq += MUL(CONJ(x), y);
                    }
                } else {
                    app = REAL(LD(w, base + lo * n + lo)); aqq = REAL(LD(w, base + hi * n + hi));
                    apq = LD(w, base + lo * n + hi);
                }
                R g = ABS(apq);
                // converged pair: |apq| small against its diagonal (relative accuracy), or against the
                // matrix (scaled to max |a| = 1: an absolute floor, so zero columns / eigenvalues do not
                // keep a sweep rotating)
                bool tiny = svd ? g <= EPS * max(sqrt(app) * sqrt(aqq), EPS)
                                : g <= EPS * max(sqrt(abs(app)) * sqrt(abs(aqq)), R(1.0) / R(n));
                if (!(tiny || g < TINY)) {
                    R theta = (aqq - app) / (R(2.0) * g);
                    R tn = (theta >= R(0.0) ? R(1.0) : R(-1.0)) / (abs(theta) + sqrt(theta * theta + R(1.0)));
                    c = R(1.0) / sqrt(tn * tn + R(1.0));
                    sn = tn * c;
                    ph = CONJ(apq) / g;
                    atomicAdd(info[p.batch + b], 1u);
                }
            }
            sh_pa[q] = lo; sh_pb[q] = hi; sh_c[q] = c; sh_s[q] = sn; sh_ph[q] = ph;
        }
        SYNC();
        uint rows = svd ? m + n : 2u * n;                 // W's rows then V's rows
        for (uint e = lid; e < rows * P; e += WG) {      // columns lo, hi of [W; V] times J
            uint q = e % P, row = e / P;
            R sn = sh_s[q];
            if (sn == R(0.0)) continue;
            uint lo = sh_pa[q], hi = sh_pb[q];
            uint at = row < m ? base + row * n : tb + (row - m) * n;
            S x = row < m ? LD(w, at + lo) : LD(t, at + lo), y = row < m ? LD(w, at + hi) : LD(t, at + hi);
            rotate(x, y, sh_c[q], sn, sh_ph[q]);
            if (row < m) { ST(w, at + lo, x); ST(w, at + hi, y); }
            else { ST(t, at + lo, x); ST(t, at + hi, y); }
        }
        if (!svd) {
            SYNC();
            for (uint e = lid; e < n * P; e += WG) {       // rows lo, hi of W times J^H
                uint q = e % P, col = e / P;
                R sn = sh_s[q];
                if (sn == R(0.0)) continue;
                uint lo = sh_pa[q], hi = sh_pb[q];
                S x = LD(w, base + lo * n + col), y = LD(w, base + hi * n + col);
                rotate(x, y, sh_c[q], sn, CONJ(sh_ph[q]));
                ST(w, base + lo * n + col, x); ST(w, base + hi * n + col, y);
            }
            SYNC();
            for (uint q = lid; q < P; q += WG) {
                if (sh_s[q] == R(0.0)) continue;
                ST(w, base + sh_pa[q] * n + sh_pb[q], ZERO); ST(w, base + sh_pb[q] * n + sh_pa[q], ZERO);
            }
        }
        SYNC();
        if (lid == 0u && rd == N - 2u) {                  // the sweep's last round
            if (info[p.batch + b] == 0u) info[b] = 1u;
            info[p.batch + b] = 0u;
        }
        return;
    }
    // finish: the values (scaled back), their ranks, then values and vectors in that order
    R scale = r[b * n];
    for (uint j = lid; j < n; j += WG) {
        R x;
        if (svd) {
            x = R(0.0);
            for (uint i = 0u; i < m; ++i) { S y = LD(w, base + i * n + j); x += REAL(MUL(CONJ(y), y)); }
            x = sqrt(x);
        } else {
            x = REAL(LD(w, base + j * n + j));
        }
        sh_vals[j] = x * scale;
    }
    SYNC();
    for (uint j = lid; j < n; j += WG) {
        R x = sh_vals[j];
        uint rank = 0u;
        for (uint i = 0u; i < n; ++i) rank += before(sh_vals[i], i, x, j, !svd) ? 1u : 0u;
        sh_perm[rank] = j;
        r[b * n + rank] = x;
    }
    SYNC();
    if (svd) {
        for (uint e = lid; e < m * n; e += WG) {          // A V in the values' order
            uint i = e / n, j = e - i * n;
            ST(v, base + e, scale * LD(w, base + i * n + sh_perm[j]));
        }
        for (uint e = lid; e < n * n; e += WG) {          // Vh[j, c] = conj(V[c, perm[j]])
            uint j = e / n, c = e - j * n;
            ST(o2, tb + e, CONJ(LD(t, tb + c * n + sh_perm[j])));
        }
    } else {
        for (uint e = lid; e < n * n; e += WG) {
            uint i = e / n, j = e - i * n;
            ST(v, tb + e, LD(t, tb + i * n + sh_perm[j]));
        }
    }
}

void main() {
    b = linear_group();
    lid = gl_LocalInvocationID.x;
    if (b >= p.batch * p.blocks) return;               // blocks: row blocks per matrix (product; else 1)
    for (uint s = p.s0; s < p.s1; ++s) {
        if (MODE == MODE_CHOLESKY) cholesky_step(s);
        else if (MODE == MODE_LU) lu_step(s);
        else if (MODE == MODE_QR) qr_step(s);
        else if (MODE == MODE_PRODUCT) product_step(s);
        else jacobi_step(s);
        SYNC();
    }
}
