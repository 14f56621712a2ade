#include "kiln/runtime/threading.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/ir/error.h"
#include "kiln/runtime/knobs.h"

// ThreadSanitizer cannot see oneTBB hand work from thread to thread (that happens inside
// libtbb.so, which is not instrumented), so under TSan kiln says it: a task's body is released
// where it is constructed (by the caller, or by the thread that split the range) and acquired
// where it runs, each chunk releases `done` when it ends and the caller acquires it afterwards.
// Chunks stay unordered among themselves, so races between them are still reported.
// scripts/tsan.supp has the rest (oneTBB's own fields).
#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#ifdef KILN_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace kiln {
namespace {

#ifdef KILN_TSAN
void tsan_release(const void* p) { __tsan_release(const_cast<void*>(p)); }
void tsan_acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
#else
void tsan_release(const void*) {}
void tsan_acquire(const void*) {}
#endif

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

namespace {

using Range = tbb::blocked_range<int64_t>;

// A parallel_for body running `chunk` (a callable taking the range), with the TSan hand-over
// above; without TSan it is just the callable and a pointer.
template <typename Chunk>
class Body {
 public:
  Body(const Chunk& chunk, const char* done) : chunk_(chunk), done_(done) { tsan_release(this); }
  Body(const Body& other) : chunk_(other.chunk_), done_(other.done_) { tsan_release(this); }
  Body& operator=(const Body&) = delete;
  void operator()(const Range& r) const {
    tsan_acquire(this);
    chunk_(r);
    tsan_release(done_);
  }

 private:
  Chunk chunk_;
  const char* done_;
};

// Runs `loop` (which calls tbb::parallel_for) in kiln's arena; `loop` may run on another
// thread (task_arena::execute hands it over when the arena has no free slot).
template <typename Loop>
void run_in_arena(const Loop& loop, const char* done) {
  struct Run {
    const Loop& loop;
    void operator()() const {
      tsan_acquire(this);
      loop();
    }
  } run{loop};
  tsan_release(&run);
  arena()->execute(run);
  tsan_acquire(done);
}

}  // namespace

namespace runtime::detail {

void parallel_for_impl(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  char done = 0;
  auto chunk = [&fn](const Range& r) { fn(r.begin(), r.end()); };
  run_in_arena(
      [&] {
        tbb::parallel_for(Range(0, n, std::max<int64_t>(grain, 1)),
                          Body<decltype(chunk)>(chunk, &done));
      },
      &done);
}

void parallel_tasks_impl(int64_t count, const std::function<void(int64_t)>& fn) {
  char done = 0;
  auto chunk = [&fn](const Range& r) {
    for (int64_t i = r.begin(); i != r.end(); ++i) fn(i);
  };
  run_in_arena(
      [&] {
        tbb::parallel_for(Range(0, count, 1), Body<decltype(chunk)>(chunk, &done),
                          tbb::simple_partitioner());
      },
      &done);
}

}  // namespace runtime::detail
}  // namespace kiln
