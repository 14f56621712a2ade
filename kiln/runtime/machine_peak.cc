#include "kiln/runtime/machine_peak.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm_engine.h"

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The peak of kernel set `mk`'s loop (none: Eigen's, 0).
FmaPeak measure_loop_peak(const gemm_detail::MicroKernels* mk, int threads, double seconds,
                          int repeats, const char* caller) {
  if (threads < 1) throw Error(fmt::format("{}: threads must be >= 1 (got {})", caller, threads));
  FmaPeak peak;
  peak.threads = threads;
  if (!mk) {
    peak.isa = "eigen";
    return peak;
  }
  peak.isa = mk->isa;
  if (mk->fma_loop_flops == 0) return peak;  // an emulation
  // Calibrate one thread's iterations to about `seconds`.
  int64_t iterations = 1 << 16;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    volatile float sink = mk->fma_loop(iterations);
    (void)sink;
    const double t = seconds_since(t0);
    if (t >= seconds / 4 || iterations > (int64_t{1} << 40)) {
      iterations = std::max<int64_t>(1, int64_t(double(iterations) * seconds / std::max(t, 1e-9)));
      break;
    }
    iterations *= 4;
  }
  for (int r = 0; r < std::max(1, repeats); ++r) {
    // All threads start together; the round lasts until the slowest finishes.
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t)
      pool.emplace_back([&] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        volatile float sink = mk->fma_loop(iterations);
        (void)sink;
      });
    while (ready.load() < threads - 1) std::this_thread::yield();
    const Clock::time_point t0 = Clock::now();
    go.store(true);
    volatile float sink = mk->fma_loop(iterations);
    (void)sink;
    for (std::thread& th : pool) th.join();
    const double t = seconds_since(t0);
    const double flops = double(iterations) * mk->fma_loop_flops * threads;
    peak.gflops = std::max(peak.gflops, flops / t * 1e-9);
  }
  return peak;
}

}  // namespace

CopyBandwidth measure_copy_bandwidth(int threads, int repeats) {
  if (threads < 1)
    throw Error(fmt::format("measure_copy_bandwidth: threads must be >= 1 (got {})", threads));
  const CacheLevel& l3 = cpu_info().l3;
  CopyBandwidth bw;
  bw.threads = threads;
  bw.bytes = std::clamp<int64_t>(2 * l3.bytes, int64_t{64} << 20, int64_t{512} << 20);
  std::vector<char> from(size_t(bw.bytes), 1), to(size_t(bw.bytes), 0);
  const int64_t share = (bw.bytes / threads) & ~int64_t{63};
  auto copy = [&](int t) {
    const int64_t begin = t * share, end = t + 1 == threads ? bw.bytes : begin + share;
    std::memcpy(to.data() + begin, from.data() + begin, size_t(end - begin));
  };
  for (int r = 0; r < std::max(1, repeats); ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        copy(t);
      });
    while (ready.load() < threads - 1) std::this_thread::yield();
    const Clock::time_point t0 = Clock::now();
    go.store(true);
    copy(0);
    for (std::thread& th : pool) th.join();
    bw.gbs = std::max(bw.gbs, 2.0 * double(bw.bytes) / seconds_since(t0) * 1e-9);
  }
  return bw;
}

FmaPeak measure_fma_peak(int threads, double seconds, int repeats) {
  return measure_loop_peak(gemm_detail::active_microkernels(), threads, seconds, repeats,
                           "measure_fma_peak");
}

FmaPeak measure_kernel_loop_peak(const gemm_detail::MicroKernels& mk, int threads, double seconds,
                                 int repeats) {
  return measure_loop_peak(&mk, threads, seconds, repeats, "measure_kernel_loop_peak");
}

FmaPeak measure_bf16_peak(int threads, double seconds, int repeats) {
  const gemm_detail::MicroKernels* pairs = gemm_detail::active_bf16_microkernels();
  return measure_loop_peak(pairs ? pairs : gemm_detail::active_microkernels(), threads, seconds,
                           repeats, "measure_bf16_peak");
}

}  // namespace kiln::runtime
