#!/usr/bin/env bash
# One entry point for a fresh Debian machine:
#   bash scripts/setup.sh main   # install what is missing, then `python -m fuelvk info` + a quick benchmark
#   bash scripts/setup.sh test   # install what is missing, then the whole test suite (validation layer on),
#                                # then again with descriptor sets + device-local memory forced
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-main}"
PY="${PYTHON:-python3}"

debs="libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc"
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
  test)
    "$PY" build_shaders.py --check
    "$PY" -m pytest -q -p no:cacheprovider tests
    # Once more on the paths lavapipe does not take by itself (README: Devices): descriptor sets instead of
    # push descriptors, device-local arrays + staging copies. test_devices_modes sets its own modes; the
    # thread stress runs 2 s per test here.
    FUELVK_NO_PUSH_DESCRIPTOR=1 FUELVK_MEMORY=device-local FUELVK_STRESS_S=2 \
      "$PY" -m pytest -q -p no:cacheprovider tests --ignore=tests/test_devices_modes.py
    ;;
  *) echo "usage: $0 main|test" >&2; exit 2 ;;
esac
