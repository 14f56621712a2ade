#include "kiln/keras/training/callbacks.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "kiln/distributed/distributed.h"
#include "kiln/keras/io/file_util.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/training/monitor.h"

namespace kiln {

// ---------------------------------------------------------------- History

void History::on_train_begin(const Logs&) {
  epoch.clear();
  history.clear();
}

void History::on_epoch_end(int e, const Logs& logs) {
  epoch.push_back(e);
  for (const auto& [k, v] : logs) history[k].push_back(v);
}

// ---------------------------------------------------------------- ProgbarLogger

ProgbarLogger::ProgbarLogger(std::ostream& os, std::optional<bool> interactive)
    : os_(os), interactive_(interactive.value_or(&os == &std::cout && stdout_is_terminal())) {}

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  in_fit_ = true;
  int verbose = params().count("verbose") ? params().at("verbose") : 1;
  int epochs = params().count("epochs") ? params().at("epochs") : 1;
  int steps = params().count("steps") ? params().at("steps") : 0;
  if (verbose == 0) return;
  if (epochs > 1 || verbose == 1) os_ << "Epoch " << epoch + 1 << "/" << epochs << "\n";
  bar_ = std::make_unique<Progbar>(steps, os_, verbose, interactive_);
}

void ProgbarLogger::on_train_batch_end(int batch, const Logs& logs) {
  last_ = logs;
  seen_ = batch + 1;
  if (bar_) bar_->update(batch + 1, logs, false);
}

void ProgbarLogger::on_epoch_end(int, const Logs& logs) {
  int steps = params().count("steps") ? params().at("steps") : 0;
  if (bar_) bar_->update(steps > 0 ? steps : seen_, logs, true);  // 0: unknown in advance
  bar_.reset();
}

void ProgbarLogger::on_test_begin(const Logs&) {
  if (in_fit_) return;  // validation inside fit is summarised in the epoch line
  int verbose = params().count("verbose") ? params().at("verbose") : 1;
  int steps = params().count("steps") ? params().at("steps") : 0;
  if (verbose) bar_ = std::make_unique<Progbar>(steps, os_, verbose, interactive_);
}

void ProgbarLogger::on_test_batch_end(int batch, const Logs& logs) {
  last_ = logs;
  seen_ = batch + 1;
  if (!in_fit_ && bar_) bar_->update(batch + 1, logs, false);
}

void ProgbarLogger::on_test_end(const Logs& logs) {
  if (in_fit_ || !bar_) return;
  int steps = params().count("steps") ? params().at("steps") : 0;
  bar_->update(steps > 0 ? steps : seen_, logs, true);
  bar_.reset();
}

// ---------------------------------------------------------------- EarlyStopping

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : o_(std::move(options)) {
  maximize_ = detail::maximizes(o_.monitor, o_.mode);
}

