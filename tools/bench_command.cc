// `kiln bench [--json FILE] [--filter REGEX] [--repetitions N] [--threads N]`: runs the
// bench/suite/suite.h workloads in this process, each eagerly, compiled and hand-written, and
// prints medians, ratios and the limits that apply: the time of the work's GEMMs with Eigen
// (or of a copy of its bytes), and its hardware limit: its flops at the machine's FMA peak
// (runtime/machine_peak.h, measured in this process at the same thread count) or its bytes at
// the copy's bandwidth.
//
// Method, per workload: every variant is called three times first (warm-up: the compiled
// variant traces and JIT-compiles on its first call; compile time is reported apart); the
// third call of eager and compiled is also the memory measurement: Storage bytes retained
// since before the first call (optimizer slots, executable arenas and pools) plus the peak
// above the live bytes during that call (runtime::Storage::reset_peak_bytes / peak_bytes).
// The hand-written baseline does not allocate through Storage and has no memory column. Then
// `repetitions` rounds, each timing every variant once, interleaved (eager, compiled,
// hand-written, limit) so machine noise spreads over all of them; one sample is the mean of
// enough back-to-back calls to last about --min-sample-ms. A workload whose hardware limit is
// its flops also times the FMA peak loop once per round (for about --min-sample-ms, after the
// variants), so that each round has its own hardware limit beside its compiled sample. Reported:
// median, min and max of the samples; ratios of medians, except the fraction of the hardware
// limit: the median over the rounds of that round's limit over its compiled sample (a slow phase
// of a shared machine weighs on both sides of each ratio, not on whichever ran during it). "compile
// ms" is cold when any kernel was compiled (missed the in-memory and disk caches,
// codegen/object_cache.h), warm when all came from the caches.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "bench/suite/suite.h"
#include "kiln/codegen/host_target.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/kiln.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/machine_peak.h"
#include "tools/commands.h"
#include "tools/json_report.h"

