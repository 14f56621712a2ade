"""Keras 3 .keras files from Python: the fixtures Keras made (tests/saving/keras_files/) load and
predict what Keras predicted within a float32 rounding bound, kiln's .keras files reload bit for
bit, and, where Keras can be imported, Keras loads kiln's files and predicts the same."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from keras_process import keras_python

import kiln
from kiln import keras

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "saving" / "keras_files"

# name, number of inputs, the longest chain of float32 roundings input -> output (the terms of
# every accumulation along the deepest path plus ~4 ulps per transcendental function; derived
# per model in tests/saving/keras_file_test.cc).
CASES = [
    ("mlp", 1, 6 + 8 + 4 + 4),
    ("two_inputs", 2, 4 + 4 + 1 + 15 + 2 + 8),
    ("lstm_masked", 1, 7 * (12 + 20) + 5 + 4),
    ("attention", 1, 8 + 4 + 10 + 6 + 8 + 1 + 20 + 12 + 6 + 8),
    ("cnn", 1, 18 + 36 + 12 + 5 + 8),
    ("rnn_cells", 1, 5 * (9 + 12) + 5 * (7 + 20) + 3 + 1),
]


def inputs(name, n):
    xs = [np.load(FIXTURES / f"{name}.x{i}.npy") for i in range(n)]
    return xs if n > 1 else xs[0]


def bound(expected, chain):
    return 2 * np.finfo(np.float32).eps * chain * max(1.0, float(np.abs(expected).max()))


@pytest.mark.parametrize("name,n,chain", CASES)
def test_keras_fixture_predicts_what_keras_predicted(name, n, chain):
    model = keras.models.load_model(FIXTURES / f"{name}.keras")
    expected = np.load(FIXTURES / f"{name}.y.npy")
    got = np.asarray(model.predict(inputs(name, n), verbose=0))
    assert got.shape == expected.shape
    assert np.abs(got.astype(np.float64) - expected).max() <= bound(expected, chain)


@pytest.mark.parametrize("name,n,chain", CASES)
def test_kiln_keras_file_reloads_bit_for_bit(tmp_path, name, n, chain):
    model = keras.models.load_model(FIXTURES / f"{name}.keras")
    path = str(tmp_path / "again.keras")
    model.save(path)
    again = keras.models.load_model(path)
    for a, b in zip(model.get_weights(), again.get_weights()):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    x = inputs(name, n)
    assert np.asarray(model.predict(x, verbose=0)).tobytes() == \
        np.asarray(again.predict(x, verbose=0)).tobytes()


def test_load_errors_are_kiln_errors(tmp_path):
    with pytest.raises(kiln.Error, match="does not exist"):
        keras.models.load_model(tmp_path / "missing.keras")
    (tmp_path / "junk.keras").write_bytes(b"not a zip")
    with pytest.raises(kiln.Error, match="is not a valid zip archive"):
        keras.models.load_model(tmp_path / "junk.keras")


KERAS_PREDICT = """
import os, sys
os.environ.setdefault("KERAS_BACKEND", "jax")
import keras, numpy as np
path, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = keras.saving.load_model(path)
xs = [np.load(sys.argv[4 + i]) for i in range(n)]
np.save(out, np.asarray(model.predict(xs if n > 1 else xs[0], verbose=0)))
print(int(keras.ops.convert_to_numpy(model.optimizer.iterations)))
"""


@pytest.mark.parametrize("name,n,chain", CASES)
def test_keras_loads_kilns_file(tmp_path, name, n, chain):
    """Keras 3 loads the file kiln writes and predicts what kiln predicts, with the optimizer's
    state (the iteration Keras trained before kiln loaded and saved it)."""
    python = keras_python()
    model = keras.models.load_model(FIXTURES / f"{name}.keras")
    path = str(tmp_path / "kiln.keras")
    model.save(path)
    out = tmp_path / "keras_y.npy"
    xs = [str(FIXTURES / f"{name}.x{i}.npy") for i in range(n)]
    run = subprocess.run([python, "-c", KERAS_PREDICT, path, str(out), str(n), *xs],
                         capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    ref = np.load(out)
    mine = np.asarray(model.predict(inputs(name, n), verbose=0))
    assert mine.shape == ref.shape
    assert np.abs(mine.astype(np.float64) - ref).max() <= bound(ref, chain)
    assert run.stdout.split()[-1] == "1"
