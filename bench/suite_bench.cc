// The `kiln bench` workloads (bench/suite/suite.h) as Google Benchmark cases, one per workload
// and variant:
//   Suite/<workload>/Eager        kiln ops one by one
//   Suite/<workload>/Compiled     the traced, JIT-compiled function (compiled before timing)
//   Suite/<workload>/HandWritten  Eigen GEMMs + hand-fused loops, no kiln
//   Suite/<workload>/Limit        just its GEMMs with Eigen (GFLOPS counter), or a memcpy of its
//                                 footprint (bytes_per_second: the copy bandwidth)
// Memory-bound workloads report bytes_per_second of the bytes they must move, so their ratio to
// the Limit's is the fraction of the roofline reached.
// at kiln's thread count (KILN_NUM_THREADS). Each case builds its workload and calls the
// variant twice before timing. `kiln bench` runs the same code interleaved and prints ratios.
// Run: kiln_bench --benchmark_filter=Suite/mlp_784
#include <benchmark/benchmark.h>

#include <string>

#include "bench/suite/suite.h"
#include "kiln/kiln.h"

namespace {

using kiln::bench::Workload;

void run_variant(benchmark::State& state, const std::string& name, const std::string& variant) {
  Workload w = kiln::bench::make_workload(name, kiln::num_threads());
  const std::function<void()>& f = variant == "Eager"      ? w.eager
                                   : variant == "Compiled" ? w.compiled
                                   : variant == "Limit"    ? w.limit
                                                           : w.baseline;
  if (!f) {
    state.SkipWithError("no such variant for this workload");
    return;
  }
  f();  // warm-up (the compiled variant compiles here)
  f();
  for (auto _ : state) f();
  if (variant == "Compiled") state.counters["compile_ms"] = w.compile_seconds() * 1e3;
  // Memory-bound workloads: bytes/s of the bytes the work must move; for Limit, of the copy.
  if (w.limit_kind == "memory")
    state.SetBytesProcessed(int64_t(state.iterations()) *
                            int64_t(variant == "Limit" ? w.copy_bytes : w.limit_bytes));
  if (w.limit_kind == "gemm" && variant == "Limit")
    state.counters["GFLOPS"] =
        benchmark::Counter(w.limit_flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  for (const std::string& name : kiln::bench::workload_names()) {
    for (const char* variant : {"Eager", "Compiled", "HandWritten", "Limit"}) {
      benchmark::RegisterBenchmark(("Suite/" + name + "/" + variant).c_str(),
                                   [name, v = std::string(variant)](benchmark::State& state) {
                                     run_variant(state, name, v);
                                   })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