namespace kiln::tools {
namespace {

using Clock = std::chrono::steady_clock;
using runtime::Storage;

struct BenchArgs {
  std::string json, filter = ".*";
  int repetitions = 5, threads = 0;
  double min_sample_ms = 20;
};

struct Stats {
  std::vector<double> samples_ms;
  double median = 0, min = 0, max = 0;
  void finish() {
    std::vector<double> s = samples_ms;
    std::sort(s.begin(), s.end());
    min = s.front(), max = s.back();
    median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  }
};

struct Memory {
  int64_t retained = 0, step_peak = 0;
  int64_t total() const { return retained + step_peak; }
};

double seconds_of(const std::function<void()>& f) {
  auto start = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Variant {
  std::string name;
  std::function<void()> run;
  int iterations = 1;
  double first_call_s = 0;
  Memory memory{};
  Stats stats{};
};

std::string time_text(const Stats& s) {
  if (s.samples_ms.empty()) return "-";
  double spread = s.median > 0 ? 50.0 * (s.max - s.min) / s.median : 0;
  return fmt::format("{:.3f} ±{:.0f}%", s.median, spread);
}

std::string ratio_text(double r) { return r > 0 ? fmt::format("{:.2f}", r) : "-"; }

std::string mib(int64_t bytes) { return fmt::format("{:.1f}", double(bytes) / (1 << 20)); }

nlohmann::json stats_json(const Stats& s) {
  if (s.samples_ms.empty()) return nullptr;
  return {
      {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"samples_ms", s.samples_ms}};
}

nlohmann::json memory_json(const Memory& m) {
  return {
      {"retained_bytes", m.retained}, {"step_peak_bytes", m.step_peak}, {"total_bytes", m.total()}};
}

struct Result {
  bench::Workload w;
  std::vector<Variant> v;  // eager, compiled, hand_written, limit
  double compile_s = 0;
  // The hardware limit of each round: flops at that round's FMA peak, or the copy's time
  // (memory); peak_ms is their median.
  Stats hardware_limit{};
  double peak_ms = 0;
  codegen::CacheStats cache{};  // kernel cache counters during the warm-up
  double ratio(int num, int den) const {
    const Stats &a = v[size_t(num)].stats, &b = v[size_t(den)].stats;
    return a.samples_ms.empty() || b.samples_ms.empty() || b.median <= 0 ? 0 : a.median / b.median;
  }
  // The fraction of its hardware limit the compiled variant reaches: the median over the rounds
  // of the round's hardware limit over its compiled sample (0 when either is missing).
  double peak_fraction() const {
    const std::vector<double>& c = v[1].stats.samples_ms;
    const std::vector<double>& h = hardware_limit.samples_ms;
    if (c.empty() || c.size() != h.size()) return 0;
    Stats pairs;
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] > 0 && h[i] > 0) pairs.samples_ms.push_back(h[i] / c[i]);
    if (pairs.samples_ms.size() != c.size()) return 0;
    pairs.finish();
    return pairs.median;
  }
  // The same fraction from the fastest samples: the fastest round's hardware limit over the
  // fastest compiled sample (0 when either is missing). On a shared machine whose slow phases
  // come in bursts, the median says what a run usually gets and this what the step can do.
  double peak_fraction_fastest() const {
    if (peak_fraction() <= 0) return 0;
    return hardware_limit.min / v[1].stats.min;
  }
};

// `peak_gflops`: one measurement of the FMA peak that bounds the workload (float32, or the bf16
// instruction's), lasting about the given seconds; 0 where there is none.
Result run_workload(const std::string& name, const BenchArgs& a,
                    const std::function<double(double)>& peak_gflops) {
  Result r{bench::make_workload(name, num_threads()), {}, 0};
  r.v = {{"eager", r.w.eager},
         {"compiled", r.w.compiled},
         {"hand_written", r.w.baseline},
         {"limit", r.w.limit}};
  const codegen::CacheStats c0 = codegen::cache_stats();
  for (Variant& v : r.v) {
    if (!v.run) continue;
    const int64_t live_before = Storage::live_bytes();
    v.first_call_s = seconds_of(v.run);
    v.run();
    Storage::reset_peak_bytes();
    const int64_t live = Storage::live_bytes();
    const double t = seconds_of(v.run);
    v.memory = {live - live_before, Storage::peak_bytes() - live};
    v.iterations = std::clamp(int(std::ceil(a.min_sample_ms * 1e-3 / std::max(t, 1e-9))), 1, 10000);
  }
  r.compile_s = r.w.compile_seconds();
  const codegen::CacheStats c1 = codegen::cache_stats();
  r.cache = {c1.memory_hits - c0.memory_hits, c1.disk_hits - c0.disk_hits, c1.misses - c0.misses,
             c1.corrupt - c0.corrupt, c1.disk_writes - c0.disk_writes};
  for (int rep = 0; rep < a.repetitions; ++rep) {
    for (Variant& v : r.v) {
      if (!v.run) continue;
      const double s = seconds_of([&] {
        for (int i = 0; i < v.iterations; ++i) v.run();
      });
      // The memory limit: the copy's time scaled to the bytes the work must move.
      const double scale =
          v.name == "limit" && r.w.limit_kind == "memory" ? r.w.limit_bytes / r.w.copy_bytes : 1.0;
      v.stats.samples_ms.push_back(s * 1e3 * scale / v.iterations);
    }
    if (r.w.limit_kind == "gemm") {
      const double gflops = peak_gflops(a.min_sample_ms * 1e-3);
      if (gflops > 0) r.hardware_limit.samples_ms.push_back(r.w.limit_flops / (gflops * 1e6));
    } else if (!r.v[3].stats.samples_ms.empty()) {
      r.hardware_limit.samples_ms.push_back(r.v[3].stats.samples_ms.back());
    }
  }
  for (Variant& v : r.v)
    if (v.run) v.stats.finish();
  if (!r.hardware_limit.samples_ms.empty()) {
    r.hardware_limit.finish();
    r.peak_ms = r.hardware_limit.median;
  }
  return r;
}

void print_table(const std::vector<Result>& results, std::ostream& os) {
  const std::vector<std::string> head = {
      "workload",   "eager ms",  "compiled ms", "hand ms",   "limit ms",   "limit",      "peak ms",
      "comp/eager", "comp/hand", "limit/comp",  "peak/comp", "compile ms", "mem MiB e/c"};
  std::vector<std::vector<std::string>> rows = {head};
  for (const Result& r : results) {
    rows.push_back(
        {r.w.name, time_text(r.v[0].stats), time_text(r.v[1].stats), time_text(r.v[2].stats),
         time_text(r.v[3].stats), r.w.limit_kind == "gemm" ? "GEMMs (Eigen)" : "copy (memcpy)",
         r.peak_ms > 0 ? fmt::format("{:.3f}", r.peak_ms) : "-", ratio_text(r.ratio(1, 0)),
         ratio_text(r.ratio(1, 2)), ratio_text(r.ratio(3, 1)), ratio_text(r.peak_fraction()),
         fmt::format("{:.0f} {}", r.compile_s * 1e3, r.cache.misses ? "cold" : "warm"),
         mib(r.v[0].memory.total()) + " / " + mib(r.v[1].memory.total())});
  }
  std::vector<size_t> width(head.size(), 0);
  // Display width: "±" is two bytes in UTF-8.
  auto cols = [](const std::string& s) {
    return s.size() - size_t(std::count(s.begin(), s.end(), '\xc2'));
  };
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], cols(row[i]));
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < rows[k].size(); ++i) {
      const std::string& cell = rows[k][i];
      std::string pad(width[i] - cols(cell), ' ');
      line += i == 0 ? cell + pad : "  " + pad + cell;
    }
    os << line << "\n";
    if (k == 0) os << std::string(cols(line), '-') << "\n";
  }
}

