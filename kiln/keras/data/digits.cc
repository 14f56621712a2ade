#include "kiln/keras/data/digits.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "kiln/frontend/creation.h"
#include "kiln/keras/data/data_dir.h"
#include "kiln/keras/io/file_util.h"

namespace kiln::data {

std::string default_digits_path() { return data_dir() + "/digits.csv.gz"; }

Examples decode_digits(std::string bytes, const std::string& what) {
  std::string text = maybe_gunzip(std::move(bytes), what);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::istringstream lines(text);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.empty() || line == "\r") continue;
    std::vector<double> values;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      char* end = nullptr;
      double v = std::strtod(cell.c_str(), &end);
      if (end == cell.c_str() || (*end != '\0' && *end != '\r'))
        throw Error(fmt::format("{}: line {}: \"{}\" is not a number", what, line_number, cell));
      values.push_back(v);
      if (values.size() > 65) break;
    }
    if (values.size() != 65)
      throw Error(fmt::format("{}: line {} has {} values; digits rows have 64 pixels and a label",
                              what, line_number,
                              values.size() > 65 ? "more than 65" : std::to_string(values.size())));
    for (int i = 0; i < 64; ++i) {
      // Written so that NaN fails too.
      if (!(values[size_t(i)] >= 0 && values[size_t(i)] <= 16))
        throw Error(fmt::format("{}: line {}: pixel {} is {}, outside 0..16", what, line_number, i,
                                values[size_t(i)]));
      pixels.push_back(float(values[size_t(i)] / 16.0));
    }
    double label = values[64];
    if (!(label >= 0 && label <= 9) || label != std::floor(label))
      throw Error(
          fmt::format("{}: line {}: label {} is not a digit 0..9", what, line_number, label));
    labels.push_back(int64_t(label));
  }
  if (labels.empty()) throw Error(fmt::format("{}: no examples found", what));
  auto n = int64_t(labels.size());
  return {tensor(pixels, {n, 64}), tensor(labels, {n})};
}

Examples load_digits(const std::string& path) { return decode_digits(io::read_file(path), path); }

}  // namespace kiln::data
