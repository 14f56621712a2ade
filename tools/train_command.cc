// `kiln train`: trains the MLP or CNN on digits (shipped) or MNIST (a directory of IDX files)
// with the Keras-style fit loop and prints `test_accuracy: 0.9xxx` at the end; or, with
// --model lstm|gru|transformer, a character language model on a text file
// (--dataset text:FILE, tools/char_lm.h) reporting perplexity.
//   --mode compiled (default)  steps traced by kiln::function and JIT-compiled
//   --mode eager               op by op
//   --mode reference           traced steps on the reference executor (node by node)
//   --mode both                eager, then compiled, from the same initial weights and seed,
//                              and a comparison table (tools/train_comparison.h)
//   --json FILE                the history per epoch, the numbers printed, and the
//                              comparison of --mode both (tools/train_json.h)
//   --report FILE              the HTML step report of the compiled train step
//                              (kiln/frontend/function/report.h), with --mode both the step
//                              compared eagerly and compiled charted
// The options common to both paths are tools/train_options.h.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "kiln/keras/data/digits.h"
#include "kiln/keras/data/mnist.h"
#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/cli_conventions.h"
#include "tools/commands.h"
#include "tools/data_parallel_report.h"
#include "tools/model_zoo.h"
#include "tools/report_steps.h"
#include "tools/train_comparison.h"
#include "tools/train_json.h"
#include "tools/train_model_files.h"

