// Compiled training (the default: run_eagerly=false, concrete functions JIT-compiled) against
// the same steps on the reference executor: losses, metrics and every weight agree within
// float32 tolerance step after step (fusion, vector math and reassociated reductions change
// the last bits, never more), for the digits MLP (Adam, SGD, RMSprop) and a small CNN.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"

namespace kiln {
namespace {

Sequential digits_model(const std::string& kind, const std::string& optimizer) {
  clear_session();
  set_random_seed(5);
  Sequential m = kind == "mlp"
                     ? Sequential({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{64})
                     : Sequential({Reshape({8, 8, 1}),
                                   Conv2D(8, {3, 3}, {.padding = "same", .activation = "relu"}),
                                   MaxPooling2D({2, 2}), Flatten(), Dense(10)},
                                  Shape{64});
  m->compile({.optimizer = Optimizer(optimizer),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"}});
  return m;
}

void expect_close_weights(const Sequential& a, const Sequential& b, double tol) {
  std::vector<Tensor> wa = a->get_weights(), wb = b->get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    std::vector<float> x = wa[i].to_vector<float>(), y = wb[i].to_vector<float>();
    ASSERT_EQ(x.size(), y.size());
    double worst = 0;
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, double(std::abs(x[k] - y[k])));
    EXPECT_LE(worst, tol) << "weight " << i;
  }
}

// Each model gets its own optimizer (an Optimizer handle is shared by copies).
void train_both(const std::string& kind, const std::string& opt, int steps, double tol) {
  data::Dataset d = data::load_digits();
  Sequential reference = digits_model(kind, opt);
  Sequential compiled = digits_model(kind, opt);
  for (int step = 0; step < steps; ++step) {
    int64_t n = step == steps - 1 ? 17 : 64;  // the last batch is a second shape
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) rows.push_back(step * 64 + i);
    Tensor x = data::take_rows(d.x, rows), y = data::take_rows(d.y, rows);
    Logs lr;
    {
      ScopedExecutionMode mode(ExecutionMode::kReference);
      lr = reference->train_on_batch(x, y);
    }
    Logs lc = compiled->train_on_batch(x, y);
    EXPECT_NEAR(lc.at("loss"), lr.at("loss"), 1e-5 * std::max(1.0, std::abs(lr.at("loss"))))
        << "step " << step;
    EXPECT_EQ(lc.at("accuracy"), lr.at("accuracy")) << "step " << step;
  }
  expect_close_weights(reference, compiled, tol);
}

TEST(CompiledFit, DigitsMlpMatchesReferenceExecutor) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  for (const char* opt : {"adam", "sgd", "rmsprop"}) {
    SCOPED_TRACE(opt);
    train_both("mlp", opt, 6, 2e-5);
  }
}

TEST(CompiledFit, SmallCnnMatchesReferenceExecutor) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  train_both("cnn", "adam", 4, 2e-5);
}

TEST(CompiledFit, TrainStepCompilesOncePerBatchShape) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Sequential m = digits_model("mlp", "adam");
  data::Dataset d = data::load_digits();
  Tensor x = data::take_rows(d.x, {0, 1, 2, 3}), y = data::take_rows(d.y, {0, 1, 2, 3});
  m->train_on_batch(x, y);
  m->train_on_batch(x, y);
  ConcreteFunction step = m->train_step_function(x, y);
  EXPECT_EQ(step.mode(), ExecutionMode::kCompiled);
  EXPECT_EQ(step.compile_stats().executables, 1);
  EXPECT_GT(step.compile_stats().compile_seconds, 0.0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledExecutable, TrainingStepAllocatesNothingAfterTheFirstCall) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Sequential m = digits_model("mlp", "adam");
  data::Dataset d = data::load_digits();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 64; ++i) rows.push_back(i);
  Tensor x = data::take_rows(d.x, rows), y = data::take_rows(d.y, rows);
  ConcreteFunction step = m->train_step_function(x, y);
  step({x, y});  // compiles; allocates the arena and the pooled buffers
  const int64_t before = runtime::Storage::allocation_count();
  for (int i = 0; i < 5; ++i) step({x, y});
  EXPECT_EQ(runtime::Storage::allocation_count() - before, 0);
}

TEST(CompiledExecutable, OneAndTwoThreadsGiveIdenticalResults) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  const int saved = num_threads();
  std::vector<std::vector<float>> weights[2];
  for (int t : {1, 2}) {
    set_num_threads(t);
    Sequential m = digits_model("cnn", "adam");
    data::Dataset d = data::load_digits();
    for (int step = 0; step < 3; ++step) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < 64; ++i) rows.push_back(step * 64 + i);
      m->train_on_batch(data::take_rows(d.x, rows), data::take_rows(d.y, rows));
    }
    for (const Tensor& w : m->get_weights()) weights[t - 1].push_back(w.to_vector<float>());
  }
  set_num_threads(saved);
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i) EXPECT_EQ(weights[0][i], weights[1][i]) << i;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The first kernel weight of a digits MLP, trained one compiled step at a time.
struct InPlaceFixture {
  Sequential m = digits_model("mlp", "adam");
  Tensor x, y;
  InPlaceFixture() {
    data::Dataset d = data::load_digits();
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < 64; ++i) rows.push_back(i);
    x = data::take_rows(d.x, rows);
    y = data::take_rows(d.y, rows);
  }
  Variable kernel() const { return m->trainable_weights().front(); }
};

TEST(CompiledExecutable, TrainingStepUpdatesWeightsInPlace) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  InPlaceFixture f;
  f.m->train_on_batch(f.x, f.y);  // compiles; the weights now live in their final buffers
  // Kernels (flat Adam epilogues of the weight gradients) and biases (serial kernels that also
  // sum the bias gradient over the batch) alike.
  std::vector<const float*> buffers;
  std::vector<std::vector<float>> before;
  for (const Variable& w : f.m->trainable_weights()) {
    buffers.push_back(w.value().data<float>());
    before.push_back(w.value().to_vector<float>());
  }
  f.m->train_on_batch(f.x, f.y);
  std::vector<Variable> weights = f.m->trainable_weights();
  ASSERT_EQ(weights.size(), 4u);
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(weights[i].value().data<float>(), buffers[i]) << weights[i].name();
    EXPECT_NE(weights[i].value().to_vector<float>(), before[i]) << weights[i].name();
  }
}

TEST(CompiledExecutable, AHeldWeightValueIsNotOverwritten) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  InPlaceFixture f;
  f.m->train_on_batch(f.x, f.y);
  Tensor held = f.kernel().value();  // shares the weight's buffer: the step must copy
  const std::vector<float> before = held.to_vector<float>();
  f.m->train_on_batch(f.x, f.y);
  EXPECT_EQ(held.to_vector<float>(), before);
  EXPECT_NE(f.kernel().value().data<float>(), held.data<float>());
  EXPECT_NE(f.kernel().value().to_vector<float>(), before);
}

}  // namespace
}  // namespace kiln
