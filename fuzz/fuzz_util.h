// Shared by the libFuzzer harnesses: what counts as a finding besides a sanitizer report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/error.h"

namespace kiln::fuzz {

// A kiln::Error is the expected answer to bad input, unless it reports a broken internal
// invariant (KILN_ASSERT, internal_error): that is a kiln bug, so the harness aborts and
// libFuzzer saves the input.
inline void check_expected_error(const Error& e) {
  if (std::string_view(e.what()).find("internal error at") != std::string_view::npos) {
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
