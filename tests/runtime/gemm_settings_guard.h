// Restores the float32 and bf16 GEMM kernel sets and kiln's thread count at scope exit, for
// tests that switch them; and the pairs of kernel sets this CPU runs.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/error.h"

#include "kiln/runtime/gemm.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {

class GemmSettingsGuard {
 public:
  GemmSettingsGuard()
      : kernels_(gemm_kernels()), bf16_(gemm_bf16_kernels()), threads_(num_threads()) {}
  ~GemmSettingsGuard() {
    set_gemm_kernels(kernels_);
    set_gemm_bf16_kernels(bf16_);
    set_num_threads(threads_);
  }
  GemmSettingsGuard(const GemmSettingsGuard&) = delete;
  GemmSettingsGuard& operator=(const GemmSettingsGuard&) = delete;

 private:
  std::string kernels_, bf16_;
  int threads_;
};

// The (float32 set, bf16 set) pairs among `float32_sets` and every bf16 kernel set that this
// CPU runs (set_gemm_kernels / set_gemm_bf16_kernels accept them).
inline std::vector<std::pair<std::string, std::string>> runnable_kernel_set_pairs(
    std::initializer_list<const char*> float32_sets) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const char* f32 : float32_sets)
    for (const char* bf16 :
         {"float32", "avx512bf16-emulated", "amx-emulated", "avx512bf16", "amx"}) {
      try {
        GemmSettingsGuard guard;
        set_gemm_kernels(f32);
        set_gemm_bf16_kernels(bf16);
        pairs.emplace_back(f32, bf16);
      } catch (const Error&) {  // this CPU cannot run them
      }
    }
  return pairs;
}

}  // namespace kiln::runtime
