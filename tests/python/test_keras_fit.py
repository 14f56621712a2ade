"""compile / fit / evaluate / predict from Python: digits against `kiln train`, History,
validation, the progress bar, callbacks written in Python and the built-in ones, losses as
Python functions, optimizers, schedules and a custom training loop with apply_gradients."""
import json
import os
import pathlib
import subprocess

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


def digits_mlp():
    """`kiln train`'s MLP (tools/model_zoo.cc) with its compile settings (train_command.cc)."""
    keras.utils.clear_session()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), layers.Dense(128, activation="relu"),
                              layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def kiln_binary():
    # build/python/kiln/__init__.py -> build/tools/kiln (the build tree the tests run from)
    path = pathlib.Path(kiln.__file__).resolve().parents[2] / "tools" / "kiln"
    return path if path.exists() else None


def test_digits_fit_matches_kiln_train(tmp_path):
    (x, y), (xt, yt) = keras.datasets.digits.load_data()
    assert x.shape == (1438, 64) and x.dtype == np.float32 and y.dtype == np.int64
    assert xt.shape == (359, 64)
    model = digits_mlp()
    history = model.fit(x, y, batch_size=32, epochs=20, seed=0, verbose=0)
    result = model.evaluate(xt, yt, batch_size=256, verbose=0, return_dict=True)
    assert result["accuracy"] > 0.95
    binary = kiln_binary()
    if binary is None:
        pytest.skip("the kiln command-line program is not beside this build of the module")
    report = tmp_path / "train.json"
    subprocess.run([str(binary), "train", "--model", "mlp", "--epochs", "20", "--batch-size",
                    "32", "--seed", "0", "--verbose", "0", "--json", str(report)], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ})
    cli = json.loads(report.read_text())
    # The same C++ code, data, seed and thread count: the same numbers, bit for bit.
    assert history.history["loss"] == cli["runs"][0]["history"]["loss"]
    assert result["accuracy"] == cli["result"]["test_accuracy"]
    assert result["loss"] == cli["result"]["test_loss"]


def small_problem(seed=0, n=48):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    return x, y


def classifier(run_eagerly=False):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), layers.Dense(8, activation="relu"),
                              layers.Dense(2)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], run_eagerly=run_eagerly)
    return model


def test_history_validation_and_progress_bar(capsys):
    x, y = small_problem()
    model = classifier()
    h = model.fit(x, y, epochs=3, batch_size=16, validation_split=0.25, verbose=1)
    out = capsys.readouterr().out  # through Python's sys.stdout
    assert "Epoch 3/3" in out and "val_loss" in out and "━" in out
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(len(v) == 3 for v in h.history.values()) and h.epoch == [0, 1, 2]
    h2 = model.fit(x, y, epochs=1, validation_data=(x[:8], y[:8]), verbose=0)
    assert "val_loss" in h2.history
    assert capsys.readouterr().out == ""  # verbose=0 prints nothing
    # evaluate: the loss first, then the metrics; predict: numpy
    loss, acc = model.evaluate(x, y, verbose=0)
    assert 0 <= acc <= 1 and loss > 0
    logits = model.predict(x)
    assert isinstance(logits, np.ndarray) and logits.shape == (48, 2)
    assert np.isclose(acc, np.mean(np.argmax(logits, 1) == y))


def test_compiled_and_eager_fit_agree():
    x, y = small_problem(2)
    a = classifier(run_eagerly=False).fit(x, y, epochs=2, batch_size=16, verbose=0).history
    b = classifier(run_eagerly=True).fit(x, y, epochs=2, batch_size=16, verbose=0).history
    assert a == b  # docs/training.md: both modes run the same kernels in the same order


def test_python_callback_gets_the_logs():
    class Recorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.events = []

        def on_train_begin(self, logs=None):
            self.events.append(("train_begin", self.params.get("epochs")))

        def on_epoch_begin(self, epoch, logs=None):
            self.events.append(("epoch_begin", epoch))

        def on_train_batch_end(self, batch, logs=None):
            self.events.append(("batch_end", batch, sorted(logs)))

        def on_epoch_end(self, epoch, logs=None):
            self.events.append(("epoch_end", epoch, dict(logs)))

        def on_train_end(self, logs=None):
            self.events.append(("train_end",))

    x, y = small_problem()
    model = classifier()
    rec = Recorder()
    h = model.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, verbose=0,
                  callbacks=[rec])
    kinds = [e[0] for e in rec.events]
    assert kinds[0] == "train_begin" and rec.events[0][1] == 2 and kinds[-1] == "train_end"
    assert kinds.count("batch_end") == 2 * 3  # 36 training rows in batches of 16
    assert [e for e in rec.events if e[0] == "batch_end"][0][2] == ["accuracy", "loss"]
    ends = [e for e in rec.events if e[0] == "epoch_end"]
    assert [e[1] for e in ends] == [0, 1]
    for epoch, (_, _, logs) in enumerate(ends):
        assert sorted(logs) == ["accuracy", "loss", "val_accuracy", "val_loss"]
        for k, v in logs.items():
            assert v == h.history[k][epoch]


