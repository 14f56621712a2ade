#include <iostream>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, /*seed=*/0);
  // Two targets per image: the digit, and whether it is even.
  auto even = [](const Tensor& digits) {
    std::vector<float> e;
    for (int64_t d : digits.to_vector<int64_t>()) e.push_back(d % 2 == 0 ? 1.0f : 0.0f);
    return tensor<float>(e, {digits.shape()[0], 1});
  };
  Tensor pixels = Input({64}, DType::f32, "pixels");
  Tensor h = Dense(64, {.activation = "relu"})(pixels);
  Model model({pixels}, {Dense(10, {.name = "digit"})(h),
                         Dense(1, {.activation = "sigmoid", .name = "even"})(h)});
  model->compile({.optimizer = Adam({.learning_rate = 1e-3}),
                  .loss = LossSpec::by_output(
                      {{"digit", losses::sparse_categorical_crossentropy(/*from_logits=*/true)},
                       {"even", "binary_crossentropy"}}),
                  .loss_weights = LossWeights::by_output({{"even", 0.5}}),
                  .metrics = {"accuracy"}});  // per output: digit_accuracy, even_accuracy

  // A streaming pipeline: reshuffled every epoch, batched, the next batch made ready on a
  // background thread while the compiled step runs.
  data::Dataset batches =
      data::Dataset::from_tensor_slices(
          train.x, Arrays::by_name({{"digit", train.y}, {"even", even(train.y)}}))
          .shuffle(2048, /*seed=*/1)
          .batch(32)
          .prefetch(2);
  model->fit(batches, {.epochs = 15, .verbose = 0});
  Logs result = model->evaluate(
      test.x, Arrays::by_name({{"digit", test.y}, {"even", even(test.y)}}), {.verbose = 0});
  std::cout << "loss: " << result["loss"] << " = digit_loss " << result["digit_loss"]
            << " + even_loss " << result["even_loss"] << "\n"
            << "digit accuracy: " << result["digit_accuracy"]
            << ", even accuracy: " << result["even_accuracy"] << "\n";
}
