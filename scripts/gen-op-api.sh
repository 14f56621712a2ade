#!/usr/bin/env bash
# Regenerates the C++ op API generated from the op table (kiln/frontend/ops_generated.h and
# ops_generated.cc) with `kiln op-api` (run after changing ir/ops.def; the ctest
# tools.op_api_is_current checks them). `kiln op-api list` says which ops are written by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
kiln="${1:-./build/tools/kiln}"
for part in header source; do
  case $part in header) out=kiln/frontend/ops_generated.h ;; source) out=kiln/frontend/ops_generated.cc ;; esac
  "$kiln" op-api "$part" > "$out.tmp"
  mv "$out.tmp" "$out"
done
echo "kiln/frontend/ops_generated.h and ops_generated.cc updated"
