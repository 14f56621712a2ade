#include <iostream>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = random_normal({3, 2}, /*seed=*/7);
  std::cout << relu(matmul(x, w)) << "\n";

  GradientTape tape;
  tape.watch(w);
  Tensor loss = mean(square(matmul(x, w) - 1.0));
  Tensor dw = tape.gradient(loss, w);
  std::cout << "loss = " << loss.item<float>() << "\ndloss/dw = " << dw << "\n";
}
