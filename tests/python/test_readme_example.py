"""The README's Python example runs and prints what it says."""
import contextlib
import io
import os
import re

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_python_example_runs():
    text = open(README).read()
    section = text[text.index("## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue()
    assert "[[ 4.]\n [13.]]" in printed
    assert "graph @step" in printed
    assert np.array2string(2 * np.arange(6, dtype=np.float32).reshape(2, 3)) in printed
    assert "[[ 3.]\n [12.]]" in printed  # kiln.ops.sum over axis 1, kept
