// Internal helpers of the callbacks that watch a metric (EarlyStopping, ModelCheckpoint,
// ReduceLROnPlateau).
#pragma once

#include <fmt/format.h>

#include <string>

#include "kiln/frontend/tensor.h"
#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/callbacks.h"

namespace kiln::detail {

// Whether larger is better for `monitor` under `mode` (kAuto: names with "acc" or "auc").
inline bool maximizes(const std::string& monitor, MonitorMode mode) {
  if (mode == MonitorMode::kMax) return true;
  if (mode == MonitorMode::kMin) return false;
  return monitor.find("acc") != std::string::npos || monitor.find("auc") != std::string::npos;
}

// The monitored value; kiln::Error naming `who` and the available names when absent.
inline double monitored(const Logs& logs, const std::string& monitor, const char* who) {
  auto it = logs.find(monitor);
  if (it == logs.end()) {
    std::string available;
    for (const auto& [k, v] : logs) available += (available.empty() ? "" : ", ") + k;
    throw Error(
        fmt::format("{}: the monitored metric \"{}\" is not in the logs (available: {}); "
                    "for val_* metrics pass validation data or validation_split to fit",
                    who, monitor, available));
  }
  return it->second;
}

}  // namespace kiln::detail
