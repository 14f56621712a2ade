// Convolution throughput of the eager kernels (run_op: conv2d, conv2d_backprop_input,
// conv2d_backprop_filter; NHWC / HWIO, float32) on the layers of `kiln bench`'s CNN, with the
// GFLOP/s of their im2col GEMMs and `of_peak` (that over the FMA peak measured in this process
// at the same thread count, runtime/machine_peak.h). Arguments: layer (0: 28x28x1 -> 3x3x16,
// 1: 14x14x16 -> 3x3x32, "same" padding, batch 64), threads, dtype (0: float32; 1: bfloat16,
// the kernels of runtime/kernels/conv_bf16.cc; 2: bfloat16 the op table's via-f32 way done by
// hand: operands widened by casts, the float32 kernel, the result cast back: the passes over
// memory that conv_bf16.cc saves).
// Run: kiln_bench --benchmark_filter=Conv
#include <benchmark/benchmark.h>

#include <random>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/machine_peak.h"
#include "kiln/runtime/threading.h"

namespace {

using kiln::runtime::Array;

struct ConvLayer {
  int64_t n, h, w, c, k, o;
};
constexpr ConvLayer kLayers[] = {{64, 28, 28, 1, 3, 16}, {64, 14, 14, 16, 3, 32}};

Array random_array(const kiln::Shape& s, uint32_t seed) {
  Array a = Array::empty(kiln::DType::f32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = dist(rng);
  return a;
}

Array cast(const Array& a, kiln::DType to) {
  const Array in[] = {a};
  return kiln::runtime::run_op(kiln::OpKind::Cast, in, {{"dtype", to}});
}

void run(benchmark::State& state, kiln::OpKind op) {
  const ConvLayer& l = kLayers[state.range(0)];
  const int threads = int(state.range(1));
  const int saved = kiln::num_threads();
  kiln::set_num_threads(threads);
  const int64_t oh = l.h, ow = l.w;  // "same", stride 1
  Array x = random_array({l.n, l.h, l.w, l.c}, 1), w = random_array({l.k, l.k, l.c, l.o}, 2),
        dy = random_array({l.n, oh, ow, l.o}, 3);
  const kiln::Attrs attrs{{"strides", std::vector<int64_t>{1, 1}},
                          {"dilations", std::vector<int64_t>{1, 1}},
                          {"padding", std::string("same")}};
  kiln::Attrs with_shape = attrs;
  std::vector<Array> in;
  if (op == kiln::OpKind::Conv2D) in = {x, w};
  if (op == kiln::OpKind::Conv2DBackpropInput) {
    in = {w, dy};
    with_shape.set("input_shape", std::vector<int64_t>{l.n, l.h, l.w, l.c});
  }
  if (op == kiln::OpKind::Conv2DBackpropFilter) {
    in = {x, dy};
    with_shape.set("filter_shape", std::vector<int64_t>{l.k, l.k, l.c, l.o});
  }
  const int64_t dtype = state.range(2);
  if (dtype > 0)
    for (Array& a : in) a = cast(a, kiln::DType::bf16);
  // The output is allocated once, as a compiled step's arena holds it: the loop times the
  // kernel, not the allocator's page faults on a fresh buffer.
  Array out = kiln::runtime::run_op(op, in, with_shape);
  const kiln::runtime::KernelFn kernel = kiln::runtime::kernel_for(op);
  for (auto _ : state) {
    if (dtype == 2) {
      const std::vector<Array> wide = {cast(in[0], kiln::DType::f32),
                                       cast(in[1], kiln::DType::f32)};
      Array narrow = cast(kiln::runtime::run_op(op, wide, with_shape), kiln::DType::bf16);
      benchmark::DoNotOptimize(narrow.raw());
    } else {
      kernel(in, with_shape, out);
      benchmark::DoNotOptimize(out.raw());
    }
  }
  const double flops = 2.0 * double(l.n * oh * ow) * double(l.k * l.k * l.c) * double(l.o);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = kiln::runtime::measure_fma_peak(threads, 0.05, 3).gflops;
  if (peak > 0)
    state.counters["of_peak"] =
        benchmark::Counter(flops * 1e-9 / peak, benchmark::Counter::kIsIterationInvariantRate);
  kiln::set_num_threads(saved);
}

void BM_Conv2D(benchmark::State& s) { run(s, kiln::OpKind::Conv2D); }
void BM_Conv2DBackpropInput(benchmark::State& s) { run(s, kiln::OpKind::Conv2DBackpropInput); }
void BM_Conv2DBackpropFilter(benchmark::State& s) { run(s, kiln::OpKind::Conv2DBackpropFilter); }

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {1, 2})
    for (int64_t layer : {0, 1})
      for (int64_t dtype : {0, 1, 2}) b->Args({layer, t, dtype});
  b->ArgNames({"layer", "threads", "dtype"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Conv2D)->Apply(Args);
BENCHMARK(BM_Conv2DBackpropInput)->Apply(Args);
BENCHMARK(BM_Conv2DBackpropFilter)->Apply(Args);

}  // namespace
