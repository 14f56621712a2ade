// max_pool2d and max_pool2d_grad as generated code (codegen/pool_window.h), beyond their
// consistency rows: the CNN's patterns (relu -> max_pool2d; max_pool2d_grad -> the ReLU
// gradient, select(relu(x) > 0, g, 0)) must become one fusion each, with no eager kernel
// left, and their results must be bitwise equal to the reference executor (the eager
// kernels) at 1, 2 and 3 threads, with ties everywhere: values on a coarse grid, -0.0 and
// +0.0, all-negative inputs (a ReLU makes every window all zeros), NaN.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/pool_window.h"
#include "kiln/ir/printer.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

struct Geometry {
  Shape input;
  std::vector<int64_t> pool, strides;
  std::string padding;
};

std::string describe_pool_geometry(const Geometry& g, DType t) {
  return fmt::format("{} {} pool [{}] strides [{}] {}", dtype_name(t), g.input.to_string(),
                     fmt::join(g.pool, ","), fmt::join(g.strides, ","), g.padding);
}

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> g = {
      {Shape{5, 8, 8, 16}, {2, 2}, {2, 2}, "valid"},  // the CNN's (batch split into chunks)
      {Shape{3, 5, 5, 3}, {2, 2}, {2, 2}, "valid"},   // last row and column dropped
      {Shape{3, 5, 5, 3}, {2, 2}, {2, 2}, "same"},    // clipped windows at the edge
      {Shape{2, 7, 6, 17}, {3, 3}, {2, 2}, "same"},   // overlapping and clipped
      {Shape{4, 6, 7, 5}, {3, 2}, {1, 2}, "valid"},   // overlapping rows
      {Shape{3, 5, 7, 2}, {2, 2}, {3, 3}, "same"},    // gaps between windows
      {Shape{2, 9, 9, 33}, {3, 3}, {1, 1}, "same"},   // every element in 9 windows
      {Shape{2, 6, 9, 1}, {3, 3}, {3, 3}, "valid"},   // windows tiling the image, one channel
      {Shape{3, 4, 6, 5}, {2, 3}, {2, 3}, "valid"},   // tiling with non-square windows
  };
  return g;
}

Attrs pool_attrs(const Geometry& g) {
  return {{"pool_size", g.pool}, {"strides", g.strides}, {"padding", g.padding}};
}

Shape pooled_shape(const Geometry& g) {
  const TensorType in[] = {{DType::f32, g.input}};
  return infer_type(OpKind::MaxPool2D, in, pool_attrs(g)).shape;
}

ir::Value* zero(ir::Graph& g, DType t) {
  std::vector<char> bytes(dtype_size(t), 0);
  return g.add_constant(ir::Literal::copy_of({t, Shape{}}, bytes.data()))->output();
}

// relu(x) -> max_pool2d, as the CNN's forward pass (`relu` false: the pool alone).
std::unique_ptr<ir::Graph> forward(const Geometry& geo, DType t, bool relu) {
  auto g = std::make_unique<ir::Graph>("forward");
  ir::Value* x = g->add_parameter({t, geo.input});
  if (relu) x = g->add_op(OpKind::Relu, {x})->output();
  g->set_outputs({g->add_op(OpKind::MaxPool2D, {x}, pool_attrs(geo))->output()});
  return g;
}

// The CNN's backward pass through relu -> max_pool2d: the ReLU's output y = relu(x) routes
// dy, and the ReLU gradient reads y again (frontend/grad_elementwise.cc).
std::unique_ptr<ir::Graph> backward(const Geometry& geo, DType t) {
  auto g = std::make_unique<ir::Graph>("backward");
  ir::Value* x = g->add_parameter({t, geo.input});
  ir::Value* dy = g->add_parameter({t, pooled_shape(geo)});
  ir::Value* y = g->add_op(OpKind::Relu, {x})->output();
  ir::Value* d = g->add_op(OpKind::MaxPool2DGrad, {y, dy}, pool_attrs(geo))->output();
  ir::Value* positive = g->add_op(OpKind::Greater, {y, zero(*g, t)})->output();
  g->set_outputs({g->add_op(OpKind::Select, {positive, d, zero(*g, t)})->output()});
  return g;
}

// Values with ties: multiples of 0.5 in [-1.5, 1.5] (`negative`: in [-1.5, -0.5]), with -0.0
// among the zeros and a few NaN (floats); integers in [-2, 2].
Array tied(const TensorType& type, std::mt19937& rng, bool negative) {
  Array a = Array::empty(type);
  visit_dtype(type.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      int k = negative ? -1 - int(rng() % 3) : int(rng() % 7) - 3;
      if constexpr (std::is_floating_point_v<T>) {
        p[i] = T(0.5 * k);
        if (k == 0 && rng() % 2 == 0) p[i] = T(-0.0);
        if (rng() % 97 == 0) p[i] = std::numeric_limits<T>::quiet_NaN();
      } else {
        p[i] = T(k % 3);
      }
    }
  });
  return a;
}

// Output gradients: random reals (so a wrong routing shows, and sums over overlapping
// windows taken in another order round differently), some -0.0.
Array gradient(const TensorType& type, std::mt19937& rng) {
  Array a = Array::empty(type);
  std::uniform_real_distribution<double> u(-2, 2);
  visit_dtype(type.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* p = static_cast<T*>(a.raw());
      for (int64_t i = 0; i < a.size(); ++i) p[i] = rng() % 11 == 0 ? T(-0.0) : T(u(rng));
    }
  });
  return a;
}

bool pool_graph_holds_op(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes())
    if (n->is_op(op)) return true;
  return false;
}

