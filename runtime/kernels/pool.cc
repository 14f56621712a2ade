#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_pool_kernels(KernelTable&) {}

}  // namespace kiln::runtime
