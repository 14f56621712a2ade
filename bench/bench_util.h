// Helpers shared by the Google Benchmark files of kiln_bench.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln::bench_util {

// The median wall time of `runs` calls of f, in seconds (for ratios measured in-process).
template <typename F>
double median_seconds(int runs, F&& f) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto s = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace kiln::bench_util
