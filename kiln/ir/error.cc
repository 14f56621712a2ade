#include "kiln/ir/error.h"

#include <fmt/format.h>

#include <atomic>

#include "kiln/ir/internal_error_count.h"

namespace kiln {
namespace {
std::atomic<int64_t> g_internal_errors{0};
}  // namespace

int64_t internal_error_count() { return g_internal_errors.load(std::memory_order_relaxed); }

void internal_error(const char* file, int line, const std::string& what) {
  g_internal_errors.fetch_add(1, std::memory_order_relaxed);
  throw Error(fmt::format("internal error at {}:{}: {} (this is a kiln bug; please report it)",
                          file, line, what));
}

}  // namespace kiln