// After the pipeline: one fusion node whose body holds `ops`, and none of them left outside.
::testing::AssertionResult fused(const ir::Graph& g, std::initializer_list<OpKind> ops) {
  int fusions = 0;
  for (const auto& n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kFusion) continue;
    ++fusions;
    for (OpKind op : ops)
      if (!pool_graph_holds_op(n->subgraph(0), op))
        return ::testing::AssertionFailure() << "the fusion lacks " << op_name(op);
  }
  for (OpKind op : ops)
    if (pool_graph_holds_op(g, op))
      return ::testing::AssertionFailure() << op_name(op) << " left outside";
  if (fusions != 1) return ::testing::AssertionFailure() << fusions << " fusions";
  return ::testing::AssertionSuccess();
}

void check_bitwise(const ir::Graph& g, const std::vector<Array>& args, const std::string& what) {
  testing::expect_bitwise_at_thread_counts(g, args, what);
}

class PoolKernel : public ::testing::Test {
 protected:
  testing::ScopedCacheDir cache_;
};

TEST_F(PoolKernel, ReluThenMaxPoolIsOneKernelEqualToTheReference) {
  std::mt19937 rng(3);
  for (DType t : {DType::f32, DType::f64, DType::i32})
    for (const Geometry& geo : geometries())
      for (bool negative : {false, true}) {
        std::string what = describe_pool_geometry(geo, t) + (negative ? " negative" : "");
        SCOPED_TRACE(what);
        auto g = forward(geo, t, true);
        passes::optimize_pipeline({}).run(*g);
        ASSERT_TRUE(fused(*g, {OpKind::Relu, OpKind::MaxPool2D})) << ir::print_graph(*g);
        check_bitwise(*g, {tied({t, geo.input}, rng, negative)}, what);
        // The pool alone: a one-op kernel on raw (negative, tied) inputs.
        auto alone = forward(geo, t, false);
        EXPECT_EQ(codegen::compile_graph_in_full(*alone).kernels.size(), 1u);
        check_bitwise(*alone, {tied({t, geo.input}, rng, negative)}, what + " alone");
      }
}

TEST_F(PoolKernel, MaxPoolGradThenReluGradIsOneKernelEqualToTheReference) {
  std::mt19937 rng(4);
  for (DType t : {DType::f32, DType::f64})
    for (const Geometry& geo : geometries())
      for (bool negative : {false, true}) {
        std::string what = describe_pool_geometry(geo, t) + (negative ? " negative" : "");
        SCOPED_TRACE(what);
        auto g = backward(geo, t);
        passes::optimize_pipeline({}).run(*g);
        ASSERT_TRUE(fused(*g, {OpKind::Relu, OpKind::MaxPool2DGrad, OpKind::Select}))
            << ir::print_graph(*g);
        check_bitwise(
            *g, {tied({t, geo.input}, rng, negative), gradient({t, pooled_shape(geo)}, rng)}, what);
      }
}

// A max-pool gradient whose windows tile its output exactly (window == stride, no padding, no
// row or column dropped) is walked window by window (codegen/pool_window.h); the geometries
// above check those kernels bitwise. Only tiling geometries qualify.
TEST_F(PoolKernel, OnlyWindowsThatTileTheImageAreWalkedByWindow) {
  const std::vector<bool> tiles = {true, false, false, false, false, false, false, true, true};
  ASSERT_EQ(tiles.size(), geometries().size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    const Geometry& geo = geometries()[i];
    auto g = backward(geo, DType::f32);
    auto strides = codegen::tiling_pool_grad(*g, geo.input);
    EXPECT_EQ(strides.has_value(), bool(tiles[i])) << describe_pool_geometry(geo, DType::f32);
    if (strides) {
      EXPECT_EQ(*strides, std::make_pair(geo.strides[0], geo.strides[1]));
    }
    EXPECT_FALSE(codegen::tiling_pool_grad(*g, pooled_shape(geo)).has_value());
  }
}

// The CNN step's forward fusion (a contraction epilogue: conv -> bias -> relu -> max_pool2d)
// keeps the pool in the epilogue kernel.
TEST_F(PoolKernel, PoolJoinsTheConvolutionEpilogue) {
  const char* text =
      R"(graph @f(%0: f32[3,6,6,2], %1: f32[3,3,2,4], %2: f32[4]) -> (f32[3,3,3,4], f32[3,6,6,4]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[3,6,6,4]
  %4 = add(%3, %2) : f32[3,6,6,4]
  %5 = relu(%4) : f32[3,6,6,4]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[3,3,3,4]
  return %6, %5
})";
  auto g = testing::optimized_graph(text);
  ASSERT_TRUE(fused(*g, {OpKind::Conv2D, OpKind::Relu, OpKind::MaxPool2D})) << ir::print_graph(*g);
  std::mt19937 rng(5);
  std::vector<Array> args;
  for (const auto& p : g->parameters()) args.push_back(tied(p->type(), rng, false));
  // The epilogue computes relu and the pool from the same product: the pool's result is
  // exactly the maximum of the stored relu output over each window.
  auto exe = codegen::compile_graph(*g);
  std::vector<Array> vars;
  std::vector<Array> got = exe->run(args, vars);
  const Array in[] = {got[1]};
  Array want = runtime::run_op(OpKind::MaxPool2D, in,
                               {{"pool_size", std::vector<int64_t>{2, 2}},
                                {"strides", std::vector<int64_t>{2, 2}},
                                {"padding", std::string("valid")}});
  EXPECT_TRUE(testing::bitwise_equal(got[0], want));
}

}  // namespace
}  // namespace kiln
