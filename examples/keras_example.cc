#include <iostream>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, /*seed=*/0);

  Sequential model({Dense(128, {.activation = "relu"}), Dense(10)}, /*input_shape=*/Shape{64});
  model->compile({.optimizer = Adam({.learning_rate = 1e-3}),
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"}});
  model->summary(std::cout);
  model->fit(train.x, train.y, {.batch_size = 32, .epochs = 20, .verbose = 2});
  Logs result = model->evaluate(test.x, test.y, {.verbose = 0});
  std::cout << "test accuracy: " << result["accuracy"] << "\n";
  model->save_weights("digits_mlp.safetensors");
}
