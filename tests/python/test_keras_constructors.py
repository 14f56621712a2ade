"""Layer constructors with Keras 3's own argument names and positions, and Embedding on the
float32 tensors that keras.Input gives (Keras casts the indices to int32)."""
import numpy as np
import pytest

import kiln
from kiln import keras
from kiln.keras import layers


@pytest.fixture(autouse=True)
def seeded():
    keras.utils.clear_session()
    keras.utils.set_random_seed(11)


def config_without_name(layer):
    c = dict(layer.get_config())
    c.pop("name")
    return c


# Each layer made with Keras' keyword names (every one of its leading arguments, at values
# other than kiln's defaults where there are any), as a Keras user writes it.
KERAS_KEYWORDS = {
    "Activation": dict(activation="relu"),
    "AveragePooling1D": dict(pool_size=3, strides=1, padding="same", data_format=None),
    "AveragePooling2D": dict(pool_size=(3, 3), strides=(1, 1), padding="same"),
    "BatchNormalization": dict(axis=-1, momentum=0.9, epsilon=1e-2, center=False, scale=True),
    "Concatenate": dict(axis=1),
    "Conv1D": dict(filters=2, kernel_size=3, strides=2, padding="same", dilation_rate=1,
                   activation="relu", use_bias=False),
    "Conv2D": dict(filters=2, kernel_size=(3, 3), strides=(1, 1), padding="valid",
                   activation="tanh"),
    "Dense": dict(units=3, activation="relu", use_bias=False, kernel_initializer="zeros"),
    "Dropout": dict(rate=0.25, noise_shape=None, seed=3),
    "Embedding": dict(input_dim=200, output_dim=32, embeddings_initializer="uniform",
                      mask_zero=True),
    "Flatten": dict(data_format=None),
    "GlobalAveragePooling1D": dict(data_format=None, keepdims=True),
    "GRU": dict(units=2, activation="tanh", recurrent_activation="sigmoid", dropout=0.1,
                return_sequences=True, reset_after=True, use_cudnn="auto"),
    "LSTM": dict(units=2, unit_forget_bias=False, return_state=True, go_backwards=True,
                 stateful=False, unroll=False),
    "LayerNormalization": dict(axis=-1, epsilon=1e-5, center=True, scale=False),
    "Masking": dict(mask_value=-1.0),
    "MaxPooling1D": dict(pool_size=2, strides=2, padding="valid"),
    "MaxPooling2D": dict(pool_size=(2, 2)),
    "MultiHeadAttention": dict(num_heads=2, key_dim=4, value_dim=3, dropout=0.1,
                               use_bias=False, output_shape=None, attention_axes=None),
    "Reshape": dict(target_shape=(2, 2)),
    "SimpleRNN": dict(units=3, activation="relu", use_bias=True, return_sequences=True),
}


@pytest.mark.parametrize("name", sorted(KERAS_KEYWORDS))
def test_keras_keyword_names_are_the_config(name):
    kwargs = KERAS_KEYWORDS[name]
    layer = getattr(layers, name)(**kwargs)
    config = layer.get_config()
    for k, v in kwargs.items():
        if k in ("use_cudnn", "stateful", "unroll") or v is None:
            continue  # Keras' defaults, accepted as such
        got = config[k]
        want = list(v) if isinstance(v, tuple) else v
        if k.endswith("_initializer"):  # "uniform" is Keras' alias of RandomUniform
            want = {"uniform": "random_uniform", "zeros": "zeros"}[v]
        if isinstance(got, list) and isinstance(v, int) and not isinstance(v, bool):
            want = [v] * len(got)  # an int size of a 1D layer is stored as a tuple, as Keras
        assert got == want, (name, k, got, want)
    # the same arguments by position, in Keras' order, give the same layer
    order = layers._POSITIONAL[name]
    n = 0
    while n < len(order) and order[n] in kwargs:
        n += 1
    positional = [kwargs[k] for k in order[:n]]
    rest = {k: v for k, v in kwargs.items() if k not in order[:n]}
    again = getattr(layers, name)(*positional, **rest)
    assert config_without_name(again) == config_without_name(layer)


def test_common_positional_spellings():
    assert layers.Dense(4, "relu").get_config()["activation"] == "relu"
    assert layers.Conv2D(8, 3, 2, "same").get_config()["padding"] == "same"
    assert layers.Dropout(0.5, None, 7).get_config()["seed"] == 7
    assert layers.LSTM(3, "relu").get_config()["activation"] == "relu"
    assert layers.BatchNormalization(1).get_config()["axis"] == 1


def test_input_layer_shape_and_batch_size():
    il = layers.InputLayer(shape=(3, 4), batch_size=2)
    assert il.get_config()["batch_shape"] == [2, 3, 4]
    assert layers.InputLayer(shape=(5,)).get_config()["batch_shape"] == [None, 5]


def test_keras_arguments_kiln_lacks_are_refused_unless_default():
    layers.Dense(3, lora_rank=None)  # Keras' default: accepted
    with pytest.raises(kiln.Error, match=r"Dense\(\): argument lora_rank=4 is not supported"):
        layers.Dense(3, lora_rank=4)
    with pytest.raises(kiln.Error, match="use_cudnn=True is not supported"):
        layers.LSTM(3, use_cudnn=True)
    with pytest.raises(kiln.Error, match="weights="):
        layers.Bidirectional(layers.LSTM(2), weights=[np.zeros((2, 2))])
    with pytest.raises(TypeError, match="unexpected keyword"):
        layers.Dense(3, unitz=4)
    with pytest.raises(TypeError, match="positional"):
        layers.Masking(0.0, 1)


def test_embedding_initial_weights():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    e = layers.Embedding(4, 3, weights=[w])
    assert np.array_equal(e(np.array([[2, 0]], np.int32)).numpy(), w[[[2, 0]]])


def test_embedding_casts_float_indices_as_keras_does():
    ids = np.array([[3, 1, 0, 7], [2, 2, 5, 0]])
    emb = layers.Embedding(input_dim=8, output_dim=4, mask_zero=True)
    want = emb(ids.astype(np.int32))
    got = emb(ids.astype(np.float32))
    assert np.array_equal(got.numpy(), want.numpy())
    assert np.array_equal(got._keras_mask.numpy(), ids != 0)
    # the functional model of keras.io's text examples: Input(shape=(4,)) is float32
    inputs = keras.Input(shape=(4,))
    x = layers.Embedding(input_dim=8, output_dim=4)(inputs)
    outputs = layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, outputs)
    table = model.layers[1].get_weights()[0]
    pred = model.predict(ids.astype(np.float32))
    assert np.allclose(pred, table[ids].mean(axis=1), rtol=1e-6, atol=1e-7)
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ids.astype(np.float32), np.zeros((2, 4), np.float32), epochs=1, verbose=0)
    with pytest.raises(kiln.Error, match=r"embedding.*1 of the 8 values.*not whole numbers"):
        emb(np.array([[3, 1.5, 0, 7], [2, 2, 5, 0]], np.float32))
