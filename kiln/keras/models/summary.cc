// ModelImpl::summary: Keras 3's model summary (keras/src/utils/summary_utils.py), which Keras
// renders with rich. This file reproduces rich's plain-text output for that table:
//  - box HEAVY_HEAD with show_lines: ┏━┳┓ top, ┃ header, ┡━╇┩ under the header, │ rows,
//    ├─┼┤ between rows, └─┴┘ bottom; one space of padding each side of every cell;
//  - line length 88 with columns at [0.45, 0.80, 1.0] for Sequential, subclassed and
//    "sequential-like" functional models (Layer (type), Output Shape, Param #), and 108 with
//    [0.3, 0.56, 0.74, 1.0] plus "Connected to" for other functional models. Keras also caps
//    the default at the terminal width minus 4; kiln does not (the output is deterministic);
//  - column widths as rich computes them: each column is int(position * length) minus the
//    previous one, plus 2 of padding; rich then takes the excess over length - (columns + 1)
//    (the borders) off the columns evenly (rich's ratio_reduce, Python rounding). With 88 this
//    gives cells of 38, 29 and 17 characters; with 108: 31, 27, 17 and 28;
//  - cells wrap at spaces like rich's divide_line; a word longer than the cell is cut with
//    "…"; Param # is right-aligned; "0 (unbuilt)" for layers not built yet;
//  - totals as Keras: counts with thousands separators and sizes by readable_memory_size
//    (bytes from each weight's dtype, 1024 per unit, two decimals); once the compiled
//    optimizer has taken a step, an "Optimizer params" line counts its variables() (kiln's
//    optimizers have no learning-rate variable, so the count is Keras' minus one).
// Text is measured in bytes: layer names are expected to be ASCII.
#include <fmt/format.h>

#include <cmath>
#include <ostream>
#include <sstream>

#include "kiln/keras/models/functional.h"
#include "kiln/keras/models/model.h"

namespace kiln {
namespace {

constexpr int kSequentialLineLength = 88;
constexpr int kFunctionalLineLength = 108;

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// Keras' readable_memory_size.
std::string readable_size(double bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  for (const char* unit : kUnits) {
    if (bytes / 1024 < 1) return fmt::format("{:.2f} {}", bytes, unit);
    bytes /= 1024;
  }
  return fmt::format("{:.2f} PB", bytes);
}

// Keras' weight_memory_size: bits per element from keras' dtype_size (bool counts 1 bit).
double memory_bytes(const std::vector<Variable>& weights) {
  double bits = 0;
  for (const Variable& v : weights) {
    DType t = v.value().dtype();
    double per = t == DType::b8 ? 1.0 : 8.0 * static_cast<double>(dtype_size(t));
    bits += per * static_cast<double>(v.shape().num_elements());
  }
  return bits / 8;
}

int64_t count(const std::vector<Variable>& weights) {
  int64_t n = 0;
  for (const Variable& v : weights) n += v.shape().num_elements();
  return n;
}

// rich's ratio_reduce with every ratio 1: takes `total` off `values` as evenly as possible.
std::vector<int> ratio_reduce(int total, std::vector<int> values) {
  int total_ratio = static_cast<int>(values.size()), remaining = total;
  for (int& v : values) {
    int share = static_cast<int>(
        std::nearbyint(static_cast<double>(remaining) / static_cast<double>(total_ratio)));
    int distributed = std::min(v, share);
    v -= distributed;
    remaining -= distributed;
    --total_ratio;
  }
  return values;
}

// Cell widths (padding included, borders excluded) as rich lays out Keras' table.
std::vector<int> cell_widths(int line_length, const std::vector<double>& positions) {
  std::vector<int> widths;
  int current = 0, total = 0;
  int max_width = line_length - static_cast<int>(positions.size() + 1);
  for (double p : positions) {
    int w = static_cast<int>(p * line_length) - current;
    if (w < 4)
      throw Error(
          fmt::format("summary: line_length {} is too small to print the summary", line_length));
    current += w;
    widths.push_back(std::min(w + 2, max_width));
    total += widths.back();
  }
  if (total > max_width) widths = ratio_reduce(total - max_width, widths);
  return widths;
}

// rich's Text.wrap for one cell: word wrap at `width`, long words cut with an ellipsis,
// each line justified (left or right) to exactly `width` columns.
std::vector<std::string> wrap(const std::string& text, int width, bool right) {
  // Words as rich's regex \s*\S+\s* finds them, with their trailing spaces.
  std::vector<std::string> words;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find_first_not_of(' ', pos);
    end = end == std::string::npos ? text.size() : text.find(' ', end);
    end = end == std::string::npos ? text.size() : text.find_first_not_of(' ', end);
    if (end == std::string::npos) end = text.size();
    words.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  std::vector<std::string> lines(1);
  int offset = 0;
  for (const std::string& word : words) {
    int length = static_cast<int>(word.find_last_not_of(' ') + 1);
    if (width - offset < length && !lines.back().empty()) lines.emplace_back();
    lines.back() += word;
    offset = static_cast<int>(lines.back().size());
  }
  for (std::string& line : lines) {
    size_t last = line.find_last_not_of(' ');
    line.resize(last == std::string::npos ? 0 : last + 1);
    if (static_cast<int>(line.size()) > width)
      line = line.substr(0, static_cast<size_t>(std::max(width - 1, 0))) + "…";
    else if (right)
      line = std::string(static_cast<size_t>(width) - line.size(), ' ') + line;
    else
      line += std::string(static_cast<size_t>(width) - line.size(), ' ');
  }
  return lines;
}

std::string rule(const std::vector<int>& widths, const char* left, const char* fill,
                 const char* mid, const char* right) {
  std::string s = left;
  for (size_t i = 0; i < widths.size(); ++i) {
    for (int k = 0; k < widths[i]; ++k) s += fill;
    s += i + 1 < widths.size() ? mid : right;
  }
  return s + "\n";
}

std::string row(const std::vector<std::string>& cells, const std::vector<int>& widths,
                const std::vector<bool>& right, const char* bar) {
  std::vector<std::vector<std::string>> lines;
  size_t height = 1;
  for (size_t i = 0; i < cells.size(); ++i) {
    lines.push_back(wrap(cells[i], widths[i] - 2, right[i]));
    height = std::max(height, lines.back().size());
  }
  std::string s;
  for (size_t h = 0; h < height; ++h) {
    s += bar;
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string text =
          h < lines[i].size() ? lines[i][h] : std::string(static_cast<size_t>(widths[i] - 2), ' ');
      s += " " + text + " " + bar;
    }
    s += "\n";
  }
  return s;
}

std::string shape_text(const Shape& shape) {
  std::string s = "(";
  for (int i = 0; i < shape.rank(); ++i)
    s += (i ? ", " : "") +
         (shape[i] == kUnknownDim ? std::string("None") : std::to_string(shape[i]));
  return s + ")";
}

}  // namespace

