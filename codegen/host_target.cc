#include "codegen/host_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <vector>

namespace kiln::codegen {

std::string llvm_version() { return LLVM_VERSION_STRING; }

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

std::string host_cpu_features() {
  std::vector<std::string> on;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.getValue()) on.push_back(f.getKey().str());
  std::sort(on.begin(), on.end());
  std::string s;
  for (const auto& f : on) s += (s.empty() ? "" : ",") + f;
  return s;
}

}  // namespace kiln::codegen
