// Logging and profiling GEMM plans (contract: gemm_plan_log.h).
#include "kiln/runtime/gemm_plan_log.h"

#include <fmt/format.h>

#include <array>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "kiln/runtime/log.h"

namespace kiln::runtime::gemm_detail {
namespace {

std::string event_name(const GemmShape& s) {
  return fmt::format("gemm {}x{}x{}{}{}", s.m, s.k, s.n, s.ta ? " ta" : "", s.tb ? " tb" : "");
}

}  // namespace

void log_gemm_plan(const GemmPlan& plan) {
  if (log_level() < LogLevel::kDebug) return;
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, bool, const MicroKernel*>;
  static std::mutex mutex;
  static std::set<Key> seen;
  const GemmShape& s = plan.shape;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!seen.emplace(s.m, s.n, s.k, s.ta, s.tb, s.threads, s.epilogue, plan.kernel).second) return;
  }
  log(LogLevel::kDebug, "gemm plan: " + plan.describe());
}

// A plan's event name and detail, formatted once per distinct plan a thread profiles (a table
// indexed by the shape's hash): kernels that run thousands of small products per op (attention
// tiles, convolutions image by image) would otherwise spend more time formatting their events
// than computing.
const std::pair<std::string, std::string>& event_strings(const GemmPlan& plan) {
  struct Entry {
    GemmPlan plan;
    std::pair<std::string, std::string> strings;
    bool used = false;
  };
  constexpr size_t kEntries = 64;
  thread_local std::array<Entry, kEntries> memo;
  Entry& e = memo[plan.shape.hash() % kEntries];
  if (!e.used || !(e.plan == plan))
    e = Entry{plan, {event_name(plan.shape), plan.describe()}, true};
  return e.strings;
}

GemmPlanScope::GemmPlanScope(const GemmPlan& plan)
    : strings_(profiling_enabled() ? &event_strings(plan) : nullptr),
      scope_(strings_ ? std::string_view(strings_->first) : std::string_view(), "gemm",
             2.0 * double(plan.shape.m) * double(plan.shape.n) * double(plan.shape.k)) {
  log_gemm_plan(plan);
  if (scope_.recording() && strings_) scope_.set_detail(strings_->second);
}

}  // namespace kiln::runtime::gemm_detail
