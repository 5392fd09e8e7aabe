"""Built-in functions of the expression language.

The TileOPs manifest names these in its expressions (reduced, valid_axes, coalesce_dtype, ceil_div,
the value generators repeat/balanced_sizes/packed_positions, the `requires` predicates ...); the
few fuelvk adds for numpy-style ops (broadcast_shapes, replace_axis, insert_axis, padded,
as_pair, conv_pads)
are marked below.  All are pure functions of their arguments.
"""
from __future__ import annotations

import math

from .expr import ExprError
from .kinds import DTYPE_BITS, INT_DTYPES


def _ints(name, seq):
    if not isinstance(seq, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                     for v in seq):
        raise ExprError(f"{name}() needs a sequence of integers, got {seq!r}")
    return tuple(seq)


def _axes(dim, rank, empty):
    """Normalised axes of `dim` (None, an int or a sequence) for a tensor of `rank`; empty: full|noop|reject."""
    if dim is None:
        if empty == "reject":
            raise ExprError("dim=None is not accepted here")
        return tuple(range(rank))
    dims = (dim,) if isinstance(dim, int) else _ints("axes", dim)
    if not dims:
        if empty == "reject":
            raise ExprError("an empty dim list is not accepted here")
        return tuple(range(rank)) if empty == "full" else ()
    out = []
    for d in dims:
        if not -max(rank, 1) <= d < max(rank, 1):
            raise ExprError(f"axis {d} out of range for rank {rank}")
        out.append(d % max(rank, 1))
    return tuple(out)


def reduced(S, dim, keepdim, empty="full"):
    S = _ints("reduced", S)
    axes = set(_axes(dim, len(S), empty))
    return tuple(1 if i in axes else n for i, n in enumerate(S) if keepdim or i not in axes)


def valid_axes(dim, rank):
    if dim is None:
        return True
    dims = (dim,) if isinstance(dim, int) and not isinstance(dim, bool) else dim
    if not isinstance(dims, (tuple, list)):
        return False
    r = max(rank, 1)
    return all(isinstance(d, int) and not isinstance(d, bool) and -r <= d < r for d in dims)


def unique_axes(dim, rank):
    if dim is None or isinstance(dim, int):
        return True
    norm = [d % max(rank, 1) for d in dim]
    return len(set(norm)) == len(norm)


def norm_axis(axis, rank):
    """fuelvk: an axis in [-rank, rank) as a non-negative axis."""
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise ExprError(f"axis {axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def replace_axis(S, axis, n):
    """fuelvk: S with axis `axis` replaced by n (an int) or spliced with the dims of n (a sequence)."""
    S = _ints("replace_axis", S)
    a = norm_axis(axis, len(S))
    mid = (n,) if isinstance(n, int) else _ints("replace_axis", n)
    return S[:a] + mid + S[a + 1:]


def insert_axis(S, axis, n):
    """fuelvk: S with a new axis of length n at `axis` of the result (numpy concatenate/stack)."""
    S = _ints("insert_axis", S)
    a = norm_axis(axis, len(S) + 1)
    return S[:a] + (n,) + S[a:]


def broadcast_shapes(A, B):
    """fuelvk: numpy's broadcast of two shapes."""
    A, B = _ints("broadcast_shapes", A), _ints("broadcast_shapes", B)
    r = max(len(A), len(B))
    A, B = (1,) * (r - len(A)) + A, (1,) * (r - len(B)) + B
    out = []
    for a, b in zip(A, B):
        if a != b and 1 not in (a, b):
            raise ExprError(f"shapes {A} and {B} do not broadcast")
        out.append(b if a == 1 else a)
    return tuple(out)


def broadcastable(A, B):
    try:
        broadcast_shapes(A, B)
        return True
    except ExprError:
        return False


def _pairs(pad_width, rank):
    if len(pad_width) != rank or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pad_width):
        raise ExprError(f"pad_width {pad_width!r} needs one (before, after) pair per axis of rank {rank}")
    return pad_width


def padded(S, pad_width):
    """fuelvk: the shape of numpy.pad(x, pad_width) for x of shape S."""
    return tuple(n + p[0] + p[1] for n, p in zip(S, _pairs(pad_width, len(S))))


def unpadded(P, pad_width):
    """fuelvk: the shape that numpy.pad(., pad_width) maps to P (pad's backward)."""
    return tuple(n - p[0] - p[1] for n, p in zip(P, _pairs(pad_width, len(P))))


