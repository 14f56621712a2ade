// kiln::function tracing: one trace per signature, retrace warnings, unknown-dimension
// signatures, reduce_retracing, and the explicit FunctionScope form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "kiln/kiln.h"
#include "tests/function/function_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- tracing count

TEST(TracingCount, SameShapesTraceOnceAndDoNotRerunTheCallable) {
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x) {
        ++invocations;
        return x * 2.0 + 1.0;
      },
      {.name = "affine"});
  EXPECT_THAT(values(f(tensor<float>({1, 2, 3}))), ElementsAre(3, 5, 7));
  EXPECT_THAT(values(f(tensor<float>({-1, 0, 4}))), ElementsAre(-1, 1, 9));
  EXPECT_THAT(values(f(tensor<float>({10, 20, 30}))), ElementsAre(21, 41, 61));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(invocations, 1);  // the later calls ran the graph, not the lambda
  EXPECT_EQ(f.name(), "affine");
}

TEST(TracingCount, NewShapeOrDtypeTracesAgainAndOldSignaturesStayCached) {
  int invocations = 0;
  auto f = function([&](const Tensor& x) {
    ++invocations;
    return sum(x);
  });
  EXPECT_EQ(f(ones({3})).item<float>(), 3);
  EXPECT_EQ(f(ones({2, 2})).item<float>(), 4);  // new shape
  EXPECT_EQ(invocations, 2);
  EXPECT_EQ(f(ones({4}, DType::f64)).item<double>(), 4);  // new dtype
  EXPECT_EQ(invocations, 3);
  // Known signatures: no trace, no callable run.
  EXPECT_EQ(f(full({3}, 2)).item<float>(), 6);
  EXPECT_EQ(f(full({2, 2}, 3)).item<float>(), 12);
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(invocations, 3);
}

TEST(TracingCount, NonTensorArgumentsArePartOfTheSignature) {
  int invocations = 0;
  auto f = function([&](const Tensor& x, bool training, int k) {
    ++invocations;
    Tensor y = x * double(k);
    return training ? y + 100.0 : y;
  });
  Tensor x = tensor<float>({1, 2});
  EXPECT_THAT(values(f(x, false, 2)), ElementsAre(2, 4));
  EXPECT_THAT(values(f(x, true, 2)), ElementsAre(102, 104));  // bool changed
  EXPECT_THAT(values(f(x, true, 3)), ElementsAre(103, 106));  // int changed
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(invocations, 3);
  // Each combination keeps its own graph (the constants 2, 3 and the +100 are baked in).
  EXPECT_THAT(values(f(tensor<float>({5, 6}), false, 2)), ElementsAre(10, 12));
  EXPECT_THAT(values(f(tensor<float>({5, 6}), true, 3)), ElementsAre(115, 118));
  EXPECT_THAT(values(f(tensor<float>({5, 6}), true, 2)), ElementsAre(110, 112));
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(invocations, 3);
}

// Regression: C strings were hashed by address (a reused buffer with new text reused the old
// graph) and char arrays did not compile.
TEST(TracingCount, StringArgumentsAreHashedByContent) {
  int invocations = 0;
  auto f = function([&](const Tensor& x, const char* activation) {
    ++invocations;
    return std::string_view(activation) == "relu" ? relu(x) : neg(x);
  });
  Tensor x = tensor<float>({-1, 2});
  char buffer[8] = "relu";
  EXPECT_THAT(values(f(x, buffer)), ElementsAre(0, 2));
  std::strcpy(buffer, "neg");  // same address, new text: a new signature
  EXPECT_THAT(values(f(x, buffer)), ElementsAre(1, -2));
  EXPECT_EQ(f.tracing_count(), 2);
  const char* relu_name = "relu";
  EXPECT_THAT(values(f(x, relu_name)), ElementsAre(0, 2));  // known text: cached
  EXPECT_THAT(values(f(x, "neg")), ElementsAre(1, -2));
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(invocations, 2);

  auto g =
      function([](const Tensor& x, const std::string& op) { return op == "double" ? x * 2.0 : x; });
  EXPECT_THAT(values(g(x, std::string("double"))), ElementsAre(-2, 4));
  EXPECT_THAT(values(g(x, std::string("same"))), ElementsAre(-1, 2));
  EXPECT_THAT(values(g(x, std::string("double"))), ElementsAre(-2, 4));
  EXPECT_EQ(g.tracing_count(), 2);
}

