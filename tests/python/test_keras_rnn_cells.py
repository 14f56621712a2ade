"""layers.RNN with LSTMCell / GRUCell / SimpleRNNCell, fit(steps_per_epoch=) on arrays, and
Variable.path, written as Keras users write them. RNN(cell) is checked against the layer of
the cell's kind with the same weights (the same loop: equal bit for bit), a cell stepped by
hand against a numpy LSTM, and steps_per_epoch against train_on_batch on the batches Keras'
schedule names."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import keras
from kiln.keras import layers

EPS = np.finfo(np.float32).eps


@pytest.fixture(autouse=True)
def seeded():
    keras.utils.clear_session()
    keras.utils.set_random_seed(3)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


@pytest.mark.parametrize("cell_cls,layer_cls", [(layers.LSTMCell, layers.LSTM),
                                                (layers.GRUCell, layers.GRU),
                                                (layers.SimpleRNNCell, layers.SimpleRNN)])
def test_rnn_of_a_cell_is_the_layer_of_its_kind(cell_cls, layer_cls):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    cell = cell_cls(4)
    rnn = layers.RNN(cell, return_sequences=True, return_state=True)
    assert rnn.cell is cell
    layer = layer_cls(4, return_sequences=True, return_state=True)
    want = layer(x)
    rnn.build((None, 5, 3))
    rnn.set_weights(layer.get_weights())
    got = rnn(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert [v.path for v in rnn.weights] == [f"{cell.name}/kernel", f"{cell.name}/recurrent_kernel",
                                             f"{cell.name}/bias"]
    # The cell's weights are the RNN's (Keras: rnn.cell is the cell).
    np.testing.assert_array_equal(cell.get_weights()[0], layer.get_weights()[0])


def test_lstm_cell_stepped_by_hand_matches_numpy():
    rng = np.random.default_rng(1)
    units, features = 3, 2
    cell = layers.LSTMCell(units)
    assert cell.state_size == [units, units] and cell.output_size == units
    x = rng.standard_normal((4, features)).astype(np.float32)
    h = rng.standard_normal((4, units)).astype(np.float32)
    c = rng.standard_normal((4, units)).astype(np.float32)
    out, (h1, c1) = cell(x, [h, c])
    k, r, b = [w.astype(np.float64) for w in cell.get_weights()]
    z = x @ k + h @ r + b
    i, f, g, o = (z[:, j * units:(j + 1) * units] for j in range(4))
    c_want = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h_want = sigmoid(o) * np.tanh(c_want)
    # A gate sums features + units + 1 float32 products of magnitude <= max|z terms|.
    bound = 8 * (features + units + 1) * EPS * (np.abs(x) @ np.abs(k) + np.abs(h) @ np.abs(r)
                                                + np.abs(b)).max()
    assert np.max(np.abs(np.asarray(c1) - c_want)) <= 2 * bound
    assert np.max(np.abs(np.asarray(h1) - h_want)) <= 2 * bound
    np.testing.assert_array_equal(np.asarray(out), np.asarray(h1))
    gru = layers.GRUCell(units)
    assert gru.state_size == units
    out, states = gru(x, [h])
    assert isinstance(states, list) and len(states) == 1
    out, state = gru(x, h)  # a single state tensor in, a tensor out (Keras)
    assert isinstance(state, kiln.Tensor)


def test_rnn_in_a_model_with_masking_trains_and_round_trips_its_config():
    rng = np.random.default_rng(2)
    tokens = rng.integers(1, 20, size=(16, 7))
    tokens[:, 5:] = 0
    y = rng.integers(0, 2, size=(16,))
    model = keras.Sequential([layers.Embedding(20, 8, mask_zero=True),
                              layers.RNN(layers.GRUCell(6, dropout=0.1)),
                              layers.Dense(2)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(tokens, y, epochs=3, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    rnn = model.layers[1]
    config = layers.serialize(rnn)
    assert config["class_name"] == "RNN"
    assert config["config"]["cell"]["class_name"] == "GRUCell"
    again = layers.deserialize(config)
    assert layers.serialize(again) == config


def test_bad_cells_are_clear_errors():
    class MyCell(layers.Layer):
        def call(self, x):
            return x

    with pytest.raises(kiln.Error, match="must be a SimpleRNNCell, LSTMCell or GRUCell"):
        layers.RNN(MyCell())
    with pytest.raises(kiln.Error, match="StackedRNNCells"):
        layers.RNN([layers.LSTMCell(2), layers.LSTMCell(2)])
    with pytest.raises(kiln.Error, match="stateful"):
        layers.RNN(layers.LSTMCell(2), stateful=True)
    cell = layers.LSTMCell(2)
    with pytest.raises(TypeError, match="states"):
        cell(np.zeros((1, 3), np.float32))


def small_model():
    keras.utils.clear_session()
    keras.utils.set_random_seed(5)
    model = keras.Sequential([layers.Input((3,)), layers.Dense(4, activation="tanh"),
                              layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_steps_per_epoch_continues_one_pass_across_epochs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 3)).astype(np.float32)
    y = rng.integers(0, 2, size=(10,))
    fitted = small_model()
    with warnings.catch_warnings(record=True):
        history = fitted.fit(x, y, batch_size=2, epochs=4, steps_per_epoch=2, shuffle=False,
                             verbose=0)
    assert len(history.history["loss"]) == 4
    by_hand = small_model()
    for b in [0, 1, 2, 3, 4, 0, 1]:  # Keras' schedule: 5 batches per pass, 2 per epoch
        by_hand.train_on_batch(x[2 * b:2 * b + 2], y[2 * b:2 * b + 2])
    for a, b in zip(fitted.get_weights(), by_hand.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_steps_per_epoch_without_batch_size_makes_one_pass():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 3)).astype(np.float32)
    y = rng.integers(0, 2, size=(12,))
    fitted = small_model()
    fitted.fit(x, y, epochs=1, steps_per_epoch=3, shuffle=False, verbose=0)  # batches of 4
    by_hand = small_model()
    for b in range(3):
        by_hand.train_on_batch(x[4 * b:4 * b + 4], y[4 * b:4 * b + 4])
    for a, b in zip(fitted.get_weights(), by_hand.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(kiln.Error, match="steps_per_epoch must be at least 1"):
        fitted.fit(x, y, steps_per_epoch=0, verbose=0)
