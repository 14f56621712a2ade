// The CPU this process runs on: its identity, vector ISA and cache sizes, read once (CPUID and
// Linux sysfs). The GEMM engine derives its blocking from these (runtime/gemm_plan.h) and keys
// its tuned table by cpu_key() (runtime/gemm_tuning.h).
//
// Contract: cpu_info() never fails. Cache sizes come from sysfs
// (/sys/devices/system/cpu/cpu0/cache), else from CPUID's deterministic cache leaves (Intel leaf
// 4, AMD leaf 0x8000001D), else from conservative defaults (32 KiB 8-way L1d, 1 MiB L2, 2 MiB of
// L3 per core); `cache_source` says which.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::runtime {

struct CacheLevel {
  int64_t bytes = 0;  // capacity of one instance
  int ways = 0;       // associativity (0: unknown)
  int shared_by = 1;  // logical CPUs sharing one instance
  int64_t per_core() const { return bytes / (shared_by > 0 ? shared_by : 1); }
};

struct CpuInfo {
  std::string vendor;                       // "GenuineIntel", "AuthenticAMD", ... (CPUID leaf 0)
  std::string model_name;                   // the brand string, trimmed ("Intel(R) Xeon(R) ...")
  int family = 0, model = 0, stepping = 0;  // display family/model (extended fields folded in)
  bool avx2 = false, fma = false, avx512f = false, avx512_bf16 = false, amx_bf16 = false;
  CacheLevel l1d, l2, l3;
  std::string cache_source;  // "sysfs", "cpuid" or "defaults"

  // One line: "GenuineIntel family 6 model 85 stepping 7 (Intel(R) Xeon(R) ...); L1d 32 KiB
  // 8-way, L2 1 MiB, L3 35.8 MiB shared by 2 (sysfs); avx512f avx2 fma".
  std::string describe() const;
};

// The host CPU, read on first use (thread-safe).
const CpuInfo& cpu_info();

// A file-name-safe key naming this CPU model: vendor, family, model, stepping and the brand
// string (e.g. "GenuineIntel-6-85-7-Intel-R-Xeon-R-Processor-2.50GHz"). Tuned tables are kept
// per key.
std::string cpu_key(const CpuInfo& cpu);

}  // namespace kiln::runtime