namespace detail {

std::string summary_shape_text(const std::vector<Shape>& shapes) {
  if (shapes.size() == 1) return shape_text(shapes[0]);
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_text(shapes[i]);
  return s + "]";
}

std::string layer_shape_text(const Layer& layer) {
  const auto& nodes = layer->inbound_nodes;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (auto node = it->lock()) {
      std::vector<Shape> shapes;
      for (const TensorType& t : node->output_types) shapes.push_back(t.shape);
      return summary_shape_text(shapes);
    }
  }
  if (layer->build_input_shapes().empty()) return "?";
  try {
    return summary_shape_text(layer->compute_output_shape(layer->build_input_shapes()));
  } catch (const Error&) {
    return "?";
  }
}

}  // namespace detail

std::string ModelImpl::summary_string(int line_length) const {
  std::vector<Layer> rows = layers();
  std::vector<std::string> shapes = layer_output_shapes();
  const auto* functional = dynamic_cast<const FunctionalImpl*>(this);
  bool sequential_like = !functional || functional->sequential_like();
  std::vector<std::string> connections;
  if (!sequential_like) connections = layer_connections();

  std::vector<std::string> header = {"Layer (type)", "Output Shape", "Param #"};
  std::vector<bool> right = {false, false, true};
  std::vector<double> positions = {0.45, 0.80, 1.0};
  int default_length = kSequentialLineLength;
  if (!sequential_like) {
    header.push_back("Connected to");
    right.push_back(false);
    positions = {0.3, 0.56, 0.74, 1.0};
    default_length = kFunctionalLineLength;
  }
  if (line_length <= 0) line_length = default_length;
  std::vector<int> widths = cell_widths(line_length, positions);

  std::string s = fmt::format("Model: \"{}\"\n", name());
  s += rule(widths, "┏", "━", "┳", "┓");
  s += row(header, widths, right, "┃");
  s += rule(widths, "┡", "━", "╇", "┩");
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerImpl& layer = rows[i].impl();
    std::vector<std::string> cells = {
        fmt::format("{} ({})", layer.name(), layer.class_name()),
        i < shapes.size() ? shapes[i] : "?",
        layer.built() ? with_commas(layer.count_params()) : "0 (unbuilt)"};
    if (!sequential_like) cells.push_back(i < connections.size() ? connections[i] : "-");
    if (i > 0) s += rule(widths, "├", "─", "┼", "┤");
    s += row(cells, widths, right, "│");
  }
  s += rule(widths, "└", "─", "┴", "┘");

  std::vector<Variable> trainable = trainable_weights(), frozen = non_trainable_weights();
  int64_t n_trainable = count(trainable), n_frozen = count(frozen);
  double b_trainable = memory_bytes(trainable), b_frozen = memory_bytes(frozen);
  // Keras adds the optimizer's variables once it is built (here: after its first step).
  int64_t n_optimizer = 0;
  double b_optimizer = 0;
  if (compiled() && compile_options().optimizer.defined() &&
      compile_options().optimizer->iterations() > 0) {
    std::vector<Variable> slots = compile_options().optimizer->variables();
    n_optimizer = count(slots);
    b_optimizer = memory_bytes(slots);
  }
  s += fmt::format(" Total params: {} ({})\n", with_commas(n_trainable + n_frozen + n_optimizer),
                   readable_size(b_trainable + b_frozen + b_optimizer));
  s += fmt::format(" Trainable params: {} ({})\n", with_commas(n_trainable),
                   readable_size(b_trainable));
  s += fmt::format(" Non-trainable params: {} ({})\n", with_commas(n_frozen),
                   readable_size(b_frozen));
  if (n_optimizer > 0)
    s += fmt::format(" Optimizer params: {} ({})\n", with_commas(n_optimizer),
                     readable_size(b_optimizer));
  return s;
}

void ModelImpl::summary(std::ostream& os, int line_length) const {
  os << summary_string(line_length);
}

}  // namespace kiln
