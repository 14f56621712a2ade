// Eager dispatch overhead: the whole path of one tiny op (type rule, allocation, kernel,
// Tensor wrapping). Target: under 1 microsecond per op.
#include <benchmark/benchmark.h>

#include "kiln/kiln.h"

namespace {

void BM_EagerDispatch_TinyAdd(benchmark::State& state) {
  kiln::Tensor a = kiln::ones({4});
  kiln::Tensor b = kiln::ones({4});
  for (auto _ : state) {
    kiln::Tensor c = kiln::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EagerDispatch_TinyAdd);

void BM_EagerDispatch_ScalarMulOperator(benchmark::State& state) {
  kiln::Tensor a = kiln::ones({4});
  for (auto _ : state) {
    kiln::Tensor c = a * 2.0;
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_EagerDispatch_ScalarMulOperator);

void BM_EagerDispatch_TinyAddRecordedOnTape(benchmark::State& state) {
  kiln::Tensor a = kiln::ones({4});
  kiln::Tensor b = kiln::ones({4});
  for (auto _ : state) {
    kiln::GradientTape tape;
    tape.watch(a);
    kiln::Tensor c = kiln::add(a, b);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_EagerDispatch_TinyAddRecordedOnTape);

}  // namespace
