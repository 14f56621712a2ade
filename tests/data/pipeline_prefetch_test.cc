// prefetch: the same elements as without it, upstream errors rethrown where the element is
// taken, with their own type, pulling ahead on a background thread, and iterators destroyed
// mid-pass (queue full, upstream busy, endless upstream) stopping the thread without hanging. The
// suite's name contains "Thread" so that the ThreadSanitizer preset runs it (CMakePresets.json).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kiln/kiln.h"
#include "tests/data/pipeline_test_util.h"

namespace kiln::data {
namespace {

using namespace ::kiln::data::test;
using namespace std::chrono_literals;

// Runs f on a thread and aborts the test binary if it has not returned after `limit` (a hang
// would otherwise stall the suite until ctest's timeout, without saying where).
template <typename F>
void finishes_within(std::chrono::seconds limit, F&& f) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::thread t([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(m);
  if (!cv.wait_for(lock, limit, [&] { return done; })) {
    std::fprintf(stderr, "prefetch test: did not finish within %lld s (hang)\n",
                 static_cast<long long>(limit.count()));
    std::abort();
  }
  lock.unlock();
  t.join();
  if (error) std::rethrow_exception(error);
}

// Polls `cond` for up to 10 s.
template <typename C>
bool eventually(C&& cond) {
  for (int i = 0; i < 1000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

struct DiskOnFire : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A generator of scalars 0, 1, ... that throws DiskOnFire("record k is unreadable") at k
// (k < 0: endless), counting its calls.
Dataset counting_generator(std::atomic<int>* calls, int fail_at) {
  return Dataset::from_generator([calls, fail_at] {
    return [calls, fail_at, i = 0]() mutable -> std::optional<Element> {
      ++*calls;
      if (i == fail_at) throw DiskOnFire("record " + std::to_string(i) + " is unreadable");
      return Element{scalar(double(i++))};
    };
  });
}

TEST(PipelinePrefetchThread, DoesNotChangeTheSequence) {
  const int64_t n = 23;
  Dataset ds = Dataset::from_tensor_slices(rows_x(n), rows_y(n)).shuffle(7, 3).map([](Element e) {
    return Element{e.x.tensors()[0] * 2.0, e.y};
  });
  Dataset plain = ds.batch(4);
  for (const Dataset& prefetched :
       {ds.batch(4).prefetch(1), ds.batch(4).prefetch(3), ds.prefetch(5).batch(4).prefetch(2)})
    for (uint64_t pass = 0; pass < 3; ++pass) {
      std::vector<Element> a = collect(plain, pass), b = collect(prefetched, pass);
      ASSERT_EQ(a.size(), 6u);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(same_tensor(a[i].x.tensors()[0], b[i].x.tensors()[0])) << pass << " " << i;
        EXPECT_TRUE(same_tensor(a[i].y.tensors()[0], b[i].y.tensors()[0])) << pass << " " << i;
      }
    }
}

TEST(PipelinePrefetchThread, RethrowsTheGeneratorErrorAtItsPosition) {
  for (int64_t buffer : {1, 2, 10}) {
    std::atomic<int> calls{0};
    Dataset::Iterator it = counting_generator(&calls, 3).prefetch(buffer).begin_pass(0);
    for (int i = 0; i < 3; ++i) {
      std::optional<Element> e = it.next();
      ASSERT_TRUE(e.has_value()) << "buffer " << buffer << " element " << i;
      EXPECT_EQ(e->x.tensors()[0].item<double>(), i);
    }
    try {
      it.next();
      ADD_FAILURE() << "no exception at element 3 (buffer " << buffer << ")";
    } catch (const DiskOnFire& e) {  // the generator's own type and message
      EXPECT_STREQ(e.what(), "record 3 is unreadable");
    }
    EXPECT_FALSE(it.next().has_value());
    EXPECT_EQ(calls.load(), 4);  // nothing pulled after the error
  }
}

TEST(PipelinePrefetchThread, RethrowsKilnErrorsFromMapAndBatch) {
  Dataset bad_map = Dataset::from_tensor_slices(rows_x(4), rows_y(4)).map([](Element e) {
    if (e.y.tensors()[0].item<int64_t>() == 2) throw Error("map: row 2 is bad");
    return e;
  });
  Dataset::Iterator it = bad_map.prefetch(4).begin_pass(0);
  EXPECT_TRUE(it.next() && it.next());
  EXPECT_THROW(
      {
        try {
          it.next();
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "map: row 2 is bad");
          throw;
        }
      },
      Error);
}

TEST(PipelinePrefetchThread, PullsAheadOnAnotherThread) {
  std::atomic<int> calls{0};
  std::atomic<bool> on_other_thread{false};
  const std::thread::id consumer = std::this_thread::get_id();
  Dataset ds = counting_generator(&calls, -1).map([&](Element e) {
    on_other_thread = std::this_thread::get_id() != consumer;
    return e;
  });
  {
    Dataset::Iterator it = ds.prefetch(3).begin_pass(0);
    // Without a single next(), the queue fills: 3 elements, then the producer waits.
    EXPECT_TRUE(eventually([&] { return calls.load() >= 3; }));
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(calls.load(), 3);
    EXPECT_TRUE(on_other_thread.load());
    EXPECT_EQ(it.next()->x.tensors()[0].item<double>(), 0);
    EXPECT_TRUE(eventually([&] { return calls.load() == 4; }));  // a free slot, refilled
  }
  // Without prefetch, map runs on the consumer's thread.
  Dataset::Iterator plain = ds.begin_pass(0);
  plain.next();
  EXPECT_FALSE(on_other_thread.load());
}

TEST(PipelinePrefetchThread, DestroyingAnIteratorEarlyDoesNotHang) {
  std::atomic<int> calls{0};
  Dataset endless = counting_generator(&calls, -1).prefetch(2);
  finishes_within(60s, [&] {
    Dataset::Iterator it = endless.begin_pass(0);
    EXPECT_EQ(it.next()->x.tensors()[0].item<double>(), 0);
    EXPECT_EQ(it.next()->x.tensors()[0].item<double>(), 1);
    // Let the producer fill the queue and block on it before the iterator goes.
    EXPECT_TRUE(eventually([&] { return calls.load() >= 4; }));
  });
  const int after = calls.load();
  EXPECT_LE(after, 5);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), after);  // the thread is gone
  // Never pulled, destroyed at once; and with the producer busy inside a slow upstream call.
  finishes_within(60s, [&] { endless.begin_pass(1); });
  Dataset slow = counting_generator(&calls, -1)
                     .map([](Element e) {
                       std::this_thread::sleep_for(20ms);
                       return e;
                     })
                     .prefetch(1);
  finishes_within(60s, [&] {
    Dataset::Iterator it = slow.begin_pass(0);
    it.next();
  });
}

}  // namespace
}  // namespace kiln::data
