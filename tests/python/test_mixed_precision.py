"""Keras dtype policies from Python: kiln.keras.mixed_precision / keras.config, layers' dtype=
(names and DTypePolicy objects), dtype_policy / compute_dtype / variable_dtype, configs as
Keras 3 writes them, and a .keras file Keras saved under "mixed_bfloat16" (the fixture
tests/saving/keras_files/mlp_mixed_bf16.keras) predicting what Keras predicted within a bound
derived from bfloat16's rounding. A mixed_bfloat16 model trains eagerly and with compiled steps.

u = 2^-8 is bfloat16's unit roundoff. Keras (JAX on the CPU) and kiln both compute a bfloat16
op in float32 and round its result, but their float32 accumulation orders differ and XLA may
fuse an op into the next one without rounding between them: per op the two results differ by
at most 2u of the magnitude of the values summed (one rounding each side) plus the float32
reordering, and that difference is carried into the next layer through |kernel|."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from keras_process import keras_python

import kiln
from kiln import keras

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "saving" / "keras_files"
U = 2.0 ** -8
U32 = 2.0 ** -24


@pytest.fixture(autouse=True)
def restore_global_policy():
    before = keras.mixed_precision.global_policy()
    yield
    keras.mixed_precision.set_global_policy(before)


def keras_policy(name):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def test_global_policy_and_its_keras_names():
    assert keras.mixed_precision.global_policy().name == "float32"
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    assert keras.config.dtype_policy() == keras.DTypePolicy("mixed_bfloat16")
    layer = keras.layers.Dense(3)
    keras.config.set_dtype_policy("float32")
    assert keras.mixed_precision.dtype_policy().name == "float32"
    assert layer.dtype_policy.name == "mixed_bfloat16"  # read at construction
    assert (layer.compute_dtype, layer.variable_dtype, layer.dtype) == \
        ("bfloat16", "float32", "float32")
    assert repr(layer.dtype_policy) == '<DTypePolicy "mixed_bfloat16">'
    keras.mixed_precision.set_global_policy(keras.mixed_precision.Policy("float64"))
    assert keras.layers.Dense(2).compute_dtype == "float64"
    keras.mixed_precision.set_global_policy(None)
    assert keras.mixed_precision.global_policy().name == "float32"


def test_policy_objects_and_errors():
    p = keras.DTypePolicy("mixed_bfloat16")
    assert (p.name, p.compute_dtype, p.variable_dtype) == \
        ("mixed_bfloat16", "bfloat16", "float32")
    assert p.get_config() == {"name": "mixed_bfloat16"}
    assert keras.DTypePolicy.from_config(p.get_config()) == p
    for name in ("float16", "mixed_float16"):
        with pytest.raises(kiln.Error, match="no float16.*mixed_bfloat16"):
            keras.DTypePolicy(name)
        with pytest.raises(kiln.Error, match="no float16"):
            keras.layers.Dense(2, dtype=name)
    with pytest.raises(kiln.Error, match="Cannot convert"):
        keras.mixed_precision.set_global_policy("mixed_float64")
    assert keras.mixed_precision.global_policy().name == "float32"


def test_layers_take_names_and_policy_objects():
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for dtype in ("mixed_bfloat16", keras.DTypePolicy("mixed_bfloat16")):
        layer = keras.layers.Dense(3, dtype=dtype)
        y = layer(x)
        assert y.dtype == "bfloat16"
        assert layer.weights[0].dtype == "float32"
        assert layer.get_config()["dtype"] == keras_policy("mixed_bfloat16")
    f64 = keras.layers.Dense(3, dtype="float64")
    assert f64(x).dtype == "float64" and f64.weights[0].dtype == "float64"
    # Layers without weights autocast too; LayerNormalization keeps float32 statistics.
    assert keras.layers.Activation("relu", dtype="mixed_bfloat16")(x).dtype == "bfloat16"
    ln = keras.layers.LayerNormalization(dtype="mixed_bfloat16")
    assert ln(x).dtype == "bfloat16" and ln.weights[0].dtype == "float32"


def test_config_round_trip_reads_old_string_form():
    layer = keras.layers.Dense(2, dtype="mixed_bfloat16")
    config = layer.get_config()
    again = keras.layers.Dense.from_config(config)
    assert again.dtype_policy.name == "mixed_bfloat16"
    config["dtype"] = "mixed_bfloat16"  # what older Keras files hold
    assert keras.layers.Dense.from_config(config).compute_dtype == "bfloat16"


KERAS_CONFIGS = """
import os, json
os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
out = {}
for name in ("float32", "mixed_bfloat16", "float64", "bfloat16"):
    out[name] = keras.layers.Dense(2, dtype=name).get_config()["dtype"]
keras.mixed_precision.set_global_policy("mixed_bfloat16")
d = keras.layers.Dense(2)
out["global"] = [d.get_config()["dtype"], d.compute_dtype, d.variable_dtype, d.dtype]
print(json.dumps(out))
"""


def test_dtype_entries_equal_keras():
    python = keras_python()
    run = subprocess.run([python, "-c", KERAS_CONFIGS], capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    ref = json.loads(run.stdout.strip().splitlines()[-1])
    for name in ("float32", "mixed_bfloat16", "float64", "bfloat16"):
        assert keras.layers.Dense(2, dtype=name).get_config()["dtype"] == ref[name], name
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    d = keras.layers.Dense(2)
    assert [d.get_config()["dtype"], d.compute_dtype, d.variable_dtype, d.dtype] == ref["global"]


def test_keras_mixed_bf16_file_predicts_what_keras_predicted():
    model = keras.models.load_model(FIXTURES / "mlp_mixed_bf16.keras")
    x = np.load(FIXTURES / "mlp_mixed_bf16.x0.npy")
    expected = np.load(FIXTURES / "mlp_mixed_bf16.y.npy").astype(np.float64)
    dense1, dense2 = [l for l in model.layers if l.class_name == "Dense"]
    for layer in (dense1, dense2):
        assert layer.dtype_policy.name == "mixed_bfloat16"
        assert all(w.dtype == "float32" for w in layer.weights)
    y = model(x)
    assert y.dtype == "bfloat16"  # Keras' output was bfloat16 too (make_fixtures.py asserts it)
    got = np.asarray(y.numpy(), dtype=np.float64)

    # The bound, from the bfloat16-rounded operands both sides use.
    def r(a):
        return np.asarray(kiln.tensor(np.asarray(a, np.float32), dtype=kiln.bfloat16).numpy(),
                          dtype=np.float64)
    k1, b1 = (r(w) for w in dense1.get_weights())
    k2, b2 = (r(w) for w in dense2.get_weights())
    xr = r(x)
    m1 = np.abs(xr) @ np.abs(k1) + np.abs(b1)  # magnitudes of the first layer's sums
    err_h = (2 * 2 * U + 6 * 2 * U32) * m1     # product and bias add (relu is exact)
    h = np.maximum(xr @ k1 + b1, 0)
    m2 = (np.abs(h) + err_h) @ np.abs(k2) + np.abs(b2)
    bound = err_h @ np.abs(k2) + (2 * 2 * U + 8 * 2 * U32) * m2
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= bound), (got, expected, bound)


@pytest.mark.parametrize("run_eagerly", [True, False])
def test_mixed_bf16_model_trains(run_eagerly):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.int32)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], run_eagerly=run_eagerly)
    history = model.fit(x, y, epochs=5, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert all(w.dtype == np.float32 for w in model.get_weights())
