#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_conv_kernels(KernelTable&) {}

}  // namespace kiln::runtime
