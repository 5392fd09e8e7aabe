#!/usr/bin/env python3
"""Load-path micro-benchmark: copy N bytes with one kernel per way of reading the source (SSBO
float / uvec2 / uvec4 loads, uniform texel buffer texelFetch R32 / RGBA32, storage texel buffer
imageLoad r32ui / rgba32ui), next to vkCmdCopyBuffer; and a read-mostly mode (16 texels loaded per texel stored, like matvec).
GB/s counts bytes read + written.

    PYTHONPATH=src python benches/bench_load_paths.py [--mb 64] [--repeats 10] [--paths utb_r32,ssbo_f32]
"""
import argparse
import json
import sys

import fuelvk as fv
from fuelvk.bench.loadpaths import bench


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=64, help="MiB copied per launch (default 64)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--paths", default="", help="comma-separated subset of the load paths")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    rows = bench(int(args.mb * (1 << 20)), args.repeats, paths=[p for p in args.paths.split(",") if p])
    print(f"device: {fv.device_info()['name']}; {args.mb:g} MiB per copy, median of {args.repeats}")
    print(f"{'path':16s} {'copy GB/s':>9s} {'ms':>8s} {'x ssbo_f32':>10s} {'read GB/s':>9s} {'ms':>8s}  note")

    def f(v, w, d):
        return f"{v:{w}.{d}f}" if v else f"{'-':>{w}s}"
    for r in rows:
        print(f"{r['path']:16s} {f(r['GBps'], 9, 2)} {f(r['median_ms'], 8, 2)} {f(r['x_vs_ssbo_f32'], 10, 2)} "
              f"{f(r['read_GBps'], 9, 2)} {f(r['read_ms'], 8, 2)}  {r['note']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["note"] != "WRONG RESULT" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
