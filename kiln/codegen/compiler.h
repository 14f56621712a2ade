// Compiling kernels: lowering (codegen/lower_kernel.h), then the caches
// (codegen/object_cache.h), then the JIT (codegen/jit.h).
//
// compile_kernels() lowers every request (its own LLVM context each), keys each kernel by a
// hash of its unoptimized LLVM IR and the target description, and then per kernel: an
// address already linked in this process (memory hit), an object from the disk cache (disk
// hit), or O3 + object emission (miss; the misses of one call compile concurrently on kiln's
// TBB threads, and are stored on disk). New objects are linked into a new JITDylib and
// resolved in one batched lookup. The symbol of a kernel is derived from its key ("kiln_k_<key>"),
// so equal kernels share code and different kernels with the same group name never clash.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel_abi.h"

namespace kiln::codegen {

struct KernelRequest {
  const ir::Graph* body = nullptr;  // a fusion body or a one-op graph
  std::string name;                 // the group name ("fused_add_mul_0"): profiles, dumps
  // A contraction node of `body` whose result becomes an extra input (its epilogue kernel).
  const ir::Node* as_parameter = nullptr;
  // Outputs the kernel may write into an input's buffer, as (output index, input index) of
  // the body (a variable's new value into its old one). Lowering keeps the pairs it can honour
  // (codegen/overwrites.h; runtime::KernelLayout::overwrites).
  std::vector<std::pair<size_t, size_t>> overwrites;
};

// Where a kernel's machine code came from.
enum class KernelSource : uint8_t {
  kMemoryCache,  // linked earlier in this process (or an equal kernel of the same call)
  kDiskCache,    // an object file of KILN_CACHE_DIR, linked now
  kCompiled,     // O3 + code emission now (then stored in the disk cache)
};
// "memory cache", "disk cache", "compiled".
const char* kernel_source_name(KernelSource source);

struct CompiledKernel {
  runtime::KernelLayout layout;  // layout.symbol is the request's name
  runtime::KernelEntry entry = nullptr;
  std::string jit_symbol;  // "kiln_k_<key>": the code's name in the JIT (and in dumps)
  KernelSource source = KernelSource::kCompiled;
  double lower_seconds = 0;     // IR -> LLVM IR (on one thread)
  double optimize_seconds = 0;  // O3 (kCompiled only)
  double emit_seconds = 0;      // object code emission (kCompiled only)
  double compile_seconds() const { return lower_seconds + optimize_seconds + emit_seconds; }
};

std::vector<CompiledKernel> compile_kernels(const std::vector<KernelRequest>& requests);

// The in-memory cache can be switched off (each compile then links its kernels afresh, from
// the disk cache or compiled): benchmarks measure warm-from-disk compile times with it.
bool memory_cache_enabled();
void set_memory_cache_enabled(bool enabled);

// Dumps of one kernel: its O3-optimized LLVM IR and its assembly (compiled afresh, bypassing
// the caches). The text starts with a comment naming the kernel's group.
std::string kernel_llvm_ir(const KernelRequest& request);
std::string kernel_assembly(const KernelRequest& request);

}  // namespace kiln::codegen
