#!/usr/bin/env python3
"""Reductions, softmax, norms and cumsum: the bench suite on those ops' workload rows.

    python benches/bench_reduction.py [suite options: --filter float32 --max-mb 0 --json out.json ...]

Same as `python -m fuelvk bench --ops sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum`.
"""
import sys

from fuelvk.bench.suite import main

OPS = "sum,max,mean,argmax,softmax,rms_norm,layer_norm,cumsum"

if __name__ == "__main__":
    sys.exit(main(["--ops", OPS, *sys.argv[1:]]))
