// The attention kernels' query blocks: those in use, and their measurement on this machine
// (contract: attention.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels/attention.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Array random_operand(const Shape& shape, uint32_t seed) {
  Array a = Array::empty(DType::f32, shape);
  std::mt19937 rng{seed};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.size(); ++i) p[i] = normal(rng);
  return a;
}

// One attention problem [heads, batch, length, dim] (self-attention: q, k, v alike) with its
// gradient's operands and outputs.
struct Case {
  std::vector<Array> forward_in, grad_in;
  Array out, grads;
  Attrs attrs;

  Case(int64_t heads, int64_t batch, int64_t length, int64_t dim, bool causal, uint32_t seed) {
    const Shape x{heads, batch, length, dim};
    forward_in = {random_operand(x, seed), random_operand(x, seed + 1),
                  random_operand(x, seed + 2)};
    grad_in = forward_in;
    grad_in.push_back(random_operand(x, seed + 3));
    out = Array::empty(DType::f32, x);
    grads = Array::empty(DType::f32, Shape{heads, batch, 3 * length, dim});
    attrs = Attrs{{"scale", 1.0 / std::sqrt(double(dim))}, {"causal", causal}};
  }

  // The fastest forward + gradient call under `blocks`, repeated for at least `slice` seconds.
  double time(const AttentionBlocks& blocks, double slice) {
    double best = 1e30;
    const Clock::time_point t0 = Clock::now();
    do {
      const Clock::time_point c0 = Clock::now();
      attention_with_blocks(forward_in, attrs, out, blocks);
      attention_grad_with_blocks(grad_in, attrs, grads, blocks);
      best = std::min(best, elapsed_since(c0));
    } while (elapsed_since(t0) < slice);
    return best;
  }
};

// The `kiln bench` transformer block's heads, and longer sequences (bench/attention_bench.cc's
// two shapes).
std::vector<Case> cases(bool causal) {
  std::vector<Case> out;
  out.emplace_back(4, 16, 64, 32, causal, 11);
  out.emplace_back(2, 4, 512, 64, causal, 23);
  return out;
}

// The cases' times under `blocks`, each relative to its `base` time (so that every shape
// weighs the same, however long it runs).
double relative_time(std::vector<Case>& cs, const std::vector<double>& base,
                     const AttentionBlocks& blocks, double slice) {
  double total = 0;
  for (size_t i = 0; i < cs.size(); ++i) total += cs[i].time(blocks, slice) / base[i];
  return total / double(cs.size());
}

}  // namespace

AttentionBlocks attention_blocks() {
  const gemm_detail::MicroKernels* mk = gemm_detail::active_microkernels();
  if (mk == nullptr) return {};
  const std::optional<gemm_detail::TunedAttention> tuned = gemm_detail::tuned_attention(*mk);
  if (!tuned) return {};
  return AttentionBlocks{tuned->query_block, tuned->causal_query_block};
}

AttentionTuneReport tune_attention_blocks(const gemm_detail::TuneOptions& o) {
  const int saved_threads = num_threads();
  set_num_threads(1);
  struct Restore {
    int threads;
    ~Restore() { set_num_threads(threads); }
  } restore{saved_threads};

  AttentionTuneReport report;
  AttentionBlocks best;
  report.start = best;
  // The plain block on plain attention, the causal one on causal attention: each timed with
  // every candidate against the current best, interleaved, the fastest kept if it beats the best
  // by min_gain.
  for (const bool causal : {false, true}) {
    std::vector<Case> cs = cases(causal);
    std::vector<double> base;
    for (Case& c : cs) base.push_back(c.time(best, o.slice_seconds));
    int64_t& field = causal ? best.causal : best.query;
    std::vector<double> times(std::size(gemm_detail::kAttentionQueryBlocks), 1e30);
    double best_t = 1e30;
    for (int r = 0; r < std::max(1, o.rounds); ++r) {
      best_t = std::min(best_t, relative_time(cs, base, best, o.slice_seconds));
      for (size_t i = 0; i < times.size(); ++i) {
        const int64_t rows = gemm_detail::kAttentionQueryBlocks[i];
        if (rows == field) continue;
        AttentionBlocks candidate = best;
        (causal ? candidate.causal : candidate.query) = rows;
        times[i] = std::min(times[i], relative_time(cs, base, candidate, o.slice_seconds));
      }
    }
    report.candidates += int(times.size()) - 1;
    std::string& timed = causal ? report.causal_times : report.plain_times;
    for (size_t i = 0; i < times.size(); ++i)
      timed += fmt::format(
          "{}{} rows {:.2f}", i ? ", " : "", gemm_detail::kAttentionQueryBlocks[i],
          (gemm_detail::kAttentionQueryBlocks[i] == field ? best_t : times[i]) / best_t);
    const size_t winner = size_t(std::min_element(times.begin(), times.end()) - times.begin());
    double& gain = causal ? report.causal_gain : report.plain_gain;
    if (times[winner] * o.min_gain < best_t) {
      field = gemm_detail::kAttentionQueryBlocks[winner];
      gain = best_t / times[winner];
    }
  }
  report.chosen = best;
  if (o.progress)
    o.progress(fmt::format(
        "attention query blocks {} / causal {} -> {} / causal {}: {:.2f}x / {:.2f}x ({} "
        "candidates; times over the default's: plain {}; causal {})",
        report.start.query, report.start.causal, report.chosen.query, report.chosen.causal,
        report.plain_gain, report.causal_gain, report.candidates, report.plain_times,
        report.causal_times));
  return report;
}

}  // namespace kiln::runtime
