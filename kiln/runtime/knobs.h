// Debugging and tuning knobs read from the environment, all in this one place.
// Each has an API equivalent (e.g. set_num_threads for KILN_NUM_THREADS); see docs/debugging.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::runtime::knobs {

// KILN_NUM_THREADS: size of kiln's task arena (default: hardware concurrency).
// Returns nullopt when unset; throws kiln::Error on a value that is not a positive integer.
std::optional<int> num_threads();

// KILN_WORKER_SPIN_US: how long kiln's workers stay awake after a parallel region, in
// microseconds (API: kiln::set_worker_spin_us); nullopt when unset; kiln::Error on a value that
// is not an integer from 0 to 1000000.
std::optional<int64_t> worker_spin_us();

// KILN_GEMM=auto|avx512|avx2|eigen: the float32 GEMM kernels (runtime/gemm.h; API:
// runtime::set_gemm_kernels); nullopt when unset or empty (then auto). runtime checks the value.
std::optional<std::string> gemm_kernels();

// KILN_GEMM_BF16=auto|amx|avx512bf16|amx-emulated|avx512bf16-emulated|float32: the kernels of
// products of bf16
// operands (runtime/gemm.h; API: runtime::set_gemm_bf16_kernels); nullopt when unset or empty.
std::optional<std::string> gemm_bf16_kernels();

// KILN_LOG: "warning" (default), "info" or "debug".
std::string log_level();

// KILN_DATA_DIR: where the shipped data sets (digits.csv.gz) are read from; nullopt if unset.
std::optional<std::string> data_dir();

// KILN_CACHE_DIR=DIR: where compiled kernels are cached across processes (codegen/object_cache.h;
// API: codegen::set_cache_dir). nullopt when unset (then $HOME/.cache/kiln); an empty value
// (KILN_CACHE_DIR=) is returned as "" and disables the disk cache.
std::optional<std::string> cache_dir();

// KILN_TARGET_CPU=native|x86-64-v2|x86-64-v3|x86-64-v4|<LLVM CPU name>: the CPU JIT kernels are
// generated for (codegen/target.h; API: codegen::set_target_cpu). nullopt when unset or empty
// (then native). codegen checks the value.
std::optional<std::string> target_cpu();

// HOME: the user's home directory (the default cache directory is $HOME/.cache/kiln); nullopt
// when unset or empty.
std::optional<std::string> home_dir();

// KILN_EXECUTION_MODE: "compiled" or "reference", how traced functions run by default
// (API: kiln::set_default_execution_mode); nullopt when unset. The frontend checks the value.
std::optional<std::string> execution_mode();

// KILN_PROFILE=trace.json: profile the whole run (runtime/profiler.h; API: start_profiling /
// stop_profiling): at exit the Chrome trace is written to this path and the per-step table is
// printed to stderr. nullopt when unset or empty.
std::optional<std::string> profile_path();

// ---- data-parallel training (distributed/distributed.h)

// KILN_DISTRIBUTED_TIMEOUT=SECONDS: how long a collective waits for the other ranks before the
// job is stopped (API: distributed::Options::timeout_seconds). nullopt when unset; kiln::Error
// on a value that is not a positive number.
std::optional<double> distributed_timeout();

// KILN_BUCKET_BYTES=N: the most bytes of gradients one all_reduce sum covers in a compiled
// step (gradient buckets, codegen/memory_plan.h; API: codegen::set_bucket_bytes); 0: every
// all_reduce sums alone. nullopt when unset (then 1 MiB); kiln::Error on a value that is not a
// non-negative integer.
std::optional<int64_t> bucket_bytes();

// Whether an MPI launcher started this process: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun),
// PMIX_RANK or PMI_RANK is set.
bool launched_by_mpi();

// ---- graph optimization (passes/pipeline.h; API: passes::PipelineOptions)

// KILN_DISABLE_PASSES=a,b: names of passes the pass pipeline skips (empty when unset). Blank
// items are dropped; the pipeline rejects names it does not know.
std::vector<std::string> disabled_passes();

// KILN_VERIFY: "1" runs the IR verifier after every pass that changed a graph, "0" never;
// nullopt when unset (then debug builds verify and release builds do not). Any other value is
// a kiln::Error.
std::optional<bool> verify();

// KILN_DUMP_IR=DIR: directory where the pass pipeline writes the IR before and after passes;
// nullopt when unset.
std::optional<std::string> dump_ir_dir();

// KILN_REPORT=DIR: directory where every compiled function writes its step report
// (frontend/function/report.h); nullopt when unset.
std::optional<std::string> report_dir();

// KILN_DUMP_PASSES=REGEX: only passes whose name matches REGEX (std::regex_search, ECMAScript)
// are dumped; nullopt when unset (every pass).
std::optional<std::string> dump_passes_regex();

}  // namespace kiln::runtime::knobs
