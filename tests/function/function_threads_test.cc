// One kiln::function called from several threads at once, each call with a signature no thread
// has used yet: every signature is traced exactly once (the others wait for that trace and
// reuse it) and every result is right. Without the lock of FunctionCore::State the threads
// trace the same signature twice and race on the signature cache (scripts/tsan.sh reports it).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {
namespace {

TEST(FunctionThreads, ConcurrentFirstCallsTraceEachSignatureOnce) {
  constexpr int kRounds = 50, kThreads = 4, kShapes = 40;
  for (int round = 0; round < kRounds; ++round) {  // a fresh function each round
    auto f = kiln::function([](const Tensor& x) { return x * x + 1.0; }, {.name = "squares"});
    std::atomic<int> wrong{0}, started{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        ++started;
        while (started.load() < kThreads) std::this_thread::yield();  // start together
        for (int k = 0; k < kShapes; ++k) {  // the same new signature in every thread
          Tensor x = full({k + 1, 3}, 2.0);
          std::vector<float> y = f(x).to_vector<float>();
          if (y.size() != size_t(3 * (k + 1))) ++wrong;
          for (float v : y)
            if (v != 5.0f) ++wrong;
        }
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(wrong.load(), 0) << "round " << round;
    ASSERT_EQ(f.tracing_count(), kShapes) << "round " << round;
  }
}

}  // namespace
}  // namespace kiln
