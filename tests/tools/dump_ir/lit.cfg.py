# lit configuration of the `kiln dump-ir FILE.kir` tests: IR files with `# RUN:` and `# CHECK:`
# lines, run through the kiln program and FileCheck (LLVM 19's tools). ctest runs them as
# `tools.dump_ir_lit` through the lit.site.cfg.py that CMake generates (it sets config.kiln).
import os
import tempfile

import lit.formats

config.name = "kiln-dump-ir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir"]
config.excludes = ["Inputs"]  # inputs of the tests, not tests
config.test_source_root = os.path.dirname(__file__)

kiln = getattr(config, "kiln", None) or lit_config.params.get("kiln")
if not kiln or not os.path.exists(kiln):
    lit_config.fatal("the kiln program was not given or not built: run lit on the build tree's "
                     "tests/tools/dump_ir (ctest -R tools.dump_ir_lit) or pass --param kiln=PATH")
config.test_exec_root = (getattr(config, "kiln_exec_root", None)
                         or os.path.join(tempfile.gettempdir(), "kiln-dump-ir-lit"))
config.environment["PATH"] = os.pathsep.join(["/usr/lib/llvm-19/bin",
                                              config.environment.get("PATH", "")])
for knob in ["KILN_DISABLE_PASSES", "KILN_VERIFY", "KILN_DUMP_IR", "KILN_DUMP_PASSES"]:
    config.environment.pop(knob, None)
if "KILN_CACHE_DIR" in os.environ:
    config.environment["KILN_CACHE_DIR"] = os.environ["KILN_CACHE_DIR"]
config.substitutions.insert(0, ("%kiln", os.path.abspath(kiln)))
