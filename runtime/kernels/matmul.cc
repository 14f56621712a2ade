#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_matmul_kernels(KernelTable&) {}

}  // namespace kiln::runtime