TEST(TracingCount, VectorArgumentsAndTupleResults) {
  int invocations = 0;
  auto f = function([&](const std::vector<Tensor>& xs, const Tensor& scale) {
    ++invocations;
    Tensor total = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) total = total + xs[i];
    return std::tuple<Tensor, Tensor>{total * scale, total};
  });
  Tensor s = scalar(10);
  auto [a, b] = f(std::vector<Tensor>{scalar(1), scalar(2)}, s);
  EXPECT_EQ(a.item<float>(), 30);
  EXPECT_EQ(b.item<float>(), 3);
  auto [c, d] = f(std::vector<Tensor>{scalar(1), scalar(2), scalar(4)}, s);  // longer list
  EXPECT_EQ(c.item<float>(), 70);
  EXPECT_EQ(d.item<float>(), 7);
  auto [e, g] = f(std::vector<Tensor>{scalar(5), scalar(6)}, scalar(2));
  EXPECT_EQ(e.item<float>(), 22);
  EXPECT_EQ(g.item<float>(), 11);
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(invocations, 2);
}

TEST(TracingCount, ExecutingEagerlyIsFalseOnlyWhileTracing) {
  std::vector<bool> seen;
  auto f = function([&](const Tensor& x) {
    seen.push_back(executing_eagerly());
    return x + 1.0;
  });
  EXPECT_TRUE(executing_eagerly());
  f(ones({2}));
  f(ones({2}));
  EXPECT_TRUE(executing_eagerly());
  EXPECT_EQ(seen, std::vector<bool>{false});
}

TEST(TracingCount, AFunctionCalledInsideAnotherTracesInline) {
  int inner_runs = 0;
  auto inner = function([&](const Tensor& x) {
    ++inner_runs;
    return x * 3.0;
  });
  auto outer = function([&](const Tensor& x) { return inner(x) + 1.0; });
  EXPECT_THAT(values(outer(tensor<float>({1, 2}))), ElementsAre(4, 7));
  EXPECT_THAT(values(outer(tensor<float>({3, 4}))), ElementsAre(10, 13));
  EXPECT_EQ(outer.tracing_count(), 1);
  EXPECT_EQ(inner.tracing_count(), 0);  // recorded into outer's graph
  EXPECT_EQ(inner_runs, 1);
}

TEST(TracingCount, CallsThatDoNotMatchTheConcreteFunctionAreRejected) {
  auto f = function([](const Tensor& x) { return x + 1.0; }, {.name = "plus_one"});
  ConcreteFunction cf = f.concrete(ones({3}));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_THAT(values(cf({tensor<float>({1, 2, 3})})[0]), ElementsAre(2, 3, 4));
  EXPECT_THAT(error_of([&] { cf({ones({4})}); }),
              HasSubstr("function \"plus_one\": argument 0 must be f32[3]"));
  EXPECT_THAT(error_of([&] { cf({}); }),
              HasSubstr("function \"plus_one\" takes 1 tensor argument(s), got 0"));
}

// ---------------------------------------------------------------- retrace warnings

TEST(TracingWarning, FiveShapesInTenCallsWarnOnce) {
  test::WarningCapture capture;
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x) {
        ++invocations;
        return mean(x);
      },
      {.name = "train_step"});
  const int64_t rows[] = {20, 19, 18, 64, 17, 20, 19, 18, 64, 17};
  for (int64_t r : rows) EXPECT_EQ(f(ones({r, 64})).item<float>(), 1);
  EXPECT_EQ(f.tracing_count(), 5);
  EXPECT_EQ(invocations, 5);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_THAT(capture.warnings()[0],
              HasSubstr("function \"train_step\" retraced 5 times in its last 5 calls; argument "
                        "0 shape (64, 64) -> (17, 64)"));
}

