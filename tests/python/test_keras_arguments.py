"""Issue 37 from Python: every keyword of a built-in layer is honoured or refused (never dropped):
data_format="channels_first", weight constraints (by name and as kiln.keras.constraints
objects) kept through training, and a walk over every layer's config entries."""
import numpy as np
import pytest

import kiln
from kiln import _kiln, keras
from kiln.keras import constraints, layers

EPS = np.finfo(np.float32).eps


@pytest.fixture(autouse=True)
def seeded():
    keras.utils.clear_session()
    keras.utils.set_random_seed(37)


def test_conv2d_channels_first_as_keras():
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    conv = layers.Conv2D(4, (3, 3), data_format="channels_first")
    y = np.asarray(conv(x))
    assert y.shape == (2, 4, 6, 6)
    assert conv.get_weights()[0].shape == (3, 3, 3, 4)  # Keras' kernel layout in both formats
    assert conv.get_config()["data_format"] == "channels_first"
    # The same weights channels-last on the transposed input: the transposed output, exactly.
    last = layers.Conv2D(4, (3, 3))
    last(np.transpose(x, (0, 2, 3, 1)))
    last.set_weights(conv.get_weights())
    want = np.transpose(np.asarray(last(np.transpose(x, (0, 2, 3, 1)))), (0, 3, 1, 2))
    np.testing.assert_array_equal(y, want)
    # From a config, as a loaded model would be.
    again = layers.deserialize(layers.serialize(conv))
    assert np.asarray(again(x)).shape == (2, 4, 6, 6)


def test_pooling_and_conv1d_channels_first():
    x = np.random.default_rng(1).uniform(-1, 1, (2, 3, 8, 6)).astype(np.float32)
    y = np.asarray(layers.MaxPooling2D(data_format="channels_first")(x))
    want = np.transpose(np.asarray(layers.MaxPooling2D()(np.transpose(x, (0, 2, 3, 1)))),
                        (0, 3, 1, 2))
    np.testing.assert_array_equal(y, want)
    x1 = np.random.default_rng(2).uniform(-1, 1, (2, 4, 10)).astype(np.float32)
    assert np.asarray(layers.Conv1D(5, 3, data_format="channels_first")(x1)).shape == (2, 5, 8)
    g = np.asarray(layers.GlobalAveragePooling1D(data_format="channels_first")(x1))
    np.testing.assert_allclose(g, x1.mean(axis=2), rtol=0, atol=16 * EPS)


def _trained_dense(constraint, steps=3):
    keras.utils.clear_session()
    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((6,)), layers.Dense(4, kernel_constraint=constraint)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="mse")
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (16, 6)).astype(np.float32)
    y = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    model.fit(x, y, epochs=steps, batch_size=16, verbose=0)
    return model.layers[0].get_weights()[0]


def test_dense_non_neg_kernel_stays_non_negative():
    plain = _trained_dense(None)
    assert (plain < 0).any()  # without the constraint training goes negative
    for c in ("non_neg", constraints.NonNeg()):
        kernel = _trained_dense(c)
        assert (kernel >= 0).all(), kernel
        assert (kernel > 0).any()


def test_max_norm_object_and_config():
    kernel = _trained_dense(constraints.MaxNorm(max_value=0.5, axis=0))
    norms = np.sqrt((kernel.astype(np.float64) ** 2).sum(axis=0))
    assert (norms <= 0.5 * (1 + 16 * EPS)).all(), norms
    d = layers.Dense(3, kernel_constraint=constraints.MaxNorm(2.5), bias_constraint="unit_norm")
    config = d.get_config()
    assert config["kernel_constraint"] == {"module": "keras.constraints", "class_name": "MaxNorm",
                                           "config": {"max_value": 2.5, "axis": 0},
                                           "registered_name": None}
    assert config["bias_constraint"]["class_name"] == "UnitNorm"
    assert constraints.deserialize(config["kernel_constraint"]) == constraints.MaxNorm(2.5)
    with pytest.raises(kiln.Error, match="kernel_constraint"):
        layers.Dense(3, kernel_constraint="positive")


