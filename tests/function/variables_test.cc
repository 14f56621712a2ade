// Variables, random ops and gradient tapes inside kiln::function.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "tests/function/function_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------- capture, not folding

TEST(TracedVariables, ReadsAreCapturedNotConstantFolded) {
  Variable v("scale", tensor<float>({2, 3}));
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x) {
        ++invocations;
        return v.read() * x;
      },
      {.name = "scaled"});
  Tensor x = tensor<float>({1, 10});
  EXPECT_THAT(values(f(x)), ElementsAre(2, 30));
  v.assign(tensor<float>({5, 7}));  // eagerly, between calls
  EXPECT_THAT(values(f(x)), ElementsAre(5, 70));
  v.assign_add(tensor<float>({1, 1}));
  EXPECT_THAT(values(f(x)), ElementsAre(6, 80));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(invocations, 1);
  std::string ir = f.concrete(x).ir_text();
  EXPECT_THAT(ir, HasSubstr("$0 = \"scale\" : f32[2] trainable read -> %1"));
  EXPECT_THAT(ir, Not(HasSubstr("constant")));  // the value is not baked in
}

TEST(TracedVariables, AssignmentsTakeEffectWhenTheFunctionRuns) {
  Variable acc("acc", tensor<float>({0, 0}), /*trainable=*/false);
  Variable last("last", tensor<float>({0, 0}), /*trainable=*/false);
  Variable down("down", scalar(100), /*trainable=*/false);
  auto f = function([&](const Tensor& d) {
    acc.assign_add(d);
    last.assign(d * 2.0);
    down.assign_sub(sum(d));
    return acc.read() + 0.5;  // reads the value after the assignment
  });
  ConcreteFunction cf = f.concrete(tensor<float>({1, 2}));
  // Tracing alone does not assign.
  EXPECT_THAT(values(acc.value()), ElementsAre(0, 0));
  EXPECT_THAT(values(last.value()), ElementsAre(0, 0));
  EXPECT_EQ(down.value().item<float>(), 100);
  EXPECT_THAT(values(f(tensor<float>({1, 2}))), ElementsAre(1.5, 2.5));
  EXPECT_THAT(values(f(tensor<float>({10, 20}))), ElementsAre(11.5, 22.5));  // applied twice
  EXPECT_THAT(values(acc.value()), ElementsAre(11, 22));
  EXPECT_THAT(values(last.value()), ElementsAre(20, 40));
  EXPECT_EQ(down.value().item<float>(), 67);  // 100 - 3 - 30
  EXPECT_EQ(f.tracing_count(), 1);
  // The concrete function handle runs the same graph.
  EXPECT_THAT(values(cf({tensor<float>({1, 1})})[0]), ElementsAre(12.5, 23.5));
  EXPECT_EQ(down.value().item<float>(), 65);
  std::vector<VariableUse> uses = cf.variables();
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_TRUE(uses[0].variable == acc && uses[0].read && uses[0].written);
  EXPECT_TRUE(uses[1].variable == last && !uses[1].read && uses[1].written);
  EXPECT_TRUE(uses[2].variable == down && uses[2].read && uses[2].written);  // assign_sub reads
}

// Eagerly a read is a snapshot: assigning the variable afterwards does not change it. The IR
// forbids using a version after an assignment superseded it (the "stale variable value"
// verifier rule, which lets the runtime update variables in place), so the tracer copies the
// old value before the assignment (frontend/function/keep_old_values.h).
TEST(TracedVariables, ValueReadBeforeAnAssignmentKeepsItsValue) {
  Variable v("v", scalar(1));
  auto f = function([&](const Tensor& x) {
    Tensor old = v.read();
    v.assign_add(x);
    return std::pair<Tensor, Tensor>{old, old + v.read()};
  });
  auto [old, both] = f(scalar(5));
  EXPECT_EQ(old.item<float>(), 1);
  EXPECT_EQ(both.item<float>(), 7);
  EXPECT_EQ(v.value().item<float>(), 6);
  std::string ir = f.concrete(scalar(5)).ir_text();
  EXPECT_NE(ir.find("copy(%1)"), std::string::npos) << ir;
  auto [old2, both2] = f(scalar(1));  // the graph again: v was 6
  EXPECT_EQ(old2.item<float>(), 6);
  EXPECT_EQ(both2.item<float>(), 13);
}

