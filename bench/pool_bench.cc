// The max-pool of kiln bench's CNN step (issue 16: "keep the argmax where that is cheaper"),
// on its first layer's shapes (conv product [64, 28, 28, 16], bias [16], pool 2x2 stride 2),
// each variant compiled (codegen::compile_graph) and timed interleaved in this one process
// (medians of 15; milliseconds):
//   fwd_eager      relu(conv + b) stored, then the eager max_pool2d (the step before)
//   fwd_generated  relu and the pool in one generated kernel (only the pool stored)
//   bwd_eager      the eager max_pool2d_grad (runtime/kernels/pool.cc), then the generated
//                  relu gradient and bias-gradient sum (the step before)
//   bwd_tail       the generated relu gradient and bias-gradient sum alone, reading a
//                  full-size dx (bwd_eager without the eager pool gradient)
//   bwd_recompute  one generated kernel: relu(conv + b) at each window element, the window's
//                  argmax recomputed, its gradient, the relu gradient, the bias-gradient sum
//   bwd_kept_index the same kernel reading the argmax from an index saved by the forward
//                  pass (u8 per pooled element: dy and the index upsampled by broadcasts, the
//                  element taken where the index equals its position in the window), i.e. what
//                  keeping the argmax would run (the forward pass would also store the index)
//   fwd_copy_bound, bwd_copy_bound  a memcpy moving the bytes each generated kernel must move
//                  (forward: read the product, write the pool; backward: read the product and
//                  dy, write the relu gradient): what any kernel, a kept index's included,
//                  needs at least
// Run: kiln_bench --benchmark_filter=MaxPoolCnnLayer
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "bench/bench_util.h"
#include "kiln/codegen/compile_graph.h"
#include "kiln/kiln.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/kernels.h"

namespace {

using namespace kiln;
using runtime::Array;
using V = ir::Value*;

constexpr int64_t kN = 64, kH = 28, kW = 28, kC = 16, kOH = 14, kOW = 14;

const Attrs& pool() {
  static const Attrs a{{"pool_size", std::vector<int64_t>{2, 2}},
                       {"strides", std::vector<int64_t>{2, 2}},
                       {"padding", std::string("valid")}};
  return a;
}

V op(ir::Graph& g, OpKind k, std::vector<V> in, Attrs a = {}) {
  return g.add_op(k, std::move(in), std::move(a))->output();
}
V zero(ir::Graph& g, DType t) {
  std::vector<char> bytes(dtype_size(t), 0);
  return g.add_constant(ir::Literal::copy_of({t, Shape{}}, bytes.data()))->output();
}
// [N, OH, OW, C] -> [N, 2 OH, 2 OW, C], each element repeated over its window.
V upsample(ir::Graph& g, V x) {
  V r = op(g, OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{kN, kOH, 1, kOW, 1, kC}}});
  r = op(g, OpKind::BroadcastTo, {r}, {{"shape", std::vector<int64_t>{kN, kOH, 2, kOW, 2, kC}}});
  return op(g, OpKind::Reshape, {r}, {{"shape", std::vector<int64_t>{kN, kH, kW, kC}}});
}

// The relu gradient and bias-gradient sum of `dx` (the CNN's fused backward tail).
void relu_grad_tail(ir::Graph& g, V y, V dx) {
  V g0 = op(g, OpKind::Select,
            {op(g, OpKind::Greater, {y, zero(g, DType::f32)}), dx, zero(g, DType::f32)});
  V db = op(g, OpKind::Sum, {g0}, {{"axes", std::vector<int64_t>{0, 1, 2}}, {"keepdims", false}});
  g.set_outputs({g0, db});
}

struct Variants {
  std::unique_ptr<ir::Graph> fwd_relu, fwd_gen, bwd_tail, bwd_rec, bwd_idx;
  Variants() {
    const TensorType image{DType::f32, Shape{kN, kH, kW, kC}};
    const TensorType pooled{DType::f32, Shape{kN, kOH, kOW, kC}};
    const TensorType bias{DType::f32, Shape{kC}};
    auto relu_of = [&](ir::Graph& g) {
      V c = g.add_parameter(image), b = g.add_parameter(bias);
      return op(g, OpKind::Relu, {op(g, OpKind::Add, {c, b})});
    };
    fwd_relu = std::make_unique<ir::Graph>("fwd_relu");
    fwd_relu->set_outputs({relu_of(*fwd_relu)});
    fwd_gen = std::make_unique<ir::Graph>("fwd_gen");
    fwd_gen->set_outputs({op(*fwd_gen, OpKind::MaxPool2D, {relu_of(*fwd_gen)}, pool())});
    bwd_tail = std::make_unique<ir::Graph>("bwd_tail");
    {
      V y = relu_of(*bwd_tail);
      relu_grad_tail(*bwd_tail, y, bwd_tail->add_parameter(image));
    }
    bwd_rec = std::make_unique<ir::Graph>("bwd_recompute");
    {
      V y = relu_of(*bwd_rec);
      V dy = bwd_rec->add_parameter(pooled);
      relu_grad_tail(*bwd_rec, y, op(*bwd_rec, OpKind::MaxPool2DGrad, {y, dy}, pool()));
    }
    bwd_idx = std::make_unique<ir::Graph>("bwd_kept_index");
    {
      ir::Graph& g = *bwd_idx;
      V y = relu_of(g);
      V dy = g.add_parameter(pooled);
      V idx = g.add_parameter({DType::u8, Shape{kN, kOH, kOW, kC}});
      V position = g.add_parameter({DType::u8, Shape{kH, kW, 1}});  // 2 (h % 2) + w % 2
      V hit = op(g, OpKind::Equal, {upsample(g, idx), position});
      relu_grad_tail(g, y, op(g, OpKind::Select, {hit, upsample(g, dy), zero(g, DType::f32)}));
    }
    for (ir::Graph* g :
         {fwd_relu.get(), fwd_gen.get(), bwd_tail.get(), bwd_rec.get(), bwd_idx.get()})
      passes::optimize_pipeline({}).run(*g);
  }
};

