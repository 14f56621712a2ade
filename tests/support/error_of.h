// Test helper: the message of the kiln::Error a callable throws.
#pragma once

#include <functional>
#include <string>

#include "kiln/ir/error.h"

namespace kiln::test {

// The what() of the kiln::Error that `f` throws, or "<no kiln::Error>" if it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no kiln::Error>";
}

}  // namespace kiln::test