TEST(TracedVariables, ExecutingEagerlyInsideAndOutside) {
  std::vector<bool> inside;
  Variable v("v", scalar(1));
  auto f = function([&](const Tensor& x) {
    inside.push_back(executing_eagerly());
    return x + v.read();
  });
  EXPECT_TRUE(executing_eagerly());
  EXPECT_EQ(f(scalar(1)).item<float>(), 2);
  EXPECT_TRUE(executing_eagerly());
  EXPECT_EQ(inside, std::vector<bool>{false});
}

// ---------------------------------------------------------------- the variable registry

TEST(TracedVariables, RegistryOfADenseTrainingStep) {
  set_random_seed(5);
  Dense dense(3);
  dense(zeros({1, 4}));
  Optimizer sgd = SGD();
  Loss loss = losses::mean_squared_error();
  auto step = function(
      [&](const Tensor& x, const Tensor& y) {
        GradientTape tape;
        Tensor l = loss(y, dense(x, true));
        std::vector<Variable> vars = dense->trainable_weights();
        sgd->apply_gradients(tape.gradient(l, vars), vars);
        return l;
      },
      {.name = "train_step"});
  Tensor x = random_normal({8, 4}, 1), y = random_normal({8, 3}, 2);
  ConcreteFunction cf = step.concrete(x, y);
  std::vector<VariableUse> uses = cf.variables();
  ASSERT_EQ(uses.size(), 4u);
  EXPECT_TRUE(uses[0].variable == dense->kernel);
  EXPECT_TRUE(uses[1].variable == dense->bias);
  EXPECT_TRUE(uses[2].variable == sgd->variables()[0]);
  EXPECT_EQ(uses[2].variable.name(), "SGD/iterations");
  // The learning rate is a variable the step reads (so changing it needs no retrace).
  EXPECT_TRUE(uses[3].variable == sgd->variables()[1]);
  EXPECT_EQ(uses[3].variable.name(), "SGD/learning_rate");
  for (const VariableUse& u : uses) {
    EXPECT_TRUE(u.read) << u.variable.name();
    EXPECT_EQ(u.written, u.variable.name() != "SGD/learning_rate") << u.variable.name();
  }
  EXPECT_THAT(cf.ir_text(),
              HasSubstr(fmt::format("  variables {{\n"
                                    "    $0 = \"{}\" : f32[4,3] trainable read write -> %2\n"
                                    "    $1 = \"{}\" : f32[3] trainable read write -> %3\n"
                                    "    $2 = \"SGD/iterations\" : i64[] read write -> %4\n"
                                    "    $3 = \"SGD/learning_rate\" : f64[] read -> %5\n"
                                    "  }}\n",
                                    dense->kernel.name(), dense->bias.name())));
  // Running it trains: one SGD step.
  Tensor kernel_before = dense->kernel.value();
  step(x, y);
  EXPECT_EQ(sgd->iterations(), 1);
  EXPECT_NE(values(dense->kernel.value()), values(kernel_before));
}

// ---------------------------------------------------------------- variable creation

