#!/usr/bin/env bash
# Builds a Python virtual environment with Keras 3 on JAX (CPU), outside the repository, for
# the two things in kiln that use real Keras: remaking the .keras test fixtures
# (tests/saving/keras_files/make_fixtures.py) and the optional Keras half of
# tests/python/test_keras_files.py (skipped where `import keras` fails). kiln's build and its
# other tests never need it.
#
#   scripts/make-keras-venv.sh [DIR]          # default DIR: ../kerasvenv beside the repository
#   KERAS_BACKEND=jax DIR/bin/python tests/saving/keras_files/make_fixtures.py
#   PYTHONPATH=build/python KERAS_BACKEND=jax DIR/bin/python -m pytest tests/python/test_keras_files.py
#
# Uses Debian's /usr/bin/python3 (the interpreter kiln's module is built for) and PyPI.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$repo/../kerasvenv}"
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install --quiet "keras>=3.15,<4" "jax[cpu]" h5py pytest
KERAS_BACKEND=jax "$dir/bin/python" -c "import keras; print('keras', keras.__version__, 'in', '$dir')"
