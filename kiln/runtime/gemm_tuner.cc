// The GEMM autotuner (contract and search: gemm_tuner.h).
#include "kiln/runtime/gemm_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>
#include <utility>

#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/file_io.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/huge_alloc.h"
#include "kiln/runtime/machine_peak.h"
#include "kiln/runtime/threading.h"
#include "kiln/version.h"

namespace kiln::runtime::gemm_detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

Buffer random_buffer(int64_t count, uint64_t seed) {
  Buffer b(static_cast<float*>(aligned_alloc_huge(size_t(std::max<int64_t>(count, 1)) * 4)));
  if (!b) throw Error(fmt::format("kiln tune: out of memory for {} floats", count));
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < count; ++i) b.get()[i] = u(rng);
  return b;
}

// Random bf16 bits (float32 values in [-1, 1) with their lower half cut off).
std::vector<uint16_t> random_bf16(int64_t count, uint64_t seed) {
  std::vector<uint16_t> bits(size_t(std::max<int64_t>(count, 1)));
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (uint16_t& b : bits) b = uint16_t(std::bit_cast<uint32_t>(u(rng)) >> 16);
  return bits;
}

// One product's operands (float32, or bf16 for a pair kernel set: GemmShape::a_bf16, b_bf16),
// and its timing under a plan.
struct Problem {
  GemmShape shape;
  Buffer a, b, c;
  std::vector<uint16_t> a16, b16;
  Problem(const GemmShape& s, bool bf16) : shape(s) {
    shape.threads = 1;
    shape.epilogue = false;
    shape.a_bf16 = shape.b_bf16 = bf16;
    if (bf16) {
      a16 = random_bf16(s.m * s.k, 1);
      b16 = random_bf16(s.k * s.n, 2);
    } else {
      a = random_buffer(s.m * s.k, 1);
      b = random_buffer(s.k * s.n, 2);
    }
    c = random_buffer(s.m * s.n, 3);
  }
  double flops() const { return 2.0 * double(shape.m) * double(shape.n) * double(shape.k); }
  GemmShape on_threads(int threads) const {
    GemmShape s = shape;
    s.threads = threads;
    return s;
  }
  // The fastest call of `slice` seconds of calls, planned for `threads` threads (kiln's arena
  // must have them).
  double time(const MicroKernels& mk, const GemmParams& p, double slice, int threads) const {
    const GemmPlan plan = make_gemm_plan(mk, on_threads(threads), p);
    SgemmArgs g{shape.ta,
                shape.tb,
                shape.m,
                shape.n,
                shape.k,
                a.get(),
                shape.ta ? shape.m : shape.k,
                b.get(),
                shape.tb ? shape.k : shape.n,
                c.get(),
                shape.n,
                false};
    if (shape.a_bf16) g.a16 = a16.data();
    if (shape.b_bf16) g.b16 = b16.data();
    double best = 1e30;
    const Clock::time_point t0 = Clock::now();
    do {
      const Clock::time_point c0 = Clock::now();
      run_gemm(mk, plan, g);
      best = std::min(best, seconds_since(c0));
    } while (seconds_since(t0) < slice);
    return best;
  }
};

// A class: its shapes' problems and the best blocking so far.
struct ClassState {
  std::string name;
  std::vector<const Problem*> problems;
  GemmParams best;
  double best_seconds = 0;
};

// The narrowest product the class is tuned on (TunedClass::n_min).
int64_t narrowest_n(const ClassState& c) {
  int64_t n = c.problems.front()->shape.n;
  for (const Problem* p : c.problems) n = std::min(n, p->shape.n);
  return n;
}

double class_time(const MicroKernels& mk, const ClassState& c, const GemmParams& p, double slice,
                  int threads = 1) {
  double total = 0;
  for (const Problem* problem : c.problems) total += problem->time(mk, p, slice, threads);
  return total;
}

