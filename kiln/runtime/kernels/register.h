// Internal: each kernel family file adds its kernels to the table (called once, in order).
#pragma once

#include <array>
#include <optional>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/scratch.h"

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
void register_matmul_bf16_kernels(KernelTable& t);
void register_conv_bf16_kernels(KernelTable& t);
void register_attention_bf16_kernels(KernelTable& t);

// The via-f32 rule's parts (registry.cc), for bf16 kernels that apply it piecewise:
// - a float32 array of `shape` in the calling thread's scratch slot `slot` (kept between calls,
//   so a step's conversions do not fault fresh pages in every call); the array keeps the
//   scratch busy while it lives and must die on this thread;
// - `a` (bf16) widened to float32 (exact), in scratch slot `slot` (none: a fresh array); while
//   profiling, a "bf16 widen" event.
Array scratch_f32(ScratchSlot slot, const Shape& shape);
Array widened_bf16(const Array& a, std::optional<ScratchSlot> slot);

// The op's kernel of the main table under the via-f32 rule (bf16 operands widened, bf16 results
// rounded; other dtypes passed through): for a bf16 kernel's cases it does not handle itself.
void run_via_f32_kernel(OpKind kind, std::span<const Array> in, const Attrs& attrs, Array& out);

}  // namespace kiln::runtime
