#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs kiln's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target kiln_cli
./build/tools/kiln "$@"
