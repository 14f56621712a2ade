"""kiln.keras layers from Python: classes generated from the C++ registry, outputs against
float64 numpy references (tolerances from the magnitudes involved), weights as Variables,
get/set_weights, Sequential and functional models, summaries, and errors."""
import numpy as np
import pytest

import kiln
from kiln import _kiln, keras
from kiln.keras import layers

EPS = np.finfo(np.float32).eps


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same layer names and global seed (initializers, dropout)."""
    keras.utils.clear_session()
    keras.utils.set_random_seed(1234)


def close(got, want, scale, terms):
    """float32 result against a float64 reference: `terms` roundings of values of size
    `scale` (elementwise) each."""
    bound = 4 * terms * EPS * (np.asarray(scale, np.float64) + 1e-30)
    assert got.shape == want.shape
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound), \
        np.max(np.abs(np.asarray(got, np.float64) - want) - bound)


def test_every_registry_class_is_a_python_class():
    for name in _kiln._builtin_layer_classes():
        if name in ("Sequential", "Functional"):
            continue
        assert issubclass(getattr(layers, name), layers.Layer), name
        assert name in layers.__all__
    for name in ["Dense", "Conv2D", "MaxPooling2D", "Flatten", "Dropout", "BatchNormalization",
                 "LayerNormalization", "Embedding", "LSTM", "GRU"]:
        assert hasattr(layers, name)


def test_dense_against_numpy_and_weights_are_variables():
    rng = np.random.default_rng(0)
    d = layers.Dense(4, activation="relu", name="d_np")
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = d(x).numpy()
    kernel, bias = d.weights
    assert isinstance(kernel, kiln.Variable) and kernel.name == "d_np/kernel"
    assert [w.name for w in d.trainable_weights] == ["d_np/kernel", "d_np/bias"]
    assert d.non_trainable_weights == []
    k, b = (w.numpy().astype(np.float64) for w in d.weights)
    ref = np.maximum(x.astype(np.float64) @ k + b, 0)
    close(y, ref, np.abs(x) @ np.abs(k) + np.abs(b), 4)
    assert d.count_params() == 3 * 4 + 4
    assert isinstance(d, layers.Dense) and isinstance(d, keras.Layer)


def test_get_and_set_weights_with_numpy():
    d = layers.Dense(2)
    d(np.zeros((1, 3), np.float32))
    new = [np.arange(6, dtype=np.float32).reshape(3, 2), np.array([1.0, -1.0], np.float32)]
    d.set_weights(new)
    got = d.get_weights()
    assert all(np.array_equal(g, n) for g, n in zip(got, new))
    got[0][0, 0] = 99.0  # a copy: the layer is unchanged
    assert d.get_weights()[0][0, 0] == 0.0
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    assert np.array_equal(d(x).numpy(), x @ new[0] + new[1])
    with pytest.raises(kiln.Error):
        d.set_weights([np.zeros((2, 2), np.float32), new[1]])


def test_conv_pool_flatten_against_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 6, 2)).astype(np.float32)
    conv = layers.Conv2D(3, (3, 3), padding="valid")
    y = conv(x).numpy()
    k, b = (w.numpy().astype(np.float64) for w in conv.weights)
    ref = np.zeros((2, 4, 4, 3))
    scale = np.zeros((2, 4, 4, 3))
    for i in range(4):
        for j in range(4):
            patch = x[:, i:i + 3, j:j + 3, :].astype(np.float64)
            ref[:, i, j, :] = np.einsum("nhwc,hwcf->nf", patch, k) + b
            scale[:, i, j, :] = np.einsum("nhwc,hwcf->nf", np.abs(patch), np.abs(k)) + np.abs(b)
    close(y, ref, scale, 19)
    pooled = layers.MaxPooling2D((2, 2))(y).numpy()
    assert np.array_equal(pooled, y.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4)))
    flat = layers.Flatten()(pooled).numpy()
    assert np.array_equal(flat, pooled.reshape(2, -1))


def test_normalization_embedding_dropout():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 6)) * 3 + 1).astype(np.float32)
    ln = layers.LayerNormalization(epsilon=1e-3)
    y = ln(x).numpy()
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-3)
    close(y, ref, np.abs(ref) + 1, 20)

    bn = layers.BatchNormalization()
    yb = bn(x, training=True).numpy()
    refb = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + 1e-3)
    close(yb, refb, np.abs(refb) + 1, 20)
    assert len(bn.non_trainable_weights) == 2  # moving mean and variance

    emb = layers.Embedding(10, 3)
    ids = np.array([[1, 4], [9, 0]], np.int64)
    table = emb.weights  # built lazily: nothing yet
    out = emb(ids).numpy()
    table = emb.weights[0].numpy()
    assert np.array_equal(out, table[ids])

    drop = layers.Dropout(0.5)
    ones = np.ones((100, 10), np.float32)
    assert np.array_equal(drop(ones).numpy(), ones)  # inference: identity
    t = drop(ones, training=True).numpy()
    assert set(np.unique(t)) <= {0.0, 2.0} and 0.3 < (t == 0).mean() < 0.7


def test_lstm_gru_shapes():
    x = np.random.default_rng(3).standard_normal((2, 5, 3)).astype(np.float32)
    assert layers.LSTM(4)(x).shape == (2, 4)
    assert layers.GRU(4, return_sequences=True)(x).shape == (2, 5, 4)


def test_sequential_functional_and_summary(capsys):
    seq = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu", name="h"),
                            layers.Dense(3, name="out")], name="seq")
    seq.summary()
    text = capsys.readouterr().out
    assert 'Model: "seq"' in text and "(None, 16)" in text and "Total params: 195" in text
    assert [type(layer).__name__ for layer in seq.layers] == ["Dense", "Dense"]
    assert seq.get_layer("out").name == "out"
    assert len(seq.weights) == 4 and all(isinstance(w, kiln.Variable) for w in seq.weights)

    a = keras.Input((4,), name="a")
    b = keras.Input((4,), name="b")
    h = layers.Add()([layers.Dense(5, name="da")(a), layers.Dense(5, name="db")(b)])
    model = keras.Model([a, b], layers.Dense(2, name="head")(h), name="two_inputs")
    assert isinstance(model, keras.Model) and type(model).__name__ == "Functional"
    assert model.input_names == ["a", "b"] and model.output_names == ["head"]
    xa = np.ones((3, 4), np.float32)
    y = model.predict([xa, 2 * xa])
    assert y.shape == (3, 2)
    # the same computation by hand from the layers' weights
    da, db, head = (model.get_layer(n) for n in ("da", "db", "head"))
    ka, ba = da.get_weights()
    kb, bb = db.get_weights()
    kh, bh = head.get_weights()
    ref = ((xa @ ka + ba) + (2 * xa @ kb + bb)).astype(np.float64) @ kh + bh
    close(y, ref, np.abs(ref) + 10, 16)
    model.summary(print_fn=lambda s: None)

    # Keras 2's input_shape on the first layer builds the model as well
    seq2 = keras.Sequential([layers.Dense(4, input_shape=(3,)), layers.Dense(1)])
    assert seq2.built and seq2.count_params() == 3 * 4 + 4 + 4 + 1


def test_errors_are_kiln_errors_with_the_cpp_message():
    # Activations and initializers go by name: a Python callable is refused, saying so.
    with pytest.raises(TypeError, match="'activation' is a Python callable"):
        keras.layers.Dense(4, activation=lambda x: x)
    with pytest.raises(TypeError, match="unexpected keyword"):
        layers.Dense(3, activaton="relu")
    with pytest.raises(kiln.Error, match="units"):
        layers.Dense()
    with pytest.raises(kiln.Error, match="activation"):
        layers.Dense(3, activation="no_such_activation")
    d = layers.Dense(3)
    d(np.ones((2, 4), np.float32))
    with pytest.raises(kiln.Error, match="dense"):
        d(np.ones((2, 5), np.float32))  # built for 4 features
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    with pytest.raises(kiln.Error, match="no_such_loss"):
        model.compile(optimizer="adam", loss="no_such_loss")
    with pytest.raises(kiln.Error, match="no_such_optimizer"):
        model.compile(optimizer="no_such_optimizer", loss="mse")
    with pytest.raises(kiln.Error, match="no_such_metric"):
        model.compile(optimizer="adam", loss="mse", metrics=["no_such_metric"])


def test_serialize_deserialize_and_more_errors():
    d = layers.Dense(3, activation="tanh", name="ser")
    spec = layers.serialize(d)
    assert spec["class_name"] == "Dense" and spec["config"]["units"] == 3
    back = layers.deserialize(spec)
    assert type(back) is layers.Dense and back.get_config()["activation"] == "tanh"
    with pytest.raises(kiln.Error, match="NoSuchLayer"):
        layers.deserialize({"class_name": "NoSuchLayer", "config": {}})
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(kiln.Error, match="same number of examples"):
        model.fit(np.ones((5, 4), np.float32), np.ones((4, 2), np.float32), verbose=0)
    with pytest.raises(kiln.Error, match="expected axis -1 of input shape to have value 4"):
        model.predict(np.ones((3, 7), np.float32))
