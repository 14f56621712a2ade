// The C++ half of tests/python/test_same_step_as_cpp.py: a seeded MLP training step (tanh
// hidden layer, mean squared error, SGD by assign_sub) traced with kiln::function and run five
// times. Prints the traced IR, then every loss and the final weights as hexadecimal floats, so
// the Python test can require the same IR and bitwise the same numbers from the same step
// written in Python.
#include <cstdio>
#include <iostream>
#include <vector>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  Variable w1("w1", random_normal({8, 16}, 1, 0.0, 0.3));
  Variable b1("b1", zeros({16}));
  Variable w2("w2", random_normal({16, 4}, 2, 0.0, 0.3));
  Tensor x = random_normal({32, 8}, 3);
  Tensor y = random_normal({32, 4}, 4);
  auto step = function(
      [&](const Tensor& x, const Tensor& y) {
        GradientTape tape;
        // One statement per read: C++ leaves the order of a call's arguments unspecified, and
        // the IR records reads in the order they happen (Python's is left to right).
        Tensor xw = matmul(x, w1.read());
        Tensor h = tanh(xw + b1.read());
        Tensor d = matmul(h, w2.read()) - y;
        Tensor loss = mean(d * d, {0, 1}, false);
        std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{w1, b1, w2});
        w1.assign_sub(g[0] * 0.1);
        b1.assign_sub(g[1] * 0.1);
        w2.assign_sub(g[2] * 0.1);
        return loss;
      },
      {.name = "train_step"});
  std::cout << step.concrete(x, y).ir_text() << "---\n";
  for (int i = 0; i < 5; ++i) std::printf("%a\n", step(x, y).item<float>());
  for (const Variable& v : {w1, b1, w2}) {
    std::printf("%s", v.name().c_str());
    Tensor value = v.value();
    for (float f : value.to_vector<float>()) std::printf(" %a", double(f));
    std::printf("\n");
  }
  return 0;
}
