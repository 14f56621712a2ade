// Facts about the host CPU and the LLVM that kiln's code generator targets (no LLVM headers:
// tools and the frontend print these).
#pragma once

#include <string>

namespace kiln::codegen {

std::string llvm_version();       // e.g. "19.1.7"
std::string host_cpu_name();      // e.g. "znver3", as LLVM names it
std::string host_cpu_features();  // comma-separated enabled features, e.g. "avx2,fma,..."

// Everything that changes the machine code of a kernel besides its IR: CPU, features, the
// optimization flags, LLVM, kiln and kernel-format versions. Part of every cache key.
std::string target_description();

}  // namespace kiln::codegen
