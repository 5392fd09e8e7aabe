"""The op records (fuelvk/ops/_opdef.py): one per public op, their shape rules agree with the specs,
their references with the ops, and they drive the specs and torch ops generated from them."""
import inspect

import numpy as np
import pytest

import fuelvk
from fuelvk import dtypes as _dt
from fuelvk.bench import cases as bench
from fuelvk.ops import _opdef
from fuelvk.ops._opdef import Meta, OpDef, opdefs, same, unary
from fuelvk.specs import load_specs
from fuelvk.specs import model as spec_model
from fuelvk.specs.instance import instantiate
from fuelvk.specs.rows import expand

OPDEFS = opdefs()
SPECS = load_specs()


def test_every_public_op_has_one_record():
    names = [r.name.split(".")[-1] for r in OPDEFS.values()]
    assert sorted(names) == sorted(set(names))
    assert set(names) == set(fuelvk.OPS) | {"quantize", "dequantize"}
    for rec in OPDEFS.values():
        home = fuelvk.quant if rec.name.startswith("quant.") else fuelvk
        # (fuelvk.api may extend an op, e.g. complex dtypes; the wrapper carries it as __wrapped__)
        assert inspect.unwrap(getattr(home, rec.name.split(".")[-1])) is rec.fn, rec.name


def test_a_second_record_for_a_name_is_refused():
    rec = OPDEFS["exp"]
    with pytest.raises(ValueError, match="declared twice"):
        _opdef.declare(OpDef("exp", rec.fn, same))


def test_every_spec_is_a_record_and_every_record_a_spec():
    assert {s.fuelvk_api for s in SPECS.values()} == set(OPDEFS)


def _metas(call):
    """Spec call inputs {name: (shape, dtype name)} (a list input: ([shapes], dtype)) as Meta."""
    def one(shape, dt):
        return Meta(tuple(shape), _dt.dtype(dt))
    return {n: [one(s, dt) for s in shape] if isinstance(shape, list) else one(shape, dt)
            for n, (shape, dt) in call["inputs"].items()}


def _outputs(got):
    got = got if isinstance(got, tuple) else (got,)
    return [(tuple(m.shape), np.dtype(m.dtype)) for m in got if m is not None]


@pytest.mark.parametrize("api", sorted(OPDEFS))
def test_shape_rule_matches_the_spec(api):
    """Every workload case of the op's spec: the record's rule gives the spec's output shapes and dtypes."""
    rec, spec = OPDEFS[api], next(s for s in SPECS.values() if s.fuelvk_api == api)
    n = 0
    for case in expand(spec):
        call = instantiate(spec, case.bindings, case.some).call()
        params = {k: rec.adapt[k](v) if k in rec.adapt else v for k, v in call["params"].items()}
        got = _outputs(rec.out(**_metas(call), **params))
        want = [(tuple(s), _dt.dtype(dt)) for s, dt in call["outputs"].values()]
        assert got == want, (case.case_id, got, want)
        n += 1
    assert n > 0


def _copied(host):
    return {k: [a.copy() for a in v] if isinstance(v, list) else v.copy() for k, v in host.items()}


BASELINES = [(n, impl) for n, r in sorted(OPDEFS.items()) for impl in ("numpy", "torch") if getattr(r, impl) is not None]


@pytest.mark.parametrize("api,impl", BASELINES)
def test_reference_agrees_with_the_op(api, impl):
    """The record's baseline (bench and test oracle) against the op on a small float32 case."""
    if impl == "torch":
        pytest.importorskip("torch")
    rec = OPDEFS[api]
    for case in bench.select([api]):
        bench.prepare(case, max_bytes=16 << 10, max_flops=1e6)
        flat = [p for v in case.call["inputs"].values() for p in (v if isinstance(v, list) else [v])]
        if any(dt not in ("float32", "bool", "int64") for _, dt in flat):
            continue
        host = bench.make_inputs(case)
        params = bench.call_params(case)
        run = bench.reference(impl, case, _copied(host), params)
        try:
            want = run()
        except NotImplementedError:
            continue                      # the baseline covers a subset of the op's parameters
        if rec.mutates:                   # setitem: the baseline and the op write into their first input
            ref_in, dev = _copied(host), {k: fuelvk.asarray(v) if k in rec.mutates else v for k, v in host.items()}
            bench.reference(impl, case, ref_in, params)()
            rec.fn(**dev, **params)
            got, want = dev[rec.mutates[0]].numpy(), ref_in[rec.mutates[0]]
        else:
            got = rec.fn(**_copied(host), **params)
        if hasattr(want, "numpy"):       # a torch tensor (bfloat16 has no numpy twin in torch)
            want = want.float().numpy() if want.is_floating_point() else want.numpy()
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-3, atol=2e-4,
                                   err_msg=f"{api} {case.case_id}")
        return
    pytest.fail(f"{api}: no float32 case the {impl} baseline covers")


def test_a_unary_record_generates_its_spec(monkeypatch):
    """The spec of a new unary record comes from the elementwise template, with no YAML edit."""
    monkeypatch.setitem(_opdef.OPDEFS, "exp2", unary("exp2", fuelvk.exp, flops=2, rows="activation"))
    entries = {s.name: s for s in spec_model.load_file(SPECS["ExpFwdOp"].file)}
    spec = entries["Exp2FwdOp"]
    assert spec.problems == [] and spec.fuelvk_api == "exp2" and spec.ref_api == "numpy.exp2"
    assert spec.roofline == {"flops": "2 * prod(S)"}
    assert spec.workloads == SPECS["TanhFwdOp"].workloads
    assert "TanhFwdOp" in entries and "AddFwdOp" in entries


def test_unary_records_have_generated_specs():
    for rec in OPDEFS.values():
        if (rec.spec or {}).get("template") == "unary":
            spec = next(s for s in SPECS.values() if s.fuelvk_api == rec.name)
            assert spec.ref_api == rec.spec["ref_api"] and spec.family == "elementwise"


def test_records_drive_torch_op_registration():
    torch = pytest.importorskip("torch")
    from fuelvk.torch import _ops
    for rec in OPDEFS.values():
        if rec.schema is not None:
            assert rec.name.split(".")[-1] in _ops.OPS
            if rec.mutates:
                assert rec.functional in _ops.OPS
    # a record registered now is a torch op with the record's fake kernel and gradient
    probe = unary("opdef_probe", fuelvk.negative, grad="negative")
    try:
        _ops.register(probe)
        x = torch.tensor([1.0, -2.0], requires_grad=True)
        y = torch.ops.fuelvk.opdef_probe(x)
        assert y.tolist() == [-1.0, 2.0]
        (g,) = torch.autograd.grad(y.sum(), x)
        assert g.tolist() == [-1.0, -1.0]
        torch.library.opcheck(torch.ops.fuelvk.opdef_probe.default, (torch.ones(2, 3, dtype=torch.float64),))
    finally:
        _ops.OPS.pop("opdef_probe", None)
