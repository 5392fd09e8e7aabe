"""Op specs in the TileOPs manifest format, their validator and their roofline.

One YAML file per family in this folder describes every public fuelvk op (signature, workload rows,
inline FLOP/byte formulas), with the extension field `fuelvk_api` naming the function.  This
package never imports the rest of fuelvk at import time: the implementation checks look the
functions up lazily, so specs can be validated even when the runtime cannot start.

    from fuelvk import specs
    specs.validate()                                   # -> [Problem, ...]
    specs.eval_roofline("rms_norm", B=[2048], N=4096, T="bfloat16", some=["weight"])
    for case in specs.workloads("matmul"): ...

fuelvk's additions to the TileOPs format, all prefixed or documented where they are defined:
`fuelvk_api` (the function, e.g. rms_norm or quant.quantize), `fuelvk_tileops` (how an entry lines
up with a TileOPs entry, tileops.py), `fuelvk_list` on an input (a Python list of tensors, element
`i`), a few primitives for numpy-style shapes (primitives.py), and `route=None`, the execution-policy
parameter a function may take last (impl.py).
"""
from .api import eval_roofline, get_spec, load_specs, missing_specs, roofline_of_call, workloads
from .model import SpecError
from .validate import SPEC_DIR, Problem, validate

__all__ = ["validate", "Problem", "eval_roofline", "roofline_of_call", "workloads", "missing_specs",
           "load_specs", "get_spec", "SpecError", "SPEC_DIR"]
