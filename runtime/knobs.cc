#include "runtime/knobs.h"

#include <fmt/format.h>

#include <cstdlib>

#include "ir/error.h"

namespace kiln::runtime::knobs {

std::optional<int> num_threads() {
  const char* v = std::getenv("KILN_NUM_THREADS");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 4096)
    throw Error(
        fmt::format("KILN_NUM_THREADS=\"{}\" is not a thread count: set it to a positive "
                    "integer such as 1 or 2, or unset it",
                    v));
  return int(n);
}

std::string log_level() {
  const char* v = std::getenv("KILN_LOG");
  return v && *v ? std::string(v) : std::string("warning");
}

std::optional<std::string> data_dir() {
  const char* v = std::getenv("KILN_DATA_DIR");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

}  // namespace kiln::runtime::knobs
