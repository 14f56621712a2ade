"""The conventions of the `kiln` and `kiln-opt` programs (tools/cli_conventions.h), and
`kiln train --json`.

ctest runs each class as its own test (tools/CMakeLists.txt):
  KILN=build/tools/kiln KILN_OPT=build/tools/kiln-opt KILN_VERSION=0.1.0 SRC=. WORK=/tmp/w \
      /usr/bin/python3 tests/tools/cli_test.py ConventionsTest TrainJsonTest -v

ConventionsTest: help (`kiln` alone, --help on every subcommand) lists every option with help
text and a default; --version is one line; exact exit codes: 0 (help, version, success),
1 (a runtime failure: `PROGRAM: error: ...`), 2 (a usage error, with a hint to --help).
TrainJsonTest: `kiln train --json FILE` parsed back and checked against what the run printed.
TrainResumeTest: `--save-model` / `--load-model --initial-epoch` resume training bitwise.
"""
import json
import math
import os
import re
import shutil
import subprocess
import unittest

KILN = os.environ.get("KILN", "build/tools/kiln")
KILN_OPT = os.environ.get("KILN_OPT", "build/tools/kiln-opt")
VERSION = os.environ.get("KILN_VERSION", "")
SRC = os.environ.get("SRC", ".")
WORK = os.environ.get("WORK", "/tmp/kiln_cli_test")

SUBCOMMANDS = ["train", "predict", "generate", "dump-ir", "report", "run", "bench", "ops", "demo"]
VALID_KIR = "graph @ok(%x: f32[2]) -> (f32[2]) {\n  %e = exp(%x) : f32[2]\n  %d = exp(%x) : f32[2]\n  %s = add(%e, %d) : f32[2]\n  return %s\n}\n"


def run(*args, stdin=None, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, input=stdin, timeout=600,
                          env=None if env is None else {**os.environ, **env})


def option_lines(help_text):
    """The rows of a CLI11 help text as (name and type, description). CLI11 starts the
    description in column 30, or on the next line (indented 30) after a longer name."""
    lines = help_text.splitlines()
    rows = []
    for k, line in enumerate(lines):
        if not line.startswith("  ") or line[2:3] in ("", " "):
            continue
        following = lines[k + 1] if k + 1 < len(lines) else ""
        if re.match(r"^ {30}\S", following):
            rows.append((line.strip(), following.strip()))
        else:
            rows.append((line[:30].strip(), line[30:].strip()))
    return rows


class ConventionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        cls.kir = os.path.join(WORK, "ok.kir")
        with open(cls.kir, "w") as f:
            f.write(VALID_KIR)

    # ---- help

    def check_help(self, help_text, where):
        """Every option has help text; every option that takes a value and is not required
        shows its default."""
        rows = [r for r in option_lines(help_text) if r[0].startswith("-") or r[0] == "file"]
        self.assertTrue(rows, f"{where}: no options in:\n{help_text}")
        for names, desc in rows:
            self.assertTrue(desc.strip(), f"{where}: {names} has no help text")
            flag = not re.search(r"\s[A-Z]", names)  # "--verify" vs "--epochs INT"
            if not flag and "REQUIRED" not in names:
                self.assertRegex(desc, r"\[default: [^\]]+\]$",
                                 f"{where}: {names} shows no default: {desc}")

    def test_kiln_alone_prints_help(self):
        r = run(KILN)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertIn("Usage:", r.stdout)
        for sub in SUBCOMMANDS:
            self.assertRegex(r.stdout, rf"\n  {re.escape(sub)}\s+\S", f"{sub} not listed")
        self.assertNotIn("== eager demo ==", r.stdout)  # it used to run the demo
        self.assertEqual(run(KILN, "--help").stdout, r.stdout)
        self.assertEqual(run(KILN, "-h").returncode, 0)
        self.check_help(r.stdout, "kiln")
        self.assertIn("--target-cpu TEXT", r.stdout)
        self.assertIn("[default: native, or KILN_TARGET_CPU]", r.stdout)

    def test_every_subcommand_help(self):
        for sub in SUBCOMMANDS:
            r = run(KILN, sub, "--help")
            self.assertEqual(r.returncode, 0, f"{sub}: {r.stderr}")
            self.assertIn(f"Usage: kiln {sub}", r.stdout)
            if sub not in ("ops", "demo"):  # they have no options but --help
                self.check_help(r.stdout, f"kiln {sub}")

    def test_train_help_shows_defaults(self):
        out = run(KILN, "train", "--help").stdout
        for option, default in [("--epochs", "20"), ("--batch-size", "32"), ("--seed", "0"),
                                ("--optimizer", "adam"), ("--mode", "compiled"),
                                ("--model", "mlp"), ("--verbose", "1"), ("--seq-len", "64"),
                                ("--units", "256"), ("--validation-split", "0"),
                                ("--json", "none")]:
            self.assertRegex(out, rf"\n  {option} [^\n]*(\n   [^\n]*)*\[default: {default}\]",
                             f"{option} should show [default: {default}]")
        self.assertRegex(out, r"--lr FLOAT[^\n]*(\n   [^\n]*)*\[default: 1e-3 for mlp and cnn, "
                         r"3e-3 for the language models\]")
        self.assertIn("learning rate", out)
        self.assertIn("training history per epoch", out)
        for option in ["--save-model", "--load-model", "--initial-epoch"]:
            self.assertIn(option, out)

    def test_kiln_opt_help(self):
        r = run(KILN_OPT, "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Usage: kiln-opt", r.stdout)
        for option in ["-o,--output", "--passes", "--pipeline", "--verify", "--timings",
                       "--list-passes", "--version"]:
            self.assertIn(option, r.stdout)
        self.assertIn("[default: -]", r.stdout)  # -o: stdout
        self.check_help(r.stdout, "kiln-opt")

    # ---- version

    def test_version_is_one_line(self):
        r = run(KILN, "--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rf"^kiln {re.escape(VERSION)} \(LLVM 19\.[^\n]*threads\)\n$")
        r = run(KILN_OPT, "--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"kiln-opt (kiln {VERSION})\n")

    # ---- usage errors: exit 2, "PROGRAM: error:" and a hint on stderr, nothing on stdout

    def check_usage_error(self, args, message, hint):
        r = run(*args)
        self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}{r.stderr}")
        self.assertEqual(r.stdout, "", args)
        program = os.path.basename(args[0])
        self.assertRegex(r.stderr, rf"^{program}: error: [^\n]*{message}",
                         f"{args}: {r.stderr}")
        self.assertIn(f"Run '{hint} --help' for more information.", r.stderr)

    def test_kiln_usage_errors(self):
        cases = [
            ([KILN, "--frobnicate"], "--frobnicate", "kiln"),
            ([KILN, "frobnicate"], "frobnicate", "kiln"),
            ([KILN, "train", "--frobnicate"], "--frobnicate", "kiln train"),
            ([KILN, "train", "--epochs", "many"], "--epochs", "kiln train"),
            ([KILN, "train", "--epochs", "0"], "--epochs", "kiln train"),
            ([KILN, "train", "--model", "resnet"], "resnet", "kiln train"),
            ([KILN, "train", "--epochs"], "--epochs", "kiln train"),
            ([KILN, "train", "--dataset", "text:x.txt"], "is text", "kiln train"),
            ([KILN, "train", "--model", "lstm", "--dataset", "digits"], "trains on text",
             "kiln train"),
            ([KILN, "predict", "--input", "x.npy", "--output", "y.npy"], "--load-weights",
             "kiln predict"),
            ([KILN, "dump-ir", self.kir, "--model", "cnn"], "or --model cnn, not both",
             "kiln dump-ir"),
            ([KILN, "--target-cpu", "not-a-cpu", "--version"], "not known to LLVM", "kiln"),
            ([KILN, "tune", "--dtype", "f16"], "f16", "kiln tune"),
        ]
        for args, message, hint in cases:
            with self.subTest(args=args[1:]):
                self.check_usage_error(args, message, hint)

    def test_kiln_opt_usage_errors(self):
        cases = [
            ([KILN_OPT], "file is required"),
            ([KILN_OPT, self.kir, "--frobnicate"], "--frobnicate"),
            ([KILN_OPT, self.kir, "--pipeline=fast"], "fast"),
            ([KILN_OPT, self.kir, "--passes=cse,nope"], 'unknown pass "nope" \\(known passes: '),
            ([KILN_OPT, self.kir, "--passes=cse", "--pipeline=default"], "excludes"),
            ([KILN_OPT, self.kir, "other.kir"], "other.kir"),
        ]
        for args, message in cases:
            with self.subTest(args=args[1:]):
                self.check_usage_error(args, message, "kiln-opt")

    # ---- runtime failures: exit 1, "PROGRAM: error: MESSAGE" on stderr

    def check_failure(self, args, message, env=None):
        r = run(*args, env=env)
        self.assertEqual(r.returncode, 1, f"{args}: {r.stdout}{r.stderr}")
        program = os.path.basename(args[0])
        self.assertRegex(r.stderr, rf"(^|\n){program}: error: [^\n]*{message}", r.stderr)
        self.assertNotIn("--help' for more information", r.stderr)

    def test_kiln_failures(self):
        missing = os.path.join(WORK, "missing.kir")
        # kiln::Error
        self.check_failure([KILN, "run", missing], "missing.kir")
        self.check_failure([KILN, "train", "--dataset", os.path.join(WORK, "no_mnist")],
                           "no_mnist")
        # Tuning the bf16 pair kernels where bf16 products run on the float32 ones (or, on a
        # CPU without AVX2, where kiln tunes nothing).
        self.check_failure([KILN, "tune", "--dtype", "bf16", "--dry-run"],
                           "(bf16 products run on the float32 kernels here|"
                           "float32 GEMMs run on Eigen here)",
                           env={"KILN_GEMM_BF16": "float32"})
        # A std::filesystem error (not a kiln::Error): the output directory is under a file.
        blocker = os.path.join(WORK, "a_file")
        with open(blocker, "w") as f:
            f.write("x")
        x = os.path.join(WORK, "x.npy")
        with open(x, "wb") as f:  # float32 [2], the .npy format by hand
            header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
            header += " " * (64 - 10 - len(header) - 1) + "\n"
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") +
                    header.encode() + b"\x00\x00\x80\x3f\x00\x00\x00\x40")
        self.check_failure([KILN, "run", self.kir, "--input", f"0={x}", "--output-dir",
                            os.path.join(blocker, "out")], "filesystem error")

    def test_kiln_opt_failures(self):
        self.check_failure([KILN_OPT, os.path.join(WORK, "missing.kir")], "missing.kir")
        bad = os.path.join(WORK, "bad.kir")
        with open(bad, "w") as f:
            f.write("graph @bad(%x: f32[2]) -> (f32[2]) {\n  return %y\n}\n")
        self.check_failure([KILN_OPT, bad], "bad.kir:2")
        # -o into a directory that does not exist
        self.check_failure([KILN_OPT, self.kir, "-o", os.path.join(WORK, "no", "out.kir")],
                           "out.kir")

    # ---- successes

    def test_kiln_opt_output_file(self):
        printed = run(KILN_OPT, self.kir, "--passes=cse,dce")
        self.assertEqual(printed.returncode, 0, printed.stderr)
        self.assertEqual(printed.stdout.count("exp("), 1)  # cse merged the two
        out = os.path.join(WORK, "out.kir")
        for args in (["-o", out], ["--output", out], [f"--output={out}"]):
            if os.path.exists(out):
                os.remove(out)
            r = run(KILN_OPT, self.kir, "--passes", "cse,dce", *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, "")
            with open(out) as f:
                self.assertEqual(f.read(), printed.stdout)
        r = run(KILN_OPT, "-", "--pipeline", "default", stdin=VALID_KIR)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("exp("), 1)
        r = run(KILN_OPT, "--list-passes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cse\n", r.stdout)

    def test_kiln_ops_succeeds(self):
        r = run(KILN, "ops")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn("| `matmul` |", r.stdout)


