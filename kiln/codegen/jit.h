// The JIT: one ORC LLJIT per process that turns kernel modules into callable code.
//
// Compiling a kernel: its module (one LLVMContext + Module per kernel, so kernels compile
// concurrently) is optimized with the new pass manager's O3 pipeline for the module's target
// (codegen/target.h: the target current when the module was created), emitted as an object file,
// and added to the process's LLJIT; one batched lookup then resolves every kernel of an executable.
// Objects may come from the object cache (codegen/object_cache.h) instead. Runtime helpers and libm
// are found by host symbol lookup (the kiln process's own symbols).
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/codegen/target.h"

namespace kiln::codegen {

// One kernel's IR: its own context and module, the name of the function to look up, and the
// target it is compiled for (its functions carry the target's attributes:
// apply_target_attributes in codegen/target_machine.h).
struct KernelModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::string symbol;
  std::shared_ptr<const KernelTarget> target;
};

// A new, empty module for current_target() (the host's triple and data layout set) in a new
// context. kiln::Error if KILN_TARGET_CPU names a target this host cannot run.
KernelModule new_kernel_module(const std::string& module_name, const std::string& symbol);

// Runs the O3 pipeline for the kernel's target on its module (rewriting it). Verifies the module
// first; an invalid module is an internal error naming the kernel. Then every vector store
// tagged with streaming_store_tag whose alignment is at least its size becomes non-temporal
// (the loop vectorizer refuses to widen a store already marked non-temporal, because the
// scalar store's alignment is too small for a vector one; other tagged stores stay plain).
void optimize_module(KernelModule& kernel);
// The TBAA access tag (its own type tree, so it tells alias analysis nothing about other
// accesses) that marks the stores of an output meant to be streamed: the loop vectorizer
// keeps TBAA tags on the stores it widens.
llvm::MDNode* streaming_store_tag(llvm::LLVMContext& ctx);
// The object file / assembly text of an optimized kernel (for its target).
std::string emit_object(KernelModule& kernel);
std::string emit_assembly(KernelModule& kernel);
// The module's textual LLVM IR.
std::string module_text(const llvm::Module& module);

// One object file to link and the kernel symbol to resolve in it.
struct ObjectToLink {
  std::string bytes;
  std::string symbol;
};

// The process's JIT (created on first use; thread-safe).
class Jit {
 public:
  static Jit& instance();
  // Links `objects` into a new JITDylib (whose link order reaches the process's own symbols:
  // runtime helpers, libm) and resolves every symbol in one batched lookup. Code is never
  // unloaded, so the addresses stay valid for the process's lifetime. kiln::Error naming the
  // object on a link failure.
  std::vector<void*> link(std::vector<ObjectToLink> objects);

 private:
  Jit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Optimizes, emits and adds `kernel`, then looks up its symbol (no cache). For tests and tools.
void* compile_uncached(KernelModule kernel);

}  // namespace kiln::codegen
