"""A training step written in Python traces to the same IR as the same step written in C++
(tests/python/cpp/train_step.cc) and, from the same seeds, gives bitwise the same losses and
weights over five steps: Python is a front end to the same tracer, not a second
implementation."""
import os
import pathlib
import subprocess

import numpy as np

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cpp_program():
    # ctest passes the program's path; by hand, the default build directory's.
    path = os.environ.get("KILN_CPP_TRAIN_STEP", str(ROOT / "build" / "python" / "cpp_train_step"))
    assert os.path.exists(path), f"{path} is missing: build the target kiln_python_cpp_train_step"
    return path


def seeded_normal(shape, seed, stddev=1.0):
    return kiln.ops.random_normal(kiln.tensor(np.int64(seed)), shape=list(shape), dtype="float32",
                                  mean=0.0, stddev=stddev)


def python_run():
    w1 = kiln.Variable(seeded_normal((8, 16), 1, 0.3), name="w1")
    b1 = kiln.Variable(np.zeros(16, np.float32), name="b1")
    w2 = kiln.Variable(seeded_normal((16, 4), 2, 0.3), name="w2")
    x = seeded_normal((32, 8), 3)
    y = seeded_normal((32, 4), 4)

    @kiln.function(name="train_step")
    def step(x, y):
        with kiln.GradientTape() as tape:
            h = kiln.ops.tanh(x @ w1 + b1)
            d = h @ w2 - y
            loss = kiln.ops.mean(d * d, axes=[0, 1], keepdims=False)
        g = tape.gradient(loss, [w1, b1, w2])
        w1.assign_sub(g[0] * 0.1)
        b1.assign_sub(g[1] * 0.1)
        w2.assign_sub(g[2] * 0.1)
        return loss

    ir = step.concrete(x, y).ir()
    losses = [float(step(x, y).numpy()) for _ in range(5)]
    return ir, losses, {v.name: v.numpy().ravel().astype(np.float64) for v in (w1, b1, w2)}


def test_python_step_equals_the_cpp_step():
    run = subprocess.run([cpp_program()], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    cpp_ir, numbers = run.stdout.split("---\n")
    lines = numbers.strip().split("\n")
    cpp_losses = [float.fromhex(v) for v in lines[:5]]
    cpp_weights = {}
    for line in lines[5:]:
        name, *values = line.split()
        cpp_weights[name] = np.array([float.fromhex(v) for v in values])

    ir, losses, weights = python_run()
    assert ir == cpp_ir
    assert losses == cpp_losses
    assert losses[-1] < losses[0]  # it trains
    assert weights.keys() == cpp_weights.keys()
    for name in weights:
        assert np.array_equal(weights[name], cpp_weights[name]), name
