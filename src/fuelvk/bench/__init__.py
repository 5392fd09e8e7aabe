"""Benchmarks: device timing (timing), roofs from calibration kernels (roofs), cases from the op
specs' workload rows (cases), the suite and its CLI (suite), outputs (report)."""


def main(argv):
    from .suite import main as suite_main
    return suite_main(argv)
