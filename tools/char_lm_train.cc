// `kiln train --model lstm|gru|transformer --dataset text:FILE`: a character language model
// trained with Model::fit on windows of a text, reporting perplexity (exp of the mean
// cross-entropy per character) against the unigram baseline of the same text.
#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/data_parallel_report.h"
#include "tools/report_steps.h"
#include "tools/train_comparison.h"
#include "tools/train_json.h"
#include "tools/train_model_files.h"

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

Optimizer make_optimizer(const TrainOptions& a) {
  if (a.optimizer == "adam") return Adam({.learning_rate = a.learning_rate()});
  if (a.optimizer == "sgd") return SGD({.learning_rate = a.learning_rate()});
  throw Error(fmt::format("--optimizer {}: expected adam or sgd", a.optimizer));
}

// --report FILE: the step report of a fresh model of the run (its configuration, optimizer and
// dtype policy) on the first training batch; with --mode both the comparison charted.
void write_char_lm_step_report(const CharLmTrainArgs& args, const CharLmData& d,
                               const ModeComparison* comparison) {
  const TrainOptions& a = args.train;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(a.batch_size, d.train.size()); ++i) rows.push_back(i);
  clear_session();
  set_random_seed(a.seed);
  Model model;
  {
    mixed_precision::PolicyScope policy(a.dtype_policy);
    model = build_char_lm(args.config);
  }
  model->compile({.optimizer = make_optimizer(a),
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"}});
  write_train_step_report(
      model, data::take_rows(d.train.x, rows), data::take_rows(d.train.y, rows), a.report,
      fmt::format("{} training step, batch {}, {}", a.model, rows.size(), a.dtype_policy),
      comparison);
}

TrainRun train_char_lm_once(const CharLmTrainArgs& args, const CharLmData& d,
                            const std::string& mode, bool report) {
  const TrainOptions& a = args.train;
  clear_session();
  set_random_seed(a.seed);
  Model model;
  if (!a.load_model.empty()) {
    model = load_model_for_training(a.load_model, mode);
  } else {
    mixed_precision::PolicyScope policy(a.dtype_policy);
    model = build_char_lm(args.config);
    if (!a.load_weights.empty()) model->load_weights(a.load_weights);
    model->compile({.optimizer = make_optimizer(a),
                    .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                    .metrics = {"accuracy"},
                    .run_eagerly = mode == "eager"});
  }
  if (report && a.verbose) model->summary(std::cout);
  std::vector<CallbackPtr> callbacks;
  if (report) callbacks.push_back(std::make_shared<PerplexityLogger>());
  TrainRun run = fit_and_evaluate(model.get(), mode, d.train.x, d.train.y,
                                  {.batch_size = a.batch_size,
                                   .epochs = a.epochs,
                                   .verbose = report && a.verbose == 2 ? 2 : 0,
                                   .callbacks = callbacks,
                                   .validation_data = std::make_pair(d.test.x, d.test.y),
                                   .seed = a.seed,
                                   .initial_epoch = a.initial_epoch},
                                  d.test.x, d.test.y);
  if (report && distributed::launched_by_mpi())
    report_data_parallel(run.step_seconds, a.batch_size);
  if (report && !a.save_weights.empty() && distributed::is_output_rank()) {
    model->save_weights(a.save_weights);
    save_char_lm_config(a.save_weights, args.config);
    std::cout << "saved weights to " << a.save_weights << " and the model description to "
              << char_lm_config_path(a.save_weights) << "\n";
  }
  if (report && !a.save_model.empty() && distributed::is_output_rank()) {
    save_trained_model(model, a.save_model, d.train.x, d.train.y, a.batch_size);
    save_char_lm_config(char_lm_model_description(a.save_model), args.config);
  }
  return run;
}

}  // namespace

void run_char_lm_training(const CharLmTrainArgs& in) {
  CharLmTrainArgs a = in;
  const TrainOptions& t = a.train;
  data::TextCorpus corpus = data::load_text(a.text_path);
  a.config.vocabulary = corpus.vocabulary;
  for (const auto& [option, path] :
       {std::pair{"--load-weights", t.load_weights},
        std::pair{"--load-model", t.load_model.empty()
                                      ? std::string()
                                      : char_lm_model_description(t.load_model)}}) {
    if (path.empty()) continue;
    // The vocabulary must be the one the weights were trained with.
    CharLmConfig saved = load_char_lm_config(path);
    if (saved.vocabulary.chars() != corpus.vocabulary.chars())
      throw Error(
          fmt::format("{} {}: those weights were trained on a text with another character set ({} "
                      "characters; this text has {})",
                      option, path, saved.vocabulary.size(), corpus.vocabulary.size()));
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

  auto report = [&t, unigram](const std::vector<TrainRun>& runs,
                              const TrainComparison* comparison) {
    const TrainRun& r = runs.back();
    std::cout << fmt::format(
        "test_loss: {:.4f}\ntest_perplexity: {:.3f}\nunigram_perplexity: {:.3f}\n", r.test_loss,
        std::exp(r.test_loss), unigram);
    write_train_json(t, runs, comparison,
                     {{"test_loss", r.test_loss},
                      {"test_perplexity", std::exp(r.test_loss)},
                      {"unigram_perplexity", unigram}});
  };
  const bool step_report = !t.report.empty() && distributed::is_output_rank();
  if (t.mode != "both") {
    report({train_char_lm_once(a, d, t.run_mode(), /*report=*/true)}, nullptr);
    if (step_report) write_char_lm_step_report(a, d, nullptr);
    return;
  }
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(t.batch_size, d.train.size()); ++i) rows.push_back(i);
  const CharLmConfig config = a.config;
  TrainComparison c = train_both_ways(
      std::cout, [&](const std::string& mode) { return train_char_lm_once(a, d, mode, false); },
      config.model,
      [config, policy = t.dtype_policy] {
        mixed_precision::PolicyScope scope(policy);
        return build_char_lm(config);
      },
      t.optimizer, t.learning_rate(), t.seed, data::take_rows(d.train.x, rows),
      data::take_rows(d.train.y, rows));
  report(c.runs, &c);
  if (step_report) write_char_lm_step_report(a, d, &c.step);
  c.check_agreement();
}

}  // namespace kiln::tools
