#include "runtime/threading.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "runtime/knobs.h"

namespace kiln {
namespace {

struct ArenaState {
  std::mutex mutex;
  std::shared_ptr<tbb::task_arena> arena;
  std::atomic<int> threads{0};
};

ArenaState& state() {
  static ArenaState s;
  return s;
}

int default_threads() {
  if (auto n = runtime::knobs::num_threads()) return *n;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? int(hw) : 1;
}

std::shared_ptr<tbb::task_arena> arena() {
  ArenaState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.arena) {
    int n = s.threads.load();
    if (n == 0) {
      n = default_threads();
      s.threads.store(n);
    }
    s.arena = std::make_shared<tbb::task_arena>(n);
  }
  return s.arena;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw Error(fmt::format("set_num_threads: thread count must be >= 1, got {}", n));
  ArenaState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.threads.load() == n && s.arena) return;
  s.threads.store(n);
  s.arena.reset();  // running work keeps its own reference to the old arena
}

int num_threads() {
  int n = state().threads.load(std::memory_order_relaxed);
  if (n == 0) {
    arena();
    n = state().threads.load();
  }
  return n;
}

namespace runtime::detail {

void parallel_for_impl(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  arena()->execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, std::max<int64_t>(grain, 1)),
                      [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
  });
}

void parallel_tasks_impl(int64_t count, const std::function<void(int64_t)>& fn) {
  arena()->execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, count, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t i = r.begin(); i != r.end(); ++i) fn(i);
        },
        tbb::simple_partitioner());
  });
}

}  // namespace runtime::detail
}  // namespace kiln
