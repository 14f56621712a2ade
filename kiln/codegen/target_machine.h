// LLVM's side of a kernel target (codegen/target.h): target machines for its CPU name and
// features, the O3 optimization level, FMA contraction allowed, and 512-bit vectors preferred
// where the target has AVX-512 (LLVM otherwise stays on 256-bit vectors on AVX-512 CPUs).
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>

#include "kiln/codegen/target.h"

namespace kiln::codegen {

// The O3 pipeline's tuning (codegen/jit.cc). Part of target_description(), so cached objects
// built with other settings are never reused.
struct PipelineTuning {
  bool loop_vectorization = true;
  bool slp_vectorization = true;
  bool loop_interleaving = true;  // several vector accumulators in reductions
  // No unrolling beyond the vectorizer's interleaving: full unrolling of the small constant
  // trip counts of kernels made code 5x larger and compiling the digits-MLP step ~5x slower
  // (660 ms -> 130 ms) for no measured speed-up.
  bool loop_unrolling = false;
};
inline constexpr PipelineTuning kPipelineTuning{};

// Initialises LLVM's native target once (thread-safe).
void initialize_native_target();

// A new target machine for `target` (TargetMachine is not thread-safe: one per thread).
std::unique_ptr<llvm::TargetMachine> create_target_machine(const KernelTarget& target);

// The calling thread's target machine for `target` (created on first use, one per target).
llvm::TargetMachine& thread_target_machine(const KernelTarget& target);

// Sets target-cpu, target-features and prefer-vector-width on a kernel function, so the
// optimizer's cost models and the instruction selector see the target's CPU and width.
void apply_target_attributes(llvm::Function& f, const KernelTarget& target);

}  // namespace kiln::codegen
