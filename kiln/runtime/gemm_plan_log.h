// Showing which plan a float32 product ran with: KILN_LOG=debug logs each distinct product's
// plan once per process ("gemm plan: ..."), and while profiling each product is an event named
// "gemm MxKxN [ta|tb]" of category "gemm", with its flops and its plan as the event's detail.
#pragma once

#include <string>
#include <utility>

#include "kiln/runtime/gemm_plan.h"
#include "kiln/runtime/profiler.h"

namespace kiln::runtime::gemm_detail {

// Logs the plan (once per distinct shape) when debug logging is on.
void log_gemm_plan(const GemmPlan& plan);

// Open around a product's run: logs its plan and records its profiler event.
class GemmPlanScope {
 public:
  explicit GemmPlanScope(const GemmPlan& plan);

 private:
  // The plan's event name and detail (this thread's copy) when profiling was on at the start.
  const std::pair<std::string, std::string>* strings_;
  ProfileScope scope_;
};

}  // namespace kiln::runtime::gemm_detail
