// The IR of traced training steps: printer/parser round trip, verifier, layer-scope names,
// source locations, and the reference executor on the parsed graph vs the ConcreteFunction.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/kiln.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/function/function_test_util.h"

namespace kiln {
namespace {

using test::values;
using ::testing::HasSubstr;

// A model, its optimizer and loss, with a training step usable eagerly or traced.
struct Trainer {
  Sequential model;
  Optimizer optimizer;
  Loss loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true);

  Tensor step(const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor logits = model(x, true);  // the loc of the traced nodes points here
    Tensor l = loss(y, logits);
    std::vector<Variable> vars = model->trainable_weights();
    optimizer->apply_gradients(tape.gradient(l, vars), vars);
    return l;
  }
};

Trainer mlp(const Shape& input_shape) {
  set_random_seed(21);
  Trainer t{Sequential({Dense(32, {.activation = "relu"}), Dense(10)}), Adam()};
  t.model(zeros(input_shape));
  return t;
}

Trainer cnn(const Shape& input_shape) {
  set_random_seed(22);
  Trainer t{Sequential({Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"}),
                        MaxPooling2D(), Flatten(), Dense(10)}),
            Adam()};
  t.model(zeros(input_shape));
  return t;
}

// Snapshot of the captured variables' values (the graph's entry values).
std::vector<runtime::Array> variable_arrays(const ConcreteFunction& cf) {
  std::vector<runtime::Array> out;
  for (const VariableUse& u : cf.variables()) out.push_back(u.variable.value().array());
  return out;
}

// Checks the IR text of a traced step: canonical round trip, verifier, names, locations.
void check_ir(const ConcreteFunction& cf, const std::string& layer_scope) {
  std::string text = cf.ir_text();
  std::unique_ptr<ir::Graph> parsed = ir::parse_graph(text);
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(ir::print_graph(*parsed), text);
  EXPECT_NO_THROW(ir::verify_graph(*parsed));
  EXPECT_EQ(parsed->variables().size(), cf.variables().size());
  // Node names carry the layer scope, e.g. name("sequential/dense/matmul").
  std::regex scoped("name\\(\"[^\"]*" + layer_scope + "[^\"]*/[a-z_0-9]+\"\\)");
  EXPECT_TRUE(std::regex_search(text, scoped)) << "no node named in scope " << layer_scope;
  // Locations point to this file (the model call in Trainer::step).
  EXPECT_THAT(text, HasSubstr("function_ir_test.cc\":"));
}

// Runs the parsed graph with the reference executor on the current variable values, then the
// concrete function on the same inputs, and compares outputs and updated variables bitwise.
void check_reference(const ConcreteFunction& cf, const std::vector<Tensor>& args) {
  std::unique_ptr<ir::Graph> parsed = ir::parse_graph(cf.ir_text());
  std::vector<runtime::Array> in;
  for (const Tensor& t : args) in.push_back(t.array());
  std::vector<runtime::Array> vars = variable_arrays(cf);
  std::vector<runtime::Array> ref = runtime::execute_reference(*parsed, in, vars);
  std::vector<Tensor> out = cf(args);
  ASSERT_EQ(ref.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(values(Tensor(ref[i])), values(out[i])) << "output " << i;
  std::vector<VariableUse> uses = cf.variables();
  ASSERT_EQ(vars.size(), uses.size());
  for (size_t i = 0; i < uses.size(); ++i) {
    Tensor after = uses[i].variable.value();
    if (is_floating(after.dtype()))
      EXPECT_EQ(values(Tensor(vars[i])), values(after)) << uses[i].variable.name();
    else
      EXPECT_EQ(Tensor(vars[i]).to_vector<int64_t>(), after.to_vector<int64_t>())
          << uses[i].variable.name();
  }
}

TEST(FunctionIr, MlpTrainingStepRoundTrips) {
  Trainer t = mlp({8, 16});
  auto step = function([&](const Tensor& x, const Tensor& y) { return t.step(x, y); },
                       {.name = "train_step"});
  Tensor x = random_normal({8, 16}, 1), y = random_integers({8}, 2, 0, 10);
  ConcreteFunction cf = step.concrete(x, y);
  std::string text = cf.ir_text();
  EXPECT_THAT(text, HasSubstr("graph @train_step(%0: f32[8,16], %1: i64[8]) -> (f32[])"));
  EXPECT_THAT(text, HasSubstr("matmul("));
  EXPECT_THAT(text, HasSubstr("assign"));
  // kernel, bias x2, adam/iterations, 2 slots per weight, 4 hyperparameters.
  EXPECT_EQ(cf.variables().size(), 4u + 1u + 8u + 4u);
  check_ir(cf, "dense");
}

TEST(FunctionIr, CnnTrainingStepRoundTrips) {
  Trainer t = cnn({8, 8, 8, 1});
  auto step = function([&](const Tensor& x, const Tensor& y) { return t.step(x, y); },
                       {.name = "cnn_step"});
  Tensor x = random_normal({8, 8, 8, 1}, 3), y = random_integers({8}, 4, 0, 10);
  ConcreteFunction cf = step.concrete(x, y);
  std::string text = cf.ir_text();
  EXPECT_THAT(text, HasSubstr("conv2d("));
  EXPECT_THAT(text, HasSubstr("max_pool2d("));
  check_ir(cf, "conv2d");
  check_ir(cf, "dense");
}

TEST(FunctionIr, ReferenceExecutorOnParsedGraphMatchesConcreteFunction) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  Trainer t = mlp({8, 16});
  auto step = function([&](const Tensor& x, const Tensor& y) { return t.step(x, y); },
                       {.name = "train_step"});
  for (int i = 0; i < 3; ++i) {
    Tensor x = random_normal({8, 16}, 10 + i), y = random_integers({8}, 20 + i, 0, 10);
    check_reference(step.concrete(x, y), {x, y});
  }
  EXPECT_EQ(t.optimizer->iterations(), 3);
  Trainer c = cnn({8, 8, 8, 1});
  auto cstep = function([&](const Tensor& x, const Tensor& y) { return c.step(x, y); },
                        {.name = "cnn_step"});
  Tensor x = random_normal({8, 8, 8, 1}, 5), y = random_integers({8}, 6, 0, 10);
  check_reference(cstep.concrete(x, y), {x, y});
}

TEST(FunctionIr, TracedCnnStepMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  Trainer eager = cnn({8, 8, 8, 1}), traced = cnn({8, 8, 8, 1});
  auto step = function([&](const Tensor& x, const Tensor& y) { return traced.step(x, y); },
                       {.name = "cnn_step"});
  for (int i = 0; i < 2; ++i) {
    Tensor x = random_normal({8, 8, 8, 1}, 30 + i), y = random_integers({8}, 40 + i, 0, 10);
    EXPECT_EQ(eager.step(x, y).item<float>(), step(x, y).item<float>()) << "step " << i;
  }
  std::vector<Tensor> we = eager.model->get_weights(), wt = traced.model->get_weights();
  ASSERT_EQ(we.size(), wt.size());
  for (size_t i = 0; i < we.size(); ++i) EXPECT_EQ(values(we[i]), values(wt[i])) << "weight " << i;
}

TEST(FunctionIr, ControlFlowGraphRoundTrips) {
  Variable hits("hits", scalar(0), /*trainable=*/false);
  auto f = function([&](const Tensor& x) {
    Tensor y = cond(
        greater(sum(x), scalar(0)),
        [&] {
          hits.assign_add(scalar(1));
          return x * 2.0;
        },
        [&] { return -x; });
    return while_loop([](const std::vector<Tensor>& v) { return less(sum(v[0]), scalar(50)); },
                      [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] * 3.0}; },
                      {y})[0];
  });
  Tensor x = tensor<float>({1, 2});
  ConcreteFunction cf = f.concrete(x);
  std::unique_ptr<ir::Graph> parsed = ir::parse_graph(cf.ir_text());
  EXPECT_EQ(ir::print_graph(*parsed), cf.ir_text());
  EXPECT_NO_THROW(ir::verify_graph(*parsed));
  check_reference(cf, {x});  // y = (2, 4); sums 6 -> 18 -> 54
  EXPECT_EQ(hits.value().item<float>(), 1);
  EXPECT_THAT(values(f(x)), ::testing::ElementsAre(18, 36));
  EXPECT_EQ(hits.value().item<float>(), 2);
  // False branch: y = (1, 2); sums 3 -> 9 -> 27 -> 81.
  EXPECT_THAT(values(f(tensor<float>({-1, -2}))), ::testing::ElementsAre(27, 54));
  EXPECT_EQ(hits.value().item<float>(), 2);
}

}  // namespace
}  // namespace kiln
