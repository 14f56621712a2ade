// What one graph pass is worth on a `kiln bench` workload, measured in one process:
//   PassAB/<workload>/<pass>   the workload's compiled step as compilation makes it, against the
//                              same step compiled with <pass> disabled (KILN_DISABLE_PASSES set
//                              while it compiles), timed in kRounds interleaved rounds of about
//                              kRoundSeconds each.
// Counters: with_over_without, the median of the rounds' ratios (below 1: the pass makes the step
// faster), and the medians of each side in ms. Interleaved rounds in one process, because the
// machines this runs on drift by 15-30% within minutes: separate runs of `kiln bench` with and
// without KILN_DISABLE_PASSES compare two different phases of the machine. The benchmark's own
// time is the whole comparison (one iteration).
// Run: kiln_bench --benchmark_filter='PassAB/cnn_b64/schedule-last-uses'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench/suite/suite.h"
#include "kiln/kiln.h"
#include "kiln/passes/passes.h"

namespace {

using kiln::bench::Workload;

constexpr int kRounds = 11;
constexpr double kRoundSeconds = 0.15;

// Adds `pass` to KILN_DISABLE_PASSES for its lifetime (the pipeline reads it at every compile).
class DisabledPass {
 public:
  explicit DisabledPass(const std::string& pass) {
    if (const char* v = std::getenv(kVar)) saved_ = v;
    const std::string value = saved_ && !saved_->empty() ? *saved_ + "," + pass : pass;
    setenv(kVar, value.c_str(), 1);
  }
  ~DisabledPass() {
    if (saved_)
      setenv(kVar, saved_->c_str(), 1);
    else
      unsetenv(kVar);
  }
  DisabledPass(const DisabledPass&) = delete;
  DisabledPass& operator=(const DisabledPass&) = delete;

 private:
  static constexpr const char* kVar = "KILN_DISABLE_PASSES";
  std::optional<std::string> saved_;
};

// Seconds per call of f, over calls lasting about kRoundSeconds.
template <typename F>
double seconds_per_call(F&& f) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int calls = 0;
  double elapsed = 0;
  do {
    f();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < kRoundSeconds);
  return elapsed / calls;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void pass_ab(benchmark::State& state, const std::string& name, const std::string& pass) {
  const int threads = kiln::num_threads();
  Workload with = kiln::bench::make_workload(name, threads);
  Workload without = kiln::bench::make_workload(name, threads);
  with.compiled();  // compiles
  {
    DisabledPass off(pass);
    without.compiled();
  }
  with.compiled();
  without.compiled();
  std::vector<double> with_s, without_s, ratio;
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
      with_s.push_back(seconds_per_call(with.compiled));
      without_s.push_back(seconds_per_call(without.compiled));
      ratio.push_back(with_s.back() / without_s.back());
    }
  }
  state.counters["with_over_without"] = median_of(ratio);
  state.counters["with_ms"] = median_of(with_s) * 1e3;
  state.counters["without_ms"] = median_of(without_s) * 1e3;
}

const bool pass_ab_registered = [] {
  for (const std::string& name : kiln::bench::workload_names())
    for (std::string_view pass : kiln::passes::registered_pass_names()) {
      const std::string p(pass);
      benchmark::RegisterBenchmark(("PassAB/" + name + "/" + p).c_str(),
                                   [name, p](benchmark::State& state) { pass_ab(state, name, p); })
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  return true;
}();

}  // namespace
