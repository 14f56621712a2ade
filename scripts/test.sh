#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs the whole test suite.
# Usage: scripts/test.sh [preset]   (default | debug | asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
bash scripts/install-deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j 2
