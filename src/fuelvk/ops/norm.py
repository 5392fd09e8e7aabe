"""Softmax, RMSNorm, LayerNorm and their backward passes (torch semantics, last-dim kernels).

softmax/softmax_backward take any axis: it is moved last with a view and made contiguous (free
for the last axis of a contiguous array); the result comes back in the caller's layout,
contiguous. The norms normalize the last dim (torch's normalized_shape = (n,)); weight/bias have
shape (n,) and the input's dtype, and are applied inside the normalizing pass (no extra pass).

Numerics: half types compute in f32, f64 in f64 (with a double exp); row sums are compensated and
tree-reduced, so 1M-element rows stay accurate. softmax of a row of all -inf is NaN, as in torch;
+-inf and NaN in a row propagate as torch's formulas do in the accumulator dtype (an rms_norm row
with an inf gives NaN there and 0 elsewhere). layer_norm's variance is two-pass, so in f32 it overflows
only when |x - mean| passes 1.8e19 (then r = 0: y = 0); torch's CPU kernel (E[x^2] - E[x]^2) gives
NaN as soon as |x| does.

Backward returns: softmax_backward -> dx. rms_norm_backward -> dx, or (dx, dweight) when weight is
given. layer_norm_backward -> dx, or (dx, dweight, dbias) when weight or bias is given (None for
the one not given). dweight/dbias are summed over rows in f32 (f64 for f64) and rounded once.
"""
import math

import numpy as np

from .. import dtypes as _dt
from .. import layout
from .. import runtime
from ..errors import DTypeError, FuelVKMemoryError, ShapeError
from ..kernels import kernel
from ..kernels.norm import (LANE_ROWS_MAX_COLS, LANE_ROWS_MIN_ROWS, ROW_SPLIT_WG, ROW_TEXELS, SG_MIN_COLS, SG_TWIN,
                            row_kernel, row_split_parts)
from ..kernels.reduction import row_wg
from ..kernels.registry import occupying_wg
from ._core import binding_limit, contiguous, device_args, fits, new_like, result, rowwise, scalar_words
from .casts import astype
from .movement_core import ascontiguousarray
from .reduction import accum_dtype, sum_over_groups, texel_views, whole_rows

__all__ = ["softmax", "softmax_backward", "rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward",
           "fused_add_rmsnorm"]

# Weight-gradient partials: at most this many rows per workgroup (serial f32 adds per column).
_MAX_ROWS_PER_GROUP = 64
_MIN_GROUPS = 512


def _check_same(op, fam, tag, ref, others):
    for name, a in others:
        if a is None:
            continue
        if a.dtype != ref.dtype:
            raise DTypeError(f"{op}: {name} has dtype {a.dtype} but x has {ref.dtype}; kernel {fam}.{tag} "
                             "needs one dtype for all inputs")


def _wg(ctx, op, fam, tag, cols, passes):
    wg = row_wg(ctx, cols, passes, fit=True)
    if wg is None:
        raise ShapeError(f"{op}: rows of {cols} elements exceed what kernel {fam}.{tag} can do on "
                         f"{ctx.device.name} (its per-invocation loop limit); split the rows")
    return wg


def _lane_rows(ctx, rows, cols, passes):
    """True when the rows should run one per invocation (LANE_ROWS): many short rows, each within
    Device.loop_budget for one invocation."""
    budget = ctx.device.loop_budget
    return (cols <= LANE_ROWS_MAX_COLS and rows >= LANE_ROWS_MIN_ROWS
            and (budget is None or passes * cols <= budget))


