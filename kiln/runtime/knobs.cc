#include "kiln/runtime/knobs.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "kiln/ir/error.h"

namespace kiln::runtime::knobs {

namespace {

// The integer value of environment variable `name`, in [lo, hi]; nullopt when unset or empty;
// kiln::Error `NAME="value" is not <what>: <advice>` for anything else.
std::optional<int64_t> integer_knob(const char* name, int64_t lo, int64_t hi, const char* what,
                                    const char* advice) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno == ERANGE || n < lo || n > hi)
    throw Error(fmt::format("{}=\"{}\" is not {}: {}", name, v, what, advice));
  return int64_t(n);
}

}  // namespace

std::optional<int> num_threads() {
  const std::optional<int64_t> n =
      integer_knob("KILN_NUM_THREADS", 1, 4096, "a thread count",
                   "set it to a positive integer such as 1 or 2, or unset it");
  return n ? std::optional<int>(int(*n)) : std::nullopt;
}

std::optional<int64_t> worker_spin_us() {
  return integer_knob("KILN_WORKER_SPIN_US", 0, 1000000, "a time in microseconds",
                      "set it to an integer from 0 (workers sleep as oneTBB decides) to "
                      "1000000, or unset it");
}

std::optional<double> distributed_timeout() {
  const char* v = std::getenv("KILN_DISTRIBUTED_TIMEOUT");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  if (*end != '\0' || !(s > 0) || s > 1e7)
    throw Error(
        fmt::format("KILN_DISTRIBUTED_TIMEOUT=\"{}\" is not a number of seconds: set it to a "
                    "positive number such as 60, or unset it (default 300)",
                    v));
  return s;
}

std::optional<int64_t> bucket_bytes() {
  return integer_knob("KILN_BUCKET_BYTES", 0, int64_t(1) << 40, "a number of bytes",
                      "set it to 0 (no buckets) or a positive integer such as 1048576, or unset "
                      "it (default 1 MiB)");
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v && *v) return true;
  }
  return false;
}

std::string log_level() {
  const char* v = std::getenv("KILN_LOG");
  return v && *v ? std::string(v) : std::string("warning");
}

std::optional<std::string> gemm_kernels() {
  const char* v = std::getenv("KILN_GEMM");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> gemm_bf16_kernels() {
  const char* v = std::getenv("KILN_GEMM_BF16");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> data_dir() {
  const char* v = std::getenv("KILN_DATA_DIR");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> execution_mode() {
  const char* v = std::getenv("KILN_EXECUTION_MODE");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> cache_dir() {
  const char* v = std::getenv("KILN_CACHE_DIR");
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> target_cpu() {
  const char* v = std::getenv("KILN_TARGET_CPU");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> home_dir() {
  const char* v = std::getenv("HOME");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> profile_path() {
  const char* v = std::getenv("KILN_PROFILE");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::vector<std::string> disabled_passes() {
  std::vector<std::string> names;
  const char* v = std::getenv("KILN_DISABLE_PASSES");
  if (!v) return names;
  std::string_view s(v);
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) names.emplace_back(item);
  }
  return names;
}

std::optional<bool> verify() {
  const char* v = std::getenv("KILN_VERIFY");
  if (!v || !*v) return std::nullopt;
  std::string_view s(v);
  if (s == "1") return true;
  if (s == "0") return false;
  throw Error(fmt::format(
      "KILN_VERIFY=\"{}\" is not 0 or 1: set KILN_VERIFY=1 to verify the IR after every pass "
      "that changes it, KILN_VERIFY=0 to never verify, or unset it",
      v));
}

std::optional<std::string> dump_ir_dir() {
  const char* v = std::getenv("KILN_DUMP_IR");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> report_dir() {
  const char* v = std::getenv("KILN_REPORT");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> dump_passes_regex() {
  const char* v = std::getenv("KILN_DUMP_PASSES");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

}  // namespace kiln::runtime::knobs
