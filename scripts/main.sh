#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs kiln's main job: training
# the MLP on the shipped digits data set (extra arguments go to `kiln train`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target kiln_cli
./build/tools/kiln --version
./build/tools/kiln train --model mlp --dataset digits --mode both "$@"