def test_callback_stops_training_and_builtin_callbacks(tmp_path):
    class StopAfterOne(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = True

    x, y = small_problem()
    model = classifier()
    h = model.fit(x, y, epochs=5, verbose=0, callbacks=[StopAfterOne()])
    assert len(h.history["loss"]) == 1

    csv = tmp_path / "log.csv"
    ckpt = tmp_path / "ckpt_{epoch:02d}.safetensors"
    es = keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=1e9)
    h = classifier().fit(x, y, epochs=4, verbose=0, callbacks=[
        es, keras.callbacks.CSVLogger(str(csv)), keras.callbacks.ModelCheckpoint(str(ckpt),
                                                                               monitor="loss")])
    assert len(h.history["loss"]) == 2 and es.stopped_epoch == 1
    rows = csv.read_text().strip().splitlines()
    assert rows[0].split(",")[0] == "epoch" and len(rows) == 3
    assert (tmp_path / "ckpt_01.safetensors").exists()
    assert (tmp_path / "ckpt_02.safetensors").exists()

    rates = []
    sched = keras.callbacks.LearningRateScheduler(
        lambda epoch, lr: rates.append(lr) or 0.5 ** epoch)
    model = classifier()
    model.fit(x, y, epochs=3, verbose=0, callbacks=[sched])
    assert rates[1:] == [1.0, 0.5] and model.optimizer.learning_rate == 0.25


def test_python_loss_function_and_optimizer_objects():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    calls = []

    def half_squared(y_true, y_pred):
        calls.append(1)
        return kiln.ops.mean((y_true - y_pred) ** 2.0 * 0.5, axes=[-1], keepdims=False)

    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), layers.Dense(1, use_bias=False)])
    opt = keras.optimizers.SGD(learning_rate=0.1, momentum=0.5)
    assert opt.get_hyperparameter("momentum") == 0.5 and isinstance(opt, keras.optimizers.Optimizer)
    model.compile(optimizer=opt, loss=half_squared)
    before = model.get_weights()[0].astype(np.float64)
    model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    after = model.get_weights()[0].astype(np.float64)
    # one full-batch step: w -= lr * x^T (x w - y) / n
    grad = x.T.astype(np.float64) @ (x @ before - y) / 32
    assert np.allclose(after, before - 0.1 * grad, rtol=1e-5, atol=1e-6)
    assert opt.iterations == 1 and len(calls) >= 1
    model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    traced_calls = len(calls)
    assert traced_calls <= 3  # Python runs while tracing, not at each of the 12 steps
    opt.learning_rate = 0.01
    assert opt.learning_rate == 0.01

    sched = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    adam = keras.optimizers.Adam(learning_rate=sched)
    assert sched(2) == pytest.approx(0.025)
    model.compile(optimizer=adam, loss="mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert adam.iterations == 2 and adam.learning_rate == pytest.approx(0.025)


def test_custom_training_loop_with_variables_and_apply_gradients():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((16, 2)).astype(np.float32)
    y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    w = kiln.Variable(np.zeros((2, 1), np.float32), name="w")
    b = kiln.Variable(np.zeros((1,), np.float32), name="b")
    opt = keras.optimizers.SGD(learning_rate=0.1)

    @kiln.function
    def step(x, y):
        with kiln.GradientTape() as tape:
            loss = kiln.ops.mean((x @ w + b - y) ** 2.0, axes=[0, 1], keepdims=False)
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [w, b]))
        return loss

    losses = [float(step(x, y)) for _ in range(200)]
    assert step.tracing_count == 1 and losses[-1] < 1e-4 < losses[0]
    assert np.allclose(w.numpy().ravel(), [2.0, -1.0], atol=1e-2)
    assert opt.iterations == 200


def test_python_schedule_is_traced_into_the_step():
    x, y = small_problem(7, n=32)
    model = classifier()
    seen = []

    def inverse_time(step):
        seen.append(step.dtype)
        return 0.1 / (1.0 + step)

    opt = keras.optimizers.SGD(learning_rate=inverse_time)
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert opt.iterations == 8 and opt.learning_rate == pytest.approx(0.1 / 9)
    assert seen and len(seen) <= 2 and seen[0] == "float64"  # traced, not called per step


def test_keras_layers_in_a_kiln_function_training_loop():
    keras.utils.set_random_seed(8)
    dense = layers.Dense(1)
    dense(np.zeros((1, 2), np.float32))  # build before tracing: variables exist up front
    opt = keras.optimizers.Adam(learning_rate=0.05)
    loss_fn = keras.losses.MeanSquaredError()
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 2)).astype(np.float32)
    y = x @ np.array([[1.5], [-0.5]], np.float32)

    @kiln.function
    def step(x, y):
        with kiln.GradientTape() as tape:
            loss = loss_fn(y, dense(x, training=True))
        grads = tape.gradient(loss, dense.trainable_weights)
        opt.apply_gradients(zip(grads, dense.trainable_weights))
        return loss

    first = float(step(x, y))
    for _ in range(150):
        last = float(step(x, y))
    assert step.tracing_count == 1 and last < 1e-3 * first
    kernel = dense.get_weights()[0].ravel()
    assert np.allclose(kernel, [1.5, -0.5], atol=0.05)
    ir = step.concrete(x, y).ir()
    assert '"dense' in ir and "kernel" in ir  # the layer's variables are the graph's


def test_ctrl_c_interrupts_fit():
    import signal
    import threading
    import time

    x, y = small_problem(9, n=16)
    model = classifier()
    timer = threading.Timer(0.3, signal.raise_signal, args=(signal.SIGINT,))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(x, y, batch_size=4, epochs=1_000_000, verbose=0)  # hours if not stopped
    finally:
        timer.cancel()
    assert time.monotonic() - start < 60
    assert model.optimizer.iterations > 0  # it trained until interrupted
    assert np.isfinite(model.evaluate(x, y, verbose=0, return_dict=True)["loss"])  # usable
