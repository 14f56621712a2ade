#include "kiln/keras/layers/merging.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"

namespace kiln {
namespace {

const char* merge_class(MergeImpl::Kind kind) {
  switch (kind) {
    case MergeImpl::Kind::kAdd:
      return "Add";
    case MergeImpl::Kind::kSubtract:
      return "Subtract";
    case MergeImpl::Kind::kMultiply:
      return "Multiply";
    case MergeImpl::Kind::kAverage:
      return "Average";
    case MergeImpl::Kind::kMaximum:
      return "Maximum";
    case MergeImpl::Kind::kMinimum:
      return "Minimum";
  }
  return "Merge";
}

// "[(None, 3), (None, 4)]"
std::string shapes_string(const std::vector<Shape>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].to_string();
  return s + "]";
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& xs) {
  std::vector<Shape> s;
  for (const Tensor& x : xs) s.push_back(x.shape());
  return s;
}

}  // namespace

// ---- elementwise merges ----

MergeImpl::MergeImpl(Kind kind, MergeOptions options)
    : LayerImpl(merge_class(kind), std::move(options.name)), kind_(kind) {
  supports_masking = true;
}

// Keras' Merge.compute_mask: the logical AND of the inputs' masks (those that have one).
std::vector<Tensor> MergeImpl::compute_mask(const std::vector<Tensor>&,
                                            const std::vector<Tensor>& masks) {
  Tensor out;
  for (const Tensor& m : masks)
    if (m.defined()) out = out.defined() ? logical_and(out, m) : m;
  return {out};
}

Shape MergeImpl::check_shapes(const std::vector<Shape>& shapes) const {
  if (kind_ == Kind::kSubtract && shapes.size() != 2)
    throw Error(
        fmt::format("layer \"{}\": A `Subtract` layer should be called on exactly 2 "
                    "inputs. Received: input_shape={}",
                    name(), shapes_string(shapes)));
  if (shapes.size() < 2)
    throw Error(
        fmt::format("layer \"{}\": A merge layer should be called on a list of at least 2 "
                    "inputs. Got {} inputs. Full input_shape received: {}",
                    name(), shapes.size(), shapes_string(shapes)));
  int64_t batch = kUnknownDim;
  for (const Shape& s : shapes) {
    int64_t b = s.rank() > 0 ? s[0] : 1;
    if (b == kUnknownDim) continue;
    if (batch != kUnknownDim && b != batch)
      throw Error(
          fmt::format("layer \"{}\": Cannot merge tensors with different batch sizes. "
                      "Received tensors with shapes {}",
                      name(), shapes_string(shapes)));
    batch = b;
  }
  Shape out = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    try {
      out = broadcast_shapes(out, shapes[i], "merge");
    } catch (const Error&) {
      throw Error(
          fmt::format("layer \"{}\": Inputs have incompatible shapes. Received shapes {} "
                      "and {}",
                      name(), out.to_string(), shapes[i].to_string()));
    }
  }
  return out;
}

std::vector<Tensor> MergeImpl::call_many(const std::vector<Tensor>& inputs, bool) {
  check_shapes(shapes_of(inputs));
  Tensor y = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    switch (kind_) {
      case Kind::kAdd:
      case Kind::kAverage:
        y = y + x;
        break;
      case Kind::kSubtract:
        y = y - x;
        break;
      case Kind::kMultiply:
        y = y * x;
        break;
      case Kind::kMaximum:
        y = maximum(y, x);
        break;
      case Kind::kMinimum:
        y = minimum(y, x);
        break;
    }
  }
  if (kind_ == Kind::kAverage) y = y / double(inputs.size());
  return {y};
}

std::vector<Shape> MergeImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  return {check_shapes(input_shapes)};
}

Layer merge_from_config(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  MergeOptions o{.name = c.name()};
  if (class_name == "Add") return Add(o);
  if (class_name == "Subtract") return Subtract(o);
  if (class_name == "Multiply") return Multiply(o);
  if (class_name == "Average") return Average(o);
  if (class_name == "Maximum") return Maximum(o);
  if (class_name == "Minimum") return Minimum(o);
  throw Error(fmt::format(
      "merge_from_config: \"{}\" is not a merge layer class (Add, Subtract, Multiply, Average, "
      "Maximum or Minimum)",
      class_name));
}

// ---- Concatenate ----

ConcatenateImpl::ConcatenateImpl(ConcatenateOptions options)
    : LayerImpl("Concatenate", std::move(options.name)), axis_(options.axis) {}

std::vector<Shape> ConcatenateImpl::compute_output_shape(const std::vector<Shape>& shapes) {
  if (shapes.empty())
    throw Error(
        fmt::format("layer \"{}\": A `Concatenate` layer should be called on a list of "
                    "at least 1 input.",
                    name()));
  const Shape& first = shapes[0];
  bool ok = axis_ >= -first.rank() && axis_ < first.rank();
  int a = axis_ < 0 ? axis_ + first.rank() : axis_;
  Shape out = first;
  for (size_t i = 1; ok && i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    ok = s.rank() == first.rank();
    for (int d = 0; ok && d < s.rank(); ++d) {
      if (d == a) {
        out[d] = (out[d] == kUnknownDim || s[d] == kUnknownDim) ? kUnknownDim : out[d] + s[d];
      } else if (s[d] != out[d]) {
        ok = s[d] == kUnknownDim || out[d] == kUnknownDim;
        if (out[d] == kUnknownDim) out[d] = s[d];
      }
    }
  }
  if (!ok)
    throw Error(
        fmt::format("layer \"{}\": A `Concatenate` layer requires inputs with matching "
                    "shapes except for the concatenation axis. Received: input_shape={} "
                    "and axis={}",
                    name(), shapes_string(shapes), axis_));
  return {out};
}

std::vector<Tensor> ConcatenateImpl::call_many(const std::vector<Tensor>& inputs, bool) {
  compute_output_shape(shapes_of(inputs));
  return {concat(inputs, axis_)};
}

Json ConcatenateImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["axis"] = axis_;
  return c;
}

Layer concatenate_from_config(const Json& config) {
  ConfigReader c(config, "Concatenate");
  return Concatenate(ConcatenateOptions{.axis = c.get<int>("axis", -1), .name = c.name()});
}

Concatenate::Concatenate(ConcatenateOptions options)
    : Layer(std::make_shared<ConcatenateImpl>(std::move(options))) {}

}  // namespace kiln
