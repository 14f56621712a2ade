// Concrete functions run compiled by default: modes, per-shape specialisation of a graph with
// unknown dimensions, errors from compiled kernels, and concurrent calls from several threads.
#include <gtest/gtest.h>

#include <thread>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

Tensor affine(const Tensor& x) { return tanh(x * scalar(2.0f) + scalar(1.0f)); }

TEST(CompiledFunction, DefaultIsCompiledAndReferenceIsAnOption) {
  auto f = kiln::function([](const Tensor& x) { return affine(x); }, {.name = "affine"});
  auto g = kiln::function([](const Tensor& x) { return affine(x); },
                          {.name = "affine_ref", .mode = ExecutionMode::kReference});
  Tensor x = random_normal({33, 7}, 1);
  Tensor yc = f(x), yr = g(x), ye = affine(x);
  EXPECT_EQ(f.concrete(x).mode(), ExecutionMode::kCompiled);
  EXPECT_EQ(g.concrete(x).mode(), ExecutionMode::kReference);
  EXPECT_EQ(yr.to_vector<float>(), ye.to_vector<float>());  // same kernels, same order
  std::vector<float> c = yc.to_vector<float>(), e = ye.to_vector<float>();
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], e[i], 2e-6) << i;
  EXPECT_EQ(g.concrete(x).compile_stats().executables, 0);
  EXPECT_EQ(f.concrete(x).compile_stats().executables, 1);
}

TEST(CompiledFunction, UnknownBatchCompilesOneExecutablePerShape) {
  auto f = kiln::function([](const Tensor& x) { return sum(affine(x), {1}); },
                          {.name = "rows", .input_signature = std::vector<TensorSpec>{{{-1, 5}}}});
  for (int64_t n : {3, 8, 3, 1}) {
    Tensor x = random_normal({n, 5}, n);
    std::vector<float> got = f(x).to_vector<float>(), want = sum(affine(x), {1}).to_vector<float>();
    ASSERT_EQ(got.size(), size_t(n));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
  }
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f.concrete(random_normal({2, 5}, 0)).compile_stats().executables, 3);  // 3, 8, 1
}

TEST(CompiledFunction, IntegerDivisionByZeroIsAnError) {
  auto f = kiln::function([](const Tensor& a, const Tensor& b) { return (a + b) / b; });
  Tensor a = tensor<int32_t>({1, 2, 3}, Shape{3});
  Tensor ok = tensor<int32_t>({1, -1, 2}, Shape{3});
  EXPECT_EQ(f(a, ok).to_vector<int32_t>(), (std::vector<int32_t>{2, -1, 2}));
  Tensor zero = tensor<int32_t>({1, 0, 2}, Shape{3});
  std::string e = test::error_of([&] { f(a, zero); });
  EXPECT_NE(e.find("integer division by zero"), std::string::npos) << e;
}

TEST(CompiledFunction, ConcurrentCallsFromSeveralThreads) {
  auto f = kiln::function([](const Tensor& x) { return affine(x) * x; }, {.name = "shared"});
  std::vector<Tensor> inputs;
  for (int t = 0; t < 4; ++t) inputs.push_back(random_normal({64, 129}, 10 + t));
  ConcreteFunction cf = f.concrete(inputs[0]);
  std::vector<std::vector<float>> serial(4), parallel(4);
  for (int t = 0; t < 4; ++t) serial[size_t(t)] = cf({inputs[size_t(t)]})[0].to_vector<float>();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        parallel[size_t(t)] = cf({inputs[size_t(t)]})[0].to_vector<float>();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(parallel[size_t(t)], serial[size_t(t)]) << t;
}

}  // namespace
}  // namespace kiln
