#include "tools/json_report.h"

#include <fstream>
#include <iostream>

#include "kiln/codegen/host_target.h"
#include "kiln/codegen/target.h"
#include "kiln/kiln.h"
#include "kiln/runtime/file_io.h"

namespace kiln::tools {

nlohmann::json environment_json() {
  return {{"kiln_version", kVersion},
          {"host_cpu", codegen::host_cpu_name()},
          {"target_cpu", codegen::target_cpu()},
          {"threads", num_threads()},
          {"load_average", load_average()}};
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a.empty() ? "?" : a + " " + b + " " + c;
}

void write_json_report(const std::string& path, const nlohmann::json& report) {
  runtime::write_file_atomically(path, report.dump(2) + "\n");
  std::cout << "wrote " << path << "\n";
}

}  // namespace kiln::tools
