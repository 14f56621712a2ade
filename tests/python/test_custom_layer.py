"""Layers and models subclassed in Python: build / call / add_weight run eagerly, in
Sequential and functional models and in fit (traced: the Python call runs while tracing only);
their gradients against central finite differences of a float64 numpy reference; sublayers,
several inputs, the training flag, get_config, and exceptions raised in call."""
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


class Poly(keras.layers.Layer):
    """y = a * x + b * tanh(x), one (a, b) pair per feature."""

    def __init__(self, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale
        self.calls = 0
        self.training_flags = []

    def build(self, input_shape):
        self.a = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="a")
        self.b = self.add_weight(shape=(input_shape[-1],), initializer=0.5, name="b")

    def call(self, inputs, training=False):
        self.calls += 1
        self.training_flags.append(training)
        return (inputs * self.a + kiln.ops.tanh(inputs) * self.b) * self.scale

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


def poly_loss64(a, b, x, y, scale):
    """Keras' mean squared error of Poly in float64."""
    pred = (x * a + np.tanh(x) * b) * scale
    return np.mean(np.mean((pred - y) ** 2, axis=-1))


def finite_difference(f, params, h=1e-6):
    grads = []
    for i, p in enumerate(params):
        g = np.zeros_like(p)
        for j in range(p.size):
            up = [q.copy() for q in params]
            down = [q.copy() for q in params]
            up[i].flat[j] += h
            down[i].flat[j] -= h
            g.flat[j] = (f(*up) - f(*down)) / (2 * h)
        grads.append(g)
    return grads


def data(seed=0, n=16, d=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.standard_normal((n, d)).astype(np.float32)
    return x, y


def test_eager_call_weights_and_config():
    layer = Poly(scale=2.0, name="poly_eager")
    x, _ = data()
    out = layer(x).numpy()
    ref = (x.astype(np.float64) + 0.5 * np.tanh(x.astype(np.float64))) * 2.0
    assert np.allclose(out, ref, rtol=4e-6, atol=4e-6)
    assert layer.built and [w.name for w in layer.trainable_weights] == ["poly_eager/a",
                                                                         "poly_eager/b"]
    assert all(isinstance(w, kiln.Variable) for w in layer.weights)
    assert layer.get_config() == {"name": "poly_eager", "trainable": True, "scale": 2.0}
    assert isinstance(layer, keras.layers.Layer) and type(layer) is Poly
    layer.trainable = False
    assert layer.trainable_weights == [] and len(layer.non_trainable_weights) == 2


def test_tape_gradient_matches_finite_differences():
    layer = Poly(scale=1.5)
    x, y = data(1)
    layer(x)  # build
    rng = np.random.default_rng(2)
    layer.set_weights([rng.standard_normal(3).astype(np.float32) for _ in range(2)])
    with kiln.GradientTape() as tape:
        pred = layer(x)
        loss = keras.losses.MeanSquaredError()(y, pred)
    grads = [g.numpy() for g in tape.gradient(loss, layer.trainable_weights)]
    a, b = (w.astype(np.float64) for w in layer.get_weights())
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    fd = finite_difference(lambda a, b: poly_loss64(a, b, x64, y64, 1.5), [a, b])
    # float32 sums of 48 terms of size |pred - y| |x| scale
    for g, f in zip(grads, fd):
        assert np.allclose(g, f, rtol=1e-4, atol=1e-5), (g, f)


def test_trained_in_fit_with_the_right_gradient():
    keras.utils.set_random_seed(0)
    poly = Poly(scale=1.0)
    model = keras.Sequential([keras.Input((3,)), poly])
    assert poly.calls == 1  # the symbolic build of the Sequential model
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    x, y = data(3)
    a0, b0 = (w.astype(np.float64) for w in model.get_weights())
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    a1, b1 = (w.astype(np.float64) for w in model.get_weights())
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ga, gb = finite_difference(lambda a, b: poly_loss64(a, b, x64, y64, 1.0), [a0, b0])
    # one full-batch SGD step: w1 = w0 - lr * grad
    assert np.allclose((a0 - a1) / 0.05, ga, rtol=1e-3, atol=1e-5)
    assert np.allclose((b0 - b1) / 0.05, gb, rtol=1e-3, atol=1e-5)
    calls_after_first_fit = poly.calls
    assert True in poly.training_flags  # the training step calls with training=True
    model.fit(x, y, batch_size=4, epochs=3, verbose=0)  # 12 steps, one new batch shape
    assert poly.calls - calls_after_first_fit <= 1  # traced once; the graph runs after
    loss_before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=16, epochs=30, verbose=0)
    assert model.evaluate(x, y, verbose=0) < loss_before
    assert poly.calls - calls_after_first_fit <= 3  # + the test step's trace

    eager = keras.Sequential([keras.Input((3,)), Poly()])
    eager.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    n0 = eager.layers[0].calls
    eager.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert eager.layers[0].calls - n0 == 4  # eager: Python runs at every step


