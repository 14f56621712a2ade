#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs kiln's main job: training
# the MLP on the shipped digits data set eagerly and compiled, with a comparison table (extra
# arguments go to `kiln train`; with --model lstm|gru|transformer it is the second main job,
# a character language model on text, by default /usr/share/common-licenses/GPL-3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target kiln_cli
./build/tools/kiln --version
case " $* " in
  *" --model "* | *" --model="*) ./build/tools/kiln train --mode both "$@" ;;
  *) ./build/tools/kiln train --model mlp --dataset digits --mode both "$@" ;;
esac
