// `kiln train`: trains the MLP or CNN on digits (shipped) or MNIST (a directory of IDX files)
// with the Keras-style fit loop and prints `test_accuracy: 0.9xxx` at the end; or, with
// --model lstm|gru|transformer, a character language model on a text file
// (--dataset text:FILE, tools/char_lm.h) reporting perplexity. Under `mpirun -np N` the
// training is data parallel over the N ranks (docs/distributed.md).
//   --mode compiled (default)  steps traced by kiln::function and JIT-compiled
//   --mode eager               op by op
//   --mode reference           traced steps on the reference executor (node by node)
//   --mode both                eager, then compiled, from the same initial weights and seed,
//                              and a comparison table (tools/train_comparison.h)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "kiln/frontend/data/digits.h"
#include "kiln/frontend/data/mnist.h"
#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/commands.h"
#include "tools/data_parallel_report.h"
#include "tools/model_zoo.h"
#include "tools/train_comparison.h"

namespace kiln::tools {
namespace {

struct TrainArgs {
  std::string model = "mlp", dataset, optimizer = "adam", mode = "compiled";
  int epochs = 20, verbose = 1;
  int64_t batch_size = 32, seq_len = 64, units = 256, embedding_dim = 64, heads = 4;
  std::optional<double> lr;  // default: 1e-3 (mlp, cnn), 3e-3 (language models)
  double validation_split = 0;
  uint64_t seed = 0;
  std::string save_weights, load_weights;
};

constexpr const char* kTextPrefix = "text:";

struct Data {
  data::Examples train, test;
  Tensor x_train, x_test;
};

Data load(const TrainArgs& a) {
  Data d;
  if (a.dataset.empty() || a.dataset == "digits") {
    std::tie(d.train, d.test) = data::train_test_split(data::load_digits(), 0.2, /*seed=*/0);
  } else {
    std::tie(d.train, d.test) = data::load_mnist(a.dataset);
  }
  d.x_train = prepare_inputs(a.model, d.train.x);
  d.x_test = prepare_inputs(a.model, d.test.x);
  return d;
}

// Under mpirun: the median step time (the first step, which compiles, left out), the bytes
// each rank all-reduced per step and how much of the all-reduce the backward pass hid
// (runtime/collectives.h), for docs/benchmarks.md's scaling figures.
// One training run in `mode` ("eager", "compiled" or "reference"), from the weights the seed
// (or --load-weights) gives.
TrainRun train_once(const TrainArgs& a, const Data& d, const std::string& mode, bool report) {
  clear_session();
  set_random_seed(a.seed);
  Shape example(std::span<const int64_t>(d.x_train.shape().begin() + 1, d.x_train.shape().end()));
  Sequential model = build_model(a.model, example, 10);
  if (!a.load_weights.empty()) model->load_weights(a.load_weights);
  const double lr = a.lr.value_or(1e-3);
  Optimizer opt = a.optimizer == "adam"  ? Adam({.learning_rate = lr})
                  : a.optimizer == "sgd" ? SGD({.learning_rate = lr})
                                         : throw Error(fmt::format("--optimizer {}: expected adam "
                                                                   "or sgd",
                                                                   a.optimizer));
  model->compile({.optimizer = opt,
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"},
                  .run_eagerly = mode == "eager"});
  if (report && a.verbose) model->summary(std::cout);
  ScopedExecutionMode execution(mode == "reference" ? ExecutionMode::kReference
                                                    : ExecutionMode::kCompiled);
  auto timer = std::make_shared<StepTimer>();
  const int64_t live_before = runtime::Storage::live_bytes();
  runtime::Storage::reset_peak_bytes();
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<History> history =
      model->fit(d.x_train, d.train.y,
                 {.batch_size = a.batch_size,
                  .epochs = a.epochs,
                  .verbose = report ? a.verbose : 0,
                  .callbacks = {timer, std::make_shared<CollectivesAfterFirstStep>()},
                  .validation_split = a.validation_split,
                  .seed = a.seed,
                  .data_parallel = distributed::launched_by_mpi()});
  if (report && distributed::launched_by_mpi())
    report_data_parallel(timer->seconds(), a.batch_size);
  TrainRun run;
  run.mode = mode;
  run.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_bytes = runtime::Storage::peak_bytes() - live_before;
  run.step_seconds = timer->seconds();
  run.batch_size = a.batch_size;
  if (auto it = history->history.find("loss"); it != history->history.end() && !it->second.empty())
    run.final_loss = it->second.back();
  if (mode != "eager")
    run.compile_seconds =
        train_step_compile_seconds(model.get(), d.x_train, d.train.y, a.batch_size);
  Logs result = model->evaluate(d.x_test, d.test.y, {.batch_size = 256, .verbose = 0});
  run.test_loss = result["loss"];
  run.test_accuracy = result["accuracy"];
  if (report && !a.save_weights.empty() && distributed::is_output_rank()) {
    model->save_weights(a.save_weights);
    std::cout << "saved weights to " << a.save_weights << "\n";
  }
  return run;
}

void run_char_lm(const TrainArgs& a) {
  CharLmTrainArgs c;
  c.config.model = a.model;
  c.config.seq_len = a.seq_len;
  c.config.units = a.units;
  c.config.embedding_dim = a.embedding_dim;
  c.config.heads = a.heads;
  if (!a.dataset.empty()) {
    if (a.dataset.rfind(kTextPrefix, 0) != 0)
      throw Error(
          fmt::format("--model {} trains on text: use --dataset text:FILE (got --dataset "
                      "{})",
                      a.model, a.dataset));
    c.text_path = a.dataset.substr(std::string(kTextPrefix).size());
  }
  c.optimizer = a.optimizer;
  c.mode = a.mode;
  c.epochs = a.epochs;
  c.verbose = a.verbose;
  c.batch_size = a.batch_size;
  c.lr = a.lr.value_or(3e-3);
  c.seed = a.seed;
  c.save_weights = a.save_weights;
  c.load_weights = a.load_weights;
  run_char_lm_training(c);
}

void run_train(const TrainArgs& a) {
  // Under mpirun every rank trains its share of each batch (FitOptions::data_parallel); rank 0
  // alone prints and writes files.
  if (distributed::launched_by_mpi()) {
    distributed::initialize();
    if (!distributed::is_output_rank()) std::cout.setstate(std::ios::badbit);
  }
  if (is_char_lm(a.model)) return run_char_lm(a);
  if (a.dataset.rfind(kTextPrefix, 0) == 0)
    throw Error(fmt::format("--dataset {} is text: train it with --model lstm, gru or transformer",
                            a.dataset));
  Data d = load(a);
  if (a.mode != "both") {
    TrainRun r = train_once(a, d, a.mode == "traced" ? "compiled" : a.mode, /*report=*/true);
    std::cout << fmt::format("test_loss: {:.4f}\ntest_accuracy: {:.4f}\n", r.test_loss,
                             r.test_accuracy);
    return;
  }
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(a.batch_size, d.x_train.shape()[0]); ++i) rows.push_back(i);
  Shape example(std::span<const int64_t>(d.x_train.shape().begin() + 1, d.x_train.shape().end()));
  train_both_ways(
      std::cout, [&](const std::string& mode) { return train_once(a, d, mode, false); }, a.model,
      [&] { return Model(build_model(a.model, example, 10)); }, a.optimizer, a.lr.value_or(1e-3),
      a.seed, data::take_rows(d.x_train, rows), data::take_rows(d.train.y, rows),
      [](const TrainRun& r) {
        std::cout << fmt::format("test_loss: {:.4f}\ntest_accuracy: {:.4f}\n", r.test_loss,
                                 r.test_accuracy);
      });
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "train an MLP or CNN (test accuracy) or a character language model (perplexity)");
  cmd->add_option("--model", args->model,
                  "mlp or cnn (digits/MNIST); lstm, gru or transformer (character language "
                  "model on text)")
      ->check(CLI::IsMember({"mlp", "cnn", "lstm", "gru", "transformer"}))
      ->capture_default_str();
  cmd->add_option("--dataset", args->dataset,
                  "digits (default for mlp/cnn), a directory with MNIST's IDX files, or "
                  "text:FILE for the language models (default "
                  "text:/usr/share/common-licenses/GPL-3)");
  cmd->add_option("--seq-len", args->seq_len, "language models: characters per training window")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--units", args->units,
                  "language models: recurrent units (lstm/gru) or feed-forward width "
                  "(transformer)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--embedding-dim", args->embedding_dim,
                  "language models: character embedding size (the transformer's d_model)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--heads", args->heads, "transformer: attention heads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--epochs", args->epochs)->check(CLI::PositiveNumber);
  cmd->add_option("--batch-size", args->batch_size)->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", args->optimizer)->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--lr", args->lr,
                  "learning rate (default 1e-3 for mlp/cnn, 3e-3 for the language models)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed);
  cmd->add_option("--validation-split", args->validation_split)->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--save-weights", args->save_weights, "safetensors file to write");
  cmd->add_option("--load-weights", args->load_weights, "safetensors file to start from");
  cmd->add_option("--verbose", args->verbose)->check(CLI::IsMember({0, 1, 2}));
  cmd->add_option("--mode", args->mode,
                  "compiled (default: steps traced by kiln::function and JIT-compiled), eager, "
                  "reference (traced steps on the reference executor), or both (eager then "
                  "compiled from the same weights, with a comparison table)")
      ->check(CLI::IsMember({"compiled", "eager", "reference", "both", "traced"}));
  cmd->callback([args] { run_train(*args); });
}

}  // namespace kiln::tools
