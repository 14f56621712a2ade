"""Keras' call conventions from Python, written as Keras users write them: mask= and
training= on layer calls, compute_mask and ._keras_mask, initial_state= for recurrent layers,
MultiHeadAttention's keyword call. Each result is checked against a numpy reference or
against the same computation reached another way (a mask from a Masking layer)."""
import numpy as np
import pytest

import kiln
from kiln import keras
from kiln.keras import layers

EPS = np.finfo(np.float32).eps


@pytest.fixture(autouse=True)
def seeded():
    keras.utils.clear_session()
    keras.utils.set_random_seed(7)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def within(got, want, bound):
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= bound, np.max(np.abs(got - want))


def sequence_and_mask(rng, batch=3, steps=6, features=4):
    x = rng.standard_normal((batch, steps, features)).astype(np.float32)
    lengths = np.array([6, 3, 1])[:batch]
    mask = np.arange(steps)[None, :] < lengths[:, None]
    return x, mask


@pytest.mark.parametrize("cls", [layers.LSTM, layers.GRU, layers.SimpleRNN])
def test_mask_keyword_equals_a_masking_layer(cls):
    rng = np.random.default_rng(1)
    x, mask = sequence_and_mask(rng)
    rnn = cls(5, return_sequences=True)
    y = rnn(x, mask=mask)
    # the same mask coming from a Masking layer: the zeroed steps are the masked ones
    x0 = np.where(mask[..., None], x, 0).astype(np.float32)
    y_masking = rnn(layers.Masking(0.0)(x0))
    assert np.array_equal(y.numpy(), y_masking.numpy())
    assert np.array_equal(y._keras_mask.numpy(), mask)
    # the last output of a sequence is the output of its last kept step
    last = cls(5)
    last.build((None, 6, 4))
    last.set_weights(rnn.get_weights())
    out = last(x, mask=mask)
    for b, n in enumerate([6, 3, 1]):
        assert np.array_equal(out.numpy()[b], y.numpy()[b, n - 1])
    assert out._keras_mask is None  # Keras: no mask without return_sequences


def test_keras_mask_flows_from_embedding_and_compute_mask():
    ids = np.array([[3, 5, 0, 0], [1, 0, 0, 0]], np.int32)
    emb = layers.Embedding(10, 4, mask_zero=True)
    e = emb(ids)
    assert np.array_equal(e._keras_mask.numpy(), ids != 0)
    assert np.array_equal(emb.compute_mask(ids).numpy(), ids != 0)
    dense = layers.Dense(3)
    assert np.array_equal(dense(e)._keras_mask.numpy(), ids != 0)  # supports masking
    assert dense.compute_mask(e, e._keras_mask) is not None
    lstm = layers.LSTM(2, return_sequences=True)
    assert np.array_equal(lstm.compute_mask(e, e._keras_mask).numpy(), ids != 0)
    assert layers.LSTM(2).compute_mask(e, e._keras_mask) is None
    assert layers.Flatten()(e)._keras_mask is None
    # a user's mask set on a tensor flows like a layer's
    t = kiln.tensor(np.ones((2, 4, 3), np.float32))
    assert t._keras_mask is None
    t._keras_mask = ids != 0
    assert np.array_equal(layers.Dense(2)(t)._keras_mask.numpy(), ids != 0)


def numpy_lstm(x, h, c, kernel, recurrent, bias):
    u = h.shape[1]
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
    return h, c


def numpy_gru(x, h, kernel, recurrent, bias):
    u = h.shape[1]
    for t in range(x.shape[1]):
        xz = x[:, t] @ kernel + bias[0]
        hz = h @ recurrent + bias[1]
        z = sigmoid(xz[:, :u] + hz[:, :u])
        r = sigmoid(xz[:, u:2 * u] + hz[:, u:2 * u])
        hh = np.tanh(xz[:, 2 * u:] + r * hz[:, 2 * u:])
        h = z * h + (1 - z) * hh
    return h


def test_lstm_initial_state_against_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    h0 = rng.standard_normal((2, 4)).astype(np.float32)
    c0 = rng.standard_normal((2, 4)).astype(np.float32)
    lstm = layers.LSTM(4, return_state=True)
    out, h, c = lstm(x, initial_state=[h0, c0])
    w = [v.astype(np.float64) for v in lstm.get_weights()]
    h_ref, c_ref = numpy_lstm(x.astype(np.float64), h0.astype(np.float64),
                              c0.astype(np.float64), *w)
    bound = 64 * 5 * (3 + 4) * EPS * (1 + np.max(np.abs(c_ref)))
    within(out.numpy(), h_ref, bound)
    within(h.numpy(), h_ref, bound)
    within(c.numpy(), c_ref, bound)
    # a different initial state changes the result (the argument is used)
    assert not np.allclose(lstm(x)[0].numpy(), out.numpy())
    # positional, as Keras allows: lstm(x, [h, c])
    assert np.array_equal(lstm(x, [h0, c0])[0].numpy(), out.numpy())


def test_gru_and_simple_rnn_initial_state_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    h0 = rng.standard_normal((2, 5)).astype(np.float32)
    gru = layers.GRU(5)
    y = gru(x, initial_state=[h0])
    w = [v.astype(np.float64) for v in gru.get_weights()]
    bound = 64 * 4 * (3 + 5) * EPS
    within(y.numpy(), numpy_gru(x.astype(np.float64), h0.astype(np.float64), *w), bound)
    rnn = layers.SimpleRNN(5)
    y = rnn(x, initial_state=h0)  # one state: the tensor itself, as Keras accepts
    k, r, b = (v.astype(np.float64) for v in rnn.get_weights())
    h = h0.astype(np.float64)
    for t in range(4):
        h = np.tanh(x[:, t].astype(np.float64) @ k + h @ r + b)
    within(y.numpy(), h, bound)


