// Keras 3's progress bar: "22/22 ━━━━━━━━━━━━━━━━━━━━ 0s 3ms/step - accuracy: 0.8812 -
// loss: 0.4101". On a terminal it redraws its line with an ETA; otherwise it prints only the
// final line. verbose 2 prints one plain line per epoch ("22/22 - 0s - 3ms/step - ...").
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

#include "kiln/keras/training/callback.h"

namespace kiln {

class Progbar {
 public:
  // `target`: number of steps (0: unknown, shown as "12/Unknown" as Keras does, without an
  // ETA); `interactive`: redraw the line (a terminal).
  Progbar(int64_t target, std::ostream& os, int verbose, bool interactive);
  // Shows step `current` (1-based) with the metric values; `finalize` ends the line.
  void update(int64_t current, const Logs& values, bool finalize);

  // "0.4101" (or "1.2000e-05" below 1e-3), as Keras formats metric values.
  static std::string format_value(double v);
  // "3ms/step", "120us/step", "2s/step".
  static std::string format_time_per_step(double seconds);

 private:
  std::string target_text() const;
  int64_t target_;
  std::ostream& os_;
  int verbose_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_;
  size_t last_width_ = 0;
};

// Whether stdout is a terminal (progress bars redraw their line only then).
bool stdout_is_terminal();

}  // namespace kiln
