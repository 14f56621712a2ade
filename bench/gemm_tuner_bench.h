// kiln_gemm_bench's tuning (bench/gemm_tuner_bench.cc): its --kiln_tune flag.
#pragma once

namespace kiln::bench {

// Tunes every class of tuning_shapes() in this process and uses the result (no table read or
// written), on the float32 kernels and on the bf16 pair kernels where bf16 products run on them;
// prints what it chose to stderr.
void tune_gemm_in_process();

}  // namespace kiln::bench