// Times `candidates` and the class's best interleaved (planned for `threads` threads); adopts
// the fastest candidate if it beats the best by min_gain. Returns the number of candidates timed.
int run_stage(const MicroKernels& mk, ClassState& c, const std::vector<GemmParams>& candidates,
              const TuneOptions& o, int threads = 1) {
  if (candidates.empty()) return 0;
  std::vector<double> times(candidates.size(), 1e30);
  double best = 1e30;
  for (int r = 0; r < std::max(1, o.rounds); ++r) {
    best = std::min(best, class_time(mk, c, c.best, o.slice_seconds, threads));
    for (size_t i = 0; i < candidates.size(); ++i)
      times[i] = std::min(times[i], class_time(mk, c, candidates[i], o.slice_seconds, threads));
  }
  const size_t winner = size_t(std::min_element(times.begin(), times.end()) - times.begin());
  c.best_seconds = best;
  if (times[winner] * o.min_gain < best) {
    c.best = candidates[winner];
    c.best_seconds = times[winner];
  }
  return int(candidates.size());
}

int64_t round16(double x) { return std::max<int64_t>(16, int64_t(x) / 16 * 16); }

bool same_blocking(const GemmParams& a, const GemmParams& b) {
  return a.kernel == b.kernel && a.kc == b.kc && a.nc == b.nc && a.b_ahead == b.b_ahead &&
         a.pack_b_min_rows == b.pack_b_min_rows && a.direct_a_max_cols == b.direct_a_max_cols &&
         a.min_task_panels == b.min_task_panels && a.row_calls == b.row_calls &&
         a.task_b_blocks == b.task_b_blocks;
}

// Whether two plans make the engine do the same thing (every decision; not where the blocking
// came from).
bool same_plan(const GemmPlan& a, const GemmPlan& b) {
  return a.kernel == b.kernel && a.back == b.back && a.back_blocks == b.back_blocks && a.m == b.m &&
         a.n == b.n && a.k == b.k && a.ta == b.ta && a.tb == b.tb && a.row_blocks == b.row_blocks &&
         a.col_blocks == b.col_blocks && a.a == b.a && a.b == b.b && a.kc == b.kc &&
         a.k_blocks == b.k_blocks && a.nc == b.nc && a.panel_rows == b.panel_rows &&
         a.b_ahead == b.b_ahead && a.row_calls == b.row_calls;
}

// Whether `p` plans some problem of class `c` differently from the class's best blocking, on
// `threads` threads.
bool changes_a_plan(const MicroKernels& mk, const ClassState& c, const GemmParams& p,
                    int threads = 1) {
  for (const Problem* problem : c.problems)
    if (!same_plan(make_gemm_plan(mk, problem->on_threads(threads), p),
                   make_gemm_plan(mk, problem->on_threads(threads), c.best)))
      return true;
  return false;
}

// Times `earlier` and the class's best once more side by side (`threads` threads) and goes back
// to `earlier` unless the best is faster (the stages' gains were noise). Returns the times of
// `earlier` and of the blocking kept.
std::pair<double, double> confirm(const MicroKernels& mk, ClassState& c, const GemmParams& earlier,
                                  const TuneOptions& o, int threads = 1) {
  double earlier_s = 1e30, best_s = 1e30;
  for (int r = 0; r < std::max(1, o.rounds); ++r) {
    earlier_s = std::min(earlier_s, class_time(mk, c, earlier, o.slice_seconds, threads));
    best_s = std::min(best_s, class_time(mk, c, c.best, o.slice_seconds, threads));
  }
  if (best_s > earlier_s) {
    c.best = earlier;
    best_s = earlier_s;
  }
  return {earlier_s, best_s};
}

void add_unique(std::vector<GemmParams>& list, const GemmParams& current, const GemmParams& p) {
  if (same_blocking(p, current)) return;
  for (const GemmParams& q : list)
    if (same_blocking(p, q)) return;
  list.push_back(p);
}

}  // namespace

