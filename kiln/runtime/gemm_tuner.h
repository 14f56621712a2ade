// The GEMM autotuner behind `kiln tune`: for each class of products the training steps use
// (runtime/gemm_tuning.h), it times a bounded set of candidate blockings on the class's shapes
// and keeps the fastest, as FFTW's planner keeps its wisdom.
//
// Search, per class, starting from the derived blocking (or TuneOptions::start), stages 1-5 on
// one thread:
//   1. the tile shapes of the kernel set, each with its derived blocking;
//   2. k blocks of 1/2, 3/4, 3/2 and 2 times the current one (the B block keeps its bytes);
//   3. B blocks of 1/2 and 2 times the current columns;
//   4. prefetch distances of 2, 4, 8, 16 and 32 rows (not on AMX tiles: their kernel does not
//      prefetch), and row calls switched (sets with MicroKernels::tile_row) where that changes
//      a plan;
//   5. the plan thresholds (pack_b_min_rows, direct_a_max_cols, min_task_panels), each halved
//      and doubled (threshold_candidates), of which only those that change the plan of one of
//      the class's shapes are timed (a plan of one thread has one task: min_task_panels, a rule
//      of multi-threaded grids, changes nothing there);
//   6. on TuneOptions::threads threads (kiln's thread count by default; no stage 6 at one):
//      min_task_panels halved and doubled, where that changes the task grid of one of the
//      class's shapes, the choice then timed once more against stage 5's.
// Each stage times its candidates and the current best interleaved, `rounds` times, and keeps a
// candidate only if its best time beats the current best's by more than `min_gain` (noise on a
// shared machine is larger than the gains of most retunings). A class's time is the sum over
// its shapes of the fastest call. At most 21 candidates per class, under a minute in all.
//
// A bf16 pair kernel set (avx512bf16, amx: MicroKernels::k_per_step 2) is tuned the same way on
// products of bf16 operands, into a table of its own: its tile shapes, k blocks in pairs, and
// its own peak as the rate of its task sizes (measure_core_gflops).
//
// Tuning changes speed only: every candidate computes the same bits (gemm_microkernel.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/gemm_plan.h"
#include "kiln/runtime/gemm_tuning.h"

namespace kiln::runtime::gemm_detail {

struct TuneOptions {
  // The products to tune for (their classes are tuned; threads and epilogue are ignored):
  // default, tuning_shapes(). On a pair set they are products of bf16 operands, and those with
  // a side under half of its tile (pair_tiles_fill: they run on the float32 kernels) are
  // skipped.
  std::vector<GemmShape> shapes;
  // Starting blocking for every class instead of the derived one (a benchmark starts from a
  // deliberately poor one); its kernel field is the starting tile shape.
  std::optional<GemmParams> start;
  double slice_seconds = 0.008;  // each timing: repeat the product for at least this long
  int rounds = 3;                // interleaved timings per candidate and stage
  int threads = 0;               // stage 6's thread count (0: kiln's at the call; 1: no stage 6)
  double min_gain = 1.015;       // a candidate must be this much faster to replace the best
  // Called with one line per finished class (and the FMA peak first); may be empty.
  std::function<void(const std::string&)> progress;
};

struct TunedClassReport {
  std::string name;
  std::vector<GemmShape> shapes;
  GemmParams start, chosen;  // the starting and the chosen blocking
  std::string start_kernel, chosen_kernel;
  double start_seconds = 0, chosen_seconds = 0;  // summed over the class's shapes
  double flops = 0;                              // of one call of each shape, summed
  int candidates = 0;                            // blockings timed on one thread
  // Stage 6: the threads it ran on, its candidates, and the class's time (summed over its
  // shapes) on those threads under stage 5's choice and the final one.
  int grid_threads = 1, grid_candidates = 0;
  double grid_start_seconds = 0, grid_chosen_seconds = 0;
  double gain() const { return chosen_seconds > 0 ? start_seconds / chosen_seconds : 1.0; }
  double grid_gain() const {
    return grid_chosen_seconds > 0 ? grid_start_seconds / grid_chosen_seconds : 1.0;
  }
};

struct TuneResult {
  TunedTable table;
  std::vector<TunedClassReport> classes;
  std::vector<GemmShape> skipped;  // shapes a pair set does not run (TuneOptions::shapes)
  double core_gflops = 0;  // one core's peak (FMA, or the pair set's rate), measured before tuning
  double seconds = 0;      // the tuner's wall time
};

// Stage 5's candidates from blocking `p`: each plan threshold halved and doubled, the others
// kept (6, before dropping those that plan a class's shapes as `p` does).
std::vector<GemmParams> threshold_candidates(const GemmParams& p);

// The GEMMs of kiln's benchmark training steps (MLP, CNN as im2col products, LSTM, transformer
// block) with the transposes their gradients use: the default shapes of tune_gemm.
std::vector<GemmShape> tuning_shapes();

// Tunes kernel set `mk` on this machine (kiln's arena is used at one thread, and at stage 6's
// thread count for its grids, then restored). Writes nothing and does not change the blocking in
// use: see save_tuned_table and use_gemm_tuning.
TuneResult tune_gemm(const MicroKernels& mk, const TuneOptions& options = {});

// Writes `table` to `path` atomically (creating its directory); kiln::Error naming the path.
void save_tuned_table(const TunedTable& table, const std::string& path);

}  // namespace kiln::runtime::gemm_detail
