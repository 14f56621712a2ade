"""scripts/check-unity-names.py: the names two files of a unity batch may not share."""
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check-unity-names.py"


def check(tmp_path, first, second):
    """Runs the checker on a build folder with one batch of two files; (exit code, output)."""
    a, b = tmp_path / "a.cc", tmp_path / "b.cc"
    a.write_text(first)
    b.write_text(second)
    unity = tmp_path / "build" / "lib.dir" / "Unity"
    unity.mkdir(parents=True)
    (unity / "unity_0_cxx.cxx").write_text(f'#include "{a}"\n#include "{b}"\n')
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "build")],
                         capture_output=True, text=True)
    return run.returncode, run.stdout


HELPER = "namespace kiln {\nnamespace {\nint helper(int x) { return x; }\n}  // namespace\n}\n"


def test_a_helper_of_the_same_name_in_one_namespace_is_reported(tmp_path):
    other = "namespace kiln {\nnamespace {\ndouble helper(double x) { return x; }\n}\n}\n"
    code, out = check(tmp_path, HELPER, other)
    assert code == 1
    assert "kiln::helper" in out and "a.cc:3" in out and "b.cc:3" in out


def test_static_functions_count_as_file_local(tmp_path):
    code, out = check(tmp_path, "static int twice(int x) { return 2 * x; }\n",
                      "static long twice(long x) { return 2 * x; }\n")
    assert code == 1 and "twice" in out


def test_the_same_name_in_different_namespaces_is_fine(tmp_path):
    other = HELPER.replace("namespace kiln {", "namespace kiln::other {")
    assert check(tmp_path, HELPER, other)[0] == 0


def test_names_inside_functions_and_classes_are_not_file_scope(tmp_path):
    body = "namespace {\nstruct A { int helper(int); };\nvoid f() { int helper = 1; }\n}\n"
    other = "namespace {\nstruct B { int helper(int); };\nvoid g() { int helper = 2; }\n}\n"
    assert check(tmp_path, body, other)[0] == 0


@pytest.mark.parametrize("second, clash", [
    ("namespace {\nusing ir::Value;\n}\n", False),
    ("namespace {\nusing llvm::Value;\n}\n", True),
    ("namespace {\nusing Grads = std::vector<Tensor>;\n}\n", False),
    ("namespace {\nusing Grads = std::vector<double>;\n}\n", True),
])
def test_using_declarations_and_aliases_clash_only_when_they_name_different_things(
        tmp_path, second, clash):
    first = "namespace {\nusing ir::Value;\nusing Grads = std::vector<Tensor>;\n}\n"
    assert check(tmp_path, first, second)[0] == (1 if clash else 0)


def test_a_macro_left_defined_is_reported_and_an_undefined_one_is_not(tmp_path):
    code, out = check(tmp_path, "#define TWICE(x) (2 * (x))\n", "#define TWICE(x) ((x) + (x))\n")
    assert code == 1 and "macro TWICE" in out
    undefined = "#define TWICE(x) (2 * (x))\n#undef TWICE\n"
    (tmp_path / "undefined").mkdir()
    assert check(tmp_path / "undefined", undefined, undefined)[0] == 0


def test_test_macros_and_comments_are_not_declarations(tmp_path):
    body = ('namespace {\n// int helper(int x);\nconst char* s = "int helper(int)";\n'
            "TEST(Suite, Name) { EXPECT_EQ(1, 1); }\n}\n")
    other = "namespace {\nTEST(Suite, Other) { EXPECT_EQ(2, 2); }\nint helper(int x);\n}\n"
    assert check(tmp_path, body, other)[0] == 0


def test_arrays_with_brace_initializers_are_declarations(tmp_path):
    code, out = check(tmp_path, "namespace {\nconstexpr int kModes[] = {1, 2};\n}\n",
                      "namespace {\nconst char* kModes[] = {\"a\"};\n}\n")
    assert code == 1 and "kModes" in out
