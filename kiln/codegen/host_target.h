// Facts about the host CPU and the LLVM that kiln's code generator uses (no LLVM headers:
// tools and the frontend print these). The target kernels are compiled for, which may be
// another CPU than the host, is in codegen/target.h.
#pragma once

#include <string>

namespace kiln::codegen {

std::string llvm_version();       // e.g. "19.1.7"
std::string host_cpu_name();      // e.g. "znver3", as LLVM names it
std::string host_cpu_features();  // comma-separated enabled features, e.g. "avx2,fma,..."

}  // namespace kiln::codegen
