#include "tools/data_parallel_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "kiln/runtime/collectives.h"

namespace kiln::tools {

void CollectivesAfterFirstStep::on_train_batch_end(int, const Logs&) {
  if (first) runtime::reset_collective_stats();
  first = false;
}

void report_data_parallel(std::vector<double> steps, int64_t batch_size) {
  const runtime::CollectiveStats c = runtime::collective_stats();
  if (!steps.empty()) steps.erase(steps.begin());
  const size_t n = steps.size();
  std::sort(steps.begin(), steps.end());
  const double median = steps.empty() ? 0 : steps[steps.size() / 2];
  std::cout << fmt::format(
      "data parallel: {} rank(s) x {} thread(s), global batch {}: median step {:.3f} ms; "
      "all-reduced {:.0f} bytes per step in {} sums, {:.3f} ms per step, {:.0f}% hidden behind "
      "the step; {:.0f} bytes per step copied into buckets (packed)\n",
      distributed::size(), num_threads(), batch_size, median * 1e3,
      n ? double(c.bytes) / double(n) : 0.0, n ? c.calls / int64_t(n) : 0,
      n ? c.seconds / double(n) * 1e3 : 0.0,
      c.seconds > 0 ? 100.0 * std::max(0.0, 1 - c.waited / c.seconds) : 0.0,
      n ? double(c.packed) / double(n) : 0.0);
}

}  // namespace kiln::tools
