#include <iostream>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  Dense layer(3);
  Optimizer opt = SGD({.learning_rate = 0.1});
  // A whole training step, traced once per input signature (-1: any batch size).
  auto train_step = function(
      [&](const Tensor& x, const Tensor& y) {
        GradientTape tape;
        Tensor loss = mean(square(layer(x) - y));
        std::vector<Variable> vars = layer->trainable_weights();
        opt->apply_gradients(tape.gradient(loss, vars), vars);
        return loss;
      },
      {.name = "train_step", .input_signature = std::vector<TensorSpec>{{{-1, 4}}, {{-1, 3}}}});
  for (int64_t batch : {8, 5, 8}) {
    Tensor x = random_normal({batch, 4}, batch), y = random_normal({batch, 3}, batch + 1);
    std::cout << "loss = " << train_step(x, y).item<float>() << "\n";
  }
  std::cout << "traces: " << train_step.tracing_count() << "\n";
  std::cout << train_step.concrete(zeros({1, 4}), zeros({1, 3})).ir_text();
}
