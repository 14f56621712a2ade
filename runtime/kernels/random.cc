#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_random_kernels(KernelTable&) {}

}  // namespace kiln::runtime