void print_targets(const std::vector<Result>& results, std::ostream& os) {
  auto met = [](bool ok) { return ok ? "met" : "MISSED"; };
  for (const Result& r : results) {
    if (r.w.name == "mlp_784_256_256_10_b64") {
      const double speedup = 1 / r.ratio(1, 0), vs_hand = r.ratio(1, 2);
      os << fmt::format(
          "target {}: compiled {:.2f}x faster than eager (>= 3x: {}), {:.2f}x the "
          "hand-written time (<= 1.3x: {})\n",
          r.w.name, speedup, met(speedup >= 3), vs_hand, met(vs_hand <= 1.3));
    }
    // Issue 21: fractions of the hardware limit (flops at the measured FMA peak).
    const std::pair<const char*, double> hardware_targets[] = {
        {"mlp_1024_1024_1024_10_b512", 0.8},
        {"cnn_b64", 0.7},
        {"transformer_block_d128_h4_seq64_b16", 0.6},
        {"lstm_2x256_seq64_b32", 0.6}};
    for (const auto& [name, target] : hardware_targets)
      if (r.w.name == name && r.peak_fraction() > 0)
        os << fmt::format(
            "target {}: compiled at {:.0f}% of its hardware limit (flops at the FMA peak; median "
            "of the rounds; fastest samples {:.0f}%; >= {:.0f}%: {})\n",
            r.w.name, 100 * r.peak_fraction(), 100 * r.peak_fraction_fastest(), 100 * target,
            met(r.peak_fraction() >= target));
    // Issue 16: fractions of the Eigen GEMM limit (and of the copy roofline).
    const std::pair<const char*, double> limit_targets[] = {
        {"mlp_1024_1024_1024_10_b512", 0.85},
        {"cnn_b64", 0.85},
        {"transformer_block_d128_h4_seq64_b16", 0.75},
        {"lstm_2x256_seq64_b32", 0.7},
        {"layernorm_gelu_residual", 0.8}};
    for (const auto& [name, target] : limit_targets)
      if (r.w.name == name)
        os << fmt::format("target {}: compiled at {:.0f}% of the {} limit (>= {:.0f}%: {})\n",
                          r.w.name, 100 * r.ratio(3, 1),
                          r.w.limit_kind == "gemm" ? "Eigen GEMM" : "copy", 100 * target,
                          met(r.ratio(3, 1) >= target));
    if (r.w.name == "lstm_2x256_seq64_b32")
      os << fmt::format("target {}: compiled {:.2f}x the hand-written time (<= 1.05x: {})\n",
                        r.w.name, r.ratio(1, 2), met(r.ratio(1, 2) <= 1.05));
    if (r.w.name == "softmax_xent")
      os << fmt::format("target {}: compiled {:.2f}x the hand-written time (<= 1.3x: {})\n",
                        r.w.name, r.ratio(1, 2), met(r.ratio(1, 2) <= 1.3));
    const int64_t e = r.v[0].memory.total(), c = r.v[1].memory.total();
    os << fmt::format("target {}: compiled step memory {} MiB vs eager {} MiB (<=: {})\n", r.w.name,
                      mib(c), mib(e), met(c <= e));
  }
}

