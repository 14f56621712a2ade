#!/usr/bin/env bash
# ThreadSanitizer over kiln's concurrency tests (docs/debugging.md, "Sanitizers"): builds the
# `tsan` preset's three test binaries that hold them (nothing else: a TSan build is slow) and
# runs only those tests:
#  - kiln_core_tests:    threaded eager kernels (one vs several threads, parallel paths), the
#                        profiler's per-thread numbering;
#  - kiln_codegen_tests: the kernel object cache (8 threads, 4 processes on one cache
#                        directory), whole graphs compiled and run (threaded JIT kernels),
#                        all_reduce sums and gradient buckets finishing on another thread
#                        while the step computes (the MPI communication thread itself:
#                        scripts/tsan_comm_thread.sh);
#  - kiln_concurrency_tests (kiln_tests' files with concurrency tests, tests/CMakeLists.txt):
#                        one compiled function called from several threads (including calls
#                        that write variables), compiled executables on 1 and 2 threads, tapes
#                        on other threads, frontend ops' parallel paths.
# Any report fails the run (halt_on_error). Third-party suppressions: scripts/tsan.supp.
# Usage: scripts/tsan.sh [extra gtest flags, e.g. --gtest_repeat=3]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset tsan
cmake --build --preset tsan
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
# The kernel cache of the tests stays inside the build tree (as in ctest).
export KILN_CACHE_DIR="$PWD/build-tsan/kernel-cache"
run() {
  local binary=$1 filter=$2
  shift 2
  echo "== tsan: $binary --gtest_filter=$filter"
  "build-tsan/tests/$binary" --gtest_filter="$filter" "$@"
}
run kiln_core_tests '*Thread*:*Parallel*' "$@"
run kiln_codegen_tests 'ObjectCache.*:CompileGraph.*:InPlaceUpdate.*:CollectiveOverlap.*' "$@"
run kiln_concurrency_tests 'CompiledFunction.*:CompiledExecutable.*:*Thread*:*Parallel*' "$@"
echo "== tsan: no data race reported"
