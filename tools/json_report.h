// The JSON files `kiln bench --json FILE` and `kiln train --json FILE` write: the machine and
// build a run happened on, then the command's own numbers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln::tools {

// {"kiln_version", "host_cpu", "target_cpu", "threads", "load_average"}.
nlohmann::json environment_json();

// "/proc/loadavg"'s first three fields ("0.12 0.30 0.25"), "?" when unreadable.
std::string load_average();

// Writes `report` (indented) to `path` atomically (runtime/file_io.h) and prints "wrote PATH";
// kiln::Error naming the path when it cannot be written.
void write_json_report(const std::string& path, const nlohmann::json& report);

}  // namespace kiln::tools
