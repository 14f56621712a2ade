#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "kiln/kiln.h"
#include "tests/support/error_of.h"
namespace kiln {
namespace {
TEST(ProbeTracing, VariableInCondBranchGradient) {
  Variable w("w", tensor<float>({1, 2, 3}));
  auto g = [&](const Tensor& x) {
    GradientTape tape;
    Tensor y = cond(greater(sum(x), scalar(0)), [&] { return sum(w.read() * x); }, [&] { return sum(x); });
    std::vector<Tensor> gr = tape.gradient(y, std::vector<Variable>{w}, UnconnectedGradients::kZero);
    return gr[0];
  };
  Tensor x = tensor<float>({1, 1, 1});
  std::cout << g(x) << std::endl;
  auto f = function(g);
  std::cout << test::error_of([&] { std::cout << f(x) << std::endl; }) << std::endl;
  std::cout << f.concrete(x).ir_text() << std::endl;
}
TEST(ProbeTracing, ZerosLikeUnknown) {
  auto f = function([](const Tensor& x) { return zeros_like(x) + ones_like(x) + x; },
                    {.input_signature = std::vector<TensorSpec>{{Shape{-1, 2}}}});
  std::cout << test::error_of([&] { std::cout << f(ones({3, 2})) << std::endl; }) << std::endl;
}
TEST(ProbeTracing, MlpIr) {
  Sequential m({Dense(4, {.activation = "relu"}), Dense(2)});
  Optimizer opt = SGD();
  Loss loss = losses::sparse_categorical_crossentropy(true);
  auto step = function([&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor l = loss(y, m(x, true));
    auto vars = m->trainable_weights();
    opt->apply_gradients(tape.gradient(l, vars), vars);
    return l;
  });
  std::cout << step.concrete(ones({2, 3}), random_integers({2}, 1, 0, 2)).ir_text() << std::endl;
}
}  // namespace
}  // namespace kiln
