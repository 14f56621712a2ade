// The host target kiln compiles kernels for: the host CPU name with all its features, the
// O3 optimization level, FMA contraction allowed, and 512-bit vectors preferred where the CPU
// has AVX-512 (LLVM otherwise stays on 256-bit vectors even on AVX-512 machines).
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>

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

// A new target machine for the host (TargetMachine is not thread-safe: one per thread).
std::unique_ptr<llvm::TargetMachine> create_host_target_machine();

// The calling thread's host target machine (created on first use).
llvm::TargetMachine& thread_target_machine();

// Sets target-cpu, target-features and prefer-vector-width on a kernel function, so the
// optimizer's cost models see the host's vector width.
void apply_target_attributes(llvm::Function& f);

// The preferred vector width in bits (512 with AVX-512, 256 with AVX, else 128).
unsigned preferred_vector_bits();

}  // namespace kiln::codegen
