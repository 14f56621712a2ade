// The reference executor: hand-computed results, bitwise agreement with the eager kernels
// called directly, unknown batch dimensions, variable assignments in program order, cond,
// while, and argument / runtime errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/runtime/layout_test_util.h"
#include "tests/support/error_of.h"

namespace kiln::runtime {
namespace {

using ir::Graph;
using ir::Literal;
using ir::Node;
using ir::NodeKind;
using ir::Value;
using ::kiln::test::error_of;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TensorType f32(std::initializer_list<int64_t> dims) { return {DType::f32, Shape(dims)}; }
TensorType i64(std::initializer_list<int64_t> dims) { return {DType::i64, Shape(dims)}; }

template <typename T>
Array array_of(const Shape& s, const std::vector<T>& values) {
  Array a = Array::empty(dtype_of<T>(), s);
  EXPECT_EQ(size_t(a.size()), values.size());
  std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}
Array scalar_bool(bool b) {
  Array a = Array::empty(DType::b8, Shape{});
  *a.data<bool>() = b;
  return a;
}
Array random_f32(const Shape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  Array a = Array::empty(DType::f32, s);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = d(rng);
  return a;
}
using layout_test::values;
bool same_bits(const Array& a, const Array& b) {
  return a.type() == b.type() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

template <typename T>
Node* constant(Graph& g, const TensorType& t, const std::vector<T>& data) {
  return g.add_constant(Literal::copy_of(t, data.data()));
}
Attrs plain_matmul_attrs() { return Attrs{{"transpose_a", false}, {"transpose_b", false}}; }

std::vector<Array> run_graph(const Graph& g, std::vector<Array> args) {
  std::vector<Array> no_variables;
  return execute_reference(g, args, no_variables);
}

TEST(ReferenceExecutor, DenseReluByHand) {
  // relu(x @ w + b) with x = [[1, 2], [3, -4]], w = [[1, 0, -1], [2, 1, 0]], b = [0.5, -1, 2].
  Graph g("dense");
  Value* x = g.add_parameter(f32({2, 2}));
  Value* w = constant<float>(g, f32({2, 3}), {1, 0, -1, 2, 1, 0})->output();
  Value* b = constant<float>(g, f32({3}), {0.5f, -1, 2})->output();
  Value* mm = g.add_op(OpKind::MatMul, {x, w}, plain_matmul_attrs())->output();
  Value* z = g.add_op(OpKind::Add, {mm, b})->output();
  Value* y = g.add_op(OpKind::Relu, {z})->output();
  g.set_outputs({y, z});
  std::vector<Array> out = run_graph(g, {array_of<float>(Shape{2, 2}, {1, 2, 3, -4})});
  ASSERT_EQ(out.size(), 2u);
  // x @ w = [[5, 2, -1], [-5, -4, -3]]; + b = [[5.5, 1, 1], [-4.5, -5, -1]].
  EXPECT_EQ(out[1].type(), f32({2, 3}));
  EXPECT_THAT(values<float>(out[1]), ElementsAre(5.5f, 1, 1, -4.5f, -5, -1));
  EXPECT_THAT(values<float>(out[0]), ElementsAre(5.5f, 1, 1, 0, 0, 0));
}

TEST(ReferenceExecutor, BitwiseEqualToEagerKernels) {
  std::mt19937 rng(7);
  Array xa = random_f32(Shape{4, 8}, rng), wa = random_f32(Shape{8, 5}, rng);
  Array ba = random_f32(Shape{5}, rng);
  Graph g("chain");
  Value* x = g.add_parameter(f32({4, 8}));
  Value* w = g.add_parameter(f32({8, 5}));
  Value* b = g.add_constant(Literal::copy_of(ba.type(), ba.raw()))->output();
  Attrs softmax{{"axis", int64_t(-1)}};
  Attrs sum{{"axes", std::vector<int64_t>{0}}, {"keepdims", true}};
  Value* mm = g.add_op(OpKind::MatMul, {x, w}, plain_matmul_attrs())->output();
  Value* z = g.add_op(OpKind::Add, {mm, b})->output();
  Value* t = g.add_op(OpKind::Tanh, {z})->output();
  Value* s = g.add_op(OpKind::Softmax, {t}, softmax)->output();
  Value* r = g.add_op(OpKind::Sum, {s}, sum)->output();
  Value* e = g.add_op(OpKind::Exp, {r})->output();
  Value* d = g.add_op(OpKind::Div, {s, e})->output();
  g.set_outputs({d, r, d});
  std::vector<Array> out = run_graph(g, {xa, wa});

  auto op2 = [](OpKind k, const Array& a, const Array& c, const Attrs& at = {}) {
    Array in[2] = {a, c};
    return run_op(k, in, at);
  };
  auto op1 = [](OpKind k, const Array& a, const Attrs& at = {}) {
    return run_op(k, std::span<const Array>(&a, 1), at);
  };
  Array emm = op2(OpKind::MatMul, xa, wa, plain_matmul_attrs());
  Array ez = op2(OpKind::Add, emm, ba);
  Array es = op1(OpKind::Softmax, op1(OpKind::Tanh, ez), softmax);
  Array er = op1(OpKind::Sum, es, sum);
  Array ed = op2(OpKind::Div, es, op1(OpKind::Exp, er));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(same_bits(out[0], ed));
  EXPECT_TRUE(same_bits(out[1], er));
  EXPECT_EQ(out[0].storage, out[2].storage);  // the same value returned twice
}

TEST(ReferenceExecutor, UnknownBatchDimensionRunsAtAnySize) {
  std::mt19937 rng(11);
  Array wa = random_f32(Shape{3, 2}, rng);
  Graph g("batch");
  Value* x = g.add_parameter(f32({kUnknownDim, 3}));
  Value* w = g.add_constant(Literal::copy_of(wa.type(), wa.raw()))->output();
  Value* y = g.add_op(OpKind::MatMul, {x, w}, plain_matmul_attrs())->output();
  Value* s = g.add_op(OpKind::Sigmoid, {y})->output();
  ASSERT_EQ(s->type(), f32({kUnknownDim, 2}));
  g.set_outputs({s});
  for (int64_t batch : {1, 5}) {
    Array xa = random_f32(Shape{batch, 3}, rng);
    std::vector<Array> out = run_graph(g, {xa});
    Array in[2] = {xa, wa};
    Array mm = run_op(OpKind::MatMul, in, plain_matmul_attrs());
    Array expected = run_op(OpKind::Sigmoid, std::span<const Array>(&mm, 1), {});
    ASSERT_EQ(out[0].type(), f32({batch, 2}));
    EXPECT_TRUE(same_bits(out[0], expected)) << "batch " << batch;
  }
}

TEST(ReferenceExecutor, AssignmentsUpdateVariablesInProgramOrder) {
  Graph g("update");
  Value* x = g.add_parameter(f32({2}));         // %0
  int v = g.add_variable("w", f32({2}), true);  // %1
  g.variable(size_t(v)).read = true;
  Value* entry = g.variable(size_t(v)).entry;
  Value* before = g.add_op(OpKind::Neg, {entry})->output();                 // %2 = -w
  Node* a = g.add_assignment(NodeKind::kAssignAdd, v, x);                   // %3: w += x
  Value* sq = g.add_op(OpKind::Mul, {a->output(), a->output()})->output();  // %4
  Value* one = constant<float>(g, f32({2}), {1, 1})->output();              // %5
  Node* s = g.add_assignment(NodeKind::kAssignSub, v, one);                 // %6: w -= 1
  Value* neg_s = g.add_op(OpKind::Neg, {s->output()})->output();            // %7
  Node* last = g.add_assignment(NodeKind::kAssign, v, sq);                  // %8: w = sq
  g.set_outputs({before, sq, neg_s, last->output()});

  Array w0 = array_of<float>(Shape{2}, {1, 2});
  std::vector<Array> vars{w0};
  Array xa = array_of<float>(Shape{2}, {10, 20});
  std::vector<Array> out = execute_reference(g, std::span<const Array>(&xa, 1), vars);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_THAT(values<float>(out[0]), ElementsAre(-1, -2));
  EXPECT_THAT(values<float>(out[1]), ElementsAre(121, 484));  // (w + x)^2, w + x = [11, 22]
  EXPECT_THAT(values<float>(out[2]), ElementsAre(-10, -21));  // -(w + x - 1)
  EXPECT_THAT(values<float>(out[3]), ElementsAre(121, 484));
  ASSERT_EQ(vars.size(), 1u);
  EXPECT_THAT(values<float>(vars[0]), ElementsAre(121, 484));
  EXPECT_THAT(values<float>(w0), ElementsAre(1, 2));  // arrays are immutable: the old one is kept
}

TEST(ReferenceExecutor, VariablesAreUnchangedWhenExecutionFails) {
  Graph g("fails");
  Value* x = g.add_parameter(f32({kUnknownDim}));
  int v = g.add_variable("w", f32({2}), true);
  g.add_assignment(NodeKind::kAssign, v, constant<float>(g, f32({2}), {5, 6})->output());
  Value* r = g.add_op(OpKind::Reshape, {x}, Attrs{{"shape", std::vector<int64_t>{2, 2}}})->output();
  g.set_outputs({r});
  std::vector<Array> vars{array_of<float>(Shape{2}, {1, 2})};
  Array xa = array_of<float>(Shape{3}, {1, 2, 3});
  EXPECT_EQ(error_of([&] { execute_reference(g, std::span<const Array>(&xa, 1), vars); }),
            "reference executor: graph @fails: node %4 = reshape: reshape: cannot reshape a "
            "tensor of shape (3,) (3 elements) into shape (2, 2) (4 elements)");
  EXPECT_THAT(values<float>(vars[0]), ElementsAre(1, 2));
}

// cond(p, x, y): then = x * y, else = x - y.
TEST(ReferenceExecutor, CondRunsTheChosenBranch) {
  Graph g("choose");
  Value* p = g.add_parameter(TensorType{DType::b8, Shape{}});
  Value* x = g.add_parameter(f32({3}));
  Value* y = g.add_parameter(f32({3}));
  std::vector<std::unique_ptr<Graph>> branches;
  for (OpKind k : {OpKind::Mul, OpKind::Sub}) {
    auto b = std::make_unique<Graph>(k == OpKind::Mul ? "then" : "else");
    Value* bx = b->add_parameter(f32({3}));
    Value* by = b->add_parameter(f32({3}));
    b->set_outputs({b->add_op(k, {bx, by})->output()});
    branches.push_back(std::move(b));
  }
  Node* c = g.add_control_flow(NodeKind::kCond, {p, x, y}, std::move(branches), {f32({3})});
  g.set_outputs({c->output()});
  Array xa = array_of<float>(Shape{3}, {1, 2, 3}), ya = array_of<float>(Shape{3}, {4, 5, 6});
  EXPECT_THAT(values<float>(run_graph(g, {scalar_bool(true), xa, ya})[0]), ElementsAre(4, 10, 18));
  EXPECT_THAT(values<float>(run_graph(g, {scalar_bool(false), xa, ya})[0]),
              ElementsAre(-3, -3, -3));
}

TEST(ReferenceExecutor, WhileSumsOneToTen) {
  // (i, acc) = (1, 0); while (i <= n) { acc += i; i += 1 }; n is a capture.
  Graph g("sum_to");
  Value* n = g.add_parameter(i64({}));
  Value* i0 = constant<int64_t>(g, i64({}), {1})->output();
  Value* acc0 = constant<int64_t>(g, i64({}), {0})->output();
  auto cond = std::make_unique<Graph>("cond");
  {
    Value* i = cond->add_parameter(i64({}));
    cond->add_parameter(i64({}));
    Value* limit = cond->add_parameter(i64({}));
    cond->set_outputs({cond->add_op(OpKind::LessEqual, {i, limit})->output()});
  }
  auto body = std::make_unique<Graph>("body");
  {
    Value* i = body->add_parameter(i64({}));
    Value* acc = body->add_parameter(i64({}));
    body->add_parameter(i64({}));
    Value* one = constant<int64_t>(*body, i64({}), {1})->output();
    Value* next_acc = body->add_op(OpKind::Add, {acc, i})->output();
    Value* next_i = body->add_op(OpKind::Add, {i, one})->output();
    body->set_outputs({next_i, next_acc});
  }
  std::vector<std::unique_ptr<Graph>> subs;
  subs.push_back(std::move(cond));
  subs.push_back(std::move(body));
  Node* loop =
      g.add_control_flow(NodeKind::kWhile, {i0, acc0, n}, std::move(subs), {i64({}), i64({})});
  g.set_outputs({loop->output(1), loop->output(0)});
  Array ten = array_of<int64_t>(Shape{}, {10});
  std::vector<Array> out = run_graph(g, {ten});
  EXPECT_THAT(values<int64_t>(out[0]), ElementsAre(55));
  EXPECT_THAT(values<int64_t>(out[1]), ElementsAre(11));
  // Zero iterations: the loop variables come out unchanged.
  out = run_graph(g, {array_of<int64_t>(Shape{}, {0})});
  EXPECT_THAT(values<int64_t>(out[0]), ElementsAre(0));
  EXPECT_THAT(values<int64_t>(out[1]), ElementsAre(1));
}

TEST(ReferenceExecutor, StackedWhileOutputsEveryIterationsStateAndTheTripCount) {
  // (i, acc) = (1, 0); while (i <= n) { acc += i; i += 1 }, stacked: also the values of i
  // and acc at the start of every iteration, then the trip count.
  Graph g("sum_to_stacked");
  Value* n = g.add_parameter(i64({}));
  Value* i0 = constant<int64_t>(g, i64({}), {1})->output();
  Value* acc0 = constant<int64_t>(g, i64({}), {0})->output();
  auto cond = std::make_unique<Graph>("cond");
  {
    Value* i = cond->add_parameter(i64({}));
    cond->add_parameter(i64({}));
    Value* limit = cond->add_parameter(i64({}));
    cond->set_outputs({cond->add_op(OpKind::LessEqual, {i, limit})->output()});
  }
  auto body = std::make_unique<Graph>("body");
  {
    Value* i = body->add_parameter(i64({}));
    Value* acc = body->add_parameter(i64({}));
    body->add_parameter(i64({}));
    Value* one = constant<int64_t>(*body, i64({}), {1})->output();
    body->set_outputs({body->add_op(OpKind::Add, {i, one})->output(),
                       body->add_op(OpKind::Add, {acc, i})->output()});
  }
  std::vector<std::unique_ptr<Graph>> subs;
  subs.push_back(std::move(cond));
  subs.push_back(std::move(body));
  Node* loop =
      g.add_control_flow(NodeKind::kWhile, {i0, acc0, n}, std::move(subs),
                         {i64({}), i64({}), i64({kUnknownDim}), i64({kUnknownDim}), i64({})});
  loop->mutable_attrs().set("stacked", true);
  g.set_outputs(
      {loop->output(0), loop->output(1), loop->output(2), loop->output(3), loop->output(4)});
  ir::verify_graph(g);
  std::vector<Array> out = run_graph(g, {array_of<int64_t>(Shape{}, {4})});
  EXPECT_THAT(values<int64_t>(out[0]), ElementsAre(5));
  EXPECT_THAT(values<int64_t>(out[1]), ElementsAre(10));
  EXPECT_EQ(out[2].shape, Shape{4});
  EXPECT_THAT(values<int64_t>(out[2]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(values<int64_t>(out[3]), ElementsAre(0, 1, 3, 6));
  EXPECT_THAT(values<int64_t>(out[4]), ElementsAre(4));
  // Zero iterations: empty stacks, trip count 0.
  out = run_graph(g, {array_of<int64_t>(Shape{}, {0})});
  EXPECT_EQ(out[2].shape, Shape{0});
  EXPECT_EQ(out[3].shape, Shape{0});
  EXPECT_THAT(values<int64_t>(out[4]), ElementsAre(0));
}

// ---- errors

std::unique_ptr<Graph> two_param_graph() {
  auto g = std::make_unique<Graph>("train_step");
  Value* x = g->add_parameter(f32({kUnknownDim, 784}));
  Value* y = g->add_parameter(i64({kUnknownDim}));
  g->add_variable("dense/kernel", f32({784, 10}), true);
  g->set_outputs({x, y});
  return g;
}

TEST(ReferenceExecutor, WrongArgumentCount) {
  std::unique_ptr<Graph> gp = two_param_graph();
  const Graph& g = *gp;
  std::vector<Array> vars{Array::zeros(DType::f32, Shape{784, 10})};
  Array x = Array::zeros(DType::f32, Shape{2, 784});
  EXPECT_EQ(error_of([&] { execute_reference(g, std::span<const Array>(&x, 1), vars); }),
            "reference executor: graph @train_step: expected 2 arguments (one per parameter), "
            "got 1");
}

TEST(ReferenceExecutor, ArgumentDtypeAndShapeAreChecked) {
  std::unique_ptr<Graph> gp = two_param_graph();
  const Graph& g = *gp;
  std::vector<Array> vars{Array::zeros(DType::f32, Shape{784, 10})};
  auto error = [&](Array x, Array y) {
    Array args[2] = {std::move(x), std::move(y)};
    return error_of([&] { execute_reference(g, args, vars); });
  };
  Array y = Array::zeros(DType::i64, Shape{2});
  EXPECT_EQ(error(Array::zeros(DType::f64, Shape{2, 784}), y),
            "reference executor: graph @train_step: parameter 0: expected f32[?,784], got "
            "f64[2,784]");
  EXPECT_EQ(error(Array::zeros(DType::f32, Shape{2, 783}), y),
            "reference executor: graph @train_step: parameter 0: expected f32[?,784], got "
            "f32[2,783]");
  EXPECT_EQ(error(Array::zeros(DType::f32, Shape{784}), y),
            "reference executor: graph @train_step: parameter 0: expected f32[?,784], got "
            "f32[784]");
  EXPECT_EQ(error(Array::zeros(DType::f32, Shape{3, 784}), Array::zeros(DType::i32, Shape{3})),
            "reference executor: graph @train_step: parameter 1: expected i64[?], got i32[3]");
  // Any batch size is accepted for the unknown dimensions.
  Array args[2] = {Array::zeros(DType::f32, Shape{3, 784}), Array::zeros(DType::i64, Shape{7})};
  std::vector<Array> out = execute_reference(g, args, vars);
  EXPECT_EQ(out[0].type(), f32({3, 784}));
}

TEST(ReferenceExecutor, VariableValuesAreChecked) {
  std::unique_ptr<Graph> gp = two_param_graph();
  const Graph& g = *gp;
  Array args[2] = {Array::zeros(DType::f32, Shape{1, 784}), Array::zeros(DType::i64, Shape{1})};
  std::vector<Array> none;
  EXPECT_EQ(error_of([&] { execute_reference(g, args, none); }),
            "reference executor: graph @train_step: expected 1 variable value (one per graph "
            "variable), got 0");
  std::vector<Array> wrong{Array::zeros(DType::f32, Shape{10, 784})};
  EXPECT_EQ(error_of([&] { execute_reference(g, args, wrong); }),
            "reference executor: graph @train_step: variable $0 \"dense/kernel\": expected "
            "f32[784,10], got f32[10,784]");
}

TEST(ReferenceExecutor, DeclaredTypesAreCheckedWhileRunning) {
  Graph g("bad");
  Value* x = g.add_parameter(f32({2}));
  Node* n = g.add_op(OpKind::Neg, {x});
  n->output()->set_type(f32({3}));
  g.set_outputs({n->output()});
  Array xa = Array::zeros(DType::f32, Shape{2});
  EXPECT_THAT(error_of([&] { run_graph(g, {xa}); }), HasSubstr("%1 = neg"));
  EXPECT_THAT(error_of([&] { run_graph(g, {xa}); }), HasSubstr("f32[3]"));
}

TEST(ReferenceExecutor, ErrorsInsideSubgraphsNameThePath) {
  Graph g("outer");
  Value* p = g.add_parameter(TensorType{DType::b8, Shape{}});
  Value* x = g.add_parameter(f32({kUnknownDim}));
  auto reshape_graph = [](const char* name) {
    auto b = std::make_unique<Graph>(name);
    Value* bx = b->add_parameter(f32({kUnknownDim}));
    b->set_outputs(
        {b->add_op(OpKind::Reshape, {bx}, Attrs{{"shape", std::vector<int64_t>{2}}})->output()});
    return b;
  };
  std::vector<std::unique_ptr<Graph>> branches;
  branches.push_back(reshape_graph("then"));
  branches.push_back(reshape_graph("else"));
  Node* c = g.add_control_flow(NodeKind::kCond, {p, x}, std::move(branches), {f32({2})});
  g.set_outputs({c->output()});
  EXPECT_THAT(
      values<float>(run_graph(g, {scalar_bool(false), array_of<float>(Shape{2}, {7, 8})})[0]),
      ElementsAreArray({7.f, 8.f}));
  EXPECT_EQ(error_of([&] {
              run_graph(g, {scalar_bool(false), Array::zeros(DType::f32, Shape{3})});
            }),
            "reference executor: graph @outer / cond %2 else: node %1 = reshape: reshape: cannot "
            "reshape a tensor of shape (3,) (3 elements) into shape (2,) (2 elements)");
}

}  // namespace
}  // namespace kiln::runtime
