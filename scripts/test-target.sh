#!/usr/bin/env bash
# Runs the codegen tests (kiln_codegen_tests), the training tests (tests/training/ in
# kiln_tests) and the compiled bf16 op tests (kiln_ops_tests) with kernels generated for
# another CPU than the host (KILN_TARGET_CPU).
# Usage: scripts/test-target.sh TARGET [BUILD_DIR]
#   TARGET: native, x86-64-v2, x86-64-v3, x86-64-v4 or an LLVM CPU name (codegen/target.h)
#   BUILD_DIR: a configured build directory (default: build); the three binaries are built.
# ctest runs the same tests at x86-64-v3 on hosts with AVX-512F (or configured with
# -DKILN_TEST_OTHER_TARGET=ON): ctest --test-dir build -L target-x86-64-v3
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: scripts/test-target.sh TARGET [BUILD_DIR]}"
build="${2:-build}"
cmake --build "$build" --target kiln_codegen_tests kiln_tests kiln_ops_tests
# The training suites, as tests/CMakeLists.txt reads them.
filter=$(sed -nE 's/^TEST(_F|_P)?\(([A-Za-z0-9_]+),.*/\2.*/p' tests/training/*_test.cc |
         sort -u | paste -sd: -)
export KILN_TARGET_CPU="$target"
export KILN_CACHE_DIR="$build/kernel-cache"
status=0
for run in "kiln_codegen_tests" "kiln_tests --gtest_filter=$filter" \
           "kiln_ops_tests --gtest_filter=Bf16Ops.Compiled*:Bf16Ops.Fused*"; do
  echo "== KILN_TARGET_CPU=$target $run"
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  "$build/tests/"$run --gtest_brief=1 || status=1
  echo "== $(( ($(date +%s%N) - start) / 1000000 )) ms"
done
exit $status
