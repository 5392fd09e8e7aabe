// Index fetch shared by index_select / gather / scatter_add / index_add.
// Needs before inclusion: spec constant IDX (IDX_UINT32, IDX_INT32, or IDX_INT64 as two u32 words:
// defines from kernels/indexing.py INDEX_KINDS) and a
// `uint ids[]` binding, or IDS_LOAD(i) defined as another read of its u32 word i (a texel view).
// Negative i32/i64 indices count from the end (numpy); `ok` is false for
// anything outside [-n, n), and the returned index is then clamped into [0, n) so a caller that
// reads with it stays in bounds (writers skip it).
#ifndef FUELVK_INDEX_FETCH_GLSL
#define FUELVK_INDEX_FETCH_GLSL
#ifndef IDS_LOAD
#define IDS_LOAD(i) ids[i]
#endif
uint fetch_index(uint pos, uint n, out bool ok) {
    int v;
    if (IDX == IDX_INT64) {
        uint lo = IDS_LOAD(2u * pos), hi = IDS_LOAD(2u * pos + 1u);
        bool fits = (hi == 0u && lo < 0x80000000u) || (hi == 0xFFFFFFFFu && lo >= 0x80000000u);
        v = fits ? int(lo) : (int(hi) < 0 ? -2147483647 : 2147483647);
    } else if (IDX == IDX_INT32) {
        v = int(IDS_LOAD(pos));
    } else {
        uint u = IDS_LOAD(pos);
        ok = u < n;
        return min(u, n - 1u);
    }
    if (v < 0) v += int(n);
    ok = v >= 0 && v < int(n);
    return uint(clamp(v, 0, int(n) - 1));
}
#endif
