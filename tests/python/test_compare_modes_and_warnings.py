"""kiln.compare_modes from Python (eager against compiled: results, differences, report) and
kiln's warnings as Python warnings (a retrace warning is a kiln.KilnWarning)."""
import warnings

import numpy as np
import pytest

import kiln


def mlp_loss_and_grads(x, w1, w2):
    with kiln.GradientTape() as tape:
        tape.watch([w1, w2])
        h = kiln.ops.relu(x @ w1)
        y = h @ w2
        loss = kiln.ops.mean(y * y, axes=[0, 1], keepdims=False)
    g1, g2 = tape.gradient(loss, [w1, w2])
    return loss, g1, g2


def test_compare_modes_reports_both_modes(capsys):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w1 = rng.standard_normal((8, 32)).astype(np.float32)
    w2 = rng.standard_normal((32, 4)).astype(np.float32)
    c = kiln.compare_modes(mlp_loss_and_grads, x, w1, w2, warmup=1, steps=3, name="mlp")
    report = capsys.readouterr().out
    assert "mlp" in report and "eager" in report and "compiled" in report
    assert isinstance(c, kiln.ModeComparison) and c.name == "mlp"
    assert len(c.eager_seconds) == 3 and len(c.compiled_seconds) == 3
    assert c.speedup > 0 and c.kernels >= 1 and c.compile_seconds >= 0
    assert [d.name for d in c.differences] == ["output 0", "output 1", "output 2"]
    # The eager results are the numpy computation's; the differences are those of the results.
    h = np.maximum(x.astype(np.float64) @ w1, 0)
    y = h @ w2
    loss = np.mean(y * y)
    assert abs(float(c.eager_results[0].numpy()) - loss) <= 1e-5 * loss
    for d, e, k in zip(c.differences, c.eager_results, c.compiled_results):
        assert d.max_abs == np.max(np.abs(e.numpy().astype(np.float64) - k.numpy()))
    # float32 with sums of at most 32 terms: well inside 1e-4 of the values' size
    assert all(d.max_rel < 1e-4 for d in c.differences)


def test_compare_modes_without_print_and_with_static_arguments(capsys):
    def scaled(x, factor):
        return x * factor

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = kiln.compare_modes(scaled, x, 3.0, steps=2, print=False)
    assert capsys.readouterr().out == ""
    assert np.array_equal(c.eager_results[0].numpy(), x * 3)
    assert np.array_equal(c.compiled_results[0].numpy(), x * 3)
    assert c.differences[0].max_abs == 0
    with pytest.raises(kiln.Error, match="steps must be >= 1"):
        kiln.compare_modes(scaled, x, 3.0, steps=0, print=False)


def test_compare_modes_compares_bf16_results_with_the_float32_run():
    # A bf16 product of positive operands: each mode is within bf16's rounding of the float32
    # run (operands and result rounded once each: 3 * 2^-8, plus the float32 sum's 16 * 2^-24),
    # and not equal to it; the float32 sum of it reports -1.
    def product(x, w):
        y = kiln.ops.cast(x, dtype=kiln.bfloat16) @ kiln.ops.cast(w, dtype=kiln.bfloat16)
        return y, kiln.ops.cast(y, dtype="float32")

    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, (4, 16)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, (16, 8)).astype(np.float32)
    c = kiln.compare_modes(product, x, w, steps=1, print=False)
    d = c.differences[0]
    assert d.type == "bf16[4,8]"
    bound = 3 * 2.0 ** -8 + 16 * 2.0 ** -24
    assert 0 < d.eager_vs_float32 <= bound and 0 < d.compiled_vs_float32 <= bound
    assert c.differences[1].eager_vs_float32 == -1


def test_retracing_warns_as_a_python_warning():
    @kiln.function(name="shape_changer")
    def f(x):
        return x + 1.0

    with pytest.warns(kiln.KilnWarning, match='"shape_changer" retraced'):
        for n in range(1, 8):
            f(np.ones(n, np.float32))
    # One shape, no more traces: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", kiln.KilnWarning)
        for _ in range(10):
            f(np.ones(3, np.float32))
    assert issubclass(kiln.KilnWarning, UserWarning)
