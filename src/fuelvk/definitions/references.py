"""Plain-PyTorch reference bodies, one per fuelvk op, for the exported Definitions' `reference`.

They live in the op records (OpDef.reference, fuelvk/ops/<family>.py); this module collects them.
Each is the body of `run` (plus optional helper functions placed above it).  The exporter
(export.py) wraps it: module constants for the op's parameters (fixed by the Definition) and for
absent optional inputs (`None`), a prelude that upcasts floating inputs to float32, and a tail
that casts each output to its Definition dtype and returns them.  A body assigns one variable per
output, named as the spec names it.  These are the mathematical specification: explicit steps,
no torch.nn.functional, nothing from fuelvk.
"""
from ..ops._opdef import opdefs

_RECORDS = opdefs().values()

REFERENCES = {r.name: r.reference_source for r in _RECORDS if r.reference is not None}

# Ops whose Definition cannot be stated sensibly, with the reason `export` prints.
SKIP = {r.name: r.export["skip"] for r in _RECORDS if "skip" in r.export}

# Parameters that are not literal values in the reference but spec lets (resolved at export).
LETS = {r.name: r.export["lets"] for r in _RECORDS if "lets" in r.export}
