#include "tools/report_steps.h"

#include <fmt/format.h>

#include <iostream>

#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/model_zoo.h"

namespace kiln::tools {

std::vector<std::string> report_step_kinds() { return {"mlp", "cnn", "lstm", "transformer"}; }

void ReportStep::run() const { model->run_train_step(x, y); }

void write_train_step_report(Model& model, const Tensor& x, const Tensor& y,
                             const std::string& path, const std::string& title,
                             const ModeComparison* comparison) {
  const CompiledForm form = model->train_step_function(x, y).compiled_form();
  const StepTiming timing = measure_step(form, [&] { model->run_train_step(x, y); });
  write_report(form, path, {.title = title, .timing = &timing, .comparison = comparison});
  std::cout << fmt::format("wrote {}: step {:.3f} ms (mean of {} calls){}\n", path,
                           double(timing.step_ns) / 1e6, timing.calls,
                           comparison ? ", eager against compiled charted" : "");
}

ReportStep make_report_step(const std::string& kind, int64_t batch_size, int64_t seq_len) {
  constexpr int64_t kSide = 8, kClasses = 10, kVocabulary = 32;
  set_random_seed(0);
  ReportStep r;
  if (kind == "mlp" || kind == "cnn") {
    r.x = prepare_inputs(kind, random_uniform({batch_size, kSide * kSide}, 1));
    r.y = random_integers({batch_size}, 2, 0, kClasses);
    Shape example(std::span<const int64_t>(r.x.shape().begin() + 1, r.x.shape().end()));
    r.model = build_model(kind, example, kClasses);
  } else if (kind == "lstm" || kind == "transformer") {
    CharLmConfig config;
    config.model = kind;
    config.seq_len = seq_len;
    config.embedding_dim = 32;
    config.units = 64;
    config.heads = 4;
    std::u32string chars;
    for (int64_t i = 0; i < kVocabulary; ++i) chars += char32_t('a' + i);
    config.vocabulary = data::CharVocabulary(chars);
    r.model = build_char_lm(config);
    r.x = random_integers({batch_size, seq_len}, 1, 0, kVocabulary, DType::i32);
    r.y = random_integers({batch_size, seq_len}, 2, 0, kVocabulary, DType::i32);
  } else {
    throw Error(fmt::format("unknown step \"{}\": expected mlp, cnn, lstm or transformer", kind));
  }
  r.model->compile({.optimizer = Adam(),
                    .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                    .metrics = {"accuracy"}});
  r.step = r.model->train_step_function(r.x, r.y);
  r.form = r.step.compiled_form();
  return r;
}

}  // namespace kiln::tools
