// Internal: each kernel family file adds its kernels to the table (called once, in order).
#pragma once

#include <array>

#include "kiln/runtime/kernels.h"

namespace kiln::runtime {

using KernelTable = std::array<KernelFn, kNumOps>;

void register_arithmetic_kernels(KernelTable& t);
void register_comparison_kernels(KernelTable& t);
void register_unary_kernels(KernelTable& t);
void register_cast_kernels(KernelTable& t);
void register_reduce_kernels(KernelTable& t);
void register_extremum_kernels(KernelTable& t);
void register_softmax_kernels(KernelTable& t);
void register_matmul_kernels(KernelTable& t);
void register_conv_kernels(KernelTable& t);
void register_pool_kernels(KernelTable& t);
void register_layout_kernels(KernelTable& t);
void register_gather_kernels(KernelTable& t);
void register_random_kernels(KernelTable& t);
void register_attention_kernels(KernelTable& t);
void register_collective_kernels(KernelTable& t);

}  // namespace kiln::runtime
