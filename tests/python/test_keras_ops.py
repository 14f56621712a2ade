"""keras.ops, keras.random and keras.initializers as a Keras user writes them, against numpy
and against the definitions. Statistical bounds are 5 standard errors of the statistic for the
sample size (a false failure about once in 10^6 runs; the seeds are fixed anyway)."""
import math

import numpy as np
import pytest

import kiln
import kiln.keras as keras
from kiln.keras import ops

U = 2.0 ** -24


def arr(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def close(got, ref, tol):
    got, ref = arr(got).astype(np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    err = np.abs(got - ref)
    assert (err <= tol).all(), err.max()


def ulp(y):
    return np.spacing(np.abs(np.asarray(y, np.float32))).astype(np.float64)


@pytest.fixture
def xs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(
        np.float32)


# ---- keras.ops

def test_ops_against_numpy(xs):
    x, w = xs
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    close(ops.matmul(x, w), x64 @ w64, 6 * U * (np.abs(x64) @ np.abs(w64)))
    close(ops.sum(x, axis=1), x64.sum(axis=1), 5 * U * np.abs(x64).sum(axis=1))
    close(ops.mean(x), x64.mean(), 14 * U * np.abs(x64).mean())
    np.testing.assert_array_equal(arr(ops.max(x, axis=0)), x.max(axis=0))
    np.testing.assert_array_equal(arr(ops.min(x, axis=-1, keepdims=True)),
                                  x.min(axis=-1, keepdims=True))
    np.testing.assert_array_equal(arr(ops.max(x, initial=10.0)), np.float32(10.0))
    for name, f in (("exp", np.exp), ("tanh", np.tanh),
                    ("sigmoid", lambda v: 1 / (1 + np.exp(-v)))):
        ref = f(x64)
        close(getattr(ops, name)(x), ref, 4 * ulp(ref) + 4 * U * np.abs(x64) * np.abs(ref) + 4 * U
              * np.abs(x64))
    ref = np.log(np.abs(x64) + 1)
    close(ops.log(np.abs(x) + np.float32(1)), ref, 4 * ulp(ref) + 4 * U)
    np.testing.assert_array_equal(arr(ops.relu(x)), np.maximum(x, 0))
    np.testing.assert_array_equal(arr(ops.abs(x)), np.abs(x))
    np.testing.assert_array_equal(arr(ops.maximum(x, 0.5)), np.maximum(x, np.float32(0.5)))
    np.testing.assert_array_equal(arr(ops.minimum(x, 0.5)), np.minimum(x, np.float32(0.5)))
    close(ops.sqrt(np.abs(x)), np.sqrt(np.abs(x64)), ulp(np.sqrt(np.abs(x64))))
    close(ops.square(x), x64 ** 2, ulp(x64 ** 2))
    # Keras' gelu is the tanh approximation by default
    g = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    close(ops.gelu(x), g, 4 * ulp(g) + 8 * U * (1 + np.abs(x64)))
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    sm = e / e.sum(axis=-1, keepdims=True)
    close(ops.softmax(x), sm, 2 * U * (4 + 20 + 8) * sm)
    close(ops.log_softmax(x, axis=0),
          x64 - x64.max(0) - np.log(np.exp(x64 - x64.max(0)).sum(0)), 2 * U * (3 + 8 + 16))
    np.testing.assert_array_equal(arr(ops.leaky_relu(x, negative_slope=0.1)),
                                  np.where(x >= 0, x, np.float32(0.1) * x))


def test_shape_ops(xs):
    x, _ = xs
    assert ops.cast(x, "int32").dtype == "int32"
    np.testing.assert_array_equal(arr(ops.cast(x, "int32")), x.astype(np.int32))
    np.testing.assert_array_equal(arr(ops.reshape(x, (2, -1))), x.reshape(2, -1))
    np.testing.assert_array_equal(arr(ops.transpose(x)), x.T)
    np.testing.assert_array_equal(arr(ops.expand_dims(x, 0)), x[None])
    np.testing.assert_array_equal(arr(ops.squeeze(x[None, :, None])), x)
    np.testing.assert_array_equal(arr(ops.squeeze(x[None], axis=0)), x)
    np.testing.assert_array_equal(arr(ops.concatenate([x, x], axis=1)), np.concatenate([x, x], 1))
    np.testing.assert_array_equal(arr(ops.stack([x, x])), np.stack([x, x]))
    np.testing.assert_array_equal(arr(ops.where(x > 0, x, 0.0)), np.where(x > 0, x, 0))
    np.testing.assert_array_equal(arr(ops.clip(x, -0.5, 0.5)), np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(arr(ops.moveaxis(np.zeros((2, 3, 4)), 0, -1)).shape, (3, 4, 2))
    np.testing.assert_array_equal(arr(ops.swapaxes(x, 0, 1)), x.T)
    np.testing.assert_array_equal(arr(ops.take(x, np.array([2, 0], np.int32), axis=1)),
                                  np.take(x, [2, 0], axis=1))
    np.testing.assert_array_equal(arr(ops.take(x, np.array([5], np.int32))), np.take(x, [5]))
    np.testing.assert_array_equal(arr(ops.argmax(x)), np.argmax(x))
    np.testing.assert_array_equal(arr(ops.argmax(x, axis=1)), np.argmax(x, axis=1))
    np.testing.assert_array_equal(arr(ops.slice(x, (1, 1), (2, 2))), x[1:3, 1:3])
    t = ops.convert_to_tensor([[1.0, 2.0]])
    assert isinstance(t, kiln.Tensor) and t.dtype == "float32"
    assert ops.convert_to_tensor(x, dtype="float64").dtype == "float64"
    assert ops.shape(x) == (3, 4) and ops.ndim(x) == 2 and ops.size(x) == 12
    np.testing.assert_array_equal(arr(ops.zeros((2, 3))), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(arr(ops.ones_like(x)), np.ones_like(x))
    np.testing.assert_array_equal(arr(ops.full((2,), 7, dtype="int32")), np.full(2, 7, np.int32))
    assert ops.arange(5).dtype == "int32"
    np.testing.assert_array_equal(arr(ops.arange(1.0, 2.0, 0.25)),
                                  np.arange(1.0, 2.0, 0.25, dtype=np.float32))
    np.testing.assert_array_equal(arr(ops.any(x > 1, axis=0)), (x > 1).any(axis=0))
    np.testing.assert_array_equal(arr(ops.all(x > -3)), (x > -3).all())


def test_one_hot_axis_and_out_of_range():
    idx = np.array([0, 2, 1], np.int32)
    np.testing.assert_array_equal(arr(ops.one_hot(idx, 3)), np.eye(3, dtype=np.float32)[idx])
    np.testing.assert_array_equal(arr(ops.one_hot(idx, 3, axis=0)),
                                  np.eye(3, dtype=np.float32)[idx].T)
    # Keras: an index outside [0, num_classes) is a row of zeros
    np.testing.assert_array_equal(arr(ops.one_hot(np.array([3, -1], np.int32), 3)),
                                  np.zeros((2, 3), np.float32))


def test_activations_composed(xs):
    x, _ = xs
    x64 = x.astype(np.float64)
    sig = 1 / (1 + np.exp(-x64))
    close(ops.silu(x), x64 * sig, 8 * ulp(x64 * sig) + 8 * U * np.abs(x64))
    np.testing.assert_array_equal(arr(ops.relu6(x * 8)), np.minimum(np.maximum(x * 8, 0), 6))
    hs = np.minimum(np.maximum(x64 + 3, 0), 6) / 6
    close(ops.hard_sigmoid(x), hs, 4 * ulp(hs))
    ls = -np.log1p(np.exp(-x64))
    close(ops.log_sigmoid(x), ls, 4 * ulp(ls) + 8 * U * (1 + np.abs(x64)))
    v = x64.var(axis=1)
    close(ops.var(x, axis=1), v, 32 * U * (v + np.abs(x64).mean(axis=1) ** 2))
    close(ops.std(x), x64.std(), 64 * U * (x64.std() + np.abs(x64).mean()))


def test_conv_and_pools():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    k = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    out = arr(ops.conv(x, k))
    ref = np.zeros((1, 2, 2, 3))
    for i in range(2):
        for j in range(2):
            ref[0, i, j] = np.tensordot(x[0, i:i + 3, j:j + 3].astype(np.float64), k, 3)
    close(out, ref, 20 * U * 18 * np.abs(ref).max())
    np.testing.assert_array_equal(arr(ops.max_pool(x, 2)),
                                  x.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4)))
    with pytest.raises(kiln.Error, match="channels_last only"):
        ops.conv(x, k, data_format="channels_first")


def test_control_flow():
    x = np.float32(2.0)
    assert float(arr(ops.cond(x > 1, lambda: ops.square(x), lambda: ops.negative(x)))) == 4.0
    i, s = ops.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i),
                          (np.int32(0), np.int32(0)))
    assert int(arr(i)) == 5 and int(arr(s)) == 10


