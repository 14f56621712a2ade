// KILN_CACHE_DIR pointed at a fresh directory for one test, for tests that write GEMM tuning
// tables; restored at scope exit, with the tables of the given kernel sets read again.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/gemm_tuning.h"

namespace kiln::runtime::gemm_detail {

class TuningCacheDirGuard {
 public:
  // `name` names the directory; `sets`: the kernel sets whose tuning is reread at the end.
  TuningCacheDirGuard(const std::string& name, std::vector<const MicroKernels*> sets)
      : dir_(std::filesystem::temp_directory_path() /
             fmt::format("kiln_gemm_tuning_{}_{}", name, ::getpid())),
        sets_(std::move(sets)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const char* old = std::getenv("KILN_CACHE_DIR");
    if (old) saved_ = old;
    had_ = old != nullptr;
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  }
  ~TuningCacheDirGuard() {
    if (had_)
      ::setenv("KILN_CACHE_DIR", saved_.c_str(), 1);
    else
      ::unsetenv("KILN_CACHE_DIR");
    for (const MicroKernels* mk : sets_) reload_gemm_tuning(*mk);
    std::filesystem::remove_all(dir_);
  }
  TuningCacheDirGuard(const TuningCacheDirGuard&) = delete;
  TuningCacheDirGuard& operator=(const TuningCacheDirGuard&) = delete;

 private:
  std::filesystem::path dir_;
  std::vector<const MicroKernels*> sets_;
  std::string saved_;
  bool had_ = false;
};

}  // namespace kiln::runtime::gemm_detail
