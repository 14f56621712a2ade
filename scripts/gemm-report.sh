#!/usr/bin/env bash
# The GEMM engine on this machine, one command: tunes the engine in-process (as `kiln tune`
# does, no table written), times every GEMM microbenchmark shape for kiln and oneDNN at 1, 2 and
# all threads (same process, 5 repetitions each, all of them in random order, so that a slow
# phase of a shared machine weighs on both columns alike instead of on whichever ran during
# it), the same at 1 and 2 threads with the operands
# flushed from the caches before each product (the Cold rows), then the tuner from a
# deliberately poor plan and the AVX2 kernels at one thread, and prints the tables of
# docs/benchmarks.md (scripts/gemm_table.py).
#
#   bash scripts/gemm-report.sh [OUT_DIR]      (default: build/gemm-report)
#
# KILN_GEMM_BENCH names the benchmark program (default build/bench/kiln_gemm_bench, built with
# `cmake --build --preset default --target kiln_gemm_bench`); it links kiln's runtime alone, so
# it can be run on a machine without LLVM through a wrapper that carries its libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${KILN_GEMM_BENCH:-build/bench/kiln_gemm_bench}
out=${1:-build/gemm-report}
python=${KILN_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
if [ ! -x "$bench" ]; then
  echo "gemm-report: $bench is missing: cmake --build --preset default --target kiln_gemm_bench" >&2
  exit 1
fi
mkdir -p "$out"
echo "== kiln and oneDNN, tuned in this process ($(date -u +%FT%TZ))"
"$bench" --kiln_tune --benchmark_filter='MatMul_(KilnGemm|OneDnn)/' --benchmark_min_time=0.1 \
  --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/gemm.json" --benchmark_out_format=json \
  > "$out/gemm.txt" 2> "$out/tune.txt"
cat "$out/tune.txt"
"$python" scripts/gemm_table.py "$out/gemm.json" | tee "$out/gemm.md"
echo "== the same at 1 and 2 threads, operands flushed from the caches before each product"
"$bench" --kiln_tune --benchmark_filter='MatMul_(KilnGemm|OneDnn)Cold/.*threads:(1|2)/' \
  --benchmark_min_time=0.1 --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/gemm-cold.json" \
  --benchmark_out_format=json > "$out/gemm-cold.txt" 2> "$out/tune-cold.txt"
"$python" scripts/gemm_table.py "$out/gemm-cold.json" | tee "$out/gemm-cold.md"
echo "== the tuner from a deliberately poor plan"
"$bench" --benchmark_filter=GemmTuner_FromPoorPlan 2>&1 | grep -E 'GemmTuner|kiln_' || true
if grep -q '"kiln_gemm_kernels": "avx512"' "$out/gemm.json"; then
  echo "== the AVX2 kernels (KILN_GEMM=avx2), one thread, tuned in this process"
  KILN_GEMM=avx2 "$bench" --kiln_tune --benchmark_filter='MatMul_(KilnGemm|OneDnn)/.*threads:1/' \
    --benchmark_min_time=0.2 --benchmark_out="$out/gemm-avx2.json" --benchmark_out_format=json \
    > "$out/gemm-avx2.txt" 2> "$out/tune-avx2.txt"
  grep "^tune: .* classes" "$out/tune-avx2.txt" || true
  echo "(the oneDNN column runs oneDNN's own best ISA; of_peak is against the AVX2 FMA peak)"
  "$python" scripts/gemm_table.py "$out/gemm-avx2.json" | tee "$out/gemm-avx2.md"
fi