def test_ops_inside_kiln_function_and_tape(xs):
    x, w = xs

    @kiln.function
    def f(a, b):
        return ops.sum(ops.softmax(ops.matmul(a, b)), axis=-1)

    close(f(x, w), np.ones(3), 32 * U)
    t = kiln.tensor(x)
    with kiln.GradientTape() as tape:
        tape.watch(t)
        y = ops.sum(ops.square(t))
    np.testing.assert_allclose(arr(tape.gradient(y, t)), 2 * x, rtol=U)


def test_what_kiln_cannot_compute_is_absent():
    for name in ("sort", "top_k", "einsum", "fft", "elu", "shuffle_not_an_op", "erfinv"):
        assert not hasattr(ops, name), name
    for name in ("truncated_normal", "shuffle", "categorical", "gamma", "binomial", "beta"):
        assert not hasattr(keras.random, name), name
    with pytest.raises(AttributeError):
        ops.einsum("ij,jk->ik", 1, 2)


# ---- keras.random

def test_random_seeds_reproduce_and_differ():
    a = arr(keras.random.normal((2, 3), seed=1))
    assert a.shape == (2, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a, arr(keras.random.normal((2, 3), seed=1)))
    assert not np.array_equal(a, arr(keras.random.normal((2, 3), seed=2)))
    np.testing.assert_array_equal(arr(keras.random.uniform((4,), seed=7)),
                                  arr(keras.random.uniform((4,), seed=7)))
    # seed=None draws the global sequence: different each call, reproducible after a reset
    keras.utils.set_random_seed(3)
    first = [arr(keras.random.normal((3,))) for _ in range(2)]
    assert not np.array_equal(first[0], first[1])
    keras.utils.set_random_seed(3)
    np.testing.assert_array_equal(arr(keras.random.normal((3,))), first[0])


