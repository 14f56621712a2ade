#include <iostream>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  Dense hidden(64, {.activation = "relu"}), out(10);
  Optimizer opt = Adam({.learning_rate = 1e-3});
  // A user-written training step: eager when called directly, compiled inside kiln::function.
  auto train_step = [&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = mean(square(out(hidden(x)) - y));
    std::vector<Variable> vars = hidden->trainable_weights();
    for (const Variable& v : out->trainable_weights()) vars.push_back(v);
    opt->apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  Tensor x = random_normal({32, 20}, 1), y = random_normal({32, 10}, 2);
  // Eager then compiled from the same weights: times, speedup, memory, differences (printed).
  ModeComparison c = compare_modes(train_step, x, y);
  std::cout << "speedup: " << c.speedup() << "x\n";

  // The one compilation result the compiled step runs: IR stages, memory plan, kernels.
  auto fn = function(train_step, {.name = "train_step"});
  CompiledForm form = fn.concrete(x, y).compiled_form({x, y});
  std::cout << form.ir_text(Stage::kOptimized) << form.summary();
  std::cout << form.memory_plan_text() << form.kernels_table();
}
