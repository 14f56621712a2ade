#!/usr/bin/env bash
# Builds kiln's libFuzzer harnesses (fuzz/, CMake preset `fuzz`: clang-19, ASan + UBSan) and runs
# each one for SECONDS (default 30) on a scratch copy of its seed corpus (fuzz/corpus/<harness>/;
# the repository is never modified). Prints the executions and the result of every harness and
# exits non-zero if any harness found a crash, a leak, a timeout or an out-of-memory input.
#
#   scripts/fuzz.sh [SECONDS]
#   KILN_FUZZ_HARNESSES="npy_fuzzer idx_fuzzer"  run only these harnesses
#   KILN_FUZZ_DIR=DIR                            scratch directory (default: a new /tmp/kiln-fuzz.*)
#   KILN_FUZZ_SKIP_DEPS=1                        do not run scripts/install-deps.sh
#   KILN_FUZZ_JOBS=N                             harnesses run at once (default: the cores)
#
# Crash inputs are written to DIR/<harness>/artifacts/; reproduce one with
#   build-fuzz/fuzz/<harness> DIR/<harness>/artifacts/crash-...
# docs/fuzzing.md describes the harnesses, the limits they check and how to fix a finding.
set -euo pipefail

seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "${KILN_FUZZ_SKIP_DEPS:-0}" != "1" ]; then bash scripts/install-deps.sh; fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz

harnesses=(${KILN_FUZZ_HARNESSES:-ir_text_fuzzer npy_fuzzer safetensors_fuzzer idx_fuzzer digits_csv_fuzzer})
scratch="${KILN_FUZZ_DIR:-$(mktemp -d /tmp/kiln-fuzz.XXXXXX)}"
mkdir -p "$scratch"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# One harness: runs it, then writes its summary line to DIR/summary and its exit to DIR/rc.
run_harness() {
  local h="$1" dir="$scratch/$1" rc=0 dict=()
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -r "fuzz/corpus/$h/." "$dir/corpus/"
  if [ -f "fuzz/$h.dict" ]; then dict=("-dict=fuzz/$h.dict"); fi
  echo "fuzz.sh: running $h for ${seconds}s (log: $dir/log)"
  "build-fuzz/fuzz/$h" "$dir/corpus" "${dict[@]}" -max_total_time="$seconds" -max_len=4096 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    > "$dir/log" 2>&1 || rc=$?
  local execs rate result
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$' || true)"
  rate="$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/log" | grep -o '[0-9]*$' || true)"
  if [ "$rc" -eq 0 ]; then
    result="ok"
  else
    result="FAILED (exit $rc): $(grep -m1 -E 'ERROR: |kiln fuzz:|runtime error|Test unit written' \
      "$dir/log" || echo 'see the log')"
  fi
  printf '%-20s %12s execs %8s exec/s  %s\n' "$h" "${execs:-?}" "${rate:-?}" "$result" > "$dir/summary"
  echo "$rc" > "$dir/rc"
}

# The harnesses are single-threaded: as many run at once as the machine has cores.
jobs="${KILN_FUZZ_JOBS:-$(nproc)}"
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_harness "$h" &
done
wait

failed=0
summary=()
for h in "${harnesses[@]}"; do
  summary+=("$(cat "$scratch/$h/summary")")
  if [ "$(cat "$scratch/$h/rc")" != 0 ]; then
    failed=1
    tail -n 40 "$scratch/$h/log"
  fi
done

echo
echo "fuzz.sh: ${seconds}s per harness; logs, corpora and artifacts in $scratch"
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz.sh: FAILED: crash inputs are in $scratch/<harness>/artifacts/" >&2
  exit 1
fi
