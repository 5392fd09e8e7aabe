#!/usr/bin/env bash
# The GPU code paths that lavapipe cannot run, verified on a GPU host in a few minutes:
#   bash scripts/gpu_check.sh            # results in $OUT, else ./gpu_check_out
# 1. `python -m fuelvk info` (text + json): the device, its features and the matmul routes; "coop" is
#    listed when the device has VK_KHR_cooperative_matrix and everything the coop kernels declare
#    (uniformAndStorageBuffer16BitAccess, vulkanMemoryModel + DeviceScope, ...), which fuelvk enables.
# 2. tests/test_matmul.py under the validation layer: test_coop_on_device runs the cooperative-matrix
#    kernels against numpy (it skips without the extension: the summary says so), the other routes too.
# 3. `python -m fuelvk bench --quick --json`: timings per op, the route taken (coop for big f16 matmuls).
# Exit status: non-zero if a step failed. Needs the package installed (scripts/setup.sh) or run from
# the source tree (src/ is put on PYTHONPATH).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
out="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 FUELVK_VALIDATION=1
rc=0
step() { echo "== $*" | tee -a "$out/summary.txt"; }

step "python -m fuelvk info"
"$PY" -m fuelvk info 2>&1 | tee "$out/info.txt" || rc=1
"$PY" -m fuelvk info --json > "$out/info.json" 2>>"$out/info.txt" || rc=1

step "pytest tests/test_matmul.py (validation layer on; coop tests need VK_KHR_cooperative_matrix)"
"$PY" -m pytest -q -rs -p no:cacheprovider --junitxml="$out/test_matmul.xml" tests/test_matmul.py \
  2>&1 | tee "$out/test_matmul.txt"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
if grep -q "no VK_KHR_cooperative_matrix" "$out/test_matmul.txt"; then
  step "cooperative matrix: NOT verified (this device lacks VK_KHR_cooperative_matrix)"
else
  step "cooperative matrix: test_coop_on_device ran"
fi

step "python -m fuelvk bench --quick --json"
"$PY" -m fuelvk bench --quick --no-progress --json "$out/bench_quick.json" 2>&1 | tee "$out/bench_quick.txt"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1

step "done: rc=$rc, files in $out"
exit $rc
