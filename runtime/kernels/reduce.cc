#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_reduce_kernels(KernelTable&) {}

}  // namespace kiln::runtime
