// Test helper: expects a callable to throw kiln::Error whose message contains every given part
// (the thing named, the values involved, what to do).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/error.h"

namespace kiln::test {

template <typename Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
  }
}

}  // namespace kiln::test
