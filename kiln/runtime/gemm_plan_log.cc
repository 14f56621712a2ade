// Logging and profiling GEMM plans (contract: gemm_plan_log.h).
#include "kiln/runtime/gemm_plan_log.h"

#include <fmt/format.h>

#include <mutex>
#include <set>
#include <tuple>

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

GemmPlanScope::GemmPlanScope(const GemmPlan& plan)
    : scope_(profiling_enabled() ? event_name(plan.shape) : std::string(), "gemm",
             2.0 * double(plan.shape.m) * double(plan.shape.n) * double(plan.shape.k)) {
  log_gemm_plan(plan);
  if (scope_.recording()) scope_.set_detail(plan.describe());
}

}  // namespace kiln::runtime::gemm_detail
