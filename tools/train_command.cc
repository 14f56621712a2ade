// `kiln train`: trains the MLP or CNN on digits (shipped) or MNIST (a directory of IDX files)
// with the Keras-style fit loop and prints `test_accuracy: 0.9xxx` at the end.
#include <fmt/format.h>

#include <iostream>

#include "frontend/data/digits.h"
#include "frontend/data/mnist.h"
#include "kiln/kiln.h"
#include "tools/commands.h"
#include "tools/model_zoo.h"

namespace kiln::tools {
namespace {

struct TrainArgs {
  std::string model = "mlp", dataset = "digits", optimizer = "adam", mode = "traced";
  int epochs = 20, verbose = 1;
  int64_t batch_size = 32;
  double lr = 1e-3, validation_split = 0;
  uint64_t seed = 0;
  std::string save_weights, load_weights;
};

void run_train(const TrainArgs& a) {
  set_random_seed(a.seed);
  data::Dataset train, test;
  if (a.dataset == "digits") {
    std::tie(train, test) = data::train_test_split(data::load_digits(), 0.2, /*seed=*/0);
  } else {
    std::tie(train, test) = data::load_mnist(a.dataset);
  }
  Tensor x_train = prepare_inputs(a.model, train.x), x_test = prepare_inputs(a.model, test.x);
  Shape example(std::span<const int64_t>(x_train.shape().begin() + 1, x_train.shape().end()));
  Sequential model = build_model(a.model, example, 10);
  if (!a.load_weights.empty()) model->load_weights(a.load_weights);
  Optimizer opt = a.optimizer == "adam"  ? Adam({.learning_rate = a.lr})
                  : a.optimizer == "sgd" ? SGD({.learning_rate = a.lr})
                                         : throw Error(fmt::format("--optimizer {}: expected adam "
                                                                   "or sgd",
                                                                   a.optimizer));
  model->compile({.optimizer = opt,
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"},
                  .run_eagerly = a.mode == "eager"});
  if (a.verbose) model->summary(std::cout);
  model->fit(x_train, train.y,
             {.batch_size = a.batch_size,
              .epochs = a.epochs,
              .verbose = a.verbose,
              .validation_split = a.validation_split,
              .seed = a.seed});
  Logs result = model->evaluate(x_test, test.y, {.batch_size = 256, .verbose = 0});
  if (!a.save_weights.empty()) {
    model->save_weights(a.save_weights);
    std::cout << "saved weights to " << a.save_weights << "\n";
  }
  std::cout << fmt::format("test_loss: {:.4f}\ntest_accuracy: {:.4f}\n", result["loss"],
                           result["accuracy"]);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train an MLP or CNN and report test accuracy");
  cmd->add_option("--model", args->model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  cmd->add_option("--dataset", args->dataset, "digits, or a directory with MNIST's IDX files");
  cmd->add_option("--epochs", args->epochs)->check(CLI::PositiveNumber);
  cmd->add_option("--batch-size", args->batch_size)->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", args->optimizer)->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--lr", args->lr)->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed);
  cmd->add_option("--validation-split", args->validation_split)->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--save-weights", args->save_weights, "safetensors file to write");
  cmd->add_option("--load-weights", args->load_weights, "safetensors file to start from");
  cmd->add_option("--verbose", args->verbose)->check(CLI::IsMember({0, 1, 2}));
  cmd->add_option("--mode", args->mode,
                  "traced (default: steps traced by kiln::function, run as graphs) or eager")
      ->check(CLI::IsMember({"traced", "eager"}));
  cmd->callback([args] { run_train(*args); });
}

}  // namespace kiln::tools
