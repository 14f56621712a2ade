#include "kiln/passes/pass.h"

#include <fmt/format.h>

namespace kiln::passes {

void PassStatistics::add(std::string_view name, int64_t n) {
  for (auto& [counter, value] : counters_)
    if (counter == name) {
      value += n;
      return;
    }
  counters_.emplace_back(std::string(name), n);
}

int64_t PassStatistics::get(std::string_view name) const {
  for (const auto& [counter, value] : counters_)
    if (counter == name) return value;
  return 0;
}

void PassStatistics::merge(const PassStatistics& other) {
  for (const auto& [counter, value] : other.counters_) add(counter, value);
}

std::string PassStatistics::to_string() const {
  std::string s;
  for (const auto& [counter, value] : counters_)
    s += fmt::format("{}{}: {}", s.empty() ? "" : ", ", counter, value);
  return s;
}

Pass::~Pass() = default;

}  // namespace kiln::passes
