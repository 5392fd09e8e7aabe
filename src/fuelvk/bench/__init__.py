"""Benchmarks: device timing, roofs (calibration kernels) and the workload-driven suite."""


def main(argv):
    from .suite import main as suite_main
    return suite_main(argv)
