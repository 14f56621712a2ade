// Compiled concrete functions (the library default; kiln_tests' own default is the reference
// executor, see tests/support/reference_mode_environment.cc, so each test here selects
// compiled explicitly): modes, per-shape specialisation of a graph with unknown dimensions,
// errors from compiled kernels, control flow, and concurrent calls from several threads.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "kiln/codegen/compile_driver.h"
#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

Tensor affine(const Tensor& x) { return tanh(x * scalar(2.0f) + scalar(1.0f)); }

TEST(CompiledFunction, DefaultIsCompiledAndReferenceIsAnOption) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  auto f = kiln::function([](const Tensor& x) { return affine(x); }, {.name = "affine"});
  auto g = kiln::function([](const Tensor& x) { return affine(x); },
                          {.name = "affine_ref", .mode = ExecutionMode::kReference});
  Tensor x = random_normal({33, 7}, 1);
  Tensor yc = f(x), yr = g(x), ye = affine(x);
  EXPECT_EQ(f.concrete(x).mode(), ExecutionMode::kCompiled);
  EXPECT_EQ(g.concrete(x).mode(), ExecutionMode::kReference);
  EXPECT_EQ(yr.to_vector<float>(), ye.to_vector<float>());  // same kernels, same order
  std::vector<float> c = yc.to_vector<float>(), e = ye.to_vector<float>();
  // tanh(z), z = 2x + 1: z is off by one rounding (u |z|, FMA or not) and z sech^2(z) <= 0.45,
  // so that moves tanh by < u; tanh is within ~2 ulp (4 u) on each path: < 10 u apart.
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], e[i], 16 * 0x1p-24) << i;
  EXPECT_EQ(g.concrete(x).compile_stats().executables, 0);
  EXPECT_EQ(f.concrete(x).compile_stats().executables, 1);
}

TEST(CompiledFunction, UnknownBatchCompilesOneExecutablePerShape) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  auto f = kiln::function([](const Tensor& x) { return sum(affine(x), {1}); },
                          {.name = "rows", .input_signature = std::vector<TensorSpec>{{{-1, 5}}}});
  for (int64_t n : {3, 8, 3, 1}) {
    Tensor x = random_normal({n, 5}, n);
    std::vector<float> got = f(x).to_vector<float>(), want = sum(affine(x), {1}).to_vector<float>();
    ASSERT_EQ(got.size(), size_t(n));
    // a sum of 5 terms in [-1, 1], each within 16 u (as above), plus the sum's own roundings
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 5 * (16 + 5) * 0x1p-24);
  }
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f.concrete(random_normal({2, 5}, 0)).compile_stats().executables, 3);  // 3, 8, 1
}

TEST(CompiledFunction, IntegerDivisionByZeroIsAnError) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  auto f = kiln::function([](const Tensor& a, const Tensor& b) { return (a + b) / b; });
  Tensor a = tensor<int32_t>({1, 2, 3}, Shape{3});
  Tensor ok = tensor<int32_t>({1, -1, 2}, Shape{3});
  EXPECT_EQ(f(a, ok).to_vector<int32_t>(), (std::vector<int32_t>{2, -1, 2}));
  Tensor zero = tensor<int32_t>({1, 0, 2}, Shape{3});
  std::string e = test::error_of([&] { f(a, zero); });
  EXPECT_NE(e.find("integer division by zero"), std::string::npos) << e;
}

TEST(CompiledFunction, ConcurrentCallsFromSeveralThreads) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
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

TEST(CompiledFunction, CallsThatWriteVariablesAreSerialised) {
  // Each call adds the input to a counter variable in place: concurrent calls must not lose
  // updates (each reads what the previous one wrote), so 4 threads x 25 calls add 100 times.
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Variable counter("counter", zeros({4096}));
  auto f = kiln::function(
      [&](const Tensor& x) {
        counter.assign(counter.read() + x);
        return sum(x);
      },
      {.name = "accumulate"});
  Tensor ones_in = ones({4096});
  f(ones_in);  // traces and compiles
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 25; ++rep) f(ones_in);
    });
  for (auto& th : threads) th.join();
  std::vector<float> v = counter.value().to_vector<float>();
  EXPECT_EQ(v.front(), 101.0f);
  EXPECT_EQ(v.back(), 101.0f);
}

TEST(CompiledFunction, ControlFlowMatchesReference) {
  // cond picks a branch on a traced predicate; while_loop iterates a traced body.
  auto body = [](const Tensor& x) {
    Tensor c = kiln::cond(
        greater(sum(x), scalar(0.0f)), [&] { return std::vector<Tensor>{tanh(x) * x}; },
        [&] { return std::vector<Tensor>{exp(x) - scalar(1.0f)}; })[0];
    std::vector<Tensor> r = kiln::while_loop(
        [](const std::vector<Tensor>& s) { return less(s[0], scalar(5, DType::i32)); },
        [](const std::vector<Tensor>& s) {
          return std::vector<Tensor>{s[0] + scalar(1, DType::i32), sigmoid(s[1]) + s[1]};
        },
        {scalar(0, DType::i32), c});
    return r[1];
  };
  auto compiled = kiln::function(body, {.name = "cf", .mode = ExecutionMode::kCompiled});
  auto reference = kiln::function(body, {.name = "cf_ref", .mode = ExecutionMode::kReference});
  for (float sign : {1.0f, -1.0f}) {
    Tensor x = random_normal({4, 9}, 3) * scalar(0.1f) + scalar(sign);
    std::vector<float> got = compiled(x).to_vector<float>(), want = reference(x).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    // 5 rounds of sigmoid(s) + s from tanh(x) * x or exp(x) - 1 (|x| <= ~1.5): each round adds
    // a few ulps of its magnitude and sigmoid' <= 1/4 damps the previous rounds' errors, so 32
    // ulps per round is a generous bound; anything larger is a real difference.
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 5 * 32 * 0x1p-24 * (1 + std::abs(want[i])));
  }
}

}  // namespace
}  // namespace kiln

#include <nlohmann/json.hpp>

namespace kiln {
namespace {

TEST(CompiledFunction, ProfilerTraceNamesEveryKernel) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  auto f = kiln::function(
      [](const Tensor& x, const Tensor& w) {
        Tensor h = relu(matmul(x, w) + scalar(0.5f));
        return softmax(h, -1) * sum(h);
      },
      {.name = "profiled"});
  Tensor x = random_normal({16, 8}, 1), w = random_normal({8, 32}, 2);
  f(x, w);  // compile outside the profile
  runtime::start_profiling();
  f(x, w);
  std::vector<runtime::ProfileEvent> events = runtime::stop_profiling();
  nlohmann::json trace = nlohmann::json::parse(runtime::chrome_trace_json(events));
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  EXPECT_TRUE(names.count("profiled")) << trace.dump();
  // Every kernel of the compiled graph, by the name the IR dump gives its fusion group.
  ConcreteFunction cf = f.concrete(x, w);
  auto compiled_fn = codegen::compile_function(cf.graph(), cf.input_types(), {});
  int kernels = 0;
  for (const auto& n : compiled_fn.optimized->nodes())
    if (n->kind() == ir::NodeKind::kFusion) {
      ++kernels;
      EXPECT_TRUE(names.count(std::string(n->fusion_name()))) << n->fusion_name();
    }
  EXPECT_GT(kernels, 0);
}

}  // namespace
}  // namespace kiln
