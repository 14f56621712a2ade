"""@kiln.function: tracing counts, retracing on new signatures and static values, the IR, the
compiled and reference executions against eager, and exceptions raised while tracing."""
import numpy as np
import pytest

import kiln


def test_traces_once_per_signature_and_matches_eager():
    calls = []

    @kiln.function
    def step(x, w, scale):
        calls.append(1)
        return kiln.ops.relu(x @ w) * scale, kiln.ops.exp(x)

    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    y1, e1 = step(x, w, 2.0)
    y2, _ = step(kiln.tensor(x), kiln.tensor(w), 2.0)
    assert len(calls) == 1 and step.tracing_count == 1
    step(x, w, 3.0)  # a new static value traces again
    assert step.tracing_count == 2
    step(x[:2], w, 2.0)  # a new shape traces again
    assert step.tracing_count == 3
    eager = np.maximum(x @ w, 0) * 2.0
    # compiled float32 against float64 numpy: a 3-term dot product's bound
    bound = 4 * 3 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w)) * 2.0 + 1e-30
    assert np.all(np.abs(y1.numpy() - eager) <= bound)
    assert np.array_equal(y1.numpy(), y2.numpy())


def test_ir_and_concrete_function():
    @kiln.function(name="affine")
    def f(x, w):
        return kiln.ops.relu(x @ w) + 1.0

    x = np.ones((2, 3), np.float32)
    w = np.ones((3, 1), np.float32)
    c = f.concrete(x, w)
    ir = c.ir()
    assert "graph @affine" in ir and "matmul" in ir and "relu" in ir
    assert "fusion" in c.ir("optimized") or "relu" in c.ir("optimized")
    assert c.input_types == ["f32[2,3]", "f32[3,1]"]
    ref = c.run([kiln.tensor(x), kiln.tensor(w)], "reference")[0].numpy()
    comp = c.run([kiln.tensor(x), kiln.tensor(w)], "compiled")[0].numpy()
    assert np.array_equal(ref, [[4.0], [4.0]]) and np.array_equal(comp, ref)
    assert "arena" in c.memory_plan() or len(c.memory_plan()) > 0


def test_results_keep_their_structure():
    @kiln.function
    def nothing(x):
        return None

    @kiln.function
    def as_list(x):
        return [x + 1.0, x * 2.0]

    x = np.ones(3, np.float32)
    assert nothing(x) is None
    out = as_list(x)
    assert isinstance(out, list) and len(out) == 2


def test_python_exception_propagates_and_leaves_no_trace():
    fail = [True]

    @kiln.function
    def f(x):
        y = x * 2.0
        if fail[0]:
            raise RuntimeError("boom in the traced body")
        return y

    x = np.ones(2, np.float32)
    with pytest.raises(RuntimeError, match="boom"):
        f(x)
    fail[0] = False
    assert np.array_equal(f(x).numpy(), [2.0, 2.0])
    assert f.tracing_count == 1


def test_input_signature_and_bad_arguments():
    @kiln.function(input_signature=[kiln.TensorSpec([None, 2], "float32")])
    def f(x):
        return x * 3.0

    f(np.ones((1, 2), np.float32))
    f(np.ones((5, 2), np.float32))
    assert f.tracing_count == 1
    with pytest.raises(kiln.Error):
        f(np.ones((5, 3), np.float32))
    with pytest.raises(TypeError, match="argument 0"):
        f(object())
