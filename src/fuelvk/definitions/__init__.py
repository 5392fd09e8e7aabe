"""FlashInfer-Bench Definitions for fuelvk's ops, and fuelvk evaluated as a Solution against them.

    python -m fuelvk definitions export DIR            # DIR/definitions/*.json + DIR/workloads/*.jsonl
    python -m fuelvk definitions run DEFS WORKLOADS -o traces.jsonl [--max-elements 2e7] [--dataset-root DIR]

export.py derives each Definition from the op's spec (axes, dtypes, parameters) with the torch
reference bodies of references.py; run.py generates the workload inputs, runs the reference and
fuelvk, applies FlashInfer-Bench's correctness rule and writes Trace JSONL; its solutions are matched
to Definitions by name and signature, those for the dataset's kinds composed from fuelvk ops in
kinds.py (paged / latent / sparse attention, sampling, MoE, gdn, mamba).  Imports torch.
"""
from .export import export, export_one
from .run import compare, evaluate, fuelvk_solution, match_solution, run, summary_table

__all__ = ["compare", "evaluate", "export", "export_one", "fuelvk_solution", "match_solution", "run",
           "summary_table"]
