// Thread control: kiln runs all parallel work in one oneTBB task arena whose size users set
// with set_num_threads(n) or KILN_NUM_THREADS. Work below a grain stays on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// Sets the number of threads of kiln's task arena (>= 1). Throws kiln::Error otherwise.
void set_num_threads(int n);
// Current arena size (KILN_NUM_THREADS or the hardware concurrency until set_num_threads).
int num_threads();

// How long kiln's workers stay awake after a parallel region, in microseconds (default 1000;
// KILN_WORKER_SPIN_US; 0: as oneTBB decides). oneTBB's workers sleep soon after their last
// task (within 50-150 us on a 2-core VM), and waking them for the next region is the operating
// system's business: from 30 to 200 us on that VM (docs/benchmarks.md, ParallelRegionAfterIdle),
// longer than many of a compiled step's regions. When a region started outside kiln's tasks ends,
// kiln enqueues one task per worker (at most one each at a time) that pauses, then yields, until a
// region starts anywhere or the time is up, so serial work shorter than that finds them awake
// (OpenMP's active wait, as OMP_WAIT_POLICY and KMP_BLOCKTIME set it). The cost: up to that
// much CPU time per worker after each burst of regions. kiln::Error for a value outside
// [0, 1000000].
void set_worker_spin_us(int64_t us);
int64_t worker_spin_us();
// Worker tasks enqueued or spinning now (tests and benchmarks).
int lingering_workers();

namespace runtime {

namespace detail {
void parallel_for_impl(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
void parallel_tasks_impl(int64_t count, const std::function<void(int64_t)>& fn);
}  // namespace detail

// Runs fn(begin, end) over sub-ranges covering [0, n), each at least `grain` long (except
// possibly the last). Runs inline when n <= grain or only one thread is configured.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain || num_threads() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  detail::parallel_for_impl(n, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// Runs fn(i) for i in [0, count) as independent tasks on the arena (inline if count == 1 or
// one thread). The split is fixed by `count`, not by the thread count, so a caller that
// combines per-task results in index order gets the same answer on any number of threads.
template <typename F>
void parallel_tasks(int64_t count, F&& fn) {
  if (count <= 0) return;
  if (count == 1 || num_threads() == 1) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  detail::parallel_tasks_impl(count, std::function<void(int64_t)>(std::ref(fn)));
}

// Minimum elements per chunk for cheap elementwise work (measured: see docs/benchmarks.md).
inline constexpr int64_t kElementwiseGrain = 32768;

}  // namespace runtime
}  // namespace kiln