nlohmann::json results_json(const std::vector<Result>& results, const BenchArgs& a,
                            const runtime::FmaPeak& peak) {
  nlohmann::json out = environment_json();
  out.update(nlohmann::json{
      {"fma_peak",
       {{"isa", peak.isa}, {"threads", peak.threads}, {"gflops_per_second", peak.gflops}}},
      {"repetitions", a.repetitions},
      {"min_sample_ms", a.min_sample_ms},
      {"workloads", nlohmann::json::array()}});
  for (const Result& r : results) {
    nlohmann::json w = {{"name", r.w.name},
                        {"description", r.w.description},
                        {"limit_kind", r.w.limit_kind},
                        {"compile_seconds", r.compile_s},
                        {"kernel_cache",
                         {{"kernels_compiled", r.cache.misses},
                          {"disk_hits", r.cache.disk_hits},
                          {"memory_hits", r.cache.memory_hits}}}};
    if (r.w.limit_kind == "gemm") {
      w["limit_flops"] = r.w.limit_flops;
      w["limit_gflops_per_second"] = r.w.limit_flops / (r.v[3].stats.median * 1e6);
    } else {
      w["limit_bytes"] = r.w.limit_bytes;
      w["copy_bytes"] = r.w.copy_bytes;
      w["copy_gb_per_second"] = r.w.limit_bytes / (r.v[3].stats.median * 1e6);
    }
    for (const Variant& v : r.v) {
      nlohmann::json j = stats_json(v.stats);
      if (!j.is_null()) {
        j["iterations_per_sample"] = v.iterations;
        j["first_call_seconds"] = v.first_call_s;
        if (v.name == "eager" || v.name == "compiled") j["memory"] = memory_json(v.memory);
      }
      w["variants"][v.name] = j;
    }
    auto ratio = [](double x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
    w["ratios"] = {{"compiled_over_eager", ratio(r.ratio(1, 0))},
                   {"compiled_over_hand_written", ratio(r.ratio(1, 2))},
                   {"limit_over_compiled", ratio(r.ratio(3, 1))},
                   {"limit_over_hand_written", ratio(r.ratio(3, 2))},
                   {"hardware_limit_over_compiled", ratio(r.peak_fraction())},
                   {"hardware_limit_over_compiled_fastest", ratio(r.peak_fraction_fastest())}};
    w["hardware_limit_ms"] = r.peak_ms > 0 ? nlohmann::json(r.peak_ms) : nlohmann::json(nullptr);
    w["hardware_limit"] = stats_json(r.hardware_limit);
    out["workloads"].push_back(w);
  }
  return out;
}

void run_bench(const BenchArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  std::regex filter;
  try {
    filter = std::regex(a.filter);
  } catch (const std::regex_error& e) {
    throw Error(fmt::format("--filter {}: not a regular expression ({})", a.filter, e.what()));
  }
  std::vector<std::string> names;
  for (const std::string& n : bench::workload_names())
    if (std::regex_search(n, filter)) names.push_back(n);
  if (names.empty())
    throw Error(fmt::format("--filter {} selects no workload (have: {})", a.filter,
                            fmt::join(bench::workload_names(), ", ")));
  std::cout << fmt::format("kiln {} bench: {} threads, host {}, load average {}\n", kVersion,
                           num_threads(), codegen::host_cpu_name(), load_average());
  const runtime::FmaPeak peak = runtime::measure_fma_peak(num_threads(), 0.1, 5);
  std::cout << fmt::format("FMA peak: {:.1f} GFLOP/s float32 ({}, {} threads at once; best of 5)\n",
                           peak.gflops, peak.isa, peak.threads);
  // The bf16 workloads' limit: the peak of the instruction their products run.
  std::optional<runtime::FmaPeak> bf16_peak;
  for (const std::string& n : names)
    if (!bf16_peak && n.ends_with("_bf16")) {
      // (On the float32 kernels it is the loop just measured.)
      bf16_peak = runtime::gemm_bf16_kernels() == "float32"
                      ? peak
                      : runtime::measure_bf16_peak(num_threads(), 0.1, 5);
      std::cout << fmt::format("bf16 peak: {:.1f} GFLOP/s ({} kernels: {}, {} threads at once)\n",
                               bf16_peak->gflops, runtime::gemm_bf16_kernels(), bf16_peak->isa,
                               bf16_peak->threads);
    }
  // Each round's hardware limit: the loop measured above, once, for about a sample's time.
  auto float32_peak = [&](double seconds) {
    return peak.gflops > 0 ? runtime::measure_fma_peak(num_threads(), seconds, 1).gflops : 0.0;
  };
  auto bf16_round_peak = [&](double seconds) {
    if (bf16_peak->gflops <= 0) return 0.0;
    return runtime::gemm_bf16_kernels() == "float32"
               ? float32_peak(seconds)
               : runtime::measure_bf16_peak(num_threads(), seconds, 1).gflops;
  };
  std::vector<Result> results;
  for (const std::string& n : names) {
    std::cerr << "running " << n << "...\n";
    if (n.ends_with("_bf16"))
      results.push_back(run_workload(n, a, bf16_round_peak));
    else
      results.push_back(run_workload(n, a, float32_peak));
  }
  std::cout << fmt::format(
      "medians of {} interleaved samples (±: half the min-max spread), per call in ms; peak ms: "
      "the flops at the FMA peak timed in each round (or the copy's time), peak/comp: the median "
      "of the rounds' ratios\n",
      a.repetitions);
  print_table(results, std::cout);
  print_targets(results, std::cout);
  if (!a.json.empty()) write_json_report(a.json, results_json(results, a, peak));
}

}  // namespace

void add_bench_options(CLI::App& cmd) {
  auto args = std::make_shared<BenchArgs>();
  cmd.add_option("--json", args->json, "write every number to this JSON file (atomically)");
  cmd.add_option("--filter", args->filter, "run the workloads whose name matches this regex");
  cmd.add_option("--repetitions", args->repetitions, "timed samples per variant")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--min-sample-ms", args->min_sample_ms, "calls per sample last about this long")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--threads", args->threads, "kiln's (and the baselines') thread count")
      ->check(CLI::PositiveNumber)
      ->default_str("KILN_NUM_THREADS, else the hardware threads");
  cmd.callback([args] { run_bench(*args); });
}

}  // namespace kiln::tools
