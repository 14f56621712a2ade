"""train_on_batch / test_on_batch return what Keras returns; Adam(amsgrad=True) against a
numpy AMSGrad over several steps (eager apply_gradients and compiled fit);
SparseCategoricalCrossentropy(ignore_class=...) against a numpy loss."""
import numpy as np
import pytest

from kiln import keras
from kiln.keras import layers

EPS = np.finfo(np.float32).eps


@pytest.fixture(autouse=True)
def seeded():
    keras.utils.clear_session()
    keras.utils.set_random_seed(5)


def data(n=8):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 4, n)


def test_train_and_test_on_batch_return_keras_forms():
    x, y = data()
    model = keras.Sequential([keras.Input((3,)), layers.Dense(4)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = model.test_on_batch(x, y)
    assert isinstance(before, float)
    logits = model.predict(x).astype(np.float64)
    want = np.mean(np.log(np.exp(logits).sum(1)) - logits[np.arange(8), y])
    assert abs(before - want) <= 64 * EPS * (1 + abs(want))
    loss = model.train_on_batch(x, y)
    assert isinstance(loss, float) and abs(loss - before) <= 64 * EPS * (1 + abs(want))
    assert model.test_on_batch(x, y) < before  # the step trained
    assert set(model.train_on_batch(x, y, return_dict=True)) == {"loss"}
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True),
                  metrics=["accuracy"])
    out = model.test_on_batch(x, y)
    assert isinstance(out, list) and len(out) == 2
    acc = np.mean(np.argmax(model.predict(x), 1) == y)
    assert out[1] == pytest.approx(acc)
    d = model.test_on_batch(x, y, return_dict=True)
    assert d == {"loss": out[0], "accuracy": out[1]}


def test_batch_results_follow_the_compile_order_of_the_metrics():
    # Keras lists the loss, then the metrics in the order compile was given them (not by name).
    x, y = data()
    model = keras.Sequential([keras.Input((3,)), layers.Dense(4)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    names = ["sparse_top_k_categorical_accuracy", "sparse_categorical_accuracy"]
    for metrics in (names, names[::-1]):
        model.compile(optimizer="sgd", loss=loss, metrics=metrics)
        d = model.test_on_batch(x, y, return_dict=True)
        assert d[names[0]] == 1.0 and d[names[1]] < 1.0  # top-5 of 4 classes; the order shows
        want = [d["loss"]] + [d[m] for m in metrics]
        assert model._log_keys() == ["loss"] + metrics
        assert model.test_on_batch(x, y) == want
        assert model.evaluate(x, y, verbose=0) == want
        trained = model.train_on_batch(x, y)  # the metrics of the batch before the update
        assert trained[1:] == pytest.approx(want[1:]) and trained[0] == pytest.approx(want[0])


def numpy_amsgrad(w, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-7):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    vhat = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        m += (g - m) * (1 - b1)
        v += (g * g - v) * (1 - b2)
        vhat = np.maximum(vhat, v)
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        w = w - alpha * m / (np.sqrt(vhat) + eps)
    return w, vhat


def test_adam_amsgrad_against_numpy():
    import kiln
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    var = kiln.Variable(w0.copy())
    # gradients that shrink (and a short beta_2), so the velocity falls below its maximum
    grads = [np.array([1.0, -2.0, 0.5]) * s for s in (3.0, 1.0, 0.2, 0.1, 0.05)]
    opt = keras.optimizers.Adam(learning_rate=0.01, beta_2=0.5, amsgrad=True)
    assert opt.get_config()["amsgrad"] is True
    for g in grads:
        opt.apply_gradients([(g.astype(np.float32), var)])
    want, vhat = numpy_amsgrad(w0.astype(np.float64), grads, b2=0.5)
    assert np.max(np.abs(var.numpy() - want)) <= 64 * 5 * EPS * (1 + np.max(np.abs(want)))
    plain = kiln.Variable(w0.copy())
    adam = keras.optimizers.Adam(learning_rate=0.01, beta_2=0.5)
    for g in grads:
        adam.apply_gradients([(g.astype(np.float32), plain)])
    assert np.max(np.abs(plain.numpy() - want)) > 1e-4  # amsgrad changed the result
    hats = [v for v in opt.variables if "velocity_hat" in v.name]
    assert len(hats) == 1 and np.allclose(hats[0].numpy(), vhat, rtol=1e-5)


def test_amsgrad_in_compiled_fit_equals_eager_steps():
    x, y = data()
    yf = np.eye(4, dtype=np.float32)[y]

    def make():
        keras.utils.clear_session()
        keras.utils.set_random_seed(3)
        m = keras.Sequential([keras.Input((3,)), layers.Dense(4)])
        m.compile(optimizer=keras.optimizers.Adam(0.05, amsgrad=True), loss="mse")
        return m

    compiled = make()
    compiled.fit(x, yf, batch_size=8, epochs=4, shuffle=False, verbose=0)
    eager = make()
    eager.compile(optimizer=keras.optimizers.Adam(0.05, amsgrad=True), loss="mse",
                  run_eagerly=True)
    eager.fit(x, yf, batch_size=8, epochs=4, shuffle=False, verbose=0)
    for a, b in zip(compiled.get_weights(), eager.get_weights()):
        assert np.max(np.abs(a - b)) <= 64 * EPS * (1 + np.max(np.abs(b)))


def test_sparse_categorical_crossentropy_ignore_class_against_numpy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 5, 4)).astype(np.float32)
    labels = np.array([[1, -1, 3, 0, -1], [2, 2, -1, 1, 3]])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    got = float(loss(labels, logits).numpy())
    lg = logits.astype(np.float64)
    lse = np.log(np.exp(lg).sum(-1))
    keep = labels != -1
    per = lse - np.take_along_axis(lg, np.where(keep, labels, 0)[..., None], -1)[..., 0]
    want = per[keep].sum() / keep.sum()
    assert abs(got - want) <= 64 * EPS * (1 + abs(want))
    # sample weights multiply the kept values; the ignored ones still count for nothing
    sw = np.array([2.0, 0.5], np.float32)
    got_w = float(loss(labels, logits, sample_weight=sw).numpy())
    want_w = (per * sw[:, None])[keep].sum() / keep.sum()
    assert abs(got_w - want_w) <= 64 * EPS * (1 + abs(want_w))
    # saved in the compile config
    model = keras.Sequential([keras.Input((5, 4)), layers.Dense(4)])
    model.compile(optimizer="sgd", loss=loss)
    model.fit(logits, labels, epochs=1, verbose=0)