TEST(TracedVariables, LayerBuiltLazilyInsideTheFirstTrace) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  set_random_seed(9);
  Dense dense(4, {.activation = "tanh"});
  auto f = function([&](const Tensor& x) { return dense(x); }, {.name = "lazy"});
  Tensor x = random_normal({2, 3}, 7);
  Tensor y = f(x);  // builds the layer (its variables) during the trace
  EXPECT_TRUE(dense->built());
  EXPECT_EQ(dense->kernel.shape(), (Shape{3, 4}));
  EXPECT_FALSE(dense->kernel.value().is_symbolic());
  EXPECT_EQ(values(y), values(dense(x)));
  EXPECT_EQ(values(f(x * 2.0)), values(dense(x * 2.0)));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f.concrete(x).variables().size(), 2u);
  // A new signature retraces; the layer is built, so no variable is created.
  Tensor x5 = random_normal({5, 3}, 8);
  EXPECT_EQ(values(f(x5)), values(dense(x5)));
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(TracedVariables, CreatingVariablesOnANonFirstTraceThrows) {
  std::vector<Variable> made;
  auto f = function(
      [&](const Tensor& x) {
        made.emplace_back("made", ones(x.shape()));
        return x * made.back().read();
      },
      {.name = "maker"});
  EXPECT_THAT(values(f(tensor<float>({2, 3}))), ElementsAre(2, 3));
  EXPECT_EQ(made.size(), 1u);
  std::string err = error_of([&] { f(ones({3})); });
  EXPECT_THAT(err, HasSubstr("function \"maker\" tried to create variables on a non-first call"));
  EXPECT_THAT(err, HasSubstr("variable \"made\""));
  EXPECT_TRUE(executing_eagerly());  // the failed trace is closed
  EXPECT_EQ(f.tracing_count(), 1);
  // The first signature still works.
  EXPECT_THAT(values(f(tensor<float>({4, 5}))), ElementsAre(4, 5));

  // Same with a layer created inside the function.
  auto g = function([](const Tensor& x) { return Dense(2)(x); }, {.name = "fresh_layer"});
  g(ones({1, 3}));
  EXPECT_THAT(error_of([&] {
                g(ones({2, 3}));
              }),
              HasSubstr("function \"fresh_layer\" tried to create variables on a non-first call"));
}

// ---------------------------------------------------------------- random ops

TEST(TracingRandom, DropoutDiffersPerCallAndIsReproducible) {
  Tensor x = ones({256});
  auto make = [] { return function([](const Tensor& x) { return dropout(x, 0.5, 42); }); };
  set_random_seed(77);
  auto f = make();
  Tensor a = f(x), b = f(x);
  EXPECT_EQ(f.tracing_count(), 1);
  for (float v : values(a)) EXPECT_TRUE(v == 0 || v == 2) << v;
  EXPECT_NE(values(a), values(b));  // a new mask each call, without retracing
  float kept = sum(a).item<float>() / 2;
  EXPECT_GT(kept, 64);
  EXPECT_LT(kept, 192);

  set_random_seed(77);
  auto g = make();  // a fresh function after resetting the seed: the same sequence
  EXPECT_EQ(values(g(x)), values(a));
  EXPECT_EQ(values(g(x)), values(b));
  set_random_seed(78);
  auto h = make();
  EXPECT_NE(values(h(x)), values(a));
}

TEST(TracingRandom, DropoutLayerInTraining) {
  Tensor x = ones({4, 64});
  auto run = [&](uint64_t seed) {
    set_random_seed(seed);
    Dropout drop(0.25);
    auto f = function([drop](const Tensor& x, bool training) { return drop(x, training); });
    std::vector<std::vector<float>> out;
    for (int i = 0; i < 3; ++i) out.push_back(values(f(x, true)));
    out.push_back(values(f(x, false)));
    EXPECT_EQ(f.tracing_count(), 2);
    return out;
  };
  auto r1 = run(5), r2 = run(5);
  EXPECT_EQ(r1, r2);
  EXPECT_NE(r1[0], r1[1]);
  EXPECT_NE(r1[1], r1[2]);
  EXPECT_EQ(r1[3], values(x));  // inference: identity
  for (float v : r1[0]) EXPECT_TRUE(v == 0 || v == 1.0f / 0.75f) << v;
}

