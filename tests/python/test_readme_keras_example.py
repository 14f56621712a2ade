"""The README's kiln.keras example (the second Python block of its Python section) runs and
trains."""
import contextlib
import io
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_keras_example_runs():
    text = open(README).read()
    section = text[text.index("## Python"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    code = next(b for b in blocks if "kiln import keras" in b)
    out = io.StringIO()
    scope = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), scope)
    assert "'accuracy'" in out.getvalue()
    assert len(scope["history"].history["loss"]) == 10
    assert scope["model"].evaluate(scope["x_test"], scope["y_test"], verbose=0,
                                   return_dict=True)["accuracy"] > 0.9
