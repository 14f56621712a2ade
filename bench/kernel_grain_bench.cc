// The minimum grain of a JIT kernel's chunks: is splitting a kernel into two chunks on two
// threads worth it, by size? KernelSplit/<elements>/<expensive> runs one compiled flat kernel
// (expensive: y = tanh(exp(x) * x); cheap: y = x * x + x; f32) over `elements` as one call and
// as two chunks on kiln's arena
// (runtime::parallel_tasks), both timed in the same benchmark; counter x_speedup = one call /
// two chunks. The break-even size is the smallest chunk worth a thread: the executable's
// grain (runtime::kElementwiseGrain elements of work per chunk) should sit at or above it.
// Run: kiln_bench --benchmark_filter=KernelSplit
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "kiln/codegen/compiler.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel_abi.h"
#include "kiln/runtime/threading.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

// expensive: tanh(exp(x) * x) (vector math); cheap: x * x + x.
runtime::KernelEntry compile_kernel(int64_t n, bool expensive, std::unique_ptr<ir::Graph>& body) {
  body = std::make_unique<ir::Graph>("grain_probe");
  ir::Value* x = body->add_parameter({DType::f32, Shape{n}});
  ir::Value* y = nullptr;
  if (expensive) {
    ir::Value* e = body->add_op(OpKind::Exp, {x})->output();
    ir::Value* m = body->add_op(OpKind::Mul, {e, x})->output();
    y = body->add_op(OpKind::Tanh, {m})->output();
  } else {
    ir::Value* m = body->add_op(OpKind::Mul, {x, x})->output();
    y = body->add_op(OpKind::Add, {m, x})->output();
  }
  body->set_outputs({y});
  return codegen::compile_kernels({{body.get(), "grain_probe", nullptr, {}}}).front().entry;
}

void KernelSplit(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::unique_ptr<ir::Graph> body;
  runtime::KernelEntry entry = compile_kernel(n, state.range(1) == 1, body);
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2, 2);
  for (float& v : x) v = u(rng);
  void* buffers[] = {x.data(), y.data()};
  int32_t status = 0;
  runtime::KernelFrame frame{buffers, &status};
  double one = 0, two = 0;
  for (auto _ : state) {
    auto a = Clock::now();
    entry(&frame, 0, n);
    auto b = Clock::now();
    runtime::parallel_tasks(2, [&](int64_t t) {
      int32_t s = 0;
      runtime::KernelFrame f{buffers, &s};
      entry(&f, t * n / 2, (t + 1) * n / 2);
    });
    auto c = Clock::now();
    one += std::chrono::duration<double>(b - a).count();
    two += std::chrono::duration<double>(c - b).count();
  }
  state.counters["x_speedup"] = two > 0 ? one / two : 0;
  state.counters["chunk_elements"] = double(n / 2);
}
BENCHMARK(KernelSplit)
    ->ArgNames({"elements", "expensive"})
    ->ArgsProduct({{1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20}, {0, 1}})
    ->UseRealTime();

}  // namespace