def numpy_mha(layer, query, value, key, mask):
    wq, bq, wk, bk, wv, bv, wo, bo = (v.astype(np.float64) for v in layer.get_weights())
    q = np.einsum("btd,dhk->bhtk", query, wq) + bq[None, :, None, :]
    k = np.einsum("btd,dhk->bhtk", key, wk) + bk[None, :, None, :]
    v = np.einsum("btd,dhk->bhtk", value, wv) + bv[None, :, None, :]
    scores = np.einsum("bhqk,bhvk->bhqv", q / np.sqrt(wq.shape[-1]), k)
    if mask is not None:
        scores = np.where(mask[:, None], scores, -1e9)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhqv,bhvk->bqhk", p, v)
    return np.einsum("bqhk,hko->bqo", out, wo) + bo, p


def test_multi_head_attention_keywords_against_numpy():
    rng = np.random.default_rng(4)
    query = rng.standard_normal((2, 4, 6)).astype(np.float32)
    value = rng.standard_normal((2, 5, 3)).astype(np.float32)
    key = rng.standard_normal((2, 5, 2)).astype(np.float32)
    att = (rng.random((2, 4, 5)) < 0.7)
    att[:, :, 0] = True
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=3)
    out, scores = mha(query, value, key=key, attention_mask=att, return_attention_scores=True)
    q64, v64, k64 = (a.astype(np.float64) for a in (query, value, key))
    ref_out, ref_p = numpy_mha(mha, q64, v64, k64, att)
    bound = 256 * 6 * EPS * (1 + np.max(np.abs(ref_out)))
    within(out.numpy(), ref_out, bound)
    within(scores.numpy(), ref_p, 256 * 6 * EPS)
    # key=None is the value; no scores asked: the output alone
    self_att = layers.MultiHeadAttention(2, 3)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    y = self_att(query=x, value=x, use_causal_mask=True)
    assert isinstance(y, kiln.Tensor)
    causal = np.broadcast_to(np.tril(np.ones((4, 4), bool)), (2, 4, 4))
    x64 = x.astype(np.float64)
    ref, _ = numpy_mha(self_att, x64, x64, x64, causal)
    within(y.numpy(), ref, 256 * 6 * EPS * (1 + np.max(np.abs(ref))))
    # use_causal_mask= equals the same mask given as attention_mask=
    y2 = self_att(x, x, attention_mask=causal, training=False)
    within(y2.numpy(), y.numpy().astype(np.float64), 64 * EPS * (1 + np.max(np.abs(ref))))
    # a user's value mask (value_mask= or on the tensor) equals the attention mask it implies
    vm = np.array([[True] * 5, [True, True, False, False, False]])
    a = mha(query, value, key, value_mask=vm)
    b = mha(query, value, key, attention_mask=np.broadcast_to(vm[:, None, :], (2, 4, 5)))
    assert np.array_equal(a.numpy(), b.numpy())
    vt = kiln.tensor(value)
    vt._keras_mask = vm
    assert np.array_equal(mha(query, vt, key).numpy(), a.numpy())


def test_python_layer_gets_mask_training_and_its_own_arguments():
    seen = {}

    class Scale(keras.layers.Layer):
        def call(self, x, mask=None, training=None, factor=1.0):
            seen["mask"], seen["training"] = mask, training
            return x * factor

    class Outer(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.scale = Scale()
            self.drop = layers.Dropout(0.5)

        def call(self, x):  # no training argument: inner layers inherit it (Keras)
            return self.drop(self.scale(x))

    x = np.ones((2, 3, 4), np.float32)
    mask = np.array([[True, False, True], [True, True, True]])
    y = Scale()(x, mask=mask, factor=3.0)
    assert np.array_equal(y.numpy(), 3 * x)
    assert np.array_equal(seen["mask"].numpy(), mask) and seen["training"] is False
    out = Outer()(x, training=True).numpy()
    assert seen["training"] is True
    assert set(np.unique(out)) <= {0.0, 2.0} and (out == 0).any()  # dropout ran
    assert np.array_equal(Outer()(x).numpy(), x)  # inference: no dropout

    class KeepMask(keras.layers.Layer):
        def call(self, x):
            return x + 1.0

        def compute_mask(self, x, previous_mask=None):
            return kiln.ops.not_equal(x[:, :, 0], kiln.tensor(np.float32(0)))

    z = np.ones((2, 3, 4), np.float32)
    z[1, 2] = 0
    assert np.array_equal(KeepMask()(z)._keras_mask.numpy(), z[:, :, 0] != 0)


def test_call_errors_name_the_layer_and_argument():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(TypeError, match="dense.*unexpected call argument.*initial_state"):
        layers.Dense(2, name="dense")(x, initial_state=[x])
    with pytest.raises(kiln.Error, match="mask 0 is a float32 tensor.*boolean"):
        layers.LSTM(2)(x, mask=np.ones((2, 3), np.float32))
    inp = keras.Input((3, 4))
    with pytest.raises(kiln.Error, match="mask= on a symbolic tensor"):
        layers.LSTM(2)(inp, mask=np.ones((2, 3), bool))
    with pytest.raises(kiln.Error, match="1 input.*2 mask"):
        layers.Dense(2)(x, mask=[np.ones((2, 3), bool)] * 2)
    with pytest.raises(TypeError, match="only input tensors may be passed as positional"):
        layers.Dense(2)(x, True)
    with pytest.raises(TypeError, match="needs a value"):
        layers.MultiHeadAttention(2, 2)(x, use_causal_mask=True)
