// kiln's arena keeps its workers awake for worker_spin_us() after a region started outside its
// tasks (runtime/threading.h): one lingering task per worker, none for nested regions, none
// with 0, and they end when the time is up or a region starts. (The suite's name holds
// "Thread", so scripts/tsan.sh runs it.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "kiln/ir/error.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

// Waits up to `seconds` for lingering_workers() to equal `n`.
bool lingering_becomes(int n, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (lingering_workers() == n) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return lingering_workers() == n;
}

// Restores the thread count and the spin time of the process.
struct ThreadsGuard {
  int threads = num_threads();
  int64_t spin = worker_spin_us();
  ~ThreadsGuard() {
    set_worker_spin_us(spin);
    set_num_threads(threads);
  }
};

TEST(WorkerThreadSpin, OneLingeringTaskPerWorkerAfterATopLevelRegionUntilTheTimeIsUp) {
  ThreadsGuard guard;
  set_num_threads(3);
  set_worker_spin_us(0);
  ASSERT_TRUE(lingering_becomes(0, 5.0));
  std::atomic<int64_t> sum{0};
  parallel_tasks(4, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 6);
  EXPECT_EQ(lingering_workers(), 0) << "0: workers sleep as oneTBB decides";

  set_worker_spin_us(200000);  // 0.2 s: long enough to see
  parallel_for(1000, 10, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1006);
  EXPECT_LE(lingering_workers(), 2);
  EXPECT_TRUE(lingering_becomes(2, 5.0)) << "two workers of three threads linger";
  // A region ends them; its own end enqueues them again (never more than one per worker).
  parallel_tasks(2, [&](int64_t) { EXPECT_LE(lingering_workers(), 2); });
  EXPECT_LE(lingering_workers(), 2);
  set_worker_spin_us(1000);
  EXPECT_TRUE(lingering_becomes(0, 5.0)) << "they stop once their time is up";
}

TEST(WorkerThreadSpin, NestedRegionsDoNotLinger) {
  ThreadsGuard guard;
  set_num_threads(2);
  set_worker_spin_us(0);
  ASSERT_TRUE(lingering_becomes(0, 5.0));
  set_worker_spin_us(200000);
  std::atomic<int> nested_lingering{-1};
  parallel_tasks(2, [&](int64_t t) {
    std::atomic<int64_t> inner{0};
    parallel_for(64, 1, [&](int64_t b, int64_t e) { inner += e - b; });
    EXPECT_EQ(inner.load(), 64);
    if (t == 0) nested_lingering = lingering_workers();
  });
  EXPECT_EQ(nested_lingering.load(), 0) << "a region inside a task enqueues nothing";
  set_worker_spin_us(1000);
  EXPECT_TRUE(lingering_becomes(0, 5.0));
}

TEST(WorkerThreadSpin, BadValuesAreErrors) {
  EXPECT_THROW(set_worker_spin_us(-1), Error);
  EXPECT_THROW(set_worker_spin_us(1000001), Error);
  ::setenv("KILN_WORKER_SPIN_US", "soon", 1);
  try {
    knobs::worker_spin_us();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("KILN_WORKER_SPIN_US=\"soon\" is not a time in microseconds"));
  }
  ::setenv("KILN_WORKER_SPIN_US", "250", 1);
  EXPECT_EQ(knobs::worker_spin_us(), 250);
  ::unsetenv("KILN_WORKER_SPIN_US");
  EXPECT_EQ(knobs::worker_spin_us(), std::nullopt);
}

}  // namespace
}  // namespace kiln::runtime
