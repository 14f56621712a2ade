#!/usr/bin/env bash
# ThreadSanitizer over the communication thread of data-parallel training (docs/distributed.md):
# builds tests/distributed/tsan/comm_thread_tsan.cc with kiln/distributed/ and the few runtime and ir
# files it needs, all with -fsanitize=thread (MPI itself is not instrumented: its calls are
# serialised by kiln's MPI mutex), and runs it under mpirun with 2 and 3 ranks. Any report stops
# the run (halt_on_error). Minutes, where a TSan build of all of kiln takes hours on 2 cores.
# Usage: scripts/tsan_comm_thread.sh [output directory, default build-tsan-comm]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-tsan-comm}
mkdir -p "$out"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -g -fsanitize=thread -fno-omit-frame-pointer -I"$PWD" \
    $(mpicxx --showme:compile) \
    tests/distributed/tsan/comm_thread_tsan.cc kiln/distributed/distributed.cc kiln/distributed/mpi_world.cc \
    kiln/distributed/comm_thread.cc kiln/runtime/collectives.cc kiln/runtime/knobs.cc kiln/ir/dtype.cc kiln/ir/error.cc \
    $(mpicxx --showme:link) -lfmt -o "$out/comm_thread_tsan"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan_mpi.supp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_DISTRIBUTED_TIMEOUT=120
for ranks in 2 3; do
  echo "== tsan: mpirun -np $ranks $out/comm_thread_tsan"
  mpirun --oversubscribe --bind-to none -np "$ranks" "$out/comm_thread_tsan"
done
echo "== tsan: no data race reported"
