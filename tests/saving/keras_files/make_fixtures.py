"""Makes the Keras 3 fixtures of tests/saving/keras_file_test.cc and
tests/python/test_keras_files.py: six small models saved by Keras as .keras files, each with
an input (<name>.x*.npy) and Keras' predictions for it (<name>.y.npy).

Run with Keras 3 on JAX (scripts/make-keras-venv.sh builds the environment):
    KERAS_BACKEND=jax ../kerasvenv/bin/python tests/saving/keras_files/make_fixtures.py [NAME...]
The tests themselves never import Keras. Every model is compiled and trained one step, so its
file holds the optimizer's variables too.
"""
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def save(name, model, xs, y_train):
    model.train_on_batch(xs if len(xs) > 1 else xs[0], y_train)
    model.save(HERE / f"{name}.keras")
    y = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    for i, x in enumerate(xs):
        np.save(HERE / f"{name}.x{i}.npy", x)
    np.save(HERE / f"{name}.y.npy", np.asarray(y))
    print(f"{name}: inputs {[x.shape for x in xs]}, output {np.asarray(y).shape}")


def mlp(rng):
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(4, activation="tanh"), layers.Dense(3)], name="mlp")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    x = rng.standard_normal((5, 6)).astype(np.float32)
    save("mlp", model, [x], rng.standard_normal((5, 3)).astype(np.float32))


def two_inputs(rng):
    a = keras.Input((4,), name="a")
    b = keras.Input((3,), name="b")
    ha = layers.Dense(5, activation="relu", name="ha")(a)
    hb = layers.Dense(5, activation="sigmoid", name="hb")(b)
    h = layers.Concatenate(name="cat")([ha, hb])
    s = layers.Add(name="add")([ha, hb])
    h = layers.Concatenate(name="cat2")([h, s])
    out = layers.Dense(2, activation="softmax", name="out")(h)
    model = keras.Model([a, b], out, name="two_inputs")
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    xa = rng.standard_normal((5, 4)).astype(np.float32)
    xb = rng.standard_normal((5, 3)).astype(np.float32)
    save("two_inputs", model, [xa, xb], rng.integers(0, 2, (5,)).astype(np.int32))


def lstm_masked(rng):
    model = keras.Sequential([keras.Input((7,), dtype="int32"),
                              layers.Embedding(20, 6, mask_zero=True),
                              layers.LSTM(5),
                              layers.Dense(1, activation="sigmoid")], name="lstm_masked")
    model.compile(optimizer=keras.optimizers.RMSprop(0.01), loss="binary_crossentropy")
    x = rng.integers(1, 20, (4, 7)).astype(np.int32)
    x[0, 5:] = 0
    x[1, 2:] = 0
    x[2, 6:] = 0
    save("lstm_masked", model, [x], rng.integers(0, 2, (4, 1)).astype(np.float32))


def attention(rng):
    inp = keras.Input((6, 8), name="tokens")
    att = layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")(inp, inp)
    h = layers.Add(name="residual")([inp, att])
    h = layers.LayerNormalization(name="norm")(h)
    h = layers.Dense(8, activation="gelu", name="ffn")(h)
    h = layers.GlobalAveragePooling1D(name="pool")(h)
    out = layers.Dense(3, name="out")(h)
    model = keras.Model(inp, out, name="attention")
    model.compile(optimizer=keras.optimizers.AdamW(0.01), loss="mse")
    x = rng.standard_normal((3, 6, 8)).astype(np.float32)
    save("attention", model, [x], rng.standard_normal((3, 3)).astype(np.float32))


def cnn(rng):
    model = keras.Sequential([keras.Input((8, 8, 2)),
                              layers.Conv2D(4, (3, 3), activation="relu", padding="same"),
                              layers.MaxPooling2D((2, 2)),
                              layers.Conv2D(3, (3, 3), activation="relu"),
                              layers.Flatten(),
                              layers.Dense(5, activation="softmax")], name="cnn")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="categorical_crossentropy",
                  metrics=["accuracy"])
    x = rng.standard_normal((3, 8, 8, 2)).astype(np.float32)
    y = np.eye(5, dtype=np.float32)[rng.integers(0, 5, (3,))]
    save("cnn", model, [x], y)


def rnn_cells(rng):
    keras.utils.set_random_seed(41)  # its own seeds: made alone, the others stay as they are
    rng = np.random.default_rng(41)
    model = keras.Sequential([keras.Input((5, 3)),
                              layers.RNN(layers.GRUCell(4), return_sequences=True),
                              layers.RNN(layers.LSTMCell(3), go_backwards=True),
                              layers.Dense(2)], name="rnn_cells")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    save("rnn_cells", model, [x], rng.standard_normal((2, 2)).astype(np.float32))


def mlp_mixed_bf16(rng):
    """An MLP made under the global "mixed_bfloat16" policy: float32 variables, bfloat16
    outputs; its config holds Keras 3's DTypePolicy entries. y.npy holds the bfloat16
    predictions widened to float32 (exact)."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                                  layers.Dense(3)], name="mlp_mixed_bf16")
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        x = rng.standard_normal((5, 6)).astype(np.float32)
        model.train_on_batch(x, rng.standard_normal((5, 3)).astype(np.float32))
        model.save(HERE / "mlp_mixed_bf16.keras")
        y = np.asarray(model.predict(x, verbose=0))
        assert str(y.dtype) == "bfloat16", y.dtype
        np.save(HERE / "mlp_mixed_bf16.x0.npy", x)
        np.save(HERE / "mlp_mixed_bf16.y.npy", y.astype(np.float32))
        print(f"mlp_mixed_bf16: output {y.shape} {y.dtype}")
    finally:
        keras.mixed_precision.set_global_policy("float32")


def main(names=()):
    keras.utils.set_random_seed(37)
    rng = np.random.default_rng(37)
    for make in (mlp, two_inputs, lstm_masked, attention, cnn, rnn_cells, mlp_mixed_bf16):
        if not names or make.__name__ in names:
            make(rng)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])  # names of the fixtures to make (all when none)
