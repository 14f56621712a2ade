#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_layout_kernels(KernelTable&) {}

}  // namespace kiln::runtime
