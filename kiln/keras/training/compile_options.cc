// Resolving compile's per-output options (loss, loss_weights, metrics) and fit's class_weight
// against a model's output names.
#include "kiln/keras/training/compile_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return "[" + out + "]";
}

// Index of `name` among `outputs`, or a kiln::Error naming both.
size_t output_index(const std::vector<std::string>& outputs, const std::string& name,
                    const std::string& what) {
  auto it = std::find(outputs.begin(), outputs.end(), name);
  if (it == outputs.end())
    throw Error(fmt::format("{}: the model has no output named \"{}\"; its outputs are {}", what,
                            name, quoted_list(outputs)));
  return size_t(it - outputs.begin());
}

void check_count(size_t given, const char* noun, const std::vector<std::string>& outputs,
                 const std::string& what) {
  if (given != outputs.size())
    throw Error(fmt::format(
        "{}: {} {} given for a model with {} output{} {}; give one per output, or use "
        "by_output(...) with output names",
        what, given, noun, outputs.size(), outputs.size() == 1 ? "" : "s", quoted_list(outputs)));
}

}  // namespace

LossSpec LossSpec::by_output(std::map<std::string, Loss> losses) {
  LossSpec s;
  s.by_name_ = std::move(losses);
  return s;
}

std::vector<Loss> LossSpec::for_outputs(const std::vector<std::string>& outputs,
                                        const std::string& model) const {
  const std::string what = fmt::format("compile (model \"{}\"): loss", model);
  std::vector<Loss> out(outputs.size());
  if (single_.defined()) {
    std::fill(out.begin(), out.end(), single_);
  } else if (!list_.empty()) {
    check_count(list_.size(), "losses", outputs, what);
    out = list_;
  } else {
    for (const auto& [name, loss] : by_name_) out[output_index(outputs, name, what)] = loss;
  }
  if (std::none_of(out.begin(), out.end(), [](const Loss& l) { return l.defined(); }))
    throw Error(fmt::format("{}: no output of {} gets a loss", what, quoted_list(outputs)));
  return out;
}

LossWeights LossWeights::by_output(std::map<std::string, double> weights) {
  LossWeights w;
  w.by_name_ = std::move(weights);
  return w;
}

std::vector<double> LossWeights::for_outputs(const std::vector<std::string>& outputs,
                                             const std::string& model) const {
  const std::string what = fmt::format("compile (model \"{}\"): loss_weights", model);
  std::vector<double> out(outputs.size(), 1.0);
  if (!list_.empty()) {
    check_count(list_.size(), "weights", outputs, what);
    out = list_;
  }
  for (const auto& [name, w] : by_name_) out[output_index(outputs, name, what)] = w;
  for (size_t i = 0; i < out.size(); ++i)
    if (!(std::isfinite(out[i]) && out[i] >= 0))
      throw Error(
          fmt::format("{}: the weight of output \"{}\" is {}; weights must be finite and "
                      ">= 0",
                      what, outputs[i], out[i]));
  return out;
}

MetricSpec MetricSpec::per_output(std::vector<std::vector<Metric>> lists) {
  MetricSpec s;
  s.per_output_ = std::move(lists);
  return s;
}

MetricSpec MetricSpec::by_output(std::map<std::string, std::vector<Metric>> lists) {
  MetricSpec s;
  s.by_name_ = std::move(lists);
  return s;
}

std::vector<std::vector<Metric>> MetricSpec::for_outputs(const std::vector<std::string>& outputs,
                                                         const std::vector<Loss>& losses,
                                                         const std::string& model) const {
  const std::string what = fmt::format("compile (model \"{}\"): metrics", model);
  std::vector<std::vector<Metric>> chosen(outputs.size());
  if (!all_.empty()) {
    std::fill(chosen.begin(), chosen.end(), all_);
  } else if (!per_output_.empty()) {
    check_count(per_output_.size(), "metric lists", outputs, what);
    chosen = per_output_;
  } else {
    for (const auto& [name, list] : by_name_) chosen[output_index(outputs, name, what)] = list;
  }
  // "accuracy" resolved from each output's loss; a flat list serving several outputs gives
  // each its own copy (its own state).
  const bool shared = !all_.empty() && outputs.size() > 1;
  std::vector<std::vector<Metric>> out(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o)
    for (const Metric& m : chosen[o]) {
      if (!m.defined())
        throw Error(fmt::format("{}: an empty Metric for output \"{}\"", what, outputs[o]));
      out[o].push_back(resolve_metric(shared ? m.fresh() : m, losses[o]));
    }
  return out;
}

ClassWeight ClassWeight::by_output(std::map<std::string, std::map<int64_t, double>> weights) {
  ClassWeight c;
  c.by_name_ = std::move(weights);
  return c;
}

std::vector<std::map<int64_t, double>> ClassWeight::for_outputs(
    const std::vector<std::string>& outputs, const std::string& caller) const {
  const std::string what = caller + ": class_weight";
  std::vector<std::map<int64_t, double>> out(outputs.size());
  if (!single_.empty()) {
    if (outputs.size() != 1)
      throw Error(fmt::format(
          "{}: one class-weight map was given for a model with {} outputs {}; give them by "
          "output name with ClassWeight::by_output",
          what, outputs.size(), quoted_list(outputs)));
    out[0] = single_;
  }
  for (const auto& [name, map] : by_name_) out[output_index(outputs, name, what)] = map;
  for (size_t o = 0; o < out.size(); ++o)
    for (const auto& [cls, w] : out[o])
      if (!(std::isfinite(w) && w >= 0))
        throw Error(
            fmt::format("{}: class {} of output \"{}\" has weight {}; weights must be "
                        "finite and >= 0",
                        what, cls, outputs[o], w));
  return out;
}

}  // namespace kiln
