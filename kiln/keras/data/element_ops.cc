#include "kiln/keras/data/element_ops.h"

#include <fmt/format.h>

#include <cstring>

#include "kiln/runtime/array.h"

namespace kiln::data {
namespace {

Tensor tensor_row(const Tensor& t, int64_t i) {
  const runtime::Array& a = t.array();
  Shape row_shape(a.shape.dims().subspan(1));
  runtime::Array row = runtime::Array::empty(a.dtype, row_shape);
  size_t bytes = row.nbytes();
  if (bytes) std::memcpy(row.raw(), static_cast<const char*>(a.raw()) + size_t(i) * bytes, bytes);
  return Tensor(std::move(row));
}

Arrays arrays_row(const Arrays& a, int64_t i) {
  if (a.empty()) return a;
  std::vector<Tensor> rows;
  rows.reserve(a.size());
  for (const Tensor& t : a.tensors()) rows.push_back(tensor_row(t, i));
  return a.with_tensors(std::move(rows));
}

// Tensor `k` of every element's Arrays `part`, stacked (shapes already checked equal).
Tensor stack_part(const std::vector<Element>& elements, Arrays Element::*part, size_t k) {
  const Tensor& first = (elements[0].*part).tensors()[k];
  Shape shape;
  shape.push_back(int64_t(elements.size()));
  for (int64_t d : first.shape()) shape.push_back(d);
  runtime::Array out = runtime::Array::empty(first.dtype(), shape);
  size_t bytes = first.array().nbytes();
  auto* dst = static_cast<char*>(out.raw());
  for (size_t i = 0; i < elements.size() && bytes; ++i)
    std::memcpy(dst + i * bytes, (elements[i].*part).tensors()[k].array().raw(), bytes);
  return Tensor(std::move(out));
}

bool same_layout(const Arrays& a, const Arrays& b) {
  if (a.size() != b.size() || a.single() != b.single() || a.names() != b.names()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const Tensor &s = a.tensors()[k], &t = b.tensors()[k];
    if (!s.defined() || !t.defined() || s.dtype() != t.dtype() || !(s.shape() == t.shape()))
      return false;
  }
  return true;
}

std::string describe_arrays(const Arrays& a) {
  auto one = [](const Tensor& t) {
    return t.defined() ? fmt::format("{} {}", dtype_name(t.dtype()), t.shape().to_string())
                       : std::string("undefined");
  };
  if (a.single()) return one(a.tensors()[0]);
  std::string out;
  for (size_t k = 0; k < a.size(); ++k)
    out += (k ? ", " : "") + (a.named() ? a.names()[k] + ": " : "") + one(a.tensors()[k]);
  return a.named() ? "{" + out + "}" : "[" + out + "]";
}

constexpr Arrays Element::*kParts[] = {&Element::x, &Element::y, &Element::sample_weight};
constexpr const char* kPartNames[] = {"x", "y", "sample_weight"};

}  // namespace

Element element_row(const Element& rows, int64_t i) {
  Element e;
  for (size_t p = 0; p < 3; ++p) e.*kParts[p] = arrays_row(rows.*kParts[p], i);
  return e;
}

std::string describe_element(const Element& e) {
  std::string out;
  for (size_t p = 0; p < 3; ++p) {
    const Arrays& a = e.*kParts[p];
    if (a.empty()) continue;
    out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", kPartNames[p], describe_arrays(a));
  }
  return out.empty() ? "no tensors" : out;
}

Element stack_elements(const std::vector<Element>& elements, int64_t first_index) {
  KILN_ASSERT(!elements.empty(), "stack_elements of no elements");
  const Element& first = elements[0];
  for (size_t i = 1; i < elements.size(); ++i)
    for (size_t p = 0; p < 3; ++p)
      if (!same_layout(first.*kParts[p], elements[i].*kParts[p]))
        throw Error(fmt::format(
            "Dataset.batch: element {} of the pass ({}) does not match element {}, the first of "
            "its batch ({}); the elements of a batch need the same structure, dtypes and "
            "shapes (map them to one shape first, or batch them with batch_size 1)",
            first_index + int64_t(i), describe_element(elements[i]), first_index,
            describe_element(first)));
  for (size_t p = 0; p < 3; ++p)
    for (const Tensor& t : (first.*kParts[p]).tensors())
      if (!t.defined())
        throw Error(fmt::format("Dataset.batch: element {} has an undefined tensor ({})",
                                first_index, describe_element(first)));
      else if (t.rank() + 1 > kMaxRank)
        throw Error(fmt::format(
            "Dataset.batch: element {} has a tensor of rank {} ({}); with the batch axis it "
            "would exceed kiln's maximum rank {}",
            first_index, t.rank(), describe_element(first), kMaxRank));
  Element out;
  for (size_t p = 0; p < 3; ++p) {
    const Arrays& a = first.*kParts[p];
    if (a.empty()) continue;
    std::vector<Tensor> stacked;
    for (size_t k = 0; k < a.size(); ++k) stacked.push_back(stack_part(elements, kParts[p], k));
    out.*kParts[p] = a.with_tensors(std::move(stacked));
  }
  return out;
}

}  // namespace kiln::data