bool EarlyStopping::improved(double v, double ref) const {
  double delta = std::fabs(o_.min_delta);
  return maximize_ ? v - delta > ref : v + delta < ref;
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = 0;
  stopped_epoch_ = best_epoch_ = -1;
  best_ = maximize_ ? -INFINITY : INFINITY;
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  if (epoch < o_.start_from_epoch) return;
  double v = detail::monitored(logs, o_.monitor, "EarlyStopping");
  if (o_.restore_best_weights && best_weights_.empty()) best_weights_ = model()->get_weights();
  ++wait_;
  if (improved(v, best_)) {
    best_ = v;
    best_epoch_ = epoch;
    if (o_.restore_best_weights) best_weights_ = model()->get_weights();
    // Keras only resets the wait when the baseline (if any) is also beaten.
    if (!o_.baseline || improved(v, *o_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= o_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model()->stop_training = true;
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  // (Every rank of data-parallel training stops alike; rank 0 alone prints.)
  const bool verbose = o_.verbose && distributed::is_output_rank();
  if (stopped_epoch_ >= 0 && verbose)
    std::cout << "Epoch " << stopped_epoch_ + 1 << ": early stopping\n";
  if (o_.restore_best_weights && !best_weights_.empty() && stopped_epoch_ >= 0) {
    if (verbose)
      std::cout << "Restoring model weights from the end of the best epoch: " << best_epoch_ + 1
                << ".\n";
    model()->set_weights(best_weights_);
  }
}

// ---------------------------------------------------------------- ModelCheckpoint

ModelCheckpoint::ModelCheckpoint(std::string filepath, ModelCheckpointOptions options)
    : filepath_(std::move(filepath)), o_(std::move(options)) {
  maximize_ = detail::maximizes(o_.monitor, o_.mode);
}

void ModelCheckpoint::on_train_begin(const Logs&) { best_.reset(); }

std::string ModelCheckpoint::format_path(int epoch, const Logs& logs) const {
  static const std::regex field(R"(\{([A-Za-z_][A-Za-z0-9_]*)(:[^}]*)?\})");
  std::string out;
  auto begin = std::sregex_iterator(filepath_.begin(), filepath_.end(), field);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out += filepath_.substr(last, size_t(m.position(0)) - last);
    std::string name = m[1].str(), spec = m[2].matched ? m[2].str() : "";
    std::string f = "{" + spec + "}";
    try {
      if (name == "epoch") {
        out += fmt::format(fmt::runtime(f), epoch + 1);
      } else {
        auto v = logs.find(name);
        if (v == logs.end())
          throw Error(
              fmt::format("ModelCheckpoint: filepath \"{}\" uses {{{}}}, which is not in "
                          "the logs",
                          filepath_, name));
        out += fmt::format(fmt::runtime(f), v->second);
      }
    } catch (const fmt::format_error& e) {
      throw Error(fmt::format("ModelCheckpoint: bad format \"{}\" for {} in \"{}\": {}", spec, name,
                              filepath_, e.what()));
    }
    last = size_t(m.position(0) + m.length(0));
  }
  return out + filepath_.substr(last);
}

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  std::string path = format_path(epoch, logs);
  // Data-parallel training: every rank keeps the same best value; rank 0 alone writes.
  const bool output = distributed::is_output_rank();
  if (o_.save_best_only) {
    double v = detail::monitored(logs, o_.monitor, "ModelCheckpoint");
    bool better = !best_ || (maximize_ ? v > *best_ : v < *best_);
    if (!better) {
      if (o_.verbose && output)
        std::cout << fmt::format("\nEpoch {}: {} did not improve from {:.5f}\n", epoch + 1,
                                 o_.monitor, *best_);
      return;
    }
    if (o_.verbose && output)
      std::cout << fmt::format(
          "\nEpoch {}: {} improved from {:.5f} to {:.5f}, saving model to {}\n", epoch + 1,
          o_.monitor, best_ ? *best_ : (maximize_ ? -INFINITY : INFINITY), v, path);
    best_ = v;
  } else if (o_.verbose && output) {
    std::cout << fmt::format("\nEpoch {}: saving model to {}\n", epoch + 1, path);
  }
  if (output) model()->save_weights(path);
}

// ---------------------------------------------------------------- CSVLogger

CSVLogger::CSVLogger(std::string filename, char separator, bool append)
    : filename_(std::move(filename)), sep_(separator), append_(append) {}

void CSVLogger::on_train_begin(const Logs&) {
  content_.clear();
  keys_.clear();
  if (append_ && std::filesystem::exists(filename_)) {
    content_ = io::read_file(filename_);
    std::istringstream first(content_);
    std::string header;
    std::getline(first, header);
    std::string key;
    std::istringstream cells(header);
    while (std::getline(cells, key, sep_))
      if (key != "epoch") keys_.push_back(key);
  }
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (keys_.empty()) {
    for (const auto& [k, v] : logs) keys_.push_back(k);
    content_ += "epoch";
    for (const auto& k : keys_) content_ += sep_ + k;
    content_ += "\n";
  }
  content_ += std::to_string(epoch);
  for (const auto& k : keys_) {
    auto it = logs.find(k);
    content_ += sep_;
    if (it != logs.end()) content_ += fmt::format("{}", it->second);
  }
  content_ += "\n";
  if (distributed::is_output_rank()) io::write_file_atomically(filename_, content_);
}

}  // namespace kiln
