// `kiln train` under mpirun: the line that reports the data-parallel step (docs/benchmarks.md's
// scaling figures come from it).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::tools {

// Starts counting the all-reduce statistics (runtime/collectives.h) after the first step,
// which compiles (the ranks wait there for the slowest compile).
struct CollectivesAfterFirstStep : Callback {
  bool first = true;
  void on_train_batch_end(int, const Logs&) override;
};

// Prints "data parallel: N rank(s) x T thread(s), global batch B: median step ... ms;
// all-reduced ... bytes per step in ... sums, ... ms per step, ...% hidden behind the step" from
// the seconds of every step (the first, which compiles, left out) and the statistics since the
// first step.
void report_data_parallel(std::vector<double> step_seconds, int64_t batch_size);

}  // namespace kiln::tools
