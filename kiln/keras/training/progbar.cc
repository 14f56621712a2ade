#include "kiln/keras/training/progbar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ostream>

namespace kiln {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

Progbar::Progbar(int64_t target, std::ostream& os, int verbose, bool interactive)
    : target_(target),
      os_(os),
      verbose_(verbose),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()) {}

std::string Progbar::format_value(double v) {
  return std::fabs(v) > 1e-3 || v == 0 ? fmt::format("{:.4f}", v) : fmt::format("{:.4e}", v);
}

std::string Progbar::format_time_per_step(double s) {
  if (s >= 1 || s == 0) return fmt::format("{:.0f}s/step", s);
  if (s >= 1e-3) return fmt::format("{:.0f}ms/step", s * 1e3);
  return fmt::format("{:.0f}us/step", s * 1e6);
}

std::string Progbar::target_text() const {
  return target_ > 0 ? std::to_string(target_) : "Unknown";
}

void Progbar::update(int64_t current, const Logs& values, bool finalize) {
  if (verbose_ == 0) return;
  if (!finalize && !interactive_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double per_step = current > 0 ? elapsed / double(current) : 0;
  std::string metrics;
  for (const auto& [name, v] : values) metrics += fmt::format(" - {}: {}", name, format_value(v));

  if (verbose_ == 2) {
    if (finalize)
      os_ << fmt::format("{}/{} - {:.0f}s - {}{}\n", current, target_text(), elapsed,
                         format_time_per_step(per_step), metrics)
          << std::flush;
    return;
  }
  int digits = target_ > 0 ? int(std::log10(double(target_))) + 1 : 1;
  std::string count = fmt::format("{:>{}}/{}", current, digits, target_text());
  constexpr int kWidth = 20;
  int done = target_ > 0 ? int(kWidth * double(current) / double(target_)) : kWidth;
  std::string bar;
  if (interactive_) {
    bar = "\x1b[1m" + count + "\x1b[0m ";
    if (done > 0) {
      bar += "\x1b[32m";
      for (int i = 0; i < done; ++i) bar += "━";
      bar += "\x1b[0m";
    }
    bar += "\x1b[37m";
    for (int i = done; i < kWidth; ++i) bar += "━";
    bar += "\x1b[0m";
  } else {
    bar = count + " ";
    for (int i = 0; i < kWidth; ++i) bar += "━";
  }
  std::string time;
  if (finalize) {
    time = fmt::format(" {:.0f}s {}", elapsed, format_time_per_step(per_step));
  } else if (target_ > 0) {
    double eta = per_step * double(target_ - current);
    std::string eta_text = eta > 3600 ? fmt::format("{}:{:02}:{:02}", int(eta) / 3600,
                                                    (int(eta) % 3600) / 60, int(eta) % 60)
                           : eta > 60 ? fmt::format("{}:{:02}", int(eta) / 60, int(eta) % 60)
                                      : fmt::format("{:.0f}s", eta);
    time = interactive_ ? " \x1b[1m" + eta_text + "\x1b[0m" : " " + eta_text;
  }
  std::string line = bar + time + metrics;
  if (interactive_) {
    std::string pad = line.size() < last_width_ ? std::string(last_width_ - line.size(), ' ') : "";
    os_ << "\r" << line << pad;
    last_width_ = line.size();
    if (finalize) os_ << "\n";
  } else {
    os_ << line << "\n";
  }
  os_ << std::flush;
}

}  // namespace kiln
