// Where in the user's code a node was recorded: the file, line and column of the call (from
// std::source_location in C++, the caller's frame in Python). Unknown when `file` is empty.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::ir {

struct SourceLocation {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  bool known() const { return !file.empty(); }
  friend bool operator==(const SourceLocation&, const SourceLocation&) = default;
};

}  // namespace kiln::ir
