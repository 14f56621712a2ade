#include "kiln/keras/data/arrays.h"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln {

Arrays::Arrays(Tensor t) : tensors_{std::move(t)}, single_(true) {}

Arrays::Arrays(std::vector<Tensor> list) : tensors_(std::move(list)) {}

Arrays Arrays::by_name(std::map<std::string, Tensor> tensors) {
  Arrays a;
  for (auto& [name, t] : tensors) {
    a.names_.push_back(name);
    a.tensors_.push_back(std::move(t));
  }
  return a;
}

namespace {
std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return "[" + out + "]";
}
}  // namespace

std::vector<Tensor> Arrays::in_order(const std::vector<std::string>& names, const std::string& role,
                                     const std::string& caller, bool for_weights) const {
  std::vector<Tensor> out;
  if (single_ && for_weights) {
    out.assign(names.size(), tensors_[0]);
  } else if (named()) {
    for (const std::string& n : names_)
      if (std::find(names.begin(), names.end(), n) == names.end())
        throw Error(fmt::format("{}: no model {} is named \"{}\"; the model's {}s are {}", caller,
                                role, n, role, joined(names)));
    for (const std::string& n : names) {
      auto it = std::find(names_.begin(), names_.end(), n);
      if (it == names_.end() && for_weights) {
        out.emplace_back();
        continue;
      }
      if (it == names_.end())
        throw Error(fmt::format("{}: the {} \"{}\" is missing (given {}; the model's {}s are {})",
                                caller, role, n, joined(names_), role, joined(names)));
      out.push_back(tensors_[size_t(it - names_.begin())]);
    }
  } else {
    if (tensors_.size() != names.size())
      throw Error(fmt::format("{}: the model has {} {}{} {}, but {} {} given", caller, names.size(),
                              role, names.size() == 1 ? "" : "s", joined(names), describe(),
                              tensors_.size() == 1 ? "was" : "were"));
    out = tensors_;
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].defined() && !(for_weights && named()))
      throw Error(
          fmt::format("{}: the {} for \"{}\" is an undefined tensor", caller, role, names[i]));
  return out;
}

int64_t Arrays::num_examples(const std::string& what) const {
  if (tensors_.empty()) throw Error(fmt::format("{}: no tensors were given", what));
  int64_t n = -1;
  for (const Tensor& t : tensors_) {
    if (!t.defined()) throw Error(fmt::format("{}: a tensor is undefined ({})", what, describe()));
    if (t.rank() == 0)
      throw Error(fmt::format("{}: examples lie along axis 0, but a tensor is a scalar ({})", what,
                              describe()));
    if (n >= 0 && t.shape()[0] != n)
      throw Error(
          fmt::format("{}: the tensors must have the same number of examples (axis 0); got {}",
                      what, describe()));
    n = t.shape()[0];
  }
  return n;
}

Arrays Arrays::take_rows(const std::vector<int64_t>& rows) const {
  Tensor index = tensor<int64_t>(rows);
  std::vector<Tensor> taken;
  for (const Tensor& t : tensors_) taken.push_back(gather(t, index, 0));
  return with_tensors(std::move(taken));
}

Arrays Arrays::with_tensors(std::vector<Tensor> tensors) const {
  if (tensors.size() != tensors_.size())
    throw Error(fmt::format("Arrays::with_tensors: {} tensors for a structure of {}",
                            tensors.size(), tensors_.size()));
  Arrays a = *this;
  a.tensors_ = std::move(tensors);
  return a;
}

std::string Arrays::describe() const {
  auto shape = [](const Tensor& t) { return t.defined() ? t.shape().to_string() : "undefined"; };
  if (tensors_.empty()) return "no tensors";
  if (single_) return "a tensor of shape " + shape(tensors_[0]);
  std::string out;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (i) out += ", ";
    if (named()) out += names_[i] + " ";
    out += shape(tensors_[i]);
  }
  if (named()) return fmt::format("tensors named {}", out);
  return fmt::format("{} tensor{} {}", tensors_.size(), tensors_.size() == 1 ? "" : "s", out);
}

}  // namespace kiln
