// Facts about the host CPU and the LLVM that kiln's code generator targets.
// (The JIT compiler itself arrives with the codegen issue; LLVM headers stay in codegen/.)
#pragma once

#include <string>

namespace kiln::codegen {

std::string llvm_version();       // e.g. "19.1.7"
std::string host_cpu_name();      // e.g. "znver3", as LLVM names it
std::string host_cpu_features();  // comma-separated enabled features, e.g. "avx2,fma,..."

}  // namespace kiln::codegen
