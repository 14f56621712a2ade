// A kiln::function called under a GradientTape (issue: traced graphs under outer tapes), as a
// ratio in this one binary: the forward pass of an MLP (Dense 784-256-256-10, GELU, batch 64)
// with its loss and the gradients of every weight, written as
//   Eager/...     the callable run eagerly under the tape (what kiln did before);
//   Function/...  the same callable wrapped in kiln::function and called under the tape: the
//                 forward variant and the backward graph run compiled.
// Counter x_faster_than_eager on Function = eager median / function median (5 runs each,
// measured in the same process just before).
// Run: kiln_bench --benchmark_filter=FunctionUnderTape
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Mlp {
  std::vector<Variable> w, b;
  Mlp() {
    const int64_t sizes[] = {784, 256, 256, 10};
    for (int i = 0; i < 3; ++i) {
      w.emplace_back(fmt::format("w{}", i),
                     random_normal({sizes[i], sizes[i + 1]}, 10 + i, 0, 0.05));
      b.emplace_back(fmt::format("b{}", i), zeros({sizes[i + 1]}));
    }
  }
  Tensor loss(const Tensor& x) const {
    Tensor h = x;
    for (size_t i = 0; i < w.size(); ++i) {
      h = matmul(h, w[i].read()) + b[i].read();
      if (i + 1 < w.size()) h = gelu(h);
    }
    return mean(square(h));
  }
  std::vector<Variable> variables() const {
    std::vector<Variable> v = w;
    v.insert(v.end(), b.begin(), b.end());
    return v;
  }
};

template <typename Loss>
void step(const Mlp& m, const Tensor& x, Loss&& loss) {
  GradientTape tape;
  Tensor l = loss(x);
  std::vector<Tensor> g = tape.gradient(l, m.variables());
  benchmark::DoNotOptimize(g[0].data<float>());
}

using bench_util::median_seconds;

void BM_FunctionUnderTape_Eager(benchmark::State& state) {
  Mlp m;
  Tensor x = random_normal({64, 784}, 1);
  for (auto _ : state) step(m, x, [&](const Tensor& t) { return m.loss(t); });
}

void BM_FunctionUnderTape_Function(benchmark::State& state) {
  Mlp m;
  Tensor x = random_normal({64, 784}, 1);
  auto f = kiln::function([&](const Tensor& t) { return m.loss(t); }, {.name = "mlp_loss"});
  auto eager = [&] { step(m, x, [&](const Tensor& t) { return m.loss(t); }); };
  auto traced = [&] { step(m, x, [&](const Tensor& t) { return f(t); }); };
  traced();  // trace, build the forward/backward pair, compile
  for (int i = 0; i < 3; ++i) eager(), traced();
  const double ratio = median_seconds(5, eager) / median_seconds(5, traced);
  for (auto _ : state) traced();
  state.counters["x_faster_than_eager"] = ratio;
}

BENCHMARK(BM_FunctionUnderTape_Eager)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FunctionUnderTape_Function)->Unit(benchmark::kMillisecond);

}  // namespace