def test_seed_generator():
    gen = keras.random.SeedGenerator(42)
    a, b = arr(keras.random.normal((5,), seed=gen)), arr(keras.random.normal((5,), seed=gen))
    assert not np.array_equal(a, b)
    gen2 = keras.random.SeedGenerator(42)
    np.testing.assert_array_equal(arr(keras.random.normal((5,), seed=gen2)), a)
    assert int(arr(gen.state)) == int(arr(gen2.state)) + 1
    assert keras.random.SeedGenerator.from_config(gen.get_config()).get_config() == {"seed": 42}


def test_random_inside_kiln_function_draws_what_eager_draws():
    @kiln.function
    def draw_int_seed(x):
        return x + keras.random.normal((4,), seed=11)

    zero = np.zeros(4, np.float32)
    eager = arr(keras.random.normal((4,), seed=11))
    np.testing.assert_array_equal(arr(draw_int_seed(zero)), eager)
    np.testing.assert_array_equal(arr(draw_int_seed(zero)), eager)  # an int seed: every call

    g_eager, g_traced = keras.random.SeedGenerator(5), keras.random.SeedGenerator(5)

    @kiln.function
    def draw_gen(x):
        return x + keras.random.uniform((4,), seed=g_traced)

    for _ in range(3):  # the same stream, advanced the same way
        np.testing.assert_array_equal(arr(draw_gen(zero)),
                                      arr(keras.random.uniform((4,), seed=g_eager)))

    @kiln.function
    def draw_none(x):
        return x + keras.random.normal((4,))

    assert not np.array_equal(arr(draw_none(zero)), arr(draw_none(zero)))  # fresh per call

    @kiln.function
    def drop(x):
        return keras.random.dropout(x, 0.5, seed=3)

    ones = np.ones(64, np.float32)
    np.testing.assert_array_equal(arr(drop(ones)), arr(keras.random.dropout(ones, 0.5, seed=3)))