def test_functional_model_sublayers_and_several_inputs():
    class Gate(keras.layers.Layer):
        """Two inputs: proj(a) * sigmoid(b); its Dense sublayer is tracked as an attribute."""

        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.proj = layers.Dense(units, name=f"{self.name}_proj")

        def build(self, input_shapes):
            assert isinstance(input_shapes, list) and len(input_shapes) == 2
            self.built_with = input_shapes

        def call(self, inputs):
            a, b = inputs
            return self.proj(a) * kiln.ops.sigmoid(b)

    a = keras.Input((4,), name="a")
    b = keras.Input((2,), name="b")
    gate = Gate(2, name="gate")
    out = gate([a, b])
    assert out.shape == (None, 2) and gate.built_with == [(None, 4), (None, 2)]
    model = keras.Model([a, b], out)
    assert [w.name for w in gate.trainable_weights] == ["gate_proj/kernel", "gate_proj/bias"]
    assert len(model.trainable_weights) == 2
    rng = np.random.default_rng(4)
    xa = rng.standard_normal((8, 4)).astype(np.float32)
    xb = rng.standard_normal((8, 2)).astype(np.float32)
    k, bias = gate.proj.get_weights()
    ref = (xa.astype(np.float64) @ k + bias) / (1 + np.exp(-xb.astype(np.float64)))
    assert np.allclose(model.predict([xa, xb]), ref, rtol=1e-5, atol=1e-5)
    model.compile(optimizer="adam", loss="mse")
    h = model.fit([xa, xb], np.zeros((8, 2), np.float32), epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2


def test_exceptions_in_call_propagate():
    class Broken(keras.layers.Layer):
        def call(self, inputs):
            raise ZeroDivisionError("broken on purpose")

    with pytest.raises(ZeroDivisionError, match="on purpose"):
        Broken()(np.ones((1, 2), np.float32))
    model = keras.Sequential([layers.Dense(2), Broken()])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ZeroDivisionError):
        model.fit(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32), verbose=0)

    class NoCall(keras.layers.Layer):
        pass

    with pytest.raises(NotImplementedError, match="call"):
        NoCall()(np.ones((1, 2), np.float32))


def test_subclassed_model():
    class MLP(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.hidden = layers.Dense(8, activation="relu")
            self.out = layers.Dense(1)

        def call(self, x, training=False):
            return self.out(self.hidden(x))

    keras.utils.set_random_seed(7)
    model = MLP(name="mlp_py")
    assert isinstance(model, keras.Model) and model.name == "mlp_py"
    x, _ = data(5, n=32)
    y = (x[:, :1] * 2.0).astype(np.float32)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    h = model.fit(x, y, epochs=20, batch_size=8, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert len(model.trainable_weights) == 4 and model.predict(x).shape == (32, 1)


def test_keras2_style_layer():
    class Old(keras.layers.Layer):
        def build(self, input_shape):
            self.kernel = self.add_weight("kernel", (input_shape[-1], 2))
            super().build(input_shape)
            self.built = True  # Keras 2 habit: accepted

        def call(self, inputs):
            return inputs @ self.kernel

    layer = Old(name="old")
    out = layer(np.ones((3, 4), np.float32))
    assert out.shape == (3, 2) and layer.built
    assert [w.name for w in layer.weights] == ["old/kernel"] and layer.weights[0].shape == (4, 2)


def test_subclassing_a_builtin_layer_is_refused():
    class MyDense(layers.Dense):
        def call(self, inputs):
            return inputs

    with pytest.raises(TypeError, match="sublayer"):
        MyDense(3)