def test_unknown_and_unhonoured_keywords_are_errors():
    with pytest.raises(TypeError, match="unexpected keyword"):
        layers.Dense(4, no_such_argument=1)
    with pytest.raises(kiln.Error, match="groups"):
        layers.Conv2D(4, (3, 3), groups=2)
    with pytest.raises(kiln.Error, match="stateful"):
        layers.LSTM(3, stateful=True)
    assert layers.LSTM(3, unroll=True).get_config()["unroll"] is True  # a speed hint
    # Keras' defaults are accepted.
    layers.Conv2D(4, (3, 3), groups=1, data_format="channels_last")
    bn = layers.BatchNormalization(synchronized=True)
    assert bn.get_config()["synchronized"] is True


_REQUIRED = {
    "Activation": {"activation": "relu"},
    "Conv1D": {"filters": 2, "kernel_size": 3},
    "Conv2D": {"filters": 2, "kernel_size": (3, 3)},
    "Dense": {"units": 3},
    "Dropout": {"rate": 0.5},
    "Embedding": {"input_dim": 5, "output_dim": 3},
    "GRU": {"units": 3},
    "GRUCell": {"units": 3},
    "LSTM": {"units": 3},
    "LSTMCell": {"units": 3},
    "RNN": {"cell": layers.GRUCell(2)},
    "MultiHeadAttention": {"num_heads": 2, "key_dim": 3},
    "PositionEmbedding": {"sequence_length": 4},
    "Reshape": {"target_shape": (2, 2)},
    "SimpleRNN": {"units": 3},
    "SimpleRNNCell": {"units": 3},
}
_SKIPPED = {"Sequential", "Functional", "InputLayer", "Bidirectional", "TimeDistributed"}


def _other_value(key, d):
    if key in ("name", "layer", "backward_layer", "cell"):
        return None
    if isinstance(d, bool):
        return not d
    if isinstance(d, int):
        return d + 1
    if isinstance(d, float):
        return 0.25 if d == 0 else d / 2
    if isinstance(d, list):
        return [e + 1 if isinstance(e, int) else e for e in d]
    if isinstance(d, str):
        if key == "padding":
            return "same" if d == "valid" else "valid"
        if key == "data_format":
            return "channels_first"
        if key in ("activation", "recurrent_activation"):
            return "tanh" if d == "relu" else "relu"
        if key == "dtype":
            return "float64"
        if key.endswith("initializer"):
            return "ones" if d == "zeros" else "zeros"
        return "kiln_test_value"
    if key == "dtype":  # Keras 3's serialized DTypePolicy
        return {**d, "config": {"name": "float64"}}
    if key.endswith("_constraint"):
        return constraints.MaxNorm(3.0)
    if key.endswith("_regularizer"):
        return {"class_name": "L2", "config": {"l2": 0.25}}
    return {"seed": 7, "output_shape": [5], "attention_axes": [1],
            "noise_shape": [1, 1]}.get(key, 3)


def test_every_keyword_is_honoured_or_refused():
    refused = set()
    for cls in _kiln._builtin_layer_classes():
        if cls in _SKIPPED:
            continue
        make = getattr(layers, cls)
        base = make(**_REQUIRED.get(cls, {})).get_config()
        for key, d in base.items():
            v = _other_value(key, d)
            if v is None:
                continue
            kwargs = dict(_REQUIRED.get(cls, {}))
            kwargs[key] = v
            try:
                layer = make(**kwargs)
            except kiln.Error as e:
                refused.add(f"{cls}.{key}")
                assert key in str(e), str(e)
                continue
            want = constraints.serialize(v) if isinstance(v, constraints.Constraint) else v
            assert layer.get_config()[key] == want, f"{cls}.{key} accepted but not honoured"
    assert refused == {"Conv1D.groups", "Conv2D.groups", "Dropout.noise_shape", "GRU.stateful",
                       "LSTM.stateful", "LayerNormalization.rms_scaling",
                       "MultiHeadAttention.attention_axes", "RNN.dtype", "RNN.stateful",
                       "SimpleRNN.stateful"}
