// kiln_tests compares traced graphs with eager execution bitwise, so its traced functions run
// on the reference executor by default (the same kernels in the same order as eager).
// Compiled execution is tested where it is chosen explicitly (ScopedExecutionMode(kCompiled)):
// tests/function/compiled_function_test.cc, tests/training/compiled_fit_test.cc, and the
// kiln_codegen_tests binary.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace {

class ReferenceModeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { kiln::set_default_execution_mode(kiln::ExecutionMode::kReference); }
};

const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new ReferenceModeEnvironment());

}  // namespace
