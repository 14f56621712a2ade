"""kiln.Variable: creation and copies, assignment, use as a tensor (operators, ops, numpy),
gradients through tapes, and reads and assignments inside kiln.function."""
import numpy as np
import pytest

import kiln


def test_creation_copies_and_describes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = kiln.Variable(a, name="w")
    a[0, 0] = 100.0  # the variable holds a copy
    assert v.numpy()[0, 0] == 0.0
    assert v.name == "w" and v.trainable and v.shape == (2, 3) and v.dtype == "float32"
    assert "w" in repr(v) and "f32[2,3]" in repr(v)
    v.trainable = False
    assert not v.trainable
    assert kiln.Variable([1, 2], dtype="float64").dtype == "float64"
    assert np.array_equal(np.asarray(kiln.Variable(kiln.tensor(a))), a)


def test_assign_family():
    v = kiln.Variable(np.zeros(3, np.float32))
    v.assign(np.array([1, 2, 3], np.float32))
    v.assign_add(np.ones(3, np.float32))
    v.assign_sub(kiln.tensor(np.full(3, 0.5, np.float32)))
    assert np.array_equal(v.numpy(), [1.5, 2.5, 3.5])
    with pytest.raises(kiln.Error, match="cannot assign"):
        v.assign(np.zeros(4, np.float32))


def test_usable_as_a_tensor():
    v = kiln.Variable(np.array([1.0, -2.0, 3.0], np.float32))
    assert np.array_equal((v * 2.0).numpy(), [2.0, -4.0, 6.0])
    assert np.array_equal((1.0 - v).numpy(), [0.0, 3.0, -2.0])
    assert np.array_equal((v + v).numpy(), [2.0, -4.0, 6.0])
    assert np.array_equal(kiln.ops.relu(v).numpy(), [1.0, 0.0, 3.0])
    assert np.array_equal(kiln.ops.maximum(v, 0.0).numpy(), [1.0, 0.0, 3.0])
    assert np.array_equal(v[1:].numpy(), [-2.0, 3.0])
    m = kiln.Variable(np.eye(3, dtype=np.float32))
    col = np.array([[1.0], [-2.0], [3.0]], np.float32)
    assert np.array_equal((m @ col).numpy(), col) and np.array_equal((col.T @ m).numpy(), col.T)


def test_tape_gradient_with_respect_to_variables():
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = kiln.Variable(w0, name="w")
    b = kiln.Variable(np.zeros(2, np.float32), name="b")
    frozen = kiln.Variable(np.ones(2, np.float32), trainable=False)
    with kiln.GradientTape() as tape:
        y = x @ w + b
        loss = kiln.ops.sum(y * y * frozen, axes=[0, 1], keepdims=False)
    dw, db, dfrozen = tape.gradient(loss, [w, b, frozen])
    y64 = x.astype(np.float64) @ w0
    scale = np.abs(x).T @ np.abs(y64) * 2
    assert np.all(np.abs(dw.numpy() - 2 * x.T @ y64) <= 1e-5 * (scale + 1))
    assert np.allclose(db.numpy(), 2 * y64.sum(0), rtol=1e-5, atol=1e-5)
    assert dfrozen is None  # not trainable: not watched


def test_variables_inside_kiln_function():
    w = kiln.Variable(np.full((2,), 2.0, np.float32), name="w")
    counter = kiln.Variable(np.zeros((), np.float32), name="count", trainable=False)

    @kiln.function
    def step(x, lr):
        with kiln.GradientTape() as tape:
            loss = kiln.ops.sum(x * w * w, axes=[0], keepdims=False)
        [g] = tape.gradient(loss, [w])
        w.assign_sub(g * lr)
        counter.assign_add(1.0)
        return loss

    x = np.array([1.0, 3.0], np.float32)
    for i in range(3):
        step(x, 0.1)
    assert step.tracing_count == 1
    expected = np.full(2, 2.0)
    for _ in range(3):
        expected = expected - 0.1 * 2 * x * expected
    assert np.allclose(w.numpy(), expected, rtol=1e-6)
    assert counter.numpy() == 3.0
    ir = step.concrete(x, 0.1).ir()
    assert "assign" in ir


def test_variable_argument_to_kiln_function():
    a = kiln.Variable(np.ones(2, np.float32))
    b = kiln.Variable(np.full(2, 5.0, np.float32))

    @kiln.function
    def bump(v, x):
        v.assign_add(x)
        return v.value() * 1.0

    x = np.ones(2, np.float32)
    bump(a, x)
    bump(b, x)  # another variable: another trace (captured by identity)
    assert bump.tracing_count == 2
    assert np.array_equal(a.numpy(), [2, 2]) and np.array_equal(b.numpy(), [6, 6])
    bump(a, x)
    assert bump.tracing_count == 2 and np.array_equal(a.numpy(), [3, 3])
