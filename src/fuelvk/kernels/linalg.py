"""The linalg extension's factorizations: one family (shaders/linalg.comp), one workgroup per matrix
of a batch, the factorization advanced in steps that the host groups into launches within the
device's loop budget (step_costs).

Tags: f32 / f64 (real), c64 / c128 (interleaved complex pairs; Cholesky, LU and QR only).
Mode ids are the table below; the shader sees them as defines (MODE_LU, ...).
"""
from .registry import family, id_defines, ids

GROUP = "Linear algebra (linalg extension)"
MODES = ids("cholesky", "lu", "qr", "eigh", "svd", "product")
KCHUNK = 16               # product: inner indices per step
WG = 64
MAXN = 512                 # Jacobi (eigh / svd): columns per matrix (shared arrays of the pairs and the order)
JACOBI_SWEEPS = 30         # at most; a sweep that rotates nothing ends the iteration
FLAGS = {"INV": 1}         # LU: v starts as the identity (inv)
TAGS = {"f32": {"R1": 1}, "f64": {"R2": 1}, "c64": {"C1": 1}, "c128": {"C2": 1}}
family("linalg", "linalg.comp", {}, GROUP, extra=tuple(TAGS),
       defines=dict(id_defines(MODE=MODES), WG=WG, MAXN=MAXN, KCHUNK=KCHUNK, MAXP=MAXN // 2,
                    **{f"FLAG_{k}": v for k, v in FLAGS.items()}),
       tag_defines=TAGS, tag_features={"f32": (), "c64": (), "f64": ("float64",), "c128": ("float64",)})


def _per(items):
    """Loop iterations one invocation runs for `items` spread over the workgroup."""
    return -(-items // WG)


def step_costs(mode, m, n, k):
    """Loop iterations per invocation of each step of `mode`: an upper bound of the shader's loops
    summed (each loop counted as ceil(items / WG), plus the steps loop itself), for an m x n matrix
    (k: B's columns for lu, Q's columns for qr, sweeps for Jacobi, the inner dimension for product)."""
    return [c + STEP_SLACK for c in _costs(mode, m, n, k)]


STEP_SLACK = 4      # the steps loop's own iteration and rounding of the per-loop counts


def _costs(mode, m, n, k):
    if mode == "cholesky":
        return [_per(n * n) * (s == 0) + _per(n) + _per((n - s) ** 2) for s in range(n)]
    if mode == "lu":
        steps = [(_per(n * n) + _per(n * k)) * (s == 0) + n + _per(n) + _per(k) + _per(n) + _per((n - s) ** 2)
                 for s in range(n)]
        steps.append(n + _per(n))
        if k:
            steps += [_per(n * k)] * n + [_per(k) + _per(n * k)] * n
        return steps
    if mode == "product":
        return [_per(m * n) * (KCHUNK + 1)] * max(1, -(-k // KCHUNK))
    if mode == "qr":
        kk = min(m, n)
        first = _per(m * n) + _per(m * k)
        steps = [first * (s == 0) + 4 * m + _per(n) * 2 * m for s in range(kk)]
        steps += [_per(k) * 2 * m] * kk
        steps.append(_per(m * kk) + _per(kk) * n)
        return steps
    svd = mode == "svd"
    rows = m if svd else n
    N = n + n % 2
    P = N // 2
    pairs = _per(P) * (1 + (rows if svd else 0))
    rnd = pairs + _per((rows + n) * P) + _per(n * P) + _per(P)
    fin = _per(n) * (rows + 1) + _per(n) * (n + 1) + _per(rows * n) + _per(n * n)
    return [2 * _per(rows * n) + WG + _per(n * n)] + [rnd] * (k * (N - 1)) + [fin]
