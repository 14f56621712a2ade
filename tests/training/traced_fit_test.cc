// Model training runs traced steps by default (run_eagerly=false): the digits MLP's traced
// training matches eager training step for step, bitwise (the graph runs the same kernels in
// the same order), and fit/evaluate/predict give identical results in both modes.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

Sequential traced_digits_mlp(bool run_eagerly, Optimizer optimizer) {
  clear_session();
  set_random_seed(3);
  Sequential m({Dense(128, {.activation = "relu"}), Dropout(0.0), Dense(10)}, Shape{64});
  m->compile({.optimizer = optimizer,
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"},
              .run_eagerly = run_eagerly});
  return m;
}

void expect_same_weights(const Sequential& a, const Sequential& b) {
  std::vector<Tensor> wa = a->get_weights(), wb = b->get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    EXPECT_EQ(wa[i].to_vector<float>(), wb[i].to_vector<float>()) << "weight " << i;
}

TEST(TracedFit, DigitsMlpStepsMatchEagerBitwise) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  data::Examples d = data::load_digits();
  for (const char* opt : {"adam", "sgd", "rmsprop"}) {
    SCOPED_TRACE(opt);
    Sequential eager = traced_digits_mlp(true, opt);
    Sequential traced = traced_digits_mlp(false, opt);
    for (int step = 0; step < 6; ++step) {
      // Batches of 64 and a last one of 17 (a second trace).
      int64_t n = step == 5 ? 17 : 64;
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < n; ++i) rows.push_back(step * 64 + i);
      Tensor x = data::take_rows(d.x, rows), y = data::take_rows(d.y, rows);
      Logs le = eager->train_on_batch(x, y), lt = traced->train_on_batch(x, y);
      EXPECT_EQ(le.at("loss"), lt.at("loss")) << "step " << step;
      EXPECT_EQ(le.at("accuracy"), lt.at("accuracy")) << "step " << step;
    }
    expect_same_weights(eager, traced);
    // The traced step is one graph per batch shape: 64 and 17.
    Tensor x = data::take_rows(d.x, {0, 1}), y = data::take_rows(d.y, {0, 1});
    EXPECT_EQ(traced->train_step_function(x, y).input_types()[0].to_string(), "f32[2,64]");
  }
}

TEST(TracedFit, FitEvaluatePredictAgreeWithEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, 0);
  Sequential eager = traced_digits_mlp(true, "adam");
  Sequential traced = traced_digits_mlp(false, "adam");
  FitOptions o{.batch_size = 50, .epochs = 2, .verbose = 0, .validation_split = 0.1};
  auto he = eager->fit(train.x, train.y, o);
  auto ht = traced->fit(train.x, train.y, o);
  EXPECT_EQ(he->history, ht->history);
  expect_same_weights(eager, traced);
  EXPECT_EQ(eager->evaluate(test.x, test.y, {.verbose = 0}),
            traced->evaluate(test.x, test.y, {.verbose = 0}));
  EXPECT_EQ(eager->predict(test.x).to_vector<float>(), traced->predict(test.x).to_vector<float>());
}

TEST(TracedFit, TracedStepRecordsTheWholeTrainingStep) {
  Sequential m = traced_digits_mlp(false, "adam");
  Tensor x = zeros({8, 64}), y = zeros({8}, DType::i64);
  ConcreteFunction step = m->train_step_function(x, y);
  // 4 weights + adam iterations + 2 slots per weight, all read and written, and adam's
  // hyperparameters (learning_rate, beta_1, beta_2, epsilon), read only.
  ASSERT_EQ(step.variables().size(), 17u);
  int read_only = 0;
  for (const VariableUse& v : step.variables()) {
    EXPECT_TRUE(v.read) << v.variable.name();
    if (!v.written) {
      ++read_only;
      EXPECT_EQ(v.variable.dtype(), DType::f64) << v.variable.name();
    }
  }
  EXPECT_EQ(read_only, 4);
  EXPECT_NE(step.ir_text().find("\"adam/learning_rate\" : f64[] read ->"), std::string::npos);
  std::string ir = step.ir_text();
  EXPECT_NE(ir.find("\"adam/iterations\" : i64[] read write"), std::string::npos);
  EXPECT_NE(ir.find("name(\"sequential/dense/matmul\")"), std::string::npos);
  EXPECT_NE(ir.find("assign_sub $0"), std::string::npos);
}

}  // namespace
}  // namespace kiln
