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

// Kernels of via-f32 ops that read and write bf16 themselves, with the rule's values (the
// float32 result rounded once) but not its widening and rounding passes over memory: they run
// for every dtype in place of the generic via-f32 wrapper (registry.cc).
void register_bf16_kernels(KernelTable& t);

}  // namespace kiln::runtime
