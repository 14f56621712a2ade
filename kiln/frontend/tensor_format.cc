// Tensor::to_string: numpy-style text with TensorFlow's header, summarised above 1000 elements.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "kiln/frontend/tensor.h"

namespace kiln {
namespace {

constexpr int64_t kSummariseThreshold = 1000;  // numpy's threshold
constexpr int64_t kEdgeItems = 3;              // numpy's edgeitems

// Indices printed along one axis; -1 stands for "...".
std::vector<int64_t> printed_indices(int64_t dim, bool summarise) {
  std::vector<int64_t> idx;
  if (summarise && dim > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = dim - kEdgeItems; i < dim; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < dim; ++i) idx.push_back(i);
  }
  return idx;
}

// Formats floats the way numpy does in spirit: "1." for whole numbers, up to 4 decimals,
// scientific notation for very large or very small magnitudes.
struct FloatStyle {
  bool integral = true, scientific = false;
  void observe(double v) {
    if (!std::isfinite(v)) return;
    if (v != std::floor(v) || std::fabs(v) >= 1e16) integral = false;
    double a = std::fabs(v);
    if (a >= 1e8 || (a > 0 && a < 1e-4)) scientific = true;
  }
  std::string format(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (scientific) return fmt::format("{:.4e}", v);
    if (integral) return fmt::format("{:.0f}.", v);
    std::string s = fmt::format("{:.4f}", v);
    while (s.back() == '0') s.pop_back();
    return s;
  }
};

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "<Tensor undefined>";
  if (is_symbolic())
    return fmt::format("<Tensor shape={} dtype={} symbolic>", shape().to_string(),
                       dtype_name(dtype()));
  const Shape& s = shape();
  const int rank = s.rank();
  const bool summarise = size() > kSummariseThreshold;
  std::vector<std::vector<int64_t>> axes;
  for (int d = 0; d < rank; ++d) axes.push_back(printed_indices(s[d], summarise));
  auto strides = s.strides();

  // Collect the printed elements' flat offsets in order, to pick a common style and width.
  std::vector<int64_t> offsets;
  std::function<void(int, int64_t)> collect = [&](int d, int64_t off) {
    if (d == rank) return offsets.push_back(off);
    for (int64_t i : axes[d])
      if (i >= 0) collect(d + 1, off + i * strides[d]);
  };
  collect(0, 0);

  std::vector<std::string> text(offsets.size());
  visit_storage(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(array().raw());
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16>) {
      FloatStyle style;  // bfloat16: its exact float value
      for (int64_t o : offsets) style.observe(double(storage_value(p[o])));
      for (size_t i = 0; i < offsets.size(); ++i)
        text[i] = style.format(double(storage_value(p[offsets[i]])));
      // Like numpy, pad trimmed decimals on the right so the decimal points line up.
      size_t frac = 0;
      for (const auto& t : text)
        if (auto dot = t.find('.'); dot != std::string::npos && t.find('e') == std::string::npos)
          frac = std::max(frac, t.size() - dot - 1);
      for (auto& t : text)
        if (auto dot = t.find('.'); dot != std::string::npos && t.find('e') == std::string::npos)
          t.append(frac - (t.size() - dot - 1), ' ');
    } else if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < offsets.size(); ++i) text[i] = p[offsets[i]] ? "True" : "False";
    } else {
      for (size_t i = 0; i < offsets.size(); ++i) text[i] = std::to_string(int64_t(p[offsets[i]]));
    }
  });
  size_t width = 0;
  for (const auto& t : text) width = std::max(width, t.size());

  std::string body;
  size_t next = 0;
  std::function<void(int)> emit = [&](int d) {
    if (d == rank) {
      body += std::string(width - text[next].size(), ' ') + text[next];
      ++next;
      return;
    }
    body += "[";
    // Last axis: ", "; outer axes: a comma, one newline per remaining axis, and indentation.
    std::string sep = ",";
    if (d == rank - 1) {
      sep += ' ';
    } else {
      sep.append(static_cast<size_t>(rank - d - 1), '\n');
      sep.append(static_cast<size_t>(d + 1), ' ');
    }
    bool first = true;
    for (int64_t i : axes[d]) {
      if (!first) body += sep;
      first = false;
      if (i < 0)
        body += "...";
      else
        emit(d + 1);
    }
    body += "]";
  };
  emit(0);

  std::string head = fmt::format("<Tensor shape={} dtype={}", s.to_string(), dtype_name(dtype()));
  return head + (body.find('\n') == std::string::npos ? " " : "\n") + body + ">";
}

}  // namespace kiln