Array filled(const TensorType& t, std::mt19937& rng) {
  Array a = Array::empty(t);
  if (t.dtype == DType::u8) {
    for (int64_t i = 0; i < a.size(); ++i) a.data<uint8_t>()[i] = uint8_t(rng() % 4);
  } else {
    std::normal_distribution<float> n;
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = n(rng);
  }
  return a;
}

void BM_MaxPoolCnnLayer(benchmark::State& state) {
  Variants v;
  auto fwd_relu = codegen::compile_graph(*v.fwd_relu);
  auto fwd_gen = codegen::compile_graph(*v.fwd_gen);
  auto bwd_tail = codegen::compile_graph(*v.bwd_tail);
  auto bwd_rec = codegen::compile_graph(*v.bwd_rec);
  auto bwd_idx = codegen::compile_graph(*v.bwd_idx);
  std::mt19937 rng(1);
  const TensorType image{DType::f32, Shape{kN, kH, kW, kC}};
  Array conv = filled(image, rng), bias = filled({DType::f32, Shape{kC}}, rng);
  Array dy = filled({DType::f32, Shape{kN, kOH, kOW, kC}}, rng);
  Array idx = filled({DType::u8, Shape{kN, kOH, kOW, kC}}, rng);
  Array position = Array::empty({DType::u8, Shape{kH, kW, 1}});
  for (int64_t h = 0; h < kH; ++h)
    for (int64_t w = 0; w < kW; ++w)
      position.data<uint8_t>()[h * kW + w] = uint8_t(2 * (h % 2) + w % 2);
  std::vector<Array> none;
  const std::vector<Array> cb = {conv, bias}, cbd = {conv, bias, dy},
                           cbdi = {conv, bias, dy, idx, position};
  auto fwd_eager = [&] {
    Array y = fwd_relu->run(cb, none)[0];
    const Array in[] = {y};
    benchmark::DoNotOptimize(runtime::run_op(OpKind::MaxPool2D, in, pool()).raw());
  };
  auto fwd_generated = [&] { benchmark::DoNotOptimize(fwd_gen->run(cb, none)[0].raw()); };
  Array y = fwd_relu->run(cb, none)[0];
  auto bwd_eager = [&] {
    const Array in[] = {y, dy};
    const std::vector<Array> args = {conv, bias,
                                     runtime::run_op(OpKind::MaxPool2DGrad, in, pool())};
    benchmark::DoNotOptimize(bwd_tail->run(args, none)[0].raw());
  };
  const std::vector<Array> tail_args = {conv, bias, [&] {
                                          const Array in[] = {y, dy};
                                          return runtime::run_op(OpKind::MaxPool2DGrad, in, pool());
                                        }()};
  auto bwd_tail_only = [&] { benchmark::DoNotOptimize(bwd_tail->run(tail_args, none)[0].raw()); };
  auto bwd_recompute = [&] { benchmark::DoNotOptimize(bwd_rec->run(cbd, none)[0].raw()); };
  auto bwd_kept_index = [&] { benchmark::DoNotOptimize(bwd_idx->run(cbdi, none)[0].raw()); };
  const size_t image_bytes = size_t(kN * kH * kW * kC) * 4, pooled_bytes = image_bytes / 4;
  std::vector<char> src(image_bytes * 2, 1), dst(image_bytes * 2);
  auto copy = [&](size_t moved) {  // moved = bytes read + written
    std::memcpy(dst.data(), src.data(), moved / 2);
    benchmark::DoNotOptimize(dst.data());
  };
  auto fwd_copy_bound = [&] { copy(image_bytes + pooled_bytes); };
  auto bwd_copy_bound = [&] { copy(2 * image_bytes + pooled_bytes); };
  std::vector<std::function<void()>> fns = {fwd_eager,      fwd_generated,  bwd_eager,
                                            bwd_recompute,  bwd_kept_index, fwd_copy_bound,
                                            bwd_copy_bound, bwd_tail_only};
  const char* names[] = {"fwd_eager_ms",      "fwd_generated_ms",  "bwd_eager_ms",
                         "bwd_recompute_ms",  "bwd_kept_index_ms", "fwd_copy_bound_ms",
                         "bwd_copy_bound_ms", "bwd_tail_ms"};
  std::vector<std::vector<double>> t(fns.size());
  for (auto _ : state) {
    for (int rep = 0; rep < 15; ++rep)
      for (size_t k = 0; k < fns.size(); ++k) t[k].push_back(bench_util::median_seconds(1, fns[k]));
  }
  for (size_t k = 0; k < fns.size(); ++k) {
    std::sort(t[k].begin(), t[k].end());
    state.counters[names[k]] = 1e3 * t[k][t[k].size() / 2];
  }
  state.counters["load_average_1min"] = [] {
    double l[1] = {0};
    return getloadavg(l, 1) == 1 ? l[0] : -1.0;
  }();
}
BENCHMARK(BM_MaxPoolCnnLayer)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
