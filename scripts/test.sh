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
source scripts/build-progress.sh
kiln_step "Installing the Debian packages kiln needs (scripts/install-deps.sh)"
bash scripts/install-deps.sh
if [ "$preset" = default ] && [ "${KILN_SKIP_FUZZ:-0}" != 1 ]; then
  kiln_step "Building the fuzz harnesses (clang) and running each briefly (scripts/fuzz.sh)"
  KILN_FUZZ_SKIP_DEPS=1 bash scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-10}"
fi
kiln_step "Configuring (cmake --preset $preset)"
cmake --preset "$preset"
kiln_build "$preset" 25
kiln_step "Running the tests (ctest --preset $preset -j 2)"
ctest --preset "$preset" -j 2
