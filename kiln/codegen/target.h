// The CPU kiln's JIT generates kernels for (no LLVM headers: tools, the frontend and tests
// use it).
//
// A target is named as KILN_TARGET_CPU / set_target_cpu() take it: "native" (the default: the
// host CPU with every feature LLVM detects on it), an x86-64 micro-architecture level
// ("x86-64-v2": SSE4.2; "x86-64-v3": AVX2 + FMA; "x86-64-v4": AVX-512 F/BW/CD/DQ/VL), or any
// CPU name LLVM knows ("skylake", "znver3", ...). A named target is used for both the
// instruction set and the scheduling model, so "x86-64-v3" on an AVX-512 machine generates
// what an AVX2 laptop runs. It must be runnable here: its instruction-set features must be a
// subset of the host's, else kiln::Error names the missing features.
//
// The target is process-wide and read once per kernel module (codegen/jit.h: a module keeps
// the target it was created for, through optimization and emission). It is part of every
// kernel cache key (target_description()), so kernels built for one target are never reused
// for another, in memory or on disk. Switching it affects kernels compiled afterwards; code
// already compiled (a kiln::function's concrete functions) keeps the target it was built for.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::codegen {

// A resolved target: what the code generator is told and what the caches key on.
struct KernelTarget {
  std::string name;           // as requested: "native", "x86-64-v3", "skylake", ...
  std::string cpu;            // LLVM CPU name: the host's ("znver4") for native, else `name`
  std::string features;       // its instruction-set features, sorted, comma-separated
  std::string llvm_features;  // "+f,-g,..." over every feature LLVM detects on hosts
  unsigned vector_bits = 0;   // preferred vector width: 512 with AVX-512F, 256 with AVX, 128
};

// Resolves `name` for this host. kiln::Error for an unknown name (listing the accepted ones),
// a 32-bit CPU, or a CPU with features this host lacks (naming them and the host CPU).
KernelTarget resolve_target(const std::string& name);

// The target kernels are compiled for now: set_target_cpu()'s, else KILN_TARGET_CPU's (read
// once it is first needed), else native. Throws kiln::Error (at each call) while the
// KILN_TARGET_CPU value cannot be resolved. Thread-safe.
std::shared_ptr<const KernelTarget> current_target();

// The current target's name ("native" by default) and its LLVM CPU name and features.
std::string target_cpu();

// Makes `name` the target of kernels compiled from now on (validated first: kiln::Error as in
// resolve_target, the current target unchanged). An empty name returns to the default
// (KILN_TARGET_CPU, else native). Process-wide, thread-safe.
void set_target_cpu(const std::string& name);

// Sets the target for its lifetime and restores the previous setting (tests, tools).
class ScopedTargetCpu {
 public:
  explicit ScopedTargetCpu(const std::string& name);
  ~ScopedTargetCpu();
  ScopedTargetCpu(const ScopedTargetCpu&) = delete;
  ScopedTargetCpu& operator=(const ScopedTargetCpu&) = delete;

 private:
  std::optional<std::string> previous_;  // set_target_cpu's value before, nullopt: default
};

// The CPU names LLVM accepts for this host's architecture (besides "native"), sorted.
std::vector<std::string> known_target_cpus();

// The instruction-set features LLVM says `cpu` has (only those LLVM's host detection reports,
// so comparable with host_cpu_features()), sorted. kiln::Error for an unknown name.
std::vector<std::string> cpu_features(const std::string& cpu);

// Everything that changes the machine code of a kernel besides its IR: the target's CPU and
// features, the optimization flags, LLVM, kiln and kernel-format versions. Part of every
// cache key. The no-argument form describes current_target().
std::string target_description(const KernelTarget& target);
std::string target_description();

}  // namespace kiln::codegen
