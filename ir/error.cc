#include "ir/error.h"

#include <fmt/format.h>

namespace kiln {

void internal_error(const char* file, int line, const std::string& what) {
  throw Error(fmt::format("internal error at {}:{}: {} (this is a kiln bug; please report it)",
                          file, line, what));
}

}  // namespace kiln
