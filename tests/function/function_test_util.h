// Helpers shared by the kiln::function (tracing) tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

// Captures the warnings kiln logs while alive (restores the previous sink and level after).
class WarningCapture {
 public:
  WarningCapture() : level_(log_level()) {
    set_log_level(LogLevel::kWarning);
    previous_ = set_log_sink([this](LogLevel level, std::string_view message) {
      if (level == LogLevel::kWarning) warnings_.emplace_back(message);
    });
  }
  ~WarningCapture() {
    set_log_sink(previous_);
    set_log_level(level_);
  }
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  LogLevel level_;
  LogSink previous_;
  std::vector<std::string> warnings_;
};

// The elements of a float tensor (for exact, bitwise-equal comparisons of float results).
inline std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace kiln::test