TEST(TracingRandom, DropoutWithUnknownBatch) {
  // dropout's mask takes x's shape at run time (random_uniform_like: the op's shape source).
  auto f = function([](const Tensor& x) { return dropout(x, 0.5, 1); },
                    {.input_signature = std::vector<TensorSpec>{{Shape{-1, 4}}}});
  for (int64_t n : {2, 5}) {
    Tensor y = f(ones({n, 4}));
    EXPECT_EQ(y.shape(), (Shape{n, 4}));
    for (float v : values(y)) EXPECT_TRUE(v == 0 || v == 2) << v;
  }
  EXPECT_EQ(f.tracing_count(), 1);
}

// ---------------------------------------------------------------- gradient tapes

TEST(TracingGradient, TapeInsideFunctionMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  Variable w("w", random_normal({3, 2}, 1));
  auto grads = [&](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = sum(tanh(matmul(x, w.read())));
    std::vector<Tensor> g = tape.gradient(y, std::vector<Tensor>{x, w.value()});
    return std::tuple<Tensor, Tensor, Tensor>{y, g[0], g[1]};
  };
  auto f = function(grads, {.name = "grads"});
  for (int i = 0; i < 2; ++i) {
    Tensor x = random_normal({4, 3}, 10 + i);
    auto [ye, gxe, gwe] = grads(x);
    auto [yt, gxt, gwt] = f(x);
    EXPECT_EQ(ye.item<float>(), yt.item<float>());
    EXPECT_EQ(values(gxe), values(gxt));
    EXPECT_EQ(values(gwe), values(gwt));
  }
  EXPECT_EQ(f.tracing_count(), 1);
  // Hand check of one entry: d/dx[0,0] = sum_j (1 - tanh(x0.w_j)^2) w[0,j].
  Tensor x = tensor<float>({1, 0, 0}, Shape{1, 3});
  Tensor wv = w.value();
  double expected = 0;
  for (int j = 0; j < 2; ++j) {
    double w0j = wv.to_vector<float>()[j];
    expected += (1 - std::tanh(w0j) * std::tanh(w0j)) * w0j;
  }
  EXPECT_NEAR(std::get<1>(f(x)).to_vector<float>()[0], expected, 1e-6);
}

TEST(TracingGradient, GradientWithRespectToVariablesAndSecondOrder) {
  Variable v("v", tensor<float>({1, -2, 3}));
  auto g = function([&](const Tensor& x) {
    GradientTape outer;
    outer.watch(x);
    Tensor dx, dv;
    {
      GradientTape inner(/*persistent=*/true);
      inner.watch(x);
      Tensor y = sum(x * x * x * v.read());
      dx = inner.gradient(y, x);                            // 3 x^2 v
      dv = inner.gradient(y, std::vector<Variable>{v})[0];  // x^3
    }
    Tensor ddx = outer.gradient(sum(dx), x);  // 6 x v
    return std::tuple<Tensor, Tensor, Tensor>{dx, dv, ddx};
  });
  auto [dx, dv, ddx] = g(tensor<float>({1, 2, -1}));
  EXPECT_THAT(values(dx), ElementsAre(3, -24, 9));
  EXPECT_THAT(values(dv), ElementsAre(1, 8, -1));
  EXPECT_THAT(values(ddx), ElementsAre(6, -24, -18));
  v.assign(tensor<float>({2, 2, 2}));  // captured: the next call uses the new value
  EXPECT_THAT(values(std::get<0>(g(tensor<float>({1, 2, -1})))), ElementsAre(6, 24, 6));
  EXPECT_EQ(g.tracing_count(), 1);
}

// TensorFlow differentiates through a tf.function call made under an outer tape; kiln runs
// the callable eagerly while a tape records, so the tape sees every op.
TEST(TracingGradient, TapeAroundAFunctionCall) {
  auto f = function([](const Tensor& x) { return x * x; });
  Tensor x = tensor<float>({3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(f(x), x);
  ASSERT_TRUE(g.defined());
  EXPECT_THAT(values(g), ElementsAre(6));
}

}  // namespace
}  // namespace kiln
