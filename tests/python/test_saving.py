"""model.save / kiln.keras.models.load_model from Python: bitwise round trips of weights,
predictions and the optimizer state (training continues as if uninterrupted), layers written
in Python through custom_objects, weights files, and errors."""
import numpy as np
import pytest

import kiln
from kiln import keras
from kiln.keras import layers


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same layer names and global seed (initializers, dropout)."""
    keras.utils.clear_session()
    keras.utils.set_random_seed(1234)


class Shift(keras.layers.Layer):
    def __init__(self, amount=0.0, **kwargs):
        super().__init__(**kwargs)
        self.amount = amount

    def build(self, input_shape):
        self.offset = self.add_weight(shape=(input_shape[-1],), initializer="random_normal",
                                      name="offset")

    def call(self, inputs):
        return inputs + self.offset + self.amount

    def get_config(self):
        return {**super().get_config(), "amount": self.amount}


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((40, 5)).astype(np.float32)
    y = (x.sum(1) > 0).astype(np.int64)
    return x, y


def weights_equal(a, b):
    wa, wb = a.get_weights(), b.get_weights()
    return len(wa) == len(wb) and all(
        u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()
        for u, v in zip(wa, wb))


def test_sequential_round_trip_and_resumed_training(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), layers.Dense(8, activation="relu"),
                              layers.BatchNormalization(), layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    x, y = data()
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    path = tmp_path / "model.kiln"
    model.save(str(path))
    loaded = keras.models.load_model(path)
    assert type(loaded) is keras.Sequential and loaded.compiled
    assert [type(layer).__name__ for layer in loaded.layers] == ["Dense", "BatchNormalization",
                                                                "Dense"]
    assert weights_equal(model, loaded)
    assert model.predict(x).tobytes() == loaded.predict(x).tobytes()
    assert loaded.optimizer.iterations == model.optimizer.iterations == 10
    # both continue exactly alike (same optimizer slots, same shuffling seed)
    h1 = model.fit(x, y, epochs=3, initial_epoch=2, batch_size=8, verbose=0, seed=4)
    h2 = loaded.fit(x, y, epochs=3, initial_epoch=2, batch_size=8, verbose=0, seed=4)
    assert h1.history == h2.history and weights_equal(model, loaded)

    fresh = keras.models.load_model(path, compile=False)
    assert not fresh.compiled


def test_python_layer_round_trip_with_custom_objects(tmp_path):
    keras.utils.set_random_seed(1)
    inp = keras.Input((5,))
    out = layers.Dense(3)(Shift(amount=0.25, name="shift")(inp))
    model = keras.Model(inp, out)
    model.compile(optimizer="sgd", loss="mse")
    x, _ = data(1)
    model.fit(x, np.zeros((40, 3), np.float32), epochs=1, verbose=0)
    path = tmp_path / "functional.kiln"
    model.save(str(path))

    with pytest.raises(kiln.Error, match="Shift"):
        keras.models.load_model(path)

    loaded = keras.models.load_model(path, custom_objects={"Shift": Shift})
    shift = loaded.get_layer("shift")
    assert type(shift) is Shift and shift.amount == 0.25
    assert weights_equal(model, loaded)
    assert model.predict(x).tobytes() == loaded.predict(x).tobytes()
    loaded.fit(x, np.zeros((40, 3), np.float32), epochs=1, verbose=0)  # still trainable


def test_weights_files(tmp_path):
    keras.utils.set_random_seed(2)
    a = keras.Sequential([keras.Input((5,)), layers.Dense(4, name="d1"),
                          layers.Dense(1, name="d2")])
    keras.utils.set_random_seed(3)
    b = keras.Sequential([keras.Input((5,)), layers.Dense(4, name="d1"),
                          layers.Dense(1, name="d2")])
    assert not weights_equal(a, b)
    f = tmp_path / "w.safetensors"
    a.save_weights(str(f))
    b.load_weights(str(f))
    assert weights_equal(a, b)


def test_load_errors(tmp_path):
    with pytest.raises(kiln.Error, match="nothing_here"):
        keras.models.load_model(tmp_path / "nothing_here")
    (tmp_path / "not_a_model").mkdir()
    with pytest.raises(kiln.Error):
        keras.models.load_model(tmp_path / "not_a_model")
