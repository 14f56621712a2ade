"""The interpreter the tests run real Keras in (a helper module of tests/python, not a test)."""
import os
import subprocess
import sys

import pytest


def keras_python():
    """An interpreter where `import keras` succeeds: $KILN_KERAS_PYTHON (e.g. the environment
    scripts/make-keras-venv.sh builds), else this one; the test is skipped without one. Keras
    runs in its own process, so its numpy need not be the one kiln's module was built with."""
    python = os.environ.get("KILN_KERAS_PYTHON", sys.executable)
    probe = subprocess.run([python, "-c", "import keras"], capture_output=True,
                           env={**os.environ, "KERAS_BACKEND": "jax"})
    if probe.returncode != 0:
        pytest.skip(f"keras cannot be imported by {python}")
    return python