namespace kiln::tools {
namespace {

// What `kiln train` is given: the options both paths share and the language models' sizes.
struct TrainArgs {
  TrainOptions train;
  CharLmConfig lm;  // seq_len, units, embedding_dim, heads (its defaults are the options')
};

constexpr const char* kTextPrefix = "text:";

struct Data {
  data::Examples train, test;
  Tensor x_train, x_test;
};

Data load(const TrainOptions& a) {
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

// One training run in `mode` ("eager", "compiled" or "reference"), from the weights the seed
// (or --load-weights) gives.
TrainRun train_once(const TrainOptions& a, const Data& d, const std::string& mode, bool report) {
  clear_session();
  set_random_seed(a.seed);
  Shape example(std::span<const int64_t>(d.x_train.shape().begin() + 1, d.x_train.shape().end()));
  Model model;
  if (!a.load_model.empty()) {
    model = load_model_for_training(a.load_model, mode);
  } else {
    mixed_precision::PolicyScope policy(a.dtype_policy);
    model = Model(build_model(a.model, example, 10));
    if (!a.load_weights.empty()) model->load_weights(a.load_weights);
    const double lr = a.learning_rate();
    Optimizer opt = a.optimizer == "adam"  ? Adam({.learning_rate = lr})
                    : a.optimizer == "sgd" ? SGD({.learning_rate = lr})
                                           : throw Error(fmt::format("--optimizer {}: expected "
                                                                     "adam or sgd",
                                                                     a.optimizer));
    model->compile({.optimizer = opt,
                    .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                    .metrics = {"accuracy"},
                    .run_eagerly = mode == "eager"});
  }
  if (report && a.verbose) model->summary(std::cout);
  TrainRun run = fit_and_evaluate(model.get(), mode, d.x_train, d.train.y,
                                  {.batch_size = a.batch_size,
                                   .epochs = a.epochs,
                                   .verbose = report ? a.verbose : 0,
                                   .validation_split = a.validation_split,
                                   .seed = a.seed,
                                   .initial_epoch = a.initial_epoch},
                                  d.x_test, d.test.y);
  if (report && distributed::launched_by_mpi())
    report_data_parallel(run.step_seconds, a.batch_size);
  if (report && !a.save_weights.empty() && distributed::is_output_rank()) {
    model->save_weights(a.save_weights);
    std::cout << "saved weights to " << a.save_weights << "\n";
  }
  if (report && !a.save_model.empty() && distributed::is_output_rank()) {
    save_trained_model(model, a.save_model, d.x_train, d.train.y, a.batch_size);
  }
  return run;
}

// --report FILE: the HTML step report of a fresh model's compiled train step on the first batch
// (the model, optimizer and dtype policy of the run), its steps timed; with --mode both, the
// step compared eagerly and compiled (`comparison`) charted.
void write_step_report(const TrainOptions& a, const Data& d, const ModeComparison* comparison) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(a.batch_size, d.x_train.shape()[0]); ++i) rows.push_back(i);
  const Tensor x = data::take_rows(d.x_train, rows), y = data::take_rows(d.train.y, rows);
  clear_session();
  set_random_seed(a.seed);
  Shape example(std::span<const int64_t>(d.x_train.shape().begin() + 1, d.x_train.shape().end()));
  Model model;
  {
    mixed_precision::PolicyScope policy(a.dtype_policy);
    model = Model(build_model(a.model, example, 10));
  }
  const double lr = a.learning_rate();
  model->compile(
      {.optimizer = a.optimizer == "sgd" ? SGD({.learning_rate = lr}) : Adam({.learning_rate = lr}),
       .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
       .metrics = {"accuracy"}});
  write_train_step_report(
      model, x, y, a.report,
      fmt::format("{} training step, batch {}, {}", a.model, rows.size(), a.dtype_policy),
      comparison);
}

void run_char_lm(const TrainArgs& a) {
  CharLmTrainArgs c;
  c.train = a.train;
  c.config = a.lm;
  c.config.model = a.train.model;
  if (!a.train.dataset.empty())
    c.text_path = a.train.dataset.substr(std::string(kTextPrefix).size());
  run_char_lm_training(c);
}

// The dataset must suit the model: usage errors (exit code 2) found before any work.
void check_dataset(const TrainOptions& a) {
  const bool text = a.dataset.rfind(kTextPrefix, 0) == 0;
  if (is_char_lm(a.model) && !a.dataset.empty() && !text)
    throw_usage_error(
        fmt::format("--model {} trains on text: use --dataset text:FILE (got --dataset {})",
                    a.model, a.dataset));
  if (!is_char_lm(a.model) && text)
    throw_usage_error(fmt::format(
        "--dataset {} is text: train it with --model lstm, gru or transformer", a.dataset));
}

void run_train(const TrainArgs& args) {
  const TrainOptions& a = args.train;
  check_dataset(a);
  // Under mpirun every rank trains its share of each batch (FitOptions::data_parallel); rank 0
  // alone prints and writes files.
  if (distributed::launched_by_mpi()) {
    distributed::initialize();
    if (!distributed::is_output_rank()) std::cout.setstate(std::ios::badbit);
  }
  if (is_char_lm(a.model)) return run_char_lm(args);
  Data d = load(a);
  auto report = [&a](const std::vector<TrainRun>& runs, const TrainComparison* comparison) {
    const TrainRun& r = runs.back();
    std::cout << fmt::format("test_loss: {:.4f}\ntest_accuracy: {:.4f}\n", r.test_loss,
                             r.test_accuracy);
    write_train_json(a, runs, comparison,
                     {{"test_loss", r.test_loss}, {"test_accuracy", r.test_accuracy}});
  };
  if (a.mode != "both") {
    report({train_once(a, d, a.run_mode(), /*report=*/true)}, nullptr);
    if (!a.report.empty() && distributed::is_output_rank()) write_step_report(a, d, nullptr);
    return;
  }
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(a.batch_size, d.x_train.shape()[0]); ++i) rows.push_back(i);
  Shape example(std::span<const int64_t>(d.x_train.shape().begin() + 1, d.x_train.shape().end()));
  TrainComparison c = train_both_ways(
      std::cout, [&](const std::string& mode) { return train_once(a, d, mode, false); }, a.model,
      [&] {
        mixed_precision::PolicyScope policy(a.dtype_policy);
        return Model(build_model(a.model, example, 10));
      },
      a.optimizer, a.learning_rate(), a.seed, data::take_rows(d.x_train, rows),
      data::take_rows(d.train.y, rows));
  report(c.runs, &c);
  if (!a.report.empty() && distributed::is_output_rank()) write_step_report(a, d, &c.step);
  c.check_agreement();
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  TrainOptions& t = args->train;
  CLI::App* cmd = app.add_subcommand(
      "train", "train an MLP or CNN (test accuracy) or a character language model (perplexity)");
  const std::string model = "Model and data", training = "Training", lm = "Language models",
                    files = "Files";
  cmd->add_option("--model", t.model,
                  "mlp or cnn (digits/MNIST); lstm, gru or transformer (character language "
                  "model on text)")
      ->check(CLI::IsMember({"mlp", "cnn", "lstm", "gru", "transformer"}))
      ->group(model);
  cmd->add_option("--dataset", t.dataset,
                  "digits (shipped), a directory with MNIST's IDX files, or text:FILE for the "
                  "language models")
      ->default_str("digits; text:/usr/share/common-licenses/GPL-3 for the language models")
      ->group(model);
  cmd->add_option("--epochs", t.epochs, "passes over the training data")
      ->check(CLI::PositiveNumber)
      ->group(training);
  cmd->add_option("--batch-size", t.batch_size, "examples per training step")
      ->check(CLI::PositiveNumber)
      ->group(training);
  cmd->add_option("--optimizer", t.optimizer, "adam or sgd")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->group(training);
  cmd->add_option("--lr", t.lr, "learning rate")
      ->check(CLI::PositiveNumber)
      ->default_str("1e-3 for mlp and cnn, 3e-3 for the language models")
      ->group(training);
  cmd->add_option("--seed", t.seed, "seeds the initial weights, shuffling and dropout")
      ->group(training);
  cmd->add_option("--validation-split", t.validation_split,
                  "mlp, cnn: fraction of the training data held out for val_loss and "
                  "val_accuracy (the language models validate on their test windows)")
      ->check(CLI::Range(0.0, 0.99))
      ->group(training);
  cmd->add_option("--mode", t.mode,
                  "compiled (steps traced by kiln::function and JIT-compiled; traced is the "
                  "same), eager, reference (traced steps on the reference executor), or both "
                  "(eager then compiled from the same weights, with a comparison table)")
      ->check(CLI::IsMember({"compiled", "eager", "reference", "both", "traced"}))
      ->group(training);
  cmd->add_option("--dtype-policy", t.dtype_policy,
                  "the Keras dtype policy the layers are built under: float32, mixed_bfloat16 "
                  "(float32 variables, bfloat16 compute), bfloat16 or float64")
      ->check(CLI::IsMember({"float32", "mixed_bfloat16", "bfloat16", "float64"}))
      ->group(training);
  cmd->add_option("--verbose", t.verbose,
                  "0: quiet; 1: the model's summary and a progress bar; 2: the summary and a line "
                  "per epoch")
      ->check(CLI::IsMember({0, 1, 2}))
      ->group(training);
  cmd->add_option("--seq-len", args->lm.seq_len, "characters per training window")
      ->check(CLI::PositiveNumber)
      ->group(lm);
  cmd->add_option("--units", args->lm.units,
                  "recurrent units (lstm, gru) or feed-forward width (transformer)")
      ->check(CLI::PositiveNumber)
      ->group(lm);
  cmd->add_option("--embedding-dim", args->lm.embedding_dim,
                  "character embedding size (the transformer's d_model)")
      ->check(CLI::PositiveNumber)
      ->group(lm);
  cmd->add_option("--heads", args->lm.heads, "transformer: attention heads")
      ->check(CLI::PositiveNumber)
      ->group(lm);
  cmd->add_option("--load-weights", t.load_weights, "safetensors file to start from")->group(files);
  cmd->add_option("--save-weights", t.save_weights,
                  "safetensors file to write after training (language models: and its .json "
                  "description)")
      ->group(files);
  CLI::Option* load_model_option =
      cmd->add_option("--load-model", t.load_model,
                      "saved model directory to resume from: its architecture, weights, "
                      "optimizer state and compile configuration (give the same --model and "
                      "--initial-epoch, the epochs it already did)")
          ->group(files);
  load_model_option->excludes(cmd->get_option("--load-weights"));
  load_model_option->excludes(cmd->get_option("--optimizer"));
  load_model_option->excludes(cmd->get_option("--lr"));
  cmd->add_option("--save-model", t.save_model,
                  "directory to save the whole trained model to (architecture, weights, "
                  "optimizer state; replaces a saved model there; docs/saving.md)")
      ->group(files);
  cmd->add_option("--initial-epoch", t.initial_epoch,
                  "epochs already done (Keras' initial_epoch): with --load-model, training "
                  "continues from there up to --epochs")
      ->check(CLI::NonNegativeNumber)
      ->group(files);
  cmd->add_option("--json", t.json,
                  "write the training history per epoch, the numbers printed and the "
                  "eager/compiled comparison (--mode both) to this JSON file (atomically)")
      ->group(files);
  cmd->add_option("--report", t.report,
                  "write the HTML step report of the compiled training step (as "
                  "`kiln report`: graph, memory plan, kernels, timed), with --mode both the "
                  "step's eager-vs-compiled comparison charted")
      ->group(files);
  cmd->callback([args] { run_train(*args); });
}

}  // namespace kiln::tools
