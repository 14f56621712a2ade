#include "kiln/keras/training/sample_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {

Tensor aligned_sample_weights(const std::string& who, const Tensor& w_in, const Tensor& v) {
  Tensor w = w_in;
  if (w.rank() == v.rank() + 1 && w.shape().dim(-1) == 1) w = squeeze(w, {-1});
  bool ok = w.rank() <= v.rank();
  for (int d = 0; ok && d < w.rank(); ++d)
    ok = w.shape()[d] == v.shape()[d] || w.shape()[d] == kUnknownDim || v.shape()[d] == kUnknownDim;
  if (!ok || w.dtype() == DType::b8)
    throw Error(fmt::format(
        "{}: sample_weight has shape {} ({}), but there is one value per sample of shape {}; "
        "give numeric weights of that shape or of its leading axes (e.g. [batch])",
        who, w_in.shape().to_string(), dtype_name(w_in.dtype()), v.shape().to_string()));
  if (!w.is_symbolic()) {
    std::vector<double> values = w.to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i)
      if (!(values[i] >= 0))
        throw Error(fmt::format("{}: sample_weight element {} is {}; weights must be >= 0", who, i,
                                values[i]));
  }
  if (w.dtype() != v.dtype()) w = cast(w, v.dtype());
  Axes shape(w.shape().begin(), w.shape().end());
  while (int(shape.size()) < v.rank()) shape.push_back(1);
  return int(shape.size()) == w.rank() ? w : reshape(w, shape);
}

Tensor class_sample_weights(const Tensor& y, const std::map<int64_t, double>& weights,
                            const std::string& who) {
  if (!y.defined() || y.is_symbolic())
    throw Error(fmt::format("{}: class weights need concrete targets", who));
  Tensor classes;
  if (is_floating(y.dtype()) && y.rank() >= 1 && y.shape().dim(-1) > 1) {
    classes = argmax(y, -1);  // one-hot
  } else {
    classes = y;
    if (classes.rank() >= 2 && classes.shape().dim(-1) == 1) classes = squeeze(classes, {-1});
  }
  std::vector<double> ids = classes.to_vector<double>();
  if (is_floating(classes.dtype()))
    for (double& id : ids) id = std::round(id);  // binary probability-style labels
  std::vector<float> out(ids.size(), 1.0f);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!std::isfinite(ids[i]))
      throw Error(fmt::format("{}: target element {} is {}, which is no class id", who, i, ids[i]));
    auto it = weights.find(int64_t(ids[i]));
    if (it != weights.end()) out[i] = float(it->second);
  }
  return tensor<float>(out, classes.shape());
}

}  // namespace kiln::detail
