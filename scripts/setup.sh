#!/usr/bin/env bash
# One entry point for a fresh Debian machine:
#   bash scripts/setup.sh main   # install what is missing, then `python -m fuelvk info` + a quick benchmark
#   bash scripts/setup.sh test   # install what is missing, then the whole test suite (validation layer on),
#                                # then again with descriptor sets + device-local memory forced,
#                                # then a subset on a second driver (Mesa >= 25 lavapipe, scripts/second_driver.sh)
#   bash scripts/setup.sh second-driver   # only that subset
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-main}"
PY="${PYTHON:-python3}"
# Run on the second driver too (test): every kernel family at least once, ~4 min on 2 idle cores.
SECOND_DRIVER_TESTS="tests/test_elementwise.py tests/test_elementwise_w64.py tests/test_elementwise_extra.py
  tests/test_semantics.py tests/test_casts.py tests/test_conv.py tests/test_indexing.py tests/test_matmul.py
  tests/test_movement.py tests/test_padding.py tests/test_reduction.py tests/test_norm.py tests/test_quant.py
  tests/test_rope.py tests/test_attention.py tests/test_loadpaths.py tests/test_runtime.py
  tests/test_loop_budget.py tests/test_bench.py tests/test_array_api.py tests/test_complex.py
  tests/test_fused_norm.py tests/test_texel_paths.py tests/test_row_paths.py tests/test_devices.py
  tests/test_texel_movement.py tests/test_fused_ew.py tests/test_linalg_ext.py tests/test_definitions_moe.py
  tests/test_float_divmod.py tests/test_recurrent.py tests/test_rng.py tests/test_sampling.py tests/test_half.py"
# pytest -k terms left out there: attention cases that each compile another specialization of the
# big attention kernels (30-50 s apiece on lavapipe); the first run covers them on the system driver.
SECOND_DRIVER_SKIP="(test_attention.py and test_forward and not (1x1/1-1x1 or 2x4/1-7x9))
  or (test_attention.py and test_backward and not (1x1/1-1x1 or zero_size or bad_input))
  or (test_other_subgroup_sizes and 16) or (test_split_launches_small_budget and opt0)
  or test_attention_split_paths or test_norm_and_softmax_split_paths"

debs="libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc curl xz-utils"
missing=""
for p in $debs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "missing Debian packages:$missing -- run: sudo apt-get install$missing" >&2
    exit 1
  fi
fi

# torch==2.13.0 (CPU build) is taken from local disk where the machine has it; the rest from PyPI.
"$PY" -m pip install -q --disable-pip-version-check -e ".[test,build,bench]"

export PYTHONUNBUFFERED=1
case "$what" in
  main)
    "$PY" -m fuelvk info
    "$PY" -m fuelvk bench --quick
    ;;
  test|second-driver)
    if [ "$what" = test ]; then
      "$PY" build_shaders.py --check
      "$PY" -m pytest -q -p no:cacheprovider tests
      # The array API conformance suite (../shared/array-api-tests), its known failures listed with
      # reasons in tests/array_api_xfails.txt: 2 examples, a fixed seed (the same draws every run).
      # The counting run of issue 16 is `bash scripts/array_api_tests.sh 20`.
      if [ -d ../shared/array-api-tests ]; then
        PY="$PY" ARRAY_API_SEED=0 bash scripts/array_api_tests.sh 2
      else
        echo "../shared/array-api-tests not found: the conformance run is skipped"
      fi
      # Once more on the paths lavapipe does not take by itself (README: Devices): descriptor sets instead
      # of push descriptors, device-local arrays + staging copies. test_devices_modes sets its own modes;
      # the thread stress runs 2 s per test here.
      FUELVK_NO_PUSH_DESCRIPTOR=1 FUELVK_MEMORY=device-local FUELVK_STRESS_S=2 \
        "$PY" -m pytest -q -p no:cacheprovider tests --ignore=tests/test_devices_modes.py
    fi
    # The second driver: every kernel family at least once (FUELVK_CHECK_FAMILIES fails the run if one
    # never created a pipeline), validation layer on.
    icd="$(bash scripts/second_driver.sh)"
    echo "second driver: $(VK_ICD_FILENAMES="$icd" "$PY" -m fuelvk info | sed -n 2p)"
    VK_ICD_FILENAMES="$icd" FUELVK_CHECK_FAMILIES=1 "$PY" -m pytest -q -p no:cacheprovider \
      -k "not (${SECOND_DRIVER_SKIP//$'\n'/ })" $SECOND_DRIVER_TESTS
    ;;
  *) echo "usage: $0 main|test|second-driver" >&2; exit 2 ;;
esac
