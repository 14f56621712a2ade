#!/usr/bin/python3
"""What a call of a compiled kiln training step costs from Python beyond the same call from C++
(issue 19: at most 10 microseconds).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call_overhead.py [--calls N]

Each workload is a @kiln.function training step on kiln.Variables (forward, GradientTape,
SGD updates with assign_sub; it returns the loss). In one process, alternately: `calls` calls
made by a Python loop (argument flattening, signature lookup, the compiled run with the GIL
released, the result wrapped as a kiln.Tensor) and `calls` calls made by a C++ loop on the same
function and arguments (Function._time_cpp_calls: what a C++ caller of kiln::function does).
Per workload it prints the median per-call time of each and their difference over
`repetitions` alternations; --json writes them too.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import kiln


def mlp_step(sizes, batch, seed=0):
    """A training step of an MLP with ReLU between layers, mean squared error and SGD."""
    rng = np.random.default_rng(seed)
    weights = [kiln.Variable((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
                             name=f"w{i}") for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.standard_normal((batch, sizes[-1])).astype(np.float32)

    @kiln.function(name="train_step")
    def step(x, y):
        with kiln.GradientTape() as tape:
            h = x
            for i, w in enumerate(weights):
                h = h @ w
                if i + 1 < len(weights):
                    h = kiln.ops.relu(h)
            d = h - y
            loss = kiln.ops.mean(d * d, axes=[0, 1], keepdims=False)
        grads = tape.gradient(loss, weights)
        for w, g in zip(weights, grads):
            w.assign_sub(g * 0.01)
        return loss

    return step, (kiln.tensor(x), kiln.tensor(y))


WORKLOADS = {
    # A step so small that the call overhead is most of its time.
    "mlp_16_16_1_b8": lambda: mlp_step([16, 16, 1], 8),
    # The MLP of `kiln bench` (mlp_784_256_256_10_b64).
    "mlp_784_256_256_10_b64": lambda: mlp_step([784, 256, 256, 10], 64),
}


def python_seconds_per_call(step, args, calls):
    start = time.perf_counter()
    for _ in range(calls):
        step(*args)
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--repetitions", type=int, default=9, help="alternations per workload")
    parser.add_argument("--filter", default="", help="only workloads whose name has this")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()

    results = []
    print(f"{'workload':<26} {'C++ us':>9} {'Python us':>10} {'overhead us':>12}")
    for name, make in WORKLOADS.items():
        if opts.filter not in name:
            continue
        step, args = make()
        step(*args)  # trace and compile
        calls = max(1, opts.calls if "784" not in name else opts.calls // 10)
        cpp, python = [], []
        for _ in range(opts.repetitions):
            cpp.append(step._time_cpp_calls(calls, *args))
            python.append(python_seconds_per_call(step, args, calls))
        # Differences of each alternation (neighbouring measurements share the machine's state).
        diffs = [p - c for p, c in zip(python, cpp)]
        row = {"workload": name, "calls": calls, "cpp_us": statistics.median(cpp) * 1e6,
               "python_us": statistics.median(python) * 1e6,
               "overhead_us": statistics.median(diffs) * 1e6}
        results.append(row)
        print(f"{name:<26} {row['cpp_us']:9.2f} {row['python_us']:10.2f} "
              f"{row['overhead_us']:12.2f}")
    if opts.json:
        with open(opts.json + ".tmp", "w") as f:
            json.dump(results, f, indent=2)
        import os
        os.replace(opts.json + ".tmp", opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