def as_pair(v):
    """fuelvk: an `int | tuple[int, int]` conv argument as a pair (torch's conv2d convention)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return tuple(v)
    raise ExprError(f"as_pair() needs an int or a pair, got {v!r}")


def conv_pads(padding, KH, KW, dilation):
    """fuelvk: (top, bottom, left, right) of a conv2d padding: an int, an (h, w) pair, a 4-tuple,
    'valid' or 'same' (torch's split: the odd pixel goes after)."""
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        dh, dw = as_pair(dilation)
        th, tw = dh * (KH - 1), dw * (KW - 1)
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return tuple(padding)
    ph, pw = as_pair(padding)
    return (ph, ph, pw, pw)


def coalesce_dtype(*dtypes):
    for d in dtypes:
        if d is not None:
            return d
    raise ExprError("coalesce_dtype() of only None")


def promote_int_to_float(T):
    return "float32" if T in INT_DTYPES else T


def bits(T):
    if T not in DTYPE_BITS:
        raise ExprError(f"bits() of unknown dtype {T!r}")
    return DTYPE_BITS[T]


def ceil_div(a, b):
    if b == 0:
        raise ExprError("ceil_div by zero")
    return -(-a // b)


def prod(seq):
    return math.prod(_ints("prod", seq))


def _minmax(f, name):
    def g(*args):
        vals = args[0] if len(args) == 1 else args
        if not isinstance(vals, (tuple, list)) or not vals:
            raise ExprError(f"{name}() needs a non-empty sequence or several values")
        return f(vals)
    return g


def _range(*args):
    return tuple(range(*args))


# --------------------------------------------------------- value generators and metadata predicates

def repeat(value, n):
    return [value] * n


def balanced_sizes(M, G):
    """M rows split over G groups as evenly as possible (the first M % G groups get one more)."""
    if G <= 0:
        raise ExprError("balanced_sizes() needs G > 0")
    return [M // G + (1 if g < M % G else 0) for g in range(G)]


def exclusive_prefix_sum(xs):
    out, acc = [], 0
    for x in xs:
        out.append(acc)
        acc += x
    return out


def packed_positions(seq_lens):
    """Positions of packed sequences: 0..len-1 for each sequence in turn."""
    return [p for n in seq_lens for p in range(n)]


def as_tensor(xs):
    return list(xs)


class Requirement:
    """A `requires` predicate on the values of a metadata tensor."""

    def __init__(self, text, test):
        self.text, self.test = text, test

    def __call__(self, values):
        return self.test(values)


def in_range(lo, hi):
    return Requirement(f"in_range({lo}, {hi})", lambda vs: all(lo <= v < hi for v in vs))


def sums_to(n):
    return Requirement(f"sums_to({n})", lambda vs: sum(vs) == n)


def exclusive_prefix_of(other_values):
    return Requirement("exclusive_prefix_of", lambda vs: list(vs) == exclusive_prefix_sum(other_values))


BUILTINS = {
    "len": len, "prod": prod, "sum": lambda xs: sum(xs), "min": _minmax(min, "min"),
    "max": _minmax(max, "max"), "all": lambda xs: all(xs), "any": lambda xs: any(xs), "abs": abs,
    "range": _range, "list": list, "tuple": tuple, "ceil_div": ceil_div, "reduced": reduced,
    "valid_axes": valid_axes, "unique_axes": unique_axes, "coalesce_dtype": coalesce_dtype,
    "promote_int_to_float": promote_int_to_float, "bits": bits, "repeat": repeat,
    "balanced_sizes": balanced_sizes, "exclusive_prefix_sum": exclusive_prefix_sum,
    "packed_positions": packed_positions, "as_tensor": as_tensor, "in_range": in_range,
    "sums_to": sums_to,
    # fuelvk additions for numpy-style signatures
    "norm_axis": norm_axis, "replace_axis": replace_axis, "insert_axis": insert_axis,
    "broadcast_shapes": broadcast_shapes, "broadcastable": broadcastable, "padded": padded,
    "unpadded": unpadded, "as_pair": as_pair, "conv_pads": conv_pads,
}
KNOWN_FUNCTIONS = frozenset(BUILTINS) | {"present", "bytes", "exclusive_prefix_of"}


def call(fname, args):
    f = BUILTINS.get(fname)
    if f is None:
        raise ExprError(f"unknown function {fname}()")
    try:
        return f(*args)
    except ExprError:
        raise
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise ExprError(f"{fname}({', '.join(map(repr, args))}): {e}") from None
