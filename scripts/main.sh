#!/usr/bin/env bash
# Installs what is missing, builds the optimized preset, and runs kiln's main job: training
# the MLP on the shipped digits data set eagerly and compiled, with a comparison table (extra
# arguments go to `kiln train`; with --model lstm|gru|transformer it is the second main job,
# a character language model on text, by default /usr/share/common-licenses/GPL-3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build-progress.sh
# ccache keys on paths relative to the checkout, so clones in other directories share objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
kiln_step "Installing the Debian packages kiln needs (scripts/install-deps.sh)"
bash scripts/install-deps.sh
kiln_step "Configuring (cmake --preset default)"
cmake --preset default
kiln_build default 12 kiln_cli
kiln_step "Running kiln"
./build/tools/kiln --version
case " $* " in
  *" --model "* | *" --model="*) ./build/tools/kiln train --mode both "$@" ;;
  *) ./build/tools/kiln train --model mlp --dataset digits --mode both "$@" ;;
esac
