#!/usr/bin/env python3
"""Casts and data movement: the bench suite on the movement/cast ops' workload rows.

    python benches/bench_movement.py [suite options: --filter float32 --max-mb 0 --json out.json ...]

Same as `python -m fuelvk bench --ops astype,flip,pad,concatenate,ascontiguousarray,roll,take`:
device time, GB/s, % of the measured copy roof, numpy / torch CPU on the same inputs.
"""
import sys

from fuelvk.bench.suite import main

OPS = "astype,flip,pad,concatenate,ascontiguousarray,roll,take"

if __name__ == "__main__":
    sys.exit(main(["--ops", OPS, *sys.argv[1:]]))
