#include "runtime/kernels/register.h"

namespace kiln::runtime {

void register_softmax_kernels(KernelTable&) {}

}  // namespace kiln::runtime
