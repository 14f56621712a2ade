#include "kiln/runtime/threading.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// Workers kept awake between regions (set_worker_spin_us, threading.h). Never destroyed: a
// lingering task may still be spinning on a worker while the process's statics go away.
struct Linger {
  std::atomic<int64_t> spin_us{-1};     // -1: not read from KILN_WORKER_SPIN_US yet
  std::atomic<int64_t> active{0};       // regions running now, from any thread
  std::atomic<uint64_t> generation{0};  // regions started so far
  std::atomic<int> lingering{0};        // lingering tasks enqueued or spinning
  std::atomic<uint64_t> since{0};       // the generation when the last top-level region ended
};

Linger& linger() {
  static Linger* l = new Linger;
  return *l;
}

constexpr int64_t kDefaultWorkerSpinUs = 1000;

// > 0 while this thread runs a chunk of a region: a region it starts is nested, and workers
// are busy with the outer one anyway.
thread_local int chunk_depth = 0;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A region of kiln's arena: counted while it runs; when a region started outside kiln's tasks
// ends, the workers are asked to stay awake for worker_spin_us() (threading.h), read before the
// region runs (a bad KILN_WORKER_SPIN_US is an error there, not in a destructor).
class RegionScope {
 public:
  RegionScope() : spin_us_(chunk_depth == 0 ? worker_spin_us() : 0) {
    Linger& l = linger();
    l.active.fetch_add(1, std::memory_order_acq_rel);
    l.generation.fetch_add(1, std::memory_order_acq_rel);
  }
  ~RegionScope() {
    linger().active.fetch_sub(1, std::memory_order_acq_rel);
    if (spin_us_ <= 0) return;
    try {
      keep_workers_awake();
    } catch (...) {
      // Out of memory for a task: the workers sleep as oneTBB decides, which changes the
      // next region's start time only.
    }
  }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  const int64_t spin_us_;

  static void keep_workers_awake() {
    const int workers = num_threads() - 1;
    if (workers <= 0) return;
    Linger& l = linger();
    l.since.store(l.generation.load(std::memory_order_acquire), std::memory_order_release);
    std::shared_ptr<tbb::task_arena> a;
    for (int n = l.lingering.load(std::memory_order_acquire); n < workers;) {
      if (!l.lingering.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) continue;
      struct Undo {  // the count back if the task is never enqueued
        std::atomic<int>* count;
        ~Undo() {
          if (count) count->fetch_sub(1, std::memory_order_acq_rel);
        }
      } undo{&l.lingering};
      if (!a) a = arena();
      // Spins until a region starts (or one is running), or the time is up; the worker then
      // returns to oneTBB's loop, which finds the new region's tasks while still awake. (It
      // captures nothing: it reads atomics only, which ThreadSanitizer follows across
      // oneTBB's uninstrumented hand-over.)
      a->enqueue([] {
        Linger& s = linger();
        const uint64_t since = s.since.load(std::memory_order_acquire);
        const int64_t us = std::max<int64_t>(0, s.spin_us.load(std::memory_order_acquire));
        const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        for (int i = 0; s.active.load(std::memory_order_acquire) == 0 &&
                        s.generation.load(std::memory_order_acquire) == since;
             ++i) {
          // A pause while a region may follow at once, then yields: the worker stays
          // runnable (no sleep to wake from) but gives its core to any other runnable thread
          // (another process's, on a machine with more threads than cores).
          if (i < 256) {
            cpu_relax();
            continue;
          }
          std::this_thread::yield();
          if (std::chrono::steady_clock::now() >= end) break;
        }
        s.lingering.fetch_sub(1, std::memory_order_acq_rel);
      });
      undo.count = nullptr;
      n = l.lingering.load(std::memory_order_acquire);
    }
  }
};

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
    ++chunk_depth;
    struct Leave {
      ~Leave() { --chunk_depth; }
    } leave;
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
  const RegionScope region;
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
  const RegionScope region;
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

void set_worker_spin_us(int64_t us) {
  if (us < 0 || us > 1000000)
    throw Error(
        fmt::format("set_worker_spin_us: {} is not a time in microseconds from 0 to 1000000", us));
  linger().spin_us.store(us, std::memory_order_release);
}

int64_t worker_spin_us() {
  Linger& l = linger();
  int64_t us = l.spin_us.load(std::memory_order_acquire);
  if (us < 0) {
    us = runtime::knobs::worker_spin_us().value_or(kDefaultWorkerSpinUs);
    int64_t unset = -1;
    if (!l.spin_us.compare_exchange_strong(unset, us)) us = unset;
  }
  return us;
}

int lingering_workers() { return linger().lingering.load(std::memory_order_acquire); }

}  // namespace kiln
