"""bench/python_call_overhead.py runs and reports both call paths (its figures are measured on
a quiet machine and kept in docs/benchmarks.md; a test checks no speed). Also: the C++ timing
loop it relies on runs the same compiled function (its variables see every call)."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_benchmark_script_reports_both_paths(tmp_path):
    out = tmp_path / "overhead.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "python_call_overhead.py"), "--calls", "20",
         "--repetitions", "2", "--filter", "mlp_16", "--json", str(out)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert run.returncode == 0, run.stderr
    assert "mlp_16_16_1_b8" in run.stdout and "overhead us" in run.stdout
    rows = json.loads(out.read_text())
    assert [r["workload"] for r in rows] == ["mlp_16_16_1_b8"]
    assert rows[0]["cpp_us"] > 0 and rows[0]["python_us"] > 0


def test_cpp_timing_loop_runs_the_function():
    v = kiln.Variable(np.zeros(2, np.float32))

    @kiln.function
    def bump(x):
        v.assign_add(x)
        return v.read_value() if hasattr(v, "read_value") else v + 0.0

    x = kiln.tensor(np.ones(2, np.float32))
    seconds = bump._time_cpp_calls(5, x)
    assert seconds > 0
    # one untimed warm-up call plus five timed calls
    assert np.array_equal(v.numpy(), [6.0, 6.0])
    assert bump.tracing_count == 1
