"""ConcreteFunction.report: the step report of a compiled function, with and without measured
times; every fusion group drawn once, nothing fetched from a network, variables left alone."""
import os
import re
import tempfile

import numpy as np
import pytest

import kiln


def _step():
    w = kiln.Variable(np.full((8, 4), 0.5, np.float32), name="dense/kernel")

    @kiln.function(name="sgd_step")
    def step(x, y):
        with kiln.GradientTape() as tape:
            loss = kiln.ops.mean((kiln.ops.relu(x @ w) - y) ** 2, axes=[0, 1], keepdims=False)
        g = tape.gradient(loss, [w])[0]
        w.assign_sub(0.1 * g)
        return loss

    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    y = np.ones((8, 4), np.float32)
    return step, w, x, y


def _groups(ir):
    return set(re.findall(r"kind\(\"[a-z]+\"\) @([A-Za-z0-9_]+)", ir))


def test_report_with_times_draws_every_group_once_and_keeps_variables():
    step, w, x, y = _step()
    c = step.concrete(x, y)
    before = np.array(w.numpy())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "step.html")
        c.report(path, [x, y], calls=2)
        html = open(path, encoding="utf-8").read()
    assert np.array_equal(w.numpy(), before)
    assert "http://" not in html and "https://" not in html
    assert 'data-calls="2"' in html and "data-step-ns=" in html
    groups = _groups(c.ir("optimized"))
    assert groups
    for g in groups:
        assert html.count('data-group="%s"' % g) == 1, g


def test_report_without_times_and_a_bad_path():
    step, _, x, y = _step()
    c = step.concrete(x, y)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "untimed.html")
        c.report(path)
        html = open(path, encoding="utf-8").read()
        assert "data-step-ns" not in html and "data-buffer=" in html
        bad = os.path.join(d, "missing", "step.html")
        with pytest.raises(Exception, match=re.escape(bad)):
            c.report(bad)


def test_a_keras_train_step_names_the_python_lines_that_made_it():
    # The layers joined the model on the next line, compile() chose the loss two lines below
    # and the optimizer was made on the line between: the traced step's nodes say so.
    model = kiln.keras.Sequential([kiln.keras.layers.Dense(4, activation="relu"),
                                   kiln.keras.layers.Dense(3)])
    opt = kiln.keras.optimizers.Adam()
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    line = test_a_keras_train_step_names_the_python_lines_that_made_it.__code__.co_firstlineno
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    y = np.array([0, 1, 2, 1], np.int32)
    ir = model.train_step_ir(x, y, "traced")
    here = re.escape(os.path.basename(__file__))
    located = {}
    for name, at in re.findall(r'name\("([^"]+)"\) loc\("[^"]*' + here + r'":([0-9]+):0\)', ir):
        located.setdefault(int(at), set()).add(name.split("/")[0].rstrip("_0123456789"))
    assert located.get(line + 3, set()) >= {"sequential", "gradient"}, located
    assert "compile_loss" in located.get(line + 6, set()), located
    assert "adam" in located.get(line + 5, set()), located
