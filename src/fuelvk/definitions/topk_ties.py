"""Which of several equal values torch.topk picks on the CPU, for one row: the FlashInfer-Bench
references route experts with torch.topk, and where the k-th and (k+1)-th largest values tie (bfloat16
router logits over 128 experts: about one token in eight at top 8) the set it returns is its selection
algorithm's, unspecified by torch.  The runner runs the references on the CPU; a solution that keeps
another tied expert differs in that token's whole output row.  kinds.top_k_rows finds the top k on
the device and recomputes only the rows with such a tie here.

ATen's CPU topk (aten/src/ATen/native/TopKImpl.h) orders (value, index) pairs by value (NaN first,
then greater) with std::partial_sort when k * 64 <= n, else std::nth_element; both are libstdc++'s
(introselect: median-of-three pivot, unguarded partition, insertion sort under four elements, heap
select past the depth limit), transcribed below.  tests/test_definitions_moe.py holds it to
torch.topk itself on rows full of ties.
"""
import math


def torch_cpu_topk(vals, k):
    """Indices torch.topk(row, k) (largest, sorted or not) picks on the CPU; their order is not
    meaningful (the set is)."""
    n = len(vals)
    q = [(v, i) for i, v in enumerate(vals)]
    if k * 64 <= n:
        return _partial_sort(q, k)
    _introselect(q, 0, k - 1, n, 2 * int(math.log2(n)))
    return [i for _, i in q[:k]]


def _gt(a, b):
    """The comparator of torch's CPU topk (largest): NaN first, then greater."""
    return (math.isnan(a) and not math.isnan(b)) or a > b


def _partial_sort(q, k):
    """std::partial_sort's selection (__heap_select into the first k; sort_heap only orders them)."""
    heap = q[:k]
    _make_heap(heap)
    for i in range(k, len(q)):
        if _gt(q[i][0], heap[0][0]):
            val = q[i]
            q[i] = heap[0]
            _adjust_heap(heap, 0, k, val)
    return [i for _, i in heap]


def _adjust_heap(h, hole, length, value):
    """libstdc++ __adjust_heap under _gt (its top is the least of the k kept)."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _gt(h[child][0], h[child - 1][0]):
            child -= 1
        h[hole] = h[child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        h[hole] = h[child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _gt(h[parent][0], value[0]):
        h[hole] = h[parent]
        hole = parent
        parent = (hole - 1) // 2
    h[hole] = value


def _make_heap(h):
    n = len(h)
    if n < 2:
        return
    parent = (n - 2) // 2
    while True:
        _adjust_heap(h, parent, n, h[parent])
        if parent == 0:
            return
        parent -= 1


def _introselect(q, first, nth, last, depth):
    """libstdc++ std::__introselect (std::nth_element with depth limit 2 lg n)."""
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        cut = _partition_pivot(q, first, last)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last)


def _heap_select(q, first, middle, last):
    h = q[first:middle]
    _make_heap(h)
    q[first:middle] = h
    for i in range(middle, last):
        if _gt(q[i][0], q[first][0]):
            val = q[i]
            q[i] = q[first]
            h = q[first:middle]
            _adjust_heap(h, 0, middle - first, val)
            q[first:middle] = h


def _partition_pivot(q, first, last):
    mid = first + (last - first) // 2
    _median_to_first(q, first, first + 1, mid, last - 1)
    return _unguarded_partition(q, first + 1, last, first)


def _median_to_first(q, r, a, b, c):
    va, vb, vc = q[a][0], q[b][0], q[c][0]
    if _gt(va, vb):
        if _gt(vb, vc):
            s = b
        elif _gt(va, vc):
            s = c
        else:
            s = a
    elif _gt(va, vc):
        s = a
    elif _gt(vb, vc):
        s = c
    else:
        s = b
    q[r], q[s] = q[s], q[r]


def _unguarded_partition(q, first, last, pivot):
    while True:
        while _gt(q[first][0], q[pivot][0]):
            first += 1
        last -= 1
        while _gt(q[pivot][0], q[last][0]):
            last -= 1
        if not first < last:
            return first
        q[first], q[last] = q[last], q[first]
        first += 1


def _insertion_sort(q, first, last):
    if first == last:
        return
    for i in range(first + 1, last):
        if _gt(q[i][0], q[first][0]):
            val = q[i]
            q[first + 1:i + 1] = q[first:i]
            q[first] = val
        else:
            val = q[i]
            j = i
            while _gt(val[0], q[j - 1][0]):
                q[j] = q[j - 1]
                j -= 1
            q[j] = val