def _row_plan(ctx, op, fam, tag, rows, cols, passes, lanes_first=False):
    """(variant, spec constants {WG, LANE_ROWS[, SG]}, rows per workgroup) of a row kernel launch: a row
    to a subgroup (the `_sg` twin) for rows of at least SG_MIN_COLS where the device has subgroup
    arithmetic, else a row to an invocation (many short rows) or to a workgroup. lanes_first: a row to an
    invocation wherever it may (before the subgroup twin)."""
    dev = ctx.device
    v = row_kernel(fam, tag, dev.features)
    budget = dev.loop_budget
    sgs = dev.subgroup_size or 1
    if (v.family.endswith(SG_TWIN) and cols >= SG_MIN_COLS and not (lanes_first and _lane_rows(ctx, rows, cols, passes))
            and (budget is None or passes * -(-cols // sgs) <= budget)):
        wg = max(row_wg(ctx), sgs)
        return v, dict(WG=wg, LANE_ROWS=0, SG=wg // sgs), wg // sgs
    v = kernel(fam, tag)
    if _lane_rows(ctx, rows, cols, passes):
        wg = row_wg(ctx)
        return v, dict(WG=wg, LANE_ROWS=1), wg
    return v, dict(WG=_wg(ctx, op, fam, tag, cols, passes), LANE_ROWS=0), 1


# Forward norms with a row an invocation (LANE_ROWS) on a CPU device: LANE_R rows an invocation side by side
# (norm.comp's lane_rows_main), each weight / bias chunk read once for all of them: a SIMD CPU driver gathers
# every lane's copy of the same chunk. Measured on lavapipe (f32 [512, 512], process CPU ms, three
# interleaved rounds, same bits): rms_norm 0.69-0.73 -> 0.61-0.66, layer_norm 0.92-0.93 -> 0.75-0.80;
# 2 rows no gain, 8 as 4. GPUs keep a row an invocation (their lanes share a loaded chunk already).
# Backward with weight / bias-gradient partials (lane_rows_backward_main): the LANE_R rows' g * xh and g are
# summed in registers and stored once an invocation, where a row an invocation read-modified-wrote a
# partials row (rows_per_group) or wrote one per row. Measured on lavapipe (f32 unless said, process CPU ms,
# best of 12, two interleaved rounds against a row an invocation; loaded host): rms_norm_backward
# [512, 512] + weight 1.47-1.49 -> 1.06-1.13, layer_norm_backward [512, 512] + weight + bias 2.2-2.9 ->
# 1.4-1.5, [2048, 192] 6.6-7.0 -> 1.8-2.1; 8 rows an invocation slower in f32 (rms 1.47-1.60). Without
# partials no gain (rms_norm_backward [512, 512] 0.73-0.75 vs 0.78-0.83): one row an invocation there.
# From LANE_R_OVER_SG_ROWS rows the backward with partials takes it before the subgroup twin (whose
# units read-modify-write theirs): layer_norm_backward bf16 [1024, 1024] + weight + bias 15.6-17.6 ->
# 4.3-5.7, f32 [512, 1024] 6.4-6.6 -> 3.9-4.4, rms_norm_backward [256, 2048] + weight 3.45 -> 3.4-4.5
# (equal); fewer rows leave too few invocations (rms_norm_backward [128, 2048] 1.6-1.8 -> 1.8-2.0).
LANE_R = 4
LANE_R_OVER_SG_ROWS = 256


def _lane_r(ctx, rows, cols, passes, align, operands):
    """(rows an invocation, workgroup size) of a norm's LANE_ROWS launch: LANE_R where the device is a
    CPU, every operand (keys of ROW_TEXELS) is whole aligned chunks (ALIGN) and LANE_R rows' loops fit
    Device.loop_budget; the workgroup halved (down to a subgroup) until the rows fill the device's cores a
    few times over."""
    need = sum(ROW_TEXELS[k] for k in operands)
    dev = ctx.device
    wg = row_wg(ctx)
    budget = dev.loop_budget
    if dev.device_type != "cpu" or align & need != need or (budget is not None and LANE_R * passes * cols > budget):
        return 1, wg
    return LANE_R, occupying_wg(dev, -(-rows // LANE_R), wg, dev.subgroup_size or 1, waves=4)


def _axis_last(op, x, axis):
    """(contiguous view with `axis` last as [rows, cols], rows, cols, perm) for the row kernels."""
    ax = layout.normalize_axis(op, axis, x.ndim)
    perm = [a for a in range(x.ndim) if a != ax] + [ax] if x.ndim else []
    v = contiguous(x.transpose(perm)) if x.ndim else contiguous(x)
    cols = x.shape[ax] if x.ndim else 1
    rows = math.prod(x.shape) // cols if cols else 0
    return v, rows, cols, perm


def _restore(out, moved_shape, perm, numpy_out):
    """The row-kernel output (axis last) back in the input's axis order, contiguous."""
    if perm == sorted(perm):
        return out
    inv = [perm.index(a) for a in range(len(perm))]
    view = out.reshape(moved_shape).transpose(inv)
    if numpy_out:
        return view  # result() downloads through the view
    return ascontiguousarray(view)


def _softmax_launch(fam, op, y_or_x, g, axis):
    arrs, numpy_out = device_args(op, *([y_or_x] if g is None else [y_or_x, g]))
    x = arrs[0]
    tag = _dt.float_tag(op, x.dtype)
    if g is not None:
        gg = arrs[1]
        if gg.shape != x.shape:
            raise ShapeError(f"{op}: grad has shape {gg.shape} but y has {x.shape}; kernel {fam}.{tag} "
                             "needs equal shapes")
        _check_same(op, fam, tag, x, [("grad", gg)])
    v, rows, cols, perm = _axis_last(op, x, axis)
    if g is not None:
        gv = contiguous(arrs[1].transpose(perm)) if x.ndim else contiguous(arrs[1])
    if not fits(v, *([gv] if g is not None else [])):
        out = rowwise(op, lambda *bl: _softmax_launch(fam, op, bl[0], bl[1] if g is not None else None, -1),
                      [v] + ([gv] if g is not None else []))
        return result(_restore(out, v.shape, perm, numpy_out), numpy_out)
    out = new_like(v.shape, x.dtype)
    if rows and cols:
        ctx = runtime.get()
        grad = {} if g is None else {"grad": gv}
        loads = {"x": v, **({} if g is None else {"g": gv})}
        views, tex = texel_views(ROW_TEXELS, loads, {"o": out})
        args = dict(out=out, x=v, **grad, **views, n_rows=rows, n_cols=cols, off_out=0, off_x=v.offset,
                    off_g=gv.offset if g is not None else 0, TEX=tex,
                    ALIGN=whole_rows(ROW_TEXELS, {**loads, "o": out}, cols))
        parts = row_split_parts(rows, cols, ctx.device.loop_budget)
        if parts:
            wg = ROW_SPLIT_WG
            part = new_like(((1 if g is not None else 2) * rows * parts,), accum_dtype(x.dtype))
            for split in (1, 2):
                ctx.launch(kernel(fam, tag), ctx.groups(-(-rows * parts // wg)), **args, part=part, parts=parts,
                           WG=wg, LANE_ROWS=0, SPLIT=split)
        else:
            kv, spec, per_group = _row_plan(ctx, op, fam, tag, rows, cols, 2 if g is not None else 3)
            ctx.launch(kv, ctx.groups(-(-rows // per_group)), **args, part=out, SPLIT=0, parts=0, **spec)
    return result(_restore(out, v.shape, perm, numpy_out), numpy_out)


def softmax(x, axis=-1):
    """torch.softmax(x, dim=axis): exp(x - max) / sum(exp(x - max)); a row of all -inf gives NaN."""
    return _softmax_launch("softmax", "softmax", x, None, axis)


def softmax_backward(y, grad, axis=-1):
    """Gradient of softmax given its output y and the upstream grad: y * (grad - sum(y * grad))."""
    return _softmax_launch("softmax_last_dim_backward", "softmax_backward", y, grad, axis)


def _norm(op, fam, x, grad, eps, weight, bias, backward):
    """Shared body of the four norm ops; returns (outputs..., numpy_out)."""
    if not isinstance(eps, (int, float, np.integer, np.floating)) or isinstance(eps, (bool, np.bool_)):
        # fv.rms_norm(x, w) is torch's F.rms_norm order (input, shape, weight); here eps comes second
        raise DTypeError(f"{op}: eps must be a real number, got {type(eps).__name__}; weight and bias are "
                         f"keywords ({op}(x, eps=..., weight=...))")
    names = ["x"] + (["grad"] if backward else []) + (["weight"] if weight is not None else []) \
        + (["bias"] if bias is not None else [])
    given = [a for a in (x, grad, weight, bias) if a is not None]
    arrs, numpy_out = device_args(op, *given)
    named = dict(zip(names, arrs))
    x = named["x"]
    tag = _dt.float_tag(op, x.dtype)
    _check_same(op, fam, tag, x, [(k, a) for k, a in named.items() if k != "x"])
    if x.ndim == 0:
        raise ShapeError(f"{op}: x must have at least one dim (the normalized last dim); got a 0-d array")
    cols = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    g = named.get("grad")
    if g is not None and g.shape != x.shape:
        raise ShapeError(f"{op}: grad has shape {g.shape} but x has {x.shape}; kernel {fam}.{tag} needs "
                         "equal shapes")
    w, b = named.get("weight"), named.get("bias")
    for name, a in (("weight", w), ("bias", b)):
        if a is not None and a.shape != (cols,):
            raise ShapeError(f"{op}: {name} has shape {a.shape}; kernel {fam}.{tag} needs ({cols},) "
                             f"(the last dim of x, shape {x.shape})")
    x = contiguous(x)
    g = contiguous(g) if g is not None else None
    w = contiguous(w) if w is not None else None
    b = contiguous(b) if b is not None else None
    if not fits(x, *(a for a in (g, w, b) if a is not None)):
        return _norm_blocks(op, fam, x, g, eps, w, b, backward) + (cols, numpy_out)
    out = new_like(x.shape, x.dtype)
    ln = fam.startswith("layer_norm")
    n_grad = (1 + (1 if ln else 0)) if backward and (w is not None or b is not None) else 0
    grads = None
    if rows == 0 or cols == 0:
        grads = new_like((n_grad * cols,), x.dtype) if n_grad else None
        if grads is not None and rows == 0 and cols:
            ctx = runtime.get()
            ctx.stream.fill(grads.buffer, (grads.nbytes + 3) & ~3)  # sums over no rows
        return out, grads, cols, numpy_out
    ctx = runtime.get()
    passes = 3 if ln else 2
    loads = {"x": x, "w": w}
    loads.update({"g": g} if backward else {"r": b})
    align = whole_rows(ROW_TEXELS, {**loads, "o": out}, cols)
    # weight-gradient partials: LANE_R rows an invocation (below, where it applies) before the subgroup twin
    wgrad_lanes = (_lane_r(ctx, rows, cols, passes, align, ("x", "g", "o") + (("w",) if w is not None else ()))
                   if n_grad > 0 else (1, None))
    lanes_first = rows >= LANE_R_OVER_SG_ROWS and wgrad_lanes[0] > 1
    kv, spec, per_group = _row_plan(ctx, op, fam, tag, rows, cols, passes, lanes_first)
    budget = ctx.device.loop_budget
    per_row = passes * -(-cols // (1 if spec["LANE_ROWS"] else spec["WG"] // per_group)) + 1
    max_rpg = _MAX_ROWS_PER_GROUP if budget is None else max(1, min(_MAX_ROWS_PER_GROUP, budget // per_row))
    eps_w = _eps_words(op, eps, x.dtype)
    views, tex = texel_views(ROW_TEXELS, loads, {"o": out})
    # weight/bias/part not given: `out` stands in (the kernel does not touch them: HAS_W etc. are 0)
    args = dict(out=out, x=x, weight=w if w is not None else out, n_rows=rows, n_cols=cols, off_out=0,
                off_x=x.offset, off_w=w.offset if w is not None else 0, eps=eps_w, HAS_W=int(w is not None),
                **views, TEX=tex, ALIGN=align, parts=0)
    acc = accum_dtype(x.dtype)
    # few long rows: each row across `parts` invocations, two passes (norm.comp's SPLIT; the weight-gradient
    # partials then [rows, n_grad, cols]: one unit per row)
    parts = row_split_parts(rows, cols, budget)
    if parts and n_grad and n_grad * rows * cols * acc.itemsize > binding_limit():
        parts = 0
    if parts:
        part = new_like((n_grad * rows * cols,), acc) if n_grad else None
        kw = (dict(grad=g, part=part if part is not None else out, off_g=g.offset, off_b=0, HAS_B=0,
                   WGRAD=int(part is not None)) if backward else
              dict(bias=b if b is not None else out, off_g=0, off_b=b.offset if b is not None else 0,
                   HAS_B=int(b is not None), WGRAD=0))
        n_sums = (5 if ln else 2) if backward else (3 if ln else 1)    # norm.comp's NS
        args.update(WG=ROW_SPLIT_WG, LANE_ROWS=0, parts=parts, sums=new_like((n_sums * rows * parts,), acc))
        for split in (1, 2):
            ctx.launch(kernel(fam, tag), ctx.groups(-(-rows * parts // ROW_SPLIT_WG)), **args, **kw,
                       rows_per_group=1, n_groups=rows, SPLIT=split)
        if part is not None:
            grads = sum_over_groups(part, rows, x.dtype)
        return out, grads, cols, numpy_out
    args.update(sums=out, SPLIT=0, **spec)
    if backward:
        wgrad = n_grad > 0
        lane_r = 1
        if spec["LANE_ROWS"] and wgrad:    # without gradient partials, LANE_R rows measured no faster
            lane_r, wg = wgrad_lanes
            if lane_r > 1 and n_grad * cols * -(-rows // lane_r) * acc.itemsize > binding_limit():
                lane_r = 1
            if lane_r > 1:
                args.update(WG=wg)
                per_group = wg
        args.update(LANE_R=lane_r)
        if wgrad and lane_r > 1:      # a unit of LANE_R rows an invocation (lane_rows_backward_main)
            n_groups, rpg = -(-rows // lane_r), lane_r
            part = new_like((n_grad * cols * n_groups,), acc)
        elif wgrad:
            n_groups = min(rows, max(_MIN_GROUPS, -(-rows // max_rpg)))
            # the partials [n_groups, n_grad * cols] must fit one binding
            n_groups = min(n_groups, max(1, binding_limit() // (n_grad * cols * accum_dtype(x.dtype).itemsize)))
            rpg = -(-rows // n_groups)
            if budget is not None and rpg > max(1, budget // per_row):   # as max_rpg: one row always runs
                raise FuelVKMemoryError(
                    f"{op}: {rows} rows of {cols} need weight-gradient partials larger than one binding "
                    f"(maxStorageBufferRange = {binding_limit()} bytes) within this device's loop budget")
            n_groups = -(-rows // rpg)
            part = new_like((n_grad * cols * n_groups,), accum_dtype(x.dtype))
        else:
            n_groups, rpg, part = rows, 1, None
        ctx.launch(kv, ctx.groups(-(-n_groups // per_group)), **args, grad=g,
                   part=part if part is not None else out, off_g=g.offset, off_b=0, rows_per_group=rpg,
                   n_groups=n_groups, HAS_B=0, WGRAD=int(wgrad))
        if wgrad:
            grads = sum_over_groups(part, n_groups, x.dtype)
    else:
        if spec["LANE_ROWS"]:
            lane_r, wg = _lane_r(ctx, rows, cols, passes, align,
                                 ("x", "o") + (("w",) if w is not None else ()) + (("r",) if b is not None else ()))
            args.update(WG=wg, LANE_R=lane_r)
            per_group = lane_r * wg
        ctx.launch(kv, ctx.groups(-(-rows // per_group)), **args, bias=b if b is not None else out, off_g=0,
                   off_b=b.offset if b is not None else 0, rows_per_group=1, n_groups=rows, HAS_B=int(b is not None),
                   WGRAD=0)
    return out, grads, cols, numpy_out


def _norm_blocks(op, fam, x, g, eps, w, b, backward):
    """(out, grads) of _norm for an x larger than one binding: blocks of whole rows through windows. The
    weight/bias gradients are the blocks' gradients summed in the accumulator dtype, rounded once more
    (for f16/bf16 each block's sum is rounded to the input dtype first: one extra rounding)."""
    if not (backward and (w is not None or b is not None)):
        return rowwise(op, lambda *bl: _norm(op, fam, bl[0], bl[1] if backward else None, eps, w, b,
                                             backward)[0], [x] + ([g] if backward else [])), None
    grads = []

    def block(xb, gb):
        dx, gr, _, _ = _norm(op, fam, xb, gb, eps, w, b, True)
        grads.append(gr if gr.dtype == accum_dtype(x.dtype) else astype(gr, accum_dtype(x.dtype)))
        return dx
    out = rowwise(op, block, [x, g])
    total = grads[0]
    for gr in grads[1:]:
        total = total + gr
    return out, (total if total.dtype == x.dtype else astype(total, x.dtype))


def _eps_words(op, eps, dt):
    """eps in the kernels' compute type (f32; f64 for float64), as torch's norms take it: rounded to a
    half type first, eps=1e-6 became 1.013e-6 in float16 (a subnormal), 1.3% off where x^2 ~ eps."""
    return scalar_words(op, eps, _dt.float64 if dt == _dt.float64 else _dt.float32)


def rms_norm(x, eps=1e-6, weight=None):
    """torch.nn.functional.rms_norm over the last dim: x / sqrt(mean(x^2) + eps) * weight."""
    out, _, _, numpy_out = _norm("rms_norm", "rms_norm_last_dim", x, None, eps, weight, None, False)
    return result(out, numpy_out)


def fused_add_rmsnorm(x, residual, weight, eps=1e-6):
    """FlashInfer's fused_add_rmsnorm in one launch: residual += x IN PLACE, and the returned output is
    rms_norm(x + residual) * weight, the sum and the norm computed in f32 (f64 for float64) from the
    unrounded sum, rounded once (FlashInfer's kernel and the FlashInfer-Bench Definition's reference).

    x, residual [..., n] and weight [n] share one float dtype. residual must be writable: a contiguous
    fuelvk Array (its buffer is updated) or a numpy array (updated in place, as add_assign_scaled
    does). Unlike flashinfer.norm.fused_add_rmsnorm, x is not overwritten: the output is a new array
    (numpy when no input was an Array)."""
    op, fam = "fused_add_rmsnorm", "fused_add_rms_norm"
    from ..array import Array
    if not isinstance(residual, (Array, np.ndarray)):
        raise DTypeError(f"{op}: residual is updated in place, so it must be a fuelvk.Array or a numpy array; "
                         f"got {type(residual).__name__}")
    if isinstance(residual, np.ndarray) and not residual.flags.writeable:
        raise ShapeError(f"{op}: residual is a read-only numpy array; it is updated in place")
    host_res = residual if isinstance(residual, np.ndarray) else None
    (x, res, w), numpy_out = device_args(op, x, residual, weight)
    tag = _dt.float_tag(op, x.dtype)
    _check_same(op, fam, tag, x, [("residual", res), ("weight", w)])
    if x.ndim == 0:
        raise ShapeError(f"{op}: x must have at least one dim (the normalized last dim); got a 0-d array")
    if res.shape != x.shape:
        raise ShapeError(f"{op}: residual has shape {res.shape} but x has {x.shape}; kernel {fam}.{tag} "
                         "needs equal shapes")
    cols, rows = x.shape[-1], math.prod(x.shape[:-1])
    if w.shape != (cols,):
        raise ShapeError(f"{op}: weight has shape {w.shape}; kernel {fam}.{tag} needs ({cols},) (the last dim "
                         f"of x, shape {x.shape})")
    if host_res is None and not res.is_contiguous:
        raise ShapeError(f"{op}: residual (shape {res.shape}, strides {res.strides}) is updated in place and "
                         f"must be contiguous; pass fuelvk.ascontiguousarray(residual) and use that array")
    x, w = contiguous(x), contiguous(w)
    if not fits(x, res, w):
        raise FuelVKMemoryError(
            f"{op}: x or residual ({rows} rows of {cols}, {x.dtype}) is larger than one binding "
            f"(maxStorageBufferRange = {binding_limit()} bytes); split the rows into batches")
    out = new_like(x.shape, x.dtype)
    if rows and cols:
        ctx = runtime.get()
        kv, spec, per_group = _row_plan(ctx, op, fam, tag, rows, cols, 2)
        loads = {"x": x, "w": w, "r": res}
        views, tex = texel_views(ROW_TEXELS, loads, {"o": out})
        ctx.launch(kv, ctx.groups(-(-rows // per_group)), out=out, x=x, weight=w, residual=res,
                   **views, n_rows=rows, n_cols=cols, off_out=0, off_x=x.offset, off_g=0, off_w=w.offset,
                   off_res=res.offset, rows_per_group=1, n_groups=rows, eps=_eps_words(op, eps, x.dtype),
                   HAS_W=1, HAS_B=0, WGRAD=0, TEX=tex, parts=0, **spec,
                   ALIGN=whole_rows(ROW_TEXELS, {**loads, "o": out}, cols))
    if host_res is not None:
        host_res[...] = res.numpy()
    return result(out, numpy_out)


def rms_norm_backward(x, grad, eps=1e-6, weight=None):
    """Gradients of rms_norm(x, eps, weight) given the upstream grad: dx, or (dx, dweight) with weight."""
    dx, grads, cols, numpy_out = _norm("rms_norm_backward", "rms_norm_last_dim_backward", x, grad, eps, weight,
                                       None, True)
    if weight is None:
        return result(dx, numpy_out)
    return result((dx, grads), numpy_out)


def layer_norm(x, eps=1e-5, weight=None, bias=None):
    """torch.nn.functional.layer_norm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias."""
    out, _, _, numpy_out = _norm("layer_norm", "layer_norm_last_dim", x, None, eps, weight, bias, False)
    return result(out, numpy_out)


def layer_norm_backward(x, grad, eps=1e-5, weight=None, bias=None):
    """Gradients of layer_norm: dx, or (dx, dweight, dbias) when weight or bias is given.

    dweight is None when weight is None (and dbias when bias is None).
    """
    dx, grads, cols, numpy_out = _norm("layer_norm_backward", "layer_norm_last_dim_backward", x, grad, eps,
                                       weight, bias, True)
    if weight is None and bias is None:
        return result(dx, numpy_out)
    dw = grads[:cols] if weight is not None else None
    db = grads[cols:] if bias is not None else None
    if numpy_out:
        return dx.numpy(), (dw.numpy() if dw is not None else None), (db.numpy() if db is not None else None)
    return dx, dw, db


# -- op records (ops/_opdef.py) ----------------------------------------------------------------------------
from ._opdef import REF_GRADS, Meta, OpDef, declare, same

_REF_RMS = '''
def _rms_norm(x, weight):
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight
'''
_REF_LAYER = '''
def _layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(-1, keepdim=True)   # biased, as torch
    y = (x - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
'''


def _np_softmax(x, axis=-1):
    import numpy as np
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _np_rms(x, eps=1e-6, weight=None):
    import numpy as np
    y = x / np.sqrt(np.mean(np.square(x), -1, keepdims=True) + eps)
    return y * weight if weight is not None else y


def _np_ln(x, eps=1e-5, weight=None, bias=None):
    import numpy as np
    m = x.mean(-1, keepdims=True)
    y = (x - m) / np.sqrt(x.var(-1, keepdims=True) + eps)
    y = y * weight if weight is not None else y
    return y + bias if bias is not None else y


def _np_fused_add_rms(x, residual, weight, eps=1e-6):
    import numpy as np
    acc = np.float64 if x.dtype == np.float64 else np.float32
    s = x.astype(acc) + residual.astype(acc)
    residual[...] = s.astype(residual.dtype)
    return (s / np.sqrt(np.mean(np.square(s), -1, keepdims=True) + eps) * weight).astype(x.dtype)


def _torch_softmax(x, axis=-1):
    import torch
    return torch.softmax(x, axis)


def _torch_rms(x, eps=1e-6, weight=None):
    import torch
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def _torch_ln(x, eps=1e-5, weight=None, bias=None):
    import torch
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _param_grad(x, p):
    """The gradient of an optional weight / bias: its shape where given, else not returned."""
    return Meta((x.shape[-1],), x.dtype) if p is not None else None


declare(
    OpDef("softmax", softmax, same, numpy=_np_softmax, torch=_torch_softmax, reference=("", """\
e = torch.exp(x - x.amax(axis, keepdim=True))
output = e / e.sum(axis, keepdim=True)"""), grad="softmax", schema="(Tensor x, int axis=-1) -> Tensor"),
    OpDef("softmax_backward", softmax_backward, same,
          reference=("", "grad_input = y * (grad - (grad * y).sum(axis, keepdim=True))"),
          schema="(Tensor y, Tensor grad, int axis=-1) -> Tensor"),
    OpDef("rms_norm", rms_norm, same, numpy=_np_rms, torch=_torch_rms, reference=(_REF_RMS, "output = _rms_norm(x, weight)"),
          grad="rms_norm", schema="(Tensor x, float eps=1e-06, Tensor? weight=None) -> Tensor"),
    # torch: a gradient that does not exist (no weight) is returned as an empty tensor
    OpDef("rms_norm_backward", rms_norm_backward, lambda x, grad, eps=1e-6, weight=None: (
              same(x), _param_grad(x, weight)),
          reference=(_REF_RMS + REF_GRADS, """grad_input, _, grad_weight = _grads(
    lambda x_, g_, w_: _rms_norm(x_, w_), (x, None, weight), grad)"""),
          schema="(Tensor x, Tensor grad, float eps=1e-06, Tensor? weight=None) -> (Tensor, Tensor)"),
    # torch: none (residual is written in place AND the output returned: neither torch form of the records)
    OpDef("fused_add_rmsnorm", fused_add_rmsnorm, same, numpy=_np_fused_add_rms,
          reference=(_REF_RMS, "output = _rms_norm(x + residual, weight)")),
    OpDef("layer_norm", layer_norm, same, numpy=_np_ln, torch=_torch_ln,
          reference=(_REF_LAYER, "output = _layer_norm(x, weight, bias)"), grad="layer_norm",
          schema="(Tensor x, float eps=1e-05, Tensor? weight=None, Tensor? bias=None) -> Tensor"),
    OpDef("layer_norm_backward", layer_norm_backward, lambda x, grad, eps=1e-5, weight=None, bias=None: (
              same(x), _param_grad(x, weight), _param_grad(x, bias)),
          reference=(_REF_LAYER + REF_GRADS, """grad_input, grad_weight, grad_bias = _grads(
    _layer_norm, (x, weight, bias), grad)"""),
          schema="(Tensor x, Tensor grad, float eps=1e-05, Tensor? weight=None, Tensor? bias=None) "
                 "-> (Tensor, Tensor, Tensor)"),
)
