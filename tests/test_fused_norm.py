"""fused_add_rmsnorm (FlashInfer's fused add + RMSNorm) against torch CPU in float64.

Output: torch on float64 copies of the rounded inputs (the sum unrounded, as FlashInfer's kernel and
the FlashInfer-Bench reference), compared with the per-dtype tolerance scaled to the magnitude. The
in-place residual is exact: x + residual in the accumulator dtype, rounded once to the dtype.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from oracles import FLOATS, TOL

import fuelvk as fv
from fuelvk.errors import DTypeError, ShapeError

rng = np.random.default_rng(19)
IDS = [str(d) for d in FLOATS]
REF_DEF = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "flashinfer-trace" / "definitions"
if not REF_DEF.is_dir():
    REF_DEF = Path("/work/shared/reference/flashinfer-trace/definitions")


def reference(x, r, w, eps):
    """float64 torch: (output, new residual before rounding)."""
    s = torch.tensor(x.astype(np.float64)) + torch.tensor(r.astype(np.float64))
    y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * torch.tensor(w.astype(np.float64))
    return y.numpy(), s


def exact_sum(x, r):
    """x + r as the kernel stores it: summed in the accumulator (f32 for half types), rounded once."""
    acc = np.float64 if x.dtype == np.float64 else np.float32
    return (x.astype(acc) + r.astype(acc)).astype(x.dtype)


def check_output(got, want, dt):
    rt, at = TOL[np.dtype(dt)]
    mag = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    got = got.numpy() if isinstance(got, fv.Array) else got
    assert got.dtype == dt and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rt * 2, atol=at * mag * 4)


@pytest.mark.parametrize("dt", FLOATS, ids=IDS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 129), (2, 3, 300), (2, 4096)])
def test_matches_float64_torch_and_updates_residual(dt, shape, launched):
    x = rng.standard_normal(shape).astype(dt)
    r = (rng.standard_normal(shape) * 2).astype(dt)
    w = rng.standard_normal(shape[-1]).astype(dt)
    want, _ = reference(x, r, w, 1e-5)
    new_r = exact_sum(x, r)
    res = fv.asarray(r)
    out = fv.fused_add_rmsnorm(fv.asarray(x), res, fv.asarray(w), eps=1e-5)
    check_output(out, want, dt)
    assert res.numpy().tobytes() == new_r.tobytes()          # in place, bit for bit
    tag = fv.dtypes.FLOAT_TAGS[np.dtype(dt)]
    assert launched in ([f"fused_add_rms_norm.{tag}"], [f"fused_add_rms_norm_sg.{tag}"])   # one launch (or its subgroup twin's)


def test_numpy_residual_is_updated_in_place_and_output_is_numpy():
    x, r, w = (rng.standard_normal(s).astype(np.float32) for s in ((4, 33), (4, 33), (33,)))
    r0 = r.copy()
    out = fv.fused_add_rmsnorm(x, r, w, 1e-6)
    assert isinstance(out, np.ndarray)
    check_output(out, reference(x, r0, w, 1e-6)[0], np.float32)
    assert r.tobytes() == (x + r0).tobytes()


def test_residual_view_with_an_offset_and_x_untouched():
    """A residual that is rows of a larger array: only those rows change; x is not overwritten."""
    big = rng.standard_normal((6, 40)).astype(np.float32)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = rng.standard_normal(40).astype(np.float32)
    base, xd = fv.asarray(big), fv.asarray(x)
    view = base[2:5]
    out = fv.fused_add_rmsnorm(xd, view, fv.asarray(w))
    check_output(out, reference(x, big[2:5], w, 1e-6)[0], np.float32)
    want = big.copy()
    want[2:5] = x + big[2:5]
    assert base.numpy().tobytes() == want.tobytes()
    assert xd.numpy().tobytes() == x.tobytes()


def test_matches_the_flashinfer_bench_reference():
    """The shipped Definition's reference (bf16, hidden 4096) agrees within one bf16 rounding."""
    path = REF_DEF / "fused_add_rmsnorm_h4096.json"
    if not path.exists():
        pytest.skip(f"{path} not in this checkout")
    scope = {}
    exec(json.loads(path.read_text())["reference"], scope)  # noqa: S102
    g = torch.Generator().manual_seed(0)
    x, r, w = (torch.randn(s, generator=g).to(torch.bfloat16) for s in ((3, 4096), (3, 4096), (4096,)))
    want = scope["run"](x, r.clone(), w).float().numpy()
    import ml_dtypes
    to_np = (lambda t: t.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
    got = fv.fused_add_rmsnorm(to_np(x), to_np(r).copy(), to_np(w), eps=1e-5).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)


def test_empty_rows():
    out = fv.fused_add_rmsnorm(np.zeros((0, 8), np.float32), np.zeros((0, 8), np.float32), np.ones(8, np.float32))
    assert out.shape == (0, 8)


def test_bad_inputs_are_typed_errors():
    x = fv.asarray(np.ones((2, 8), np.float32))
    r = fv.asarray(np.ones((2, 8), np.float32))
    w = fv.asarray(np.ones(8, np.float32))
    with pytest.raises(DTypeError, match="residual is updated in place"):
        fv.fused_add_rmsnorm(x, [[1.0] * 8] * 2, w)
    with pytest.raises(DTypeError, match="residual has dtype float16"):
        fv.fused_add_rmsnorm(x, fv.asarray(np.ones((2, 8), np.float16)), w)
    with pytest.raises(ShapeError, match="residual has shape"):
        fv.fused_add_rmsnorm(x, fv.asarray(np.ones((2, 9), np.float32)), w)
    with pytest.raises(ShapeError, match="weight has shape"):
        fv.fused_add_rmsnorm(x, r, fv.asarray(np.ones(9, np.float32)))
    with pytest.raises(ShapeError, match="must be contiguous"):
        fv.fused_add_rmsnorm(x, fv.asarray(np.ones((8, 2), np.float32)).T, w)
    ro = np.ones((2, 8), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ShapeError, match="read-only"):
        fv.fused_add_rmsnorm(x, ro, w)
    with pytest.raises(DTypeError):
        fv.fused_add_rmsnorm(np.ones((2, 8), np.int32), np.ones((2, 8), np.int32), np.ones(8, np.int32))



def test_larger_than_one_binding_is_a_typed_error(device_limits):
    from fuelvk.errors import FuelVKMemoryError
    x = fv.asarray(np.ones((64, 64), np.float32))
    r = fv.asarray(np.ones((64, 64), np.float32))
    device_limits(maxStorageBufferRange=4096)
    with pytest.raises(FuelVKMemoryError, match="larger than one binding"):
        fv.fused_add_rmsnorm(x, r, fv.asarray(np.ones(64, np.float32)))
