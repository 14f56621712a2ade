// The GEMM autotuner in kiln_gemm_bench (runtime/gemm_tuner.h): GemmTuner_FromPoorPlan starts it
// from a deliberately poor blocking and reports the gain it finds (counters start_gflops,
// tuned_gflops, gain); tune_gemm_in_process is the program's --kiln_tune.
#include "bench/gemm_tuner_bench.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>

#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuner.h"
#include "kiln/runtime/gemm_tuning.h"

namespace kiln::bench {
namespace {

// The tuner from a deliberately poor blocking (blocks for a quarter of the caches, no
// prefetch) on the transformer block's products, in memory only (no table written, the
// blocking in use unchanged), on the float32 kernels (set:0) or the bf16 pair kernels in use
// (set:1: products of bf16 operands). One iteration is one tuning run.
void BM_GemmTuner_FromPoorPlan(benchmark::State& state) {
  namespace gd = kiln::runtime::gemm_detail;
  const bool pairs = state.range(0) == 1;
  const gd::MicroKernels* mk = pairs ? gd::active_bf16_microkernels() : gd::active_microkernels();
  if (mk == nullptr)
    return state.SkipWithError(pairs ? "bf16 products run on the float32 kernels: no pair set"
                                     : "Eigen's GEMM: nothing to tune");
  gd::TuneOptions o;
  o.shapes = {gd::GemmShape{1024, 384, 128, false, false},
              gd::GemmShape{1024, 128, 512, false, false},
              gd::GemmShape{128, 512, 1024, true, false}};
  gd::GemmParams poor = gd::derived_gemm_params(*mk, 0);
  poor.kc = std::max<int64_t>(16, poor.kc / 4 / 16 * 16);
  poor.nc = std::max<int64_t>(mk->shapes[0].nr, poor.nc / 4 / mk->shapes[0].nr * mk->shapes[0].nr);
  poor.b_ahead = 1;
  o.start = poor;
  double start_s = 0, tuned_s = 0, flops = 0;
  for (auto _ : state) {
    const gd::TuneResult r = gd::tune_gemm(*mk, o);
    start_s = tuned_s = flops = 0;
    for (const gd::TunedClassReport& c : r.classes) {
      start_s += c.start_seconds;
      tuned_s += c.chosen_seconds;
      flops += c.flops;
    }
  }
  state.counters["start_gflops"] = flops / start_s * 1e-9;
  state.counters["tuned_gflops"] = flops / tuned_s * 1e-9;
  state.counters["gain"] = start_s / tuned_s;
}

BENCHMARK(BM_GemmTuner_FromPoorPlan)
    ->ArgName("set")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace

void tune_gemm_in_process() {
  namespace gd = kiln::runtime::gemm_detail;
  const gd::MicroKernels* mk = gd::active_microkernels();
  if (mk == nullptr) {
    std::cerr << "kiln_gemm_bench --kiln_tune: the float32 GEMMs run on Eigen here "
                 "(KILN_GEMM=eigen or a CPU without AVX2): nothing to tune\n";
    return;
  }
  for (const gd::MicroKernels* set : {mk, gd::active_bf16_microkernels()}) {
    if (set == nullptr) continue;
    gd::TuneOptions o;
    o.progress = [](const std::string& line) { std::cerr << "tune: " << line << "\n"; };
    const gd::TuneResult r = gd::tune_gemm(*set, o);
    double start_s = 0, tuned_s = 0;
    for (const gd::TunedClassReport& c : r.classes) {
      start_s += c.start_seconds;
      tuned_s += c.chosen_seconds;
    }
    std::cerr << fmt::format(
        "tune: {}: {} classes in {:.1f} s, {:.3f}x over the derived blocking\n", set->isa,
        r.classes.size(), r.seconds, tuned_s > 0 ? start_s / tuned_s : 1.0);
    gd::use_gemm_tuning(*set, r.table);
  }
}

}  // namespace kiln::bench
