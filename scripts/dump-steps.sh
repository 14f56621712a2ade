#!/usr/bin/env bash
# Dumps what the compiler makes of the four training steps `kiln bench` times (the MLP, CNN,
# LSTM and transformer block): each compiled specialisation's optimized IR, memory plan, kernel
# list and every kernel's LLVM IR, one folder per step. Two revisions' dumps diff to nothing when
# a change (a move, a refactoring) leaves the compiler's output alone:
#
#   bash scripts/dump-steps.sh /tmp/before            # at the old revision
#   bash scripts/dump-steps.sh /tmp/after             # at the new one
#   diff -r /tmp/before /tmp/after && echo identical
#
# Timing lines (the pass timings, compile times) are dropped, as they differ run to run; each
# run starts from an empty kernel cache (KILN_CACHE_DIR), so every kernel is compiled anew.
# KILN (default build/tools/kiln) names the program. One thread, one short sample each: the
# dumps are made by the first compilation, not by the timing.
set -euo pipefail

out=${1:?usage: scripts/dump-steps.sh OUT_DIR}
kiln=${KILN:-build/tools/kiln}
[[ -x $kiln ]] || { echo "dump-steps: $kiln is not a built kiln program (set KILN=...)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"
for step in mlp_784_256_256_10_b64 cnn_b64 lstm_2x256_seq64_b32 transformer_block_d128_h4_seq64_b16; do
  raw=$(mktemp -d)
  KILN_CACHE_DIR="$raw/cache" KILN_DUMP_IR="$raw" "$kiln" bench --filter "^${step}\$" \
    --repetitions 1 --min-sample-ms 1 \
    --threads 1 >/dev/null
  for dir in "$raw"/*.compiled.*; do
    [[ -d $dir && $dir != */cache ]] || continue
    dest="$out/$step/$(basename "$dir")"
    mkdir -p "$dest/kernels"
    cp "$dir"/kernels/*.ll "$dest/kernels/"
    cp "$dir/optimized.kir" "$dir/memory_plan.txt" "$dest/"
    # The kernel list without its compile times and where each kernel came from (a cache or
    # the compiler): name, loop and extent.
    grep -v '^# compile ' "$dir/kernels.txt" | awk '/^#/ {print; next} /^kernel / {print "kernel loop extent"; next} {print $1, $(NF-2), $(NF-1)}' \
      >"$dest/kernels.txt"
  done
  rm -rf "$raw"
  echo "$step: $(find "$out/$step" -type f | wc -l) files"
done