def test_random_statistics():
    n = 20000
    z = arr(keras.random.normal((n,), mean=1.5, stddev=2.0, seed=0)).astype(np.float64)
    assert abs(z.mean() - 1.5) < 5 * 2.0 / math.sqrt(n)
    assert abs(z.var() - 4.0) < 5 * 4.0 * math.sqrt(2 / (n - 1))
    u = arr(keras.random.uniform((n,), minval=-1.0, maxval=3.0, seed=0)).astype(np.float64)
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(u.mean() - 1.0) < 5 * (4 / math.sqrt(12)) / math.sqrt(n)
    r = arr(keras.random.randint((n,), 2, 7, seed=0))
    assert r.dtype == np.int32 and r.min() >= 2 and r.max() <= 6
    p = 1 / 5
    for v in range(2, 7):
        assert abs((r == v).sum() - n * p) < 5 * math.sqrt(n * p * (1 - p))
    x = np.full(n, 3.0, np.float32)
    d = arr(keras.random.dropout(x, 0.25, seed=0))
    kept = d != 0
    assert abs((~kept).mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / n)
    np.testing.assert_allclose(d[kept], 3.0 / 0.75, rtol=2 * U)


def test_random_errors():
    with pytest.raises(kiln.Error, match="seed must be an int, a SeedGenerator or None"):
        keras.random.normal((2,), seed="x")
    with pytest.raises(kiln.Error, match="noise_shape"):
        keras.random.dropout(np.ones(3, np.float32), 0.5, noise_shape=(1,))
    with pytest.raises(kiln.Error, match="minval must be an int"):
        keras.random.randint((2,), 0.5, 3)


# ---- keras.initializers

def test_glorot_uniform_within_its_limit_and_spread():
    fan_in, fan_out = 300, 200
    w = arr(keras.initializers.GlorotUniform(seed=1)((fan_in, fan_out))).astype(np.float64)
    limit = math.sqrt(6 / (fan_in + fan_out))
    n = w.size
    assert np.abs(w).max() <= limit
    # uniform on [-limit, limit]: variance limit^2 / 3; the fourth moment gives the error
    var = limit ** 2 / 3
    assert abs(w.var() - var) < 5 * math.sqrt((limit ** 4 / 5 - var ** 2) / n)
    assert abs(w.mean()) < 5 * math.sqrt(var / n)


def test_he_normal_variance_and_truncation():
    fan_in, fan_out = 400, 150
    w = arr(keras.initializers.get("he_normal")((fan_in, fan_out))).astype(np.float64)
    var = 2 / fan_in
    n = w.size
    # Keras truncates at two standard deviations of the untruncated normal, whose stddev is
    # sqrt(var) / 0.87962566103423978 (so that the truncated one has variance var)
    assert np.abs(w).max() <= 2 * math.sqrt(var) / 0.87962566103423978 * (1 + 4 * U)
    assert abs(w.var() - var) < 5 * var * math.sqrt(2 / n)
    assert abs(w.mean()) < 5 * math.sqrt(var / n)


