"""Line fuelvk specs up with TileOPs reference entries (the `fuelvk_tileops` extension field).

    fuelvk_tileops:
      op: RMSNormFwdOp                       # the TileOPs entry with the same semantics
      bind: {B: B, N: "prod(normalized_shape)", T: T}   # fuelvk name <- expression over the TileOPs call
      when: "rope_layout == 'neox'"          # optional: the TileOPs rows fuelvk can express
      bytes_delta: "bytes(cos) + bytes(sin)" # optional: documented extra traffic, over the fuelvk call

Each TileOPs workload case is instantiated, mapped through `bind` (optional tensors in `some` carry
over by name) and instantiated as a fuelvk call; both rooflines are evaluated with the same
evaluator, so a reader (and a test) can check that fuelvk counts FLOPs and bytes as TileOPs does.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import rows
from .evaluate import evaluate
from .expr import parse
from .instance import instantiate


@dataclass
class Comparison:
    case_id: str
    reference: tuple | None      # (flops, bytes) by the TileOPs formula
    fuelvk: tuple | None         # (flops, bytes - bytes_delta) by fuelvk's spec
    skipped: str | None = None   # why the case is not comparable (the `when` that fails)

    @property
    def equal(self):
        return self.skipped is None and self.reference == self.fuelvk


def compare(fv_spec, ref_spec):
    """Comparison per case of the reference entry's workload rows."""
    m = fv_spec.tileops or {}
    out = []
    for case in rows.expand(ref_spec):
        ref = instantiate(ref_spec, case.bindings, case.some)
        if "when" in m and not evaluate(parse(str(m["when"])), ref.env):
            out.append(Comparison(case.case_id, None, None, f"outside fuelvk_tileops.when: {m['when']}"))
            continue
        reference = ref.roofline()
        binds = {k: evaluate(parse(str(v)), ref.env) for k, v in (m.get("bind") or {}).items()}
        some = [s for s in case.some if s in fv_spec.tensors]
        fv = instantiate(fv_spec, binds, some)
        flops, nbytes = fv.roofline()
        delta = evaluate(parse(str(m["bytes_delta"])), fv.env) if "bytes_delta" in m else 0
        out.append(Comparison(case.case_id, reference, (flops, nbytes - delta)))
    return out
