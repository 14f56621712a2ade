"""kiln.ops (generated from the op table) against numpy, GradientTape against finite
differences, and kiln errors as Python exceptions."""
import numpy as np
import pytest

import kiln


def test_every_op_of_the_table_is_a_function():
    names = kiln.ops.__all__
    assert {"add", "matmul", "exp", "sum", "relu", "conv2d"} <= set(names)
    for name in names:
        assert callable(getattr(kiln.ops, name))
        assert name in getattr(kiln.ops, name).__doc__


def test_ops_with_attributes_against_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 5))
    t = kiln.tensor(a, dtype="float64")
    s = kiln.ops.sum(t, axes=[1], keepdims=False).numpy()
    assert np.allclose(s, a.sum(axis=1), rtol=0, atol=8 * np.finfo(float).eps * np.abs(a).sum(axis=1).max())
    e = kiln.ops.exp(t).numpy()
    assert np.allclose(e, np.exp(a), rtol=4 * np.finfo(float).eps, atol=0)
    r = kiln.ops.reshape(t, shape=[5, 3]).numpy()
    assert np.array_equal(r, a.reshape(5, 3))
    c = kiln.ops.cast(t, dtype="int32")
    assert c.dtype == "int32"


def test_op_errors_are_kiln_errors():
    t = kiln.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(kiln.Error, match="missing attribute"):
        kiln.ops.sum(t)
    with pytest.raises(kiln.Error, match="unknown attribute"):
        kiln.ops.exp(t, axes=[0])
    with pytest.raises(kiln.Error, match="must be a list of ints"):
        kiln.ops.sum(t, axes=1, keepdims=False)
    with pytest.raises(ValueError, match="inner dimensions"):
        t @ t
    # A dtype error is a TypeError too, with kiln's message.
    with pytest.raises(TypeError, match="dtypes differ") as info:
        kiln.ops.add(t, kiln.tensor(np.ones((2, 3), np.int64)))
    assert isinstance(info.value, kiln.Error)


def finite_difference(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = h
        g[i] = (f(x + d) - f(x - d)) / (2 * h)
    return g


def test_tape_gradient_against_finite_differences():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((3, 4))
    w0 = rng.standard_normal((4, 2))

    def loss_np(x):
        return np.sum(np.tanh(x @ w0) ** 2)

    x = kiln.tensor(x0, dtype="float64")
    w = kiln.tensor(w0, dtype="float64")
    with kiln.GradientTape() as tape:
        tape.watch(x)
        y = kiln.ops.tanh(x @ w)
        loss = kiln.ops.sum(y * y, axes=[0, 1], keepdims=False)
    g = tape.gradient(loss, x).numpy()
    fd = finite_difference(loss_np, x0)
    # central differences: truncation ~h^2 |f'''| and rounding ~eps |f| / h
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, abs(loss_np(x0))))


def test_tape_stops_recording_after_the_block_and_persistent_tapes():
    x = kiln.tensor(np.array([1.0, 2.0]), dtype="float64")
    with kiln.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
    z = y * 3.0  # after the block: not recorded
    assert np.array_equal(tape.gradient(y, x).numpy(), [2.0, 4.0])
    assert np.array_equal(tape.gradient(y, [x])[0].numpy(), [2.0, 4.0])
    assert isinstance(tape.gradient(y, (x,)), tuple)
    assert tape.gradient(z, x) is None
    with kiln.GradientTape() as t2:
        pass
    with pytest.raises(kiln.Error):
        kiln.GradientTape().watch(x)
