// What a parallel region costs on kiln's arena after the calling thread has worked alone for a
// while. oneTBB's workers spin briefly after their last task, then sleep; the next region
// waits for the operating system to wake them (on a virtual machine, an interprocessor
// interrupt through the hypervisor). A compiled step alternates parallel regions (GEMMs,
// kernels split into chunks) with serial steps, so this is paid wherever a serial stretch
// outlasts the workers' spinning. kiln keeps them awake for worker_spin_us() after a region
// (runtime/threading.h); KILN_WORKER_SPIN_US=0 measures oneTBB's own behaviour.
//
// ParallelRegionAfterIdle/<gap_us>/<work_us>: the caller spins gap_us alone, then
// runtime::parallel_tasks runs one task per kiln thread, each spinning work_us; the region's
// time is the iteration's time (manual timing). Counter extra_us: the region's time beyond
// work_us (what running every task at once costs: 0 with ideal threads), serial_us: the tasks
// one after another on the caller (what a region worse than that loses outright).
// Run: kiln_bench --benchmark_filter=ParallelRegionAfterIdle
#include <benchmark/benchmark.h>

#include <chrono>

#include "kiln/runtime/threading.h"

namespace {

using Clock = std::chrono::steady_clock;

void spin_microseconds(double us) {
  const Clock::time_point t0 = Clock::now();
  while (std::chrono::duration<double, std::micro>(Clock::now() - t0).count() < us) {
  }
}

void ParallelRegionAfterIdle(benchmark::State& state) {
  const double gap_us = double(state.range(0)), work_us = double(state.range(1));
  const int threads = kiln::num_threads();
  double total = 0;
  for (auto _ : state) {
    spin_microseconds(gap_us);
    const Clock::time_point t0 = Clock::now();
    kiln::runtime::parallel_tasks(threads, [&](int64_t) { spin_microseconds(work_us); });
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  const double mean_us = total / double(state.iterations()) * 1e6;
  state.counters["extra_us"] = mean_us - work_us;
  state.counters["serial_us"] = double(threads) * work_us;
  state.counters["threads"] = threads;
}
BENCHMARK(ParallelRegionAfterIdle)
    ->ArgNames({"gap_us", "work_us"})
    ->ArgsProduct({{0, 20, 50, 100, 200, 1000}, {2, 20, 100}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