std::vector<GemmParams> threshold_candidates(const GemmParams& p) {
  std::vector<GemmParams> out;
  for (double f : {0.5, 2.0}) {
    GemmParams q = p;
    q.pack_b_min_rows = std::max<int64_t>(1, int64_t(double(p.pack_b_min_rows) * f));
    out.push_back(q);
    q = p;
    q.direct_a_max_cols = int64_t(double(p.direct_a_max_cols) * f);  // 0 (never) stays 0
    out.push_back(q);
    q = p;
    q.min_task_panels = std::max<int64_t>(1, int64_t(double(p.min_task_panels) * f));
    out.push_back(q);
  }
  return out;
}

std::vector<GemmShape> tuning_shapes() {
  // m, k, n, ta, tb
  const int64_t shapes[][5] = {
      // MLP 1024 (batch 512) and its gradients; MLP 784 (batch 64)
      {512, 1024, 1024, 0, 0},
      {1024, 512, 1024, 1, 0},
      {512, 1024, 1024, 0, 1},
      {64, 784, 256, 0, 0},
      {784, 64, 256, 1, 0},
      // transformer block (16 x 64 tokens, d 128, feed-forward 512), attention scores
      {1024, 128, 384, 0, 0},
      {1024, 128, 512, 0, 0},
      {1024, 512, 128, 0, 0},
      {128, 1024, 512, 1, 0},
      {1024, 512, 128, 0, 1},
      {64, 32, 64, 0, 1},
      // LSTM 256 (batch 32, 64 steps): per step and hoisted over all steps
      {32, 256, 1024, 0, 0},
      {32, 1024, 256, 0, 1},
      {32, 1024, 256, 0, 0},
      {2048, 256, 1024, 0, 0},
      {256, 2048, 1024, 1, 0},
      {64, 2048, 1024, 1, 0},
      {2048, 1024, 256, 0, 1},
      // CNN (batch 64, 28 x 28): conv2 as im2col products, the dense layer's gradients
      {12544, 144, 32, 0, 0},
      {12544, 32, 144, 0, 1},
      {144, 12544, 32, 1, 0},
      {64, 10, 6272, 0, 1},
      {6272, 64, 10, 1, 0}};
  std::vector<GemmShape> out;
  for (const auto& s : shapes) out.push_back(GemmShape{s[0], s[2], s[1], s[3] != 0, s[4] != 0});
  return out;
}