def printed(pattern, text):
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in:\n{text}"
    return float(m.group(1))


class TrainResumeTest(unittest.TestCase):
    """`kiln train --save-model` then `--load-model --initial-epoch` resumes training exactly:
    2 epochs + 2 resumed epochs end with the same bytes of weights and optimizer state as 4
    epochs in one run (same thread count), compiled and eager; and --load-model refuses the
    options it would otherwise have to ignore."""

    def train(self, *args):
        r = run(KILN, "train", "--verbose", "0", *args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def saved_bytes(self, model_dir):
        out = {}
        for name in ["model.weights.safetensors", "optimizer.safetensors"]:
            with open(os.path.join(model_dir, name), "rb") as f:
                out[name] = f.read()
        return out

    def test_two_plus_two_epochs_equal_four(self):
        for mode in ["compiled", "eager"]:
            with self.subTest(mode=mode):
                base = os.path.join(WORK, "resume_" + mode)
                shutil.rmtree(base, ignore_errors=True)
                os.makedirs(base)
                common = ["--model", "mlp", "--mode", mode, "--seed", "3", "--batch-size", "64"]
                half, resumed, whole = (os.path.join(base, n) for n in ["half", "resumed", "whole"])
                out = self.train(*common, "--epochs", "2", "--save-model", half)
                self.assertIn("saved the model", out)
                for name in ["metadata.json", "config.json", "model.weights.safetensors",
                             "optimizer.safetensors"]:
                    self.assertTrue(os.path.exists(os.path.join(half, name)), name)
                self.train(*common, "--epochs", "4", "--load-model", half, "--initial-epoch", "2",
                           "--save-model", resumed)
                self.train(*common, "--epochs", "4", "--save-model", whole)
                got, want = self.saved_bytes(resumed), self.saved_bytes(whole)
                for name in want:
                    self.assertEqual(got[name], want[name], name + " differs after resuming")
                # The half-way model differs (the test can tell models apart).
                self.assertNotEqual(self.saved_bytes(half)["model.weights.safetensors"],
                                    want["model.weights.safetensors"])

    def test_run_takes_a_saved_models_variables_by_name(self):
        """`kiln run DIR/train_step.kir --model DIR` equals the same run with every variable
        given by hand from the saved safetensors files (read here with numpy)."""
        import numpy as np
        base = os.path.join(WORK, "run_model")
        shutil.rmtree(base, ignore_errors=True)
        model = os.path.join(base, "m")
        self.train("--model", "mlp", "--epochs", "1", "--batch-size", "16", "--save-model", model)
        step = os.path.join(model, "train_step.kir")
        self.assertTrue(os.path.exists(step))
        with open(os.path.join(model, "train_step.optimized.kir")) as f:
            self.assertIn("fusion", f.read())  # the optimized stage: fusion groups
        rng = np.random.default_rng(5)
        np.save(os.path.join(base, "x.npy"), rng.random((16, 64)).astype(np.float32))
        np.save(os.path.join(base, "y.npy"), (np.arange(16) % 10).astype(np.int64))
        inputs = ["--input", "0=" + os.path.join(base, "x.npy"),
                  "--input", "1=" + os.path.join(base, "y.npy")]
        by_hand = []
        for name in ["model.weights.safetensors", "optimizer.safetensors"]:
            with open(os.path.join(model, name), "rb") as f:
                data = f.read()
            n = int.from_bytes(data[:8], "little")
            header = json.loads(data[8:8 + n])
            names = header.pop("__metadata__")
            for entry, info in header.items():
                dtype = {"F32": np.float32, "I64": np.int64, "F64": np.float64}[info["dtype"]]
                begin, end = info["data_offsets"]
                value = np.frombuffer(data[8 + n + begin:8 + n + end], dtype).reshape(info["shape"])
                path = os.path.join(base, "var_%d.npy" % len(by_hand))
                np.save(path, value)
                by_hand += ["--input", names[entry] + "=" + path]
        outs = {}
        for label, extra in [("model", ["--model", model]), ("hand", by_hand)]:
            out_dir = os.path.join(base, "out_" + label)
            r = run(KILN, "run", step, *inputs, *extra, "--output-dir", out_dir)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            outs[label] = {f: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
        self.assertEqual(sorted(outs["model"]), sorted(outs["hand"]))
        self.assertIn("dense.kernel.npy", outs["model"])  # the step wrote the updated weights
        for f in outs["hand"]:
            self.assertTrue(np.array_equal(outs["model"][f], outs["hand"][f]), f)
        # Without --model the variables are missing: a clear error naming one.
        r = run(KILN, "run", step, *inputs, "--output-dir", os.path.join(base, "none"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no --input", r.stderr)

    def test_load_model_excludes_options_it_would_ignore(self):
        for option in [["--lr", "0.1"], ["--optimizer", "sgd"], ["--load-weights", "w.st"]]:
            r = run(KILN, "train", "--load-model", "m", *option)
            self.assertEqual(r.returncode, 2, option)
            self.assertIn("excludes", r.stderr)

    def test_missing_saved_model_is_an_error(self):
        r = run(KILN, "train", "--load-model", os.path.join(WORK, "no_such_model"), "--epochs", "1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("kiln: error:", r.stderr)
        self.assertIn("no_such_model", r.stderr)


class TrainJsonTest(unittest.TestCase):
    """`kiln train --json FILE` parsed back: the numbers equal the ones the run printed."""

    @classmethod
    def setUpClass(cls):
        os.makedirs(WORK, exist_ok=True)

    def train(self, name, *args):
        path = os.path.join(WORK, name)
        if os.path.exists(path):
            os.remove(path)
        r = run(KILN, "train", *args, "--json", path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"wrote {path}", r.stdout)
        with open(path) as f:
            return r.stdout, json.load(f)

    def check_common(self, report, epochs):
        self.assertEqual(report["command"], "train")
        self.assertEqual(report["kiln_version"], VERSION)
        for key in ["host_cpu", "target_cpu", "threads", "load_average"]:
            self.assertIn(key, report)
        self.assertEqual(report["options"]["epochs"], epochs)
        for run_ in report["runs"]:
            self.assertEqual(run_["epochs"], epochs)
            for metric, values in run_["history"].items():
                self.assertEqual(len(values), epochs, metric)
            self.assertAlmostEqual(run_["final_loss"], run_["history"]["loss"][-1], places=12)
            self.assertGreater(run_["step_ms"]["median_ms"], 0)
            self.assertGreater(run_["step_ms"]["steps"], 0)

    def test_mlp_one_mode(self):
        out, report = self.train("mlp.json", "--model", "mlp", "--epochs", "3", "--verbose",
                                 "2", "--validation-split", "0.1", "--lr", "0.002")
        self.check_common(report, 3)
        self.assertEqual(report["options"]["learning_rate"], 0.002)
        self.assertEqual(len(report["runs"]), 1)
        self.assertNotIn("comparison", report)
        r = report["runs"][0]
        self.assertEqual(r["mode"], "compiled")
        self.assertEqual(sorted(r["history"]),
                         ["accuracy", "loss", "val_accuracy", "val_loss"])
        # fit's per-epoch lines (verbose 2) print the history with 4 decimals.
        losses = [float(v) for v in re.findall(r" - loss: ([0-9.e+-]+)", out)]
        self.assertEqual(len(losses), 3, out)
        for a, b in zip(losses, r["history"]["loss"]):
            self.assertAlmostEqual(a, b, delta=5e-5)
        val = [float(v) for v in re.findall(r" - val_accuracy: ([0-9.e+-]+)", out)]
        for a, b in zip(val, r["history"]["val_accuracy"]):
            self.assertAlmostEqual(a, b, delta=5e-5)
        for key in ["test_loss", "test_accuracy"]:
            self.assertAlmostEqual(report["result"][key], printed(rf"{key}: ([0-9.]+)", out),
                                   delta=5e-5)
            self.assertEqual(report["result"][key], r[key])

    def test_mlp_both_modes(self):
        out, report = self.train("both.json", "--model", "mlp", "--epochs", "2", "--verbose",
                                 "0", "--mode", "both")
        self.check_common(report, 2)
        self.assertEqual([r["mode"] for r in report["runs"]], ["eager", "compiled"])
        c = report["comparison"]
        self.assertTrue(c["agree"])
        self.assertIn("compiled vs eager: results agree", out)
        # The table: "speedup  1.00x  N.NNx", "final training loss  L_e  L_c", ...
        self.assertAlmostEqual(c["speedup"], printed(r"\nspeedup +1\.00x +([0-9.]+)x", out),
                               delta=0.005 + 1e-9)
        finals = re.search(r"\nfinal training loss +([0-9.]+) +([0-9.]+)", out)
        accuracies = re.search(r"\ntest accuracy +([0-9.]+) +([0-9.]+)", out)
        for i, r in enumerate(report["runs"]):
            self.assertAlmostEqual(r["final_loss"], float(finals.group(i + 1)), delta=5e-5)
            self.assertAlmostEqual(r["test_accuracy"], float(accuracies.group(i + 1)),
                                   delta=5e-5)
        median = re.search(r"\nstep time \(median\) +([0-9.]+) ms +([0-9.]+) ms", out)
        for i, r in enumerate(report["runs"]):
            self.assertAlmostEqual(r["step_ms"]["median_ms"], float(median.group(i + 1)),
                                   delta=5e-4 + 1e-9)
        step = c["train_step"]
        self.assertEqual(step["name"], "mlp_train_step")
        self.assertGreater(len(step["differences"]), 1)  # the loss and the updated variables
        self.assertTrue(any(d["name"].startswith("variable ") for d in step["differences"]))
        self.assertAlmostEqual(report["result"]["test_accuracy"],
                               report["runs"][1]["test_accuracy"], places=12)

    def test_mlp_mixed_bfloat16(self):
        # The layers built under the policy: a training run of its own (the final loss is not the
        # float32 run's), eager and compiled agreeing, the option in the report.
        _, f32 = self.train("f32.json", "--model", "mlp", "--epochs", "2", "--verbose", "0")
        out, report = self.train("bf16.json", "--model", "mlp", "--epochs", "2", "--verbose",
                                 "0", "--mode", "both", "--dtype-policy", "mixed_bfloat16")
        self.check_common(report, 2)
        self.assertEqual(report["options"]["dtype_policy"], "mixed_bfloat16")
        self.assertEqual(f32["options"]["dtype_policy"], "float32")
        self.assertTrue(report["comparison"]["agree"])
        self.assertIn("compiled vs eager: results agree", out)
        self.assertNotEqual(report["runs"][1]["final_loss"], f32["runs"][0]["final_loss"])

    def test_language_model(self):
        text = os.path.join(WORK, "text.txt")
        with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
            with open(text, "w", encoding="utf-8") as g:
                g.write(f.read(3000))
        out, report = self.train("lm.json", "--model", "gru", "--dataset", f"text:{text}",
                                 "--epochs", "2", "--seq-len", "16", "--units", "16",
                                 "--embedding-dim", "8", "--verbose", "1")
        self.check_common(report, 2)
        self.assertEqual(report["options"]["learning_rate"], 3e-3)
        r = report["runs"][0]
        self.assertIn("val_loss", r["history"])
        # "epoch N: loss L, perplexity P, val_perplexity Q"
        for epoch, loss in enumerate(r["history"]["loss"]):
            self.assertAlmostEqual(loss, printed(rf"epoch {epoch + 1}: loss ([0-9.]+)", out),
                                   delta=5e-5)
        result = report["result"]
        self.assertAlmostEqual(result["test_perplexity"], math.exp(result["test_loss"]))
        for key in ["test_perplexity", "unigram_perplexity"]:
            self.assertAlmostEqual(result[key], printed(rf"{key}: ([0-9.]+)", out), delta=5e-4)

    def test_json_unwritable(self):
        path = os.path.join(WORK, "no_such_dir", "t.json")
        r = run(KILN, "train", "--epochs", "1", "--verbose", "0", "--json", path)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"^kiln: error: .*no_such_dir/t\.json")


if __name__ == "__main__":
    unittest.main()
