// Shared by the libFuzzer harnesses: what counts as a finding besides a sanitizer report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kiln/ir/error.h"
#include "kiln/ir/internal_error_count.h"

namespace kiln::fuzz {

// A kiln::Error is the expected answer to bad input, unless a broken internal invariant
// (KILN_ASSERT, internal_error) raised it: that is a kiln bug, so the harness aborts and
// libFuzzer saves the input. (Counted, not searched for in the message: libFuzzer learns the
// strings a harness compares with and would put them into the input.)
inline void check_expected_error(const Error& e) {
  if (internal_error_count() != 0) {
    std::fprintf(stderr, "kiln fuzz: internal error on bad input: %s\n", e.what());
    std::abort();
  }
}

// Aborts with `message` (a property the harness checks did not hold).
[[noreturn]] inline void finding(const char* message, std::string_view detail) {
  std::fprintf(stderr, "kiln fuzz: %s\n%.*s\n", message, int(detail.size()), detail.data());
  std::abort();
}

}  // namespace kiln::fuzz
