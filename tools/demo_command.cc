// `kiln demo`: eager ops on concrete tensors, broadcasting, and a gradient tape.
#include <chrono>
#include <iostream>

#include "kiln/kiln.h"
#include "tools/commands.h"

namespace kiln::tools {

void run_demo() {
  std::cout << "\n== eager demo ==\n";
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor<float>({10, 20, 30});
  std::cout << "x = " << x << "\n";
  std::cout << "x + b (broadcast) = " << x + b << "\n";
  std::cout << "softmax(x) = " << softmax(x) << "\n";
  std::cout << "sum(x, axis 0) = " << sum(x, {0}) << "\n";

  // A two-layer perceptron's forward pass and gradients on random data.
  Generator gen(42);
  Tensor inputs = gen.normal({64, 784});
  Tensor w1 = gen.normal({784, 256}, 0, 0.05), w2 = gen.normal({256, 10}, 0, 0.05);
  Tensor labels = one_hot(gen.integers({64}, 0, 10), 10);
  auto start = std::chrono::steady_clock::now();
  GradientTape tape;
  tape.watch({w1, w2});
  Tensor logits = matmul(relu(matmul(inputs, w1)), w2);
  Tensor loss = -mean(sum(labels * log_softmax(logits), {-1}));
  std::vector<Tensor> grads = tape.gradient(loss, {w1, w2});
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "MLP 784-256-10, batch 64: loss = " << loss.item<float>()
            << ", |dL/dw1| = " << sqrt(sum(square(grads[0]))).item<float>()
            << ", |dL/dw2| = " << sqrt(sum(square(grads[1]))).item<float>()
            << " (forward + backward in " << ms << " ms)\n";
}

void add_demo_command(CLI::App& app) {
  app.add_subcommand("demo", "run a short eager demo: ops, broadcasting, gradients")->callback([] {
    run_demo();
  });
}

}  // namespace kiln::tools