TuneResult tune_gemm(const MicroKernels& mk, const TuneOptions& o) {
  const Clock::time_point t0 = Clock::now();
  const int saved_threads = num_threads();
  const int grid_threads = o.threads > 0 ? o.threads : saved_threads;
  set_num_threads(1);
  struct Restore {
    int threads;
    ~Restore() { set_num_threads(threads); }
  } restore{saved_threads};

  TuneResult result;
  // Warm the core up (a virtual CPU may run at a fraction of its speed for its first few
  // hundred milliseconds of load) and measure its peak; again at the end, the best kept. A
  // pair set's rate is its own (measure_core_gflops: the rate its task sizes are derived from).
  const bool pairs = mk.k_per_step == 2;
  auto core_peak = [&] {
    if (!pairs) return measure_fma_peak(1, 0.02, 5).gflops;
    double best = 0;
    for (int r = 0; r < 3; ++r) best = std::max(best, measure_core_gflops(mk));
    return best;
  };
  (void)measure_fma_peak(1, 0.1, 5);
  result.core_gflops = core_peak();
  if (o.progress)
    o.progress(fmt::format("{} peak {:.1f} GFLOP/s on one core ({}); {}", pairs ? "bf16" : "FMA",
                           result.core_gflops, mk.isa, cpu_info().describe()));

  const std::vector<GemmShape> shapes = o.shapes.empty() ? tuning_shapes() : o.shapes;
  std::vector<std::unique_ptr<Problem>> problems;
  std::map<std::string, ClassState> classes;
  std::vector<std::string> order;
  for (const GemmShape& s : shapes) {
    if (s.m <= 0 || s.n <= 0 || s.k <= 0)
      throw Error(fmt::format("kiln tune: shape {}x{}x{} has a size <= 0", s.m, s.k, s.n));
    // A pair set's products are of bf16 operands; those with a side under half its tile run on
    // the float32 kernels (pair_tiles_fill), whose own table serves them.
    if (pairs && !pair_tiles_fill(mk, s.m, s.n, s.k)) {
      result.skipped.push_back(s);
      continue;
    }
    problems.push_back(std::make_unique<Problem>(s, pairs));
    const std::string name = gemm_class(s);
    ClassState& c = classes[name];
    if (c.problems.empty()) order.push_back(name);
    c.name = name;
    c.problems.push_back(problems.back().get());
  }

  // Blockings derived for this machine, per tile shape, with the measured peak.
  std::vector<GemmParams> derived;
  for (int32_t i = 0; i < mk.shape_count; ++i)
    derived.push_back(derive_gemm_params(mk, i, cpu_info(), result.core_gflops));

  result.table.kiln_version = kVersion;
  result.table.cpu_key = cpu_key(cpu_info());
  result.table.isa = mk.isa;
  result.table.core_gflops = result.core_gflops;
  for (const std::string& name : order) {
    ClassState& c = classes[name];
    TunedClassReport report;
    report.name = name;
    for (const Problem* p : c.problems) {
      report.shapes.push_back(p->shape);
      report.flops += p->flops();
    }
    c.best = o.start ? *o.start : derived[0];
    c.best.kernel = std::clamp<int32_t>(c.best.kernel, 0, mk.shape_count - 1);
    report.start = c.best;
    // 1. Tile shapes, each with its derived blocking (a given start keeps its own blocking for
    //    its tile shape).
    std::vector<GemmParams> candidates;
    for (int32_t i = 0; i < mk.shape_count; ++i) add_unique(candidates, c.best, derived[size_t(i)]);
    report.candidates += run_stage(mk, c, candidates, o);
    report.start_seconds = 0;
    // 2. k blocks, the B block keeping its bytes.
    candidates.clear();
    for (double f : {0.5, 0.75, 1.5, 2.0}) {
      GemmParams p = c.best;
      p.kc = std::min<int64_t>(round16(double(c.best.kc) * f), 2048);
      const int64_t nr = mk.shapes[p.kernel].nr;
      p.nc = std::max<int64_t>(nr, c.best.nc * c.best.kc / p.kc / nr * nr);
      add_unique(candidates, c.best, p);
    }
    report.candidates += run_stage(mk, c, candidates, o);
    // 3. B block columns.
    candidates.clear();
    for (double f : {0.5, 2.0}) {
      GemmParams p = c.best;
      const int64_t nr = mk.shapes[p.kernel].nr;
      p.nc = std::clamp<int64_t>(int64_t(double(c.best.nc) * f) / nr * nr, nr, 64 * nr);
      add_unique(candidates, c.best, p);
    }
    report.candidates += run_stage(mk, c, candidates, o);
    // 4. Prefetch distances (not on AMX tiles: their kernel does not prefetch B), and a set's
    //    row calls off or on, where that changes a plan.
    candidates.clear();
    if (mk.pair_layout != PairLayout::kTiles)
      for (int32_t ahead : {2, 4, 8, 16, 32}) {
        GemmParams p = c.best;
        p.b_ahead = ahead;
        add_unique(candidates, c.best, p);
      }
    if (mk.tile_row) {
      GemmParams p = c.best;
      p.row_calls = !p.row_calls;
      if (changes_a_plan(mk, c, p)) add_unique(candidates, c.best, p);
    }
    report.candidates += run_stage(mk, c, candidates, o);
    // 5. Plan thresholds, each halved and doubled; only those that change the plan of one of
    //    the class's shapes are timed (the others would time the same plans again).
    candidates.clear();
    for (const GemmParams& p : threshold_candidates(c.best))
      if (changes_a_plan(mk, c, p)) add_unique(candidates, c.best, p);
    report.candidates += run_stage(mk, c, candidates, o);
    // The start and the choice, timed once more side by side.
    std::tie(report.start_seconds, report.chosen_seconds) = confirm(mk, c, report.start, o);
    // 6. The task grids on grid_threads threads (the stages above time one thread, whose plans
    //    have one task): min_task_panels halved and doubled, and a large packed B packed by the
    //    column tasks or before them (task_b_blocks off or on), where that changes the plan of
    //    one of the class's shapes; the choice is timed once more against the one-thread choice.
    report.grid_threads = grid_threads;
    std::vector<GemmParams> grids;
    if (grid_threads > 1) {
      for (const GemmParams& p : threshold_candidates(c.best))
        if (p.min_task_panels != c.best.min_task_panels && changes_a_plan(mk, c, p, grid_threads))
          grids.push_back(p);
      GemmParams p = c.best;
      p.task_b_blocks = !p.task_b_blocks;
      if (changes_a_plan(mk, c, p, grid_threads)) grids.push_back(p);
    }
    if (!grids.empty()) {
      set_num_threads(grid_threads);
      const GemmParams one_thread = c.best;
      report.grid_candidates = run_stage(mk, c, grids, o, grid_threads);
      report.grid_start_seconds = report.grid_chosen_seconds = c.best_seconds;
      if (!same_blocking(one_thread, c.best))
        std::tie(report.grid_start_seconds, report.grid_chosen_seconds) =
            confirm(mk, c, one_thread, o, grid_threads);
      set_num_threads(1);
    }
    report.chosen = c.best;
    report.start_kernel = mk.shapes[report.start.kernel].name;
    report.chosen_kernel = mk.shapes[c.best.kernel].name;
    result.table.classes.push_back(
        TunedClass{name, report.chosen_kernel, c.best.kc, c.best.nc, c.best.b_ahead,
                   c.best.pack_b_min_rows, c.best.direct_a_max_cols, c.best.min_task_panels,
                   c.best.row_calls, c.best.task_b_blocks, narrowest_n(c), report.gain()});
    if (o.progress)
      o.progress(fmt::format(
          "{:<22} {} kc {}{} nc {} prefetch {} -> {} kc {}{} nc {} prefetch {}, B packed from "
          "{} rows, A direct to {} columns, tasks of {} panels{}{}: {:.2f}x ({} candidates){}",
          name, report.start_kernel, report.start.kc, pairs ? " pairs" : "", report.start.nc,
          report.start.b_ahead, report.chosen_kernel, c.best.kc, pairs ? " pairs" : "", c.best.nc,
          c.best.b_ahead, c.best.pack_b_min_rows, c.best.direct_a_max_cols, c.best.min_task_panels,
          c.best.task_b_blocks ? "" : ", large B packed before the tasks",
          !mk.tile_row       ? ""
          : c.best.row_calls ? ", row calls"
                             : ", no row calls",
          report.gain(), report.candidates,
          report.grid_candidates == 0
              ? std::string()
              : fmt::format("; grids on {} threads: {:.2f}x ({} candidates)", grid_threads,
                            report.grid_gain(), report.grid_candidates)));
    result.classes.push_back(std::move(report));
  }
  result.core_gflops = std::max(result.core_gflops, core_peak());
  result.table.core_gflops = result.core_gflops;
  result.seconds = seconds_since(t0);
  return result;
}

void save_tuned_table(const TunedTable& table, const std::string& path) {
  if (path.empty())
    throw Error(
        "kiln tune: no place for the tuned table: the disk cache is disabled "
        "(KILN_CACHE_DIR is empty); set KILN_CACHE_DIR or HOME");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec)
    throw Error(
        fmt::format("kiln tune: cannot create the directory of {}: {}", path, ec.message()));
  write_file_atomically(path, table.to_text());
}

}  // namespace kiln::runtime::gemm_detail
