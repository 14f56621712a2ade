// `kiln train --model lstm|gru|transformer --dataset text:FILE`: a character language model
// trained with Model::fit on windows of a text, reporting perplexity (exp of the mean
// cross-entropy per character) against the unigram baseline of the same text.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/data_parallel_report.h"
#include "tools/train_comparison.h"

namespace kiln::tools {
namespace {

struct CharLmData {
  data::Examples train, test;
};

// Prints "epoch N: loss L, perplexity P, val_perplexity Q" after each epoch.
class PerplexityLogger : public Callback {
 public:
  void on_epoch_end(int epoch, const Logs& logs) override {
    std::string line = fmt::format("epoch {}: loss {:.4f}, perplexity {:.3f}", epoch + 1,
                                   logs.at("loss"), std::exp(logs.at("loss")));
    if (auto it = logs.find("val_loss"); it != logs.end())
      line += fmt::format(", val_perplexity {:.3f}", std::exp(it->second));
    std::cout << line << "\n" << std::flush;
  }
};

Optimizer make_optimizer(const CharLmTrainArgs& a) {
  if (a.optimizer == "adam") return Adam({.learning_rate = a.lr});
  if (a.optimizer == "sgd") return SGD({.learning_rate = a.lr});
  throw Error(fmt::format("--optimizer {}: expected adam or sgd", a.optimizer));
}

TrainRun train_once(const CharLmTrainArgs& a, const CharLmData& d, const std::string& mode,
                    bool report) {
  clear_session();
  set_random_seed(a.seed);
  Model model = build_char_lm(a.config);
  if (!a.load_weights.empty()) model->load_weights(a.load_weights);
  model->compile({.optimizer = make_optimizer(a),
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"},
                  .run_eagerly = mode == "eager"});
  if (report && a.verbose) model->summary(std::cout);
  ScopedExecutionMode execution(mode == "reference" ? ExecutionMode::kReference
                                                    : ExecutionMode::kCompiled);
  auto timer = std::make_shared<StepTimer>();
  std::vector<CallbackPtr> callbacks{timer, std::make_shared<CollectivesAfterFirstStep>()};
  if (report) callbacks.push_back(std::make_shared<PerplexityLogger>());
  const int64_t live_before = runtime::Storage::live_bytes();
  runtime::Storage::reset_peak_bytes();
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<History> history =
      model->fit(d.train.x, d.train.y,
                 {.batch_size = a.batch_size,
                  .epochs = a.epochs,
                  .verbose = report && a.verbose == 2 ? 2 : 0,
                  .callbacks = callbacks,
                  .validation_data = std::make_pair(d.test.x, d.test.y),
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
  run.final_loss = history->history.at("loss").back();
  if (mode != "eager")
    run.compile_seconds =
        train_step_compile_seconds(model.get(), d.train.x, d.train.y, a.batch_size);
  Logs result = model->evaluate(d.test.x, d.test.y, {.batch_size = 256, .verbose = 0});
  run.test_loss = result["loss"];
  run.test_accuracy = result["accuracy"];
  if (report && !a.save_weights.empty() && distributed::is_output_rank()) {
    model->save_weights(a.save_weights);
    save_char_lm_config(a.save_weights, a.config);
    std::cout << "saved weights to " << a.save_weights << " and the model description to "
              << char_lm_config_path(a.save_weights) << "\n";
  }
  return run;
}

}  // namespace

void run_char_lm_training(const CharLmTrainArgs& in) {
  CharLmTrainArgs a = in;
  data::TextCorpus corpus = data::load_text(a.text_path);
  a.config.vocabulary = corpus.vocabulary;
  if (!a.load_weights.empty()) {
    // The vocabulary must be the one the weights were trained with.
    CharLmConfig saved = load_char_lm_config(a.load_weights);
    if (saved.vocabulary.chars() != corpus.vocabulary.chars())
      throw Error(fmt::format(
          "--load-weights {}: those weights were trained on a text with another character "
          "set ({} characters; this text has {})",
          a.load_weights, saved.vocabulary.size(), corpus.vocabulary.size()));
  }
  data::Examples windows = data::text_windows(corpus.ids, a.config.seq_len, a.config.seq_len);
  const int64_t n = windows.size(), n_test = std::max<int64_t>(1, n / 10);
  if (n < 2)
    throw Error(fmt::format(
        "{}: {} characters make {} window(s) of {} + 1; need at least 2 (one to train on, one "
        "to test); use a longer text or a smaller --seq-len",
        a.text_path, corpus.ids.size(), n, a.config.seq_len));
  std::vector<int64_t> train_rows, test_rows;
  for (int64_t i = 0; i < n; ++i) (i < n - n_test ? train_rows : test_rows).push_back(i);
  CharLmData d{data::take(windows, train_rows), data::take(windows, test_rows)};
  // The baseline: a model that knows only the character frequencies of the training text.
  std::vector<int32_t> train_ids(
      corpus.ids.begin(),
      corpus.ids.begin() + std::ptrdiff_t(train_rows.size() * size_t(a.config.seq_len)));
  const double unigram = data::unigram_perplexity(train_ids, corpus.vocabulary.size());
  std::cout << fmt::format(
      "text {}: {} characters, vocabulary {}, {} training and {} test windows of {}\n", a.text_path,
      corpus.ids.size(), corpus.vocabulary.size(), train_rows.size(), test_rows.size(),
      a.config.seq_len);

  auto report = [unigram](const TrainRun& r) {
    std::cout << fmt::format(
        "test_loss: {:.4f}\ntest_perplexity: {:.3f}\nunigram_perplexity: {:.3f}\n", r.test_loss,
        std::exp(r.test_loss), unigram);
  };
  if (a.mode != "both") {
    report(train_once(a, d, a.mode == "traced" ? "compiled" : a.mode, /*report=*/true));
    return;
  }
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(a.batch_size, d.train.size()); ++i) rows.push_back(i);
  const CharLmConfig config = a.config;
  train_both_ways(
      std::cout, [&](const std::string& mode) { return train_once(a, d, mode, false); },
      config.model, [config] { return build_char_lm(config); }, a.optimizer, a.lr, a.seed,
      data::take_rows(d.train.x, rows), data::take_rows(d.train.y, rows), report);
}

}  // namespace kiln::tools
