# lit configuration of the pass tests: IR files (*.kir) with `# RUN:` and `# CHECK:` lines,
# run through kiln-opt and FileCheck (both from Debian's llvm-19-tools).
#
# ctest runs them as `passes.lit` through the lit.site.cfg.py that CMake generates in the
# build tree (it sets config.kiln_opt). By hand:
#   /usr/bin/python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v tests/passes \
#       --param kiln_opt=build/tools/kiln-opt
import os
import tempfile

import lit.formats

config.name = "kiln-passes"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir"]
config.test_source_root = os.path.dirname(__file__)

kiln_opt = getattr(config, "kiln_opt", None) or lit_config.params.get("kiln_opt")
if not kiln_opt:
    lit_config.fatal("kiln-opt not given: run lit on the build tree's tests/passes "
                     "(ctest -R passes.lit) or pass --param kiln_opt=PATH")
kiln_opt = os.path.abspath(kiln_opt)
if not os.path.exists(kiln_opt):
    lit_config.fatal(f"kiln-opt not found at {kiln_opt}: build it (ninja kiln_opt)")

# Temporary files (%t) go to the build tree (or --param exec_root=DIR), never the sources.
config.test_exec_root = (getattr(config, "kiln_exec_root", None)
                         or lit_config.params.get("exec_root")
                         or os.path.join(tempfile.gettempdir(), "kiln-passes-lit"))

# FileCheck, not and split-file come from LLVM 19's tools.
llvm_bin = "/usr/lib/llvm-19/bin"
config.environment["PATH"] = os.pathsep.join([llvm_bin, config.environment.get("PATH", "")])
# The pipeline knobs must not leak in from the caller's environment.
for knob in ["KILN_DISABLE_PASSES", "KILN_VERIFY", "KILN_DUMP_IR", "KILN_DUMP_PASSES"]:
    config.environment.pop(knob, None)

config.substitutions.insert(0, ("%kiln-opt", kiln_opt))