def test_other_initializers_against_their_definitions():
    I = keras.initializers
    np.testing.assert_array_equal(arr(I.Zeros()((2, 3))), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(arr(I.Ones()((2,), dtype="float64")), np.ones(2))
    np.testing.assert_array_equal(arr(I.Constant(3.5)((2, 2))), np.full((2, 2), 3.5, np.float32))
    rn = I.RandomNormal(mean=1.0, stddev=0.5, seed=3)
    a = arr(rn((100, 100))).astype(np.float64)
    np.testing.assert_array_equal(arr(rn((100, 100))), a.astype(np.float32))  # seeded: same
    # the standard errors of the mean and of the standard deviation of 10^4 normal values
    assert abs(a.mean() - 1.0) < 5 * 0.5 / 100
    assert abs(a.std() - 0.5) < 5 * 0.5 / math.sqrt(2 * 1e4)
    ru = arr(I.RandomUniform(-2.0, 1.0, seed=4)((1000,)))
    assert ru.min() >= -2.0 and ru.max() < 1.0
    tn = arr(I.TruncatedNormal(stddev=0.1, seed=5)((1000,)))
    assert np.abs(tn).max() <= 0.2 * (1 + 4 * U)
    q = arr(I.Orthogonal(gain=2.0, seed=6)((6, 4))).astype(np.float64)
    np.testing.assert_allclose(q.T @ q, 4 * np.eye(4), atol=4 * 6 * 4 * U * 4)
    # unseeded: each call draws new values
    g = I.GlorotNormal()
    assert not np.array_equal(arr(g((3, 3))), arr(g((3, 3))))


def test_initializer_names_configs_and_serialization():
    I = keras.initializers
    assert isinstance(I.get("glorot_uniform"), I.GlorotUniform)
    assert isinstance(I.get("GlorotUniform"), I.GlorotUniform)
    assert isinstance(I.get("uniform"), I.RandomUniform)
    init = I.RandomNormal(stddev=0.3, seed=9)
    assert init.get_config() == {"mean": 0.0, "stddev": 0.3, "seed": 9}
    assert I.RandomNormal.from_config(init.get_config()) == init
    assert I.deserialize(I.serialize(init)) == init
    assert I.get(I.serialize(init)) == init
    assert I.get(init) is init and I.get(None) is None
    with pytest.raises(kiln.Error, match="unknown initializer"):
        I.get("xavier")


def test_layers_take_initializer_objects():
    I = keras.initializers
    d = keras.layers.Dense(4, kernel_initializer=I.Constant(0.5), bias_initializer=I.Ones())
    d.build((None, 3))
    k, b = d.get_weights()
    np.testing.assert_array_equal(k, np.full((3, 4), 0.5, np.float32))
    np.testing.assert_array_equal(b, np.ones(4, np.float32))
    # arguments and seeds are honoured, and the config says them (so a reload makes the same)
    init = I.RandomNormal(stddev=2.0, seed=3)
    d = keras.layers.Dense(5, kernel_initializer=init)
    d.build((None, 6))
    np.testing.assert_array_equal(d.get_weights()[0], arr(init((6, 5))))
    cfg = d.get_config()["kernel_initializer"]
    assert cfg["class_name"] == "RandomNormal"
    assert cfg["config"]["stddev"] == 2.0 and cfg["config"]["seed"] == 3
    again = keras.layers.Dense.from_config(d.get_config())
    again.build((None, 6))
    np.testing.assert_array_equal(again.get_weights()[0], d.get_weights()[0])
    # names still work, and what an initializer cannot take is refused
    keras.layers.Dense(2, kernel_initializer="he_normal").build((None, 2))
    with pytest.raises(kiln.Error, match="unknown argument \"gain\""):
        keras.layers.Dense(2, kernel_initializer={"class_name": "GlorotUniform",
                                                  "config": {"gain": 2.0}}).build((None, 2))

    class WithWeight(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(2,), initializer=I.Constant(1.5))

        def call(self, x):
            return x * self.w

    np.testing.assert_array_equal(arr(WithWeight()(np.ones((1, 2), np.float32))),
                                  np.full((1, 2), 1.5, np.float32))
