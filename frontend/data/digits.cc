#include "frontend/data/digits.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "frontend/creation.h"
#include "runtime/knobs.h"

namespace kiln::data {

std::string default_digits_path() {
  return runtime::knobs::data_dir().value_or(KILN_DEFAULT_DATA_DIR) + "/digits.csv.gz";
}

Dataset load_digits(const std::string& path) {
  std::string text = read_maybe_gzip(path);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::istringstream lines(text);
  std::string line;
  int64_t row = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line == "\r") continue;
    ++row;
    std::vector<double> values;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      char* end = nullptr;
      double v = std::strtod(cell.c_str(), &end);
      if (end == cell.c_str() || (*end != '\0' && *end != '\r'))
        throw Error(fmt::format("{}: line {}: \"{}\" is not a number", path, row, cell));
      values.push_back(v);
    }
    if (values.size() != 65)
      throw Error(fmt::format("{}: line {} has {} values; digits rows have 64 pixels and a label",
                              path, row, values.size()));
    for (int i = 0; i < 64; ++i) {
      if (values[size_t(i)] < 0 || values[size_t(i)] > 16)
        throw Error(fmt::format("{}: line {}: pixel {} is {}, outside 0..16", path, row, i,
                                values[size_t(i)]));
      pixels.push_back(float(values[size_t(i)] / 16.0));
    }
    double label = values[64];
    if (label < 0 || label > 9 || label != double(int64_t(label)))
      throw Error(fmt::format("{}: line {}: label {} is not a digit 0..9", path, row, label));
    labels.push_back(int64_t(label));
  }
  if (labels.empty()) throw Error(fmt::format("{}: no examples found", path));
  auto n = int64_t(labels.size());
  return {tensor(pixels, {n, 64}), tensor(labels, {n})};
}

}  // namespace kiln::data
