"""kiln.cond, kiln.while_loop and kiln.scan with Python callables: eager against traced
(compiled and reference), gradients through traced control flow against the analytic ones,
result structure, and Python exceptions raised inside a branch or loop body."""
import numpy as np
import pytest

import kiln

EPS64 = np.finfo(np.float64).eps


def total(x):
    return kiln.ops.sum(x, axes=[0], keepdims=False)


def test_cond_eager_and_traced_agree():
    def f(x):
        return kiln.cond(total(x) > 0.0, lambda: x * x, lambda: -x)

    traced = kiln.function(f)
    reference = kiln.function(f, mode="reference")
    for data in ([1.0, 2.0, -0.5], [-1.0, -2.0, 0.5]):
        x = np.array(data, np.float64)
        expected = x * x if x.sum() > 0 else -x
        for run in (f, traced, reference):
            assert np.array_equal(run(kiln.tensor(x)).numpy(), expected)
    # One trace serves both branches: the predicate is data, not part of the signature.
    assert traced.tracing_count == 1
    ir = traced.concrete(np.ones(3)).ir()
    assert "cond(" in ir and "then" in ir and "else" in ir


def test_cond_keeps_the_branches_structure():
    x = kiln.tensor(np.array([1.0, 2.0], np.float32))
    pair = kiln.cond(kiln.tensor(True), lambda: (x, x * 2.0), lambda: (x * 3.0, x))
    assert isinstance(pair, tuple) and len(pair) == 2
    assert np.array_equal(pair[1].numpy(), [2.0, 4.0])
    as_list = kiln.cond(kiln.tensor(False), lambda: [x], lambda: [x + 1.0])
    assert isinstance(as_list, list) and np.array_equal(as_list[0].numpy(), [2.0, 3.0])


def test_while_loop_eager_and_traced_agree():
    def count_sum(n):
        i0 = kiln.tensor(np.int64(0))
        return kiln.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i), (i0, i0))

    for run in (count_sum, kiln.function(count_sum)):
        i, s = run(kiln.tensor(np.int64(6)))
        assert int(i.numpy()) == 6 and int(s.numpy()) == 15
    # A single loop variable stays a single tensor.
    y = kiln.while_loop(lambda v: total(v) < 100.0, lambda v: v * 2.0,
                        kiln.tensor(np.ones(2, np.float32)))
    assert isinstance(y, kiln.Tensor) and np.array_equal(y.numpy(), [64.0, 64.0])


def test_gradients_through_traced_cond_and_while_loop():
    @kiln.function
    def grads(x):
        with kiln.GradientTape() as tape:
            tape.watch(x)
            y = kiln.cond(total(x) > 0.0, lambda: x * x * x, lambda: kiln.ops.tanh(x))
            # x ** 4 by a loop that multiplies by the captured x four times
            _, p = kiln.while_loop(lambda i, p: i < 4, lambda i, p: (i + 1, p * x),
                                   (kiln.tensor(np.int64(0)), x * 0.0 + 1.0))
            loss = total(y) + total(p)
        return tape.gradient(loss, x)

    for data in ([0.5, 1.5, -0.25], [-0.5, -1.5, 0.25]):
        x = np.array(data, np.float64)
        dy = 3 * x**2 if x.sum() > 0 else 1 - np.tanh(x) ** 2
        expected = dy + 4 * x**3
        got = grads(kiln.tensor(x)).numpy()
        # a handful of float64 roundings of values of size |expected|
        assert np.all(np.abs(got - expected) <= 16 * EPS64 * (np.abs(dy) + np.abs(4 * x**3)))


def test_scan_returns_every_step():
    x = np.arange(1.0, 5.0, dtype=np.float64)

    def cumulative(x):
        def body(step, s):
            return s + kiln.ops.gather(x, step, axis=0)
        return kiln.scan(4, body, kiln.tensor(np.float64(0.0)))

    for run in (cumulative, kiln.function(cumulative)):
        final, stacked = run(kiln.tensor(x))
        assert float(final.numpy()) == 10.0
        assert np.array_equal(stacked.numpy(), np.cumsum(x))


def test_scan_over_sequences_and_its_gradient():
    # h <- h * w + a[k] * b[k]: final = sum_k a[k] b[k] w^(steps-1-k) (h0 = 0)
    steps = 4
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (steps, 3))
    b = rng.uniform(-1, 1, (steps, 3))
    w = 0.5

    def run(a, b):
        with kiln.GradientTape() as tape:
            tape.watch([a, b])
            final, stacked = kiln.scan(
                steps, lambda k, h, rows: h * w + rows[0] * rows[1],
                kiln.tensor(np.zeros(3)), xs=(a, b))
            loss = total(final)
        da, db = tape.gradient(loss, [a, b])
        return final, stacked, da, db

    powers = w ** np.arange(steps - 1, -1, -1)[:, None]
    for f in (run, kiln.function(run)):
        final, stacked, da, db = f(kiln.tensor(a), kiln.tensor(b))
        scale = np.abs(a * b).sum(axis=0)
        assert np.all(np.abs(final.numpy() - (a * b * powers).sum(axis=0)) <= 8 * EPS64 * scale)
        assert stacked.numpy().shape == (steps, 3)
        # d final / d a[k] = b[k] w^(steps-1-k), exactly (powers of two and one product)
        assert np.array_equal(da.numpy(), b * powers)
        assert np.array_equal(db.numpy(), a * powers)


def test_exception_in_a_branch_propagates_and_leaves_no_trace():
    fail = [True]

    def bad():
        if fail[0]:
            raise RuntimeError("boom in a branch")
        return kiln.tensor(np.float32(1.0))

    @kiln.function
    def f(x):
        return kiln.cond(x > 0.0, bad, lambda: x)

    with pytest.raises(RuntimeError, match="boom in a branch"):
        f(np.float32(1.0))
    assert f.tracing_count == 0
    fail[0] = False
    assert float(f(np.float32(2.0)).numpy()) == 1.0
    assert f.tracing_count == 1


def test_control_flow_errors_are_kiln_errors():
    x = kiln.tensor(np.ones(2, np.float32))
    with pytest.raises(kiln.Error, match="loop variables"):
        kiln.while_loop(lambda a, b: total(a) < 10.0, lambda a, b: (a * 2.0,), (x, x))
    with pytest.raises(kiln.Error):
        # The branches' types differ: traced, that is an error naming both.
        kiln.function(lambda p: kiln.cond(p, lambda: x, lambda: kiln.tensor(np.ones(3, np.float32))))(
            kiln.tensor(True))
    with pytest.raises(TypeError, match="returned None"):
        kiln.cond(kiln.tensor(True), lambda: None, lambda: None)
