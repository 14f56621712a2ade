#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_gather_kernels(KernelTable&) {}

}  // namespace kiln::runtime
