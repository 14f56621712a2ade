// Smoke test of kiln::function: a traced Dense + Adam training step equals the eager one.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

TEST(FunctionSmoke, TracedTrainingStepMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  auto make = [] {
    set_random_seed(7);
    Sequential m({Dense(8, {.activation = "relu"}), Dense(3)});
    m(zeros({1, 5}));  // build now, so both models draw the same initial weights
    return m;
  };
  Tensor x = random_normal({16, 5}, 1), y = random_integers({16}, 2, 0, 3);
  Loss loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true);

  Sequential eager = make();
  Optimizer eopt = Adam();
  Sequential traced = make();
  Optimizer topt = Adam();
  auto step_fn = [](Sequential& m, Optimizer& opt, Loss& loss, const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor l = loss(y, m(x, true));
    auto vars = m->trainable_weights();
    opt->apply_gradients(tape.gradient(l, vars), vars);
    return l;
  };
  auto step =
      function([&](const Tensor& x, const Tensor& y) { return step_fn(traced, topt, loss, x, y); },
               {.name = "train_step"});
  for (int i = 0; i < 3; ++i) {
    Tensor le = step_fn(eager, eopt, loss, x, y);
    Tensor lt = step(x, y);
    EXPECT_EQ(le.item<float>(), lt.item<float>()) << "step " << i;
  }
  EXPECT_EQ(step.tracing_count(), 1);
  auto we = eager->get_weights(), wt = traced->get_weights();
  for (size_t i = 0; i < we.size(); ++i)
    EXPECT_EQ(we[i].to_vector<float>(), wt[i].to_vector<float>());
  std::cout << step.concrete(x, y).ir_text() << std::endl;
}

}  // namespace
}  // namespace kiln
