// kiln::Error: the one exception type for every user-facing failure.
// Messages say what failed, with the values involved, and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An Error about a tensor's dtype (an op that does not accept it, operands whose dtypes
// differ): Python maps it to a TypeError, everything else to a ValueError.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// Internal invariant check: a failure here is a kiln bug, not bad user input.
// It still throws (never aborts) so that a library user's process survives.
[[noreturn]] void internal_error(const char* file, int line, const std::string& what);

}  // namespace kiln

#define KILN_ASSERT(cond, msg)                                    \
  do {                                                            \
    if (!(cond)) ::kiln::internal_error(__FILE__, __LINE__, msg); \
  } while (0)