TEST(TracingWarning, OncePerBurst) {
  test::WarningCapture capture;
  auto f = function([](const Tensor& x) { return sum(x); }, {.name = "bursty"});
  for (int64_t r = 1; r <= 7; ++r) f(ones({r}));  // 7 traces in a row: one warning
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_THAT(capture.warnings()[0],
              HasSubstr("function \"bursty\" retraced 5 times in its last 5 calls; argument 0 "
                        "shape (4,) -> (5,)"));
  for (int i = 0; i < 10; ++i) f(ones({1}));  // the window empties of traces
  EXPECT_EQ(capture.warnings().size(), 1u);
  for (int64_t r = 11; r <= 15; ++r) f(ones({r}));  // a second burst warns again
  ASSERT_EQ(capture.warnings().size(), 2u);
  EXPECT_THAT(capture.warnings()[1],
              HasSubstr("function \"bursty\" retraced 5 times in its last 10 calls; argument 0 "
                        "shape (14,) -> (15,)"));
  EXPECT_EQ(f.tracing_count(), 12);
}

TEST(TracingWarning, FewRetracesOrNonTensorChangesAreDescribed) {
  test::WarningCapture capture;
  auto f = function([](const Tensor& x) { return sum(x); });
  for (int64_t r = 1; r <= 4; ++r) f(ones({r}));  // 4 traces: below the threshold
  for (int i = 0; i < 6; ++i) f(ones({1}));
  EXPECT_TRUE(capture.warnings().empty());

  auto g = function([](const Tensor& x, int k) { return x * double(k); }, {.name = "scaled"});
  for (int k = 1; k <= 5; ++k) g(ones({2}), k);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_THAT(capture.warnings()[0],
              HasSubstr("function \"scaled\" retraced 5 times in its last 5 calls; a non-tensor "
                        "argument changed"));
}

// ---------------------------------------------------------------- unknown dimensions

TEST(TracingSignature, UnknownBatchServesEveryBatchSize) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  set_random_seed(11);
  Dense dense(10, {.activation = "relu"});
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x) {
        ++invocations;
        return softmax(dense(x));
      },
      {.name = "predict", .input_signature = std::vector<TensorSpec>{{Shape{-1, 784}}}});
  Tensor x64 = random_normal({64, 784}, 1), x17 = random_normal({17, 784}, 2);
  Tensor y64 = f(x64), y17 = f(x17);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(invocations, 1);
  EXPECT_EQ(y64.shape(), (Shape{64, 10}));
  EXPECT_EQ(y17.shape(), (Shape{17, 10}));
  EXPECT_EQ(values(y64), values(softmax(dense(x64))));
  EXPECT_EQ(values(y17), values(softmax(dense(x17))));
  ConcreteFunction cf = f.concrete(x17);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_THAT(cf.ir_text(), HasSubstr("graph @predict(%0: f32[?,784]) -> (f32[?,10])"));
  // The signature is enforced.
  EXPECT_THAT(error_of([&] {
                f(ones({3, 783}));
              }),
              HasSubstr("function \"predict\": argument 0 must be f32[?,784]"));
}

// Dense + softmax cross-entropy + GradientTape + SGD, eager or traced with an unknown batch.
struct DenseTrainer {
  Dense dense;
  Optimizer optimizer;
  Loss loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true);

  DenseTrainer() : dense(make_dense()), optimizer(SGD({.learning_rate = 0.1})) {}
  static Dense make_dense() {
    set_random_seed(3);
    Dense d(10);
    d(zeros({1, 784}));  // built eagerly: both trainers start from the same weights
    return d;
  }
  Tensor step(const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor l = loss(y, dense(x, true));
    std::vector<Variable> vars = dense->trainable_weights();
    optimizer->apply_gradients(tape.gradient(l, vars), vars);
    return l;
  }
};

