#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs the whole test suite: each
# libFuzzer harness briefly (scripts/fuzz.sh 10; KILN_SKIP_FUZZ=1 leaves it out), then ctest
# (which includes the codegen and training tests at KILN_TARGET_CPU=x86-64-v3 and the crash
# kill tests).
# Usage: scripts/test.sh [preset]   (default | debug | asan; the fuzzers run with default only)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
# ccache keys on paths relative to the checkout, so clones in other directories share objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
bash scripts/install-deps.sh
if [ "$preset" = default ] && [ "${KILN_SKIP_FUZZ:-0}" != 1 ]; then
  KILN_FUZZ_SKIP_DEPS=1 bash scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-10}"
fi
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j 2