TEST(TracingSignature, TrainingStepWithUnknownBatchMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  DenseTrainer eager, traced;
  auto step = function([&](const Tensor& x, const Tensor& y) { return traced.step(x, y); },
                       {.name = "train_step",
                        .input_signature = std::vector<TensorSpec>{{Shape{-1, 784}, DType::f32},
                                                                   {Shape{-1}, DType::i64}}});
  const int64_t batches[] = {64, 17, 64, 5};
  for (int i = 0; i < 4; ++i) {
    int64_t n = batches[i];
    Tensor x = random_normal({n, 784}, 100 + i), y = random_integers({n}, 200 + i, 0, 10);
    float le = eager.step(x, y).item<float>();
    float lt = step(x, y).item<float>();
    EXPECT_EQ(le, lt) << "step " << i << " batch " << n;
  }
  EXPECT_EQ(step.tracing_count(), 1);
  EXPECT_EQ(eager.optimizer->iterations(), 4);
  EXPECT_EQ(traced.optimizer->iterations(), 4);
  std::vector<Tensor> we = eager.dense->get_weights(), wt = traced.dense->get_weights();
  ASSERT_EQ(we.size(), 2u);
  for (size_t i = 0; i < we.size(); ++i) EXPECT_EQ(values(we[i]), values(wt[i])) << "weight " << i;
  std::string ir =
      step.concrete(random_normal({3, 784}, 1), random_integers({3}, 1, 0, 10)).ir_text();
  EXPECT_THAT(ir, HasSubstr("%0: f32[?,784], %1: i64[?]"));
  EXPECT_THAT(ir, HasSubstr("element_count"));
  EXPECT_THAT(ir, HasSubstr("broadcast_like"));
}

TEST(TracingSignature, ReduceRetracingRelaxesChangingDimensions) {
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x) {
        ++invocations;
        return sum(x * x, {1});
      },
      {.name = "relaxed", .reduce_retracing = true});
  Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor b = tensor<float>({1, 1, 1, 2, 2, 2, 3, 3, 3}, Shape{3, 3});
  Tensor c = ones({5, 3});
  EXPECT_THAT(values(f(a)), ElementsAre(14, 77));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_THAT(f.concrete(a).ir_text(), HasSubstr("(%0: f32[2,3])"));
  EXPECT_THAT(values(f(b)), ElementsAre(3, 12, 27));  // second shape: a relaxed trace
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_THAT(f.concrete(b).ir_text(), HasSubstr("(%0: f32[?,3]) -> (f32[?])"));
  EXPECT_THAT(values(f(c)), ElementsAre(3, 3, 3, 3, 3));  // third shape: no trace
  EXPECT_THAT(values(f(a)), ElementsAre(14, 77));
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(invocations, 2);
}

// ---------------------------------------------------------------- FunctionScope

TEST(FunctionScopeTest, ExplicitScopeMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  Variable w("scope_test/w", tensor<float>({0.5f, -1, 2, 0.25f, 1.5f, -0.75f}, Shape{3, 2}));
  Tensor b = tensor<float>({0.1f, -0.2f});
  auto model = [&](const Tensor& x) { return tanh(matmul(x, w.read()) + b); };
  ConcreteFunction cf;
  {
    FunctionScope scope("affine_tanh", {TensorSpec{Shape{-1, 3}}});
    EXPECT_FALSE(executing_eagerly());
    Tensor y = model(scope.input(0));
    EXPECT_TRUE(y.is_traced());
    cf = scope.finish({y, sum(y)});
    EXPECT_TRUE(executing_eagerly());  // finish closes the trace
    EXPECT_THAT(error_of([&] { scope.finish({}); }), HasSubstr("already called"));
  }
  EXPECT_EQ(cf.name(), "affine_tanh");
  ASSERT_EQ(cf.variables().size(), 1u);
  EXPECT_TRUE(cf.variables()[0].variable == w);
  for (int64_t n : {4, 1}) {
    Tensor x = random_normal({n, 3}, n);
    std::vector<Tensor> out = cf({x});
    ASSERT_EQ(out.size(), 2u);
    Tensor ref = model(x);
    EXPECT_EQ(values(out[0]), values(ref));
    EXPECT_EQ(out[1].item<float>(), sum(ref).item<float>());
  }
  w.assign(zeros({3, 2}));  // the variable is captured, not folded
  EXPECT_THAT(values(cf({ones({1, 3})})[0]),
              ElementsAre(tanh(scalar(0.1f)).item<float>(), tanh(scalar(-0.2f)).item<float>()));
}

TEST(FunctionScopeTest, ScopeWithoutFinishDiscardsItsTrace) {
  {
    FunctionScope scope("discarded", {TensorSpec{Shape{2}}});
    EXPECT_FALSE(executing_eagerly());
    EXPECT_THAT(error_of([&] { scope.input(1); }), HasSubstr("input 1 does not exist"));
  }
  EXPECT_TRUE(executing_eagerly());
  EXPECT_THAT(values(ones({2}) + 1.0), ElementsAre(2, 2));
}

}  // namespace
}  // namespace kiln
