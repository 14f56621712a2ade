// The machine's float32 FMA peak, measured in this process: the yardstick `kiln bench` and the
// GEMM benchmarks hold compute-bound work against (docs/benchmarks.md, first paragraph); and
// its copy bandwidth beyond the caches, the step report's yardstick for steps that move data.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::runtime {

namespace gemm_detail {
struct MicroKernels;
}

struct FmaPeak {
  std::string isa;      // the vector ISA measured: that of the GEMM kernels in use
  int threads = 0;      // threads that ran the loop at the same time
  double gflops = 0.0;  // float32 GFLOP/s summed over the threads (an FMA counts 2 flops)
};

// Runs the vector FMA loop of the active GEMM kernels' ISA (runtime/gemm.h: avx512 or avx2) on
// `threads` threads at once, each for about `seconds`, best of `repeats`. With the eigen
// kernels (no kiln vector loop for this CPU) gflops is 0. kiln::Error if threads < 1.
FmaPeak measure_fma_peak(int threads, double seconds = 0.05, int repeats = 3);

// The same for products of bf16 operands: the loop of the instruction the bf16 kernels in use
// run (runtime::gemm_bf16_kernels(): TDPBF16PS for amx, VDPBF16PS for avx512bf16; a pair of
// bf16 products is 2 flops each), or the float32 FMA peak where they are the float32 kernels
// (isa then names the float32 set). The emulated sets have no peak (gflops 0).
FmaPeak measure_bf16_peak(int threads, double seconds = 0.05, int repeats = 3);

// The loop of one kernel set (runtime/gemm_microkernel.h), as the two above run it for the sets
// in use; the CPU must run the set.
FmaPeak measure_kernel_loop_peak(const gemm_detail::MicroKernels& mk, int threads,
                                 double seconds = 0.05, int repeats = 3);

struct CopyBandwidth {
  int threads = 0;
  int64_t bytes = 0;  // the size of the buffer copied (twice the last-level cache, >= 64 MiB)
  double gbs = 0.0;   // GB/s read plus written, summed over the threads
};

// `threads` threads each memcpy their share of a buffer twice the size of the last-level cache
// (runtime/cpu_info.h; at least 64 MiB), all starting together, best of `repeats`. kiln::Error
// if threads < 1.
CopyBandwidth measure_copy_bandwidth(int threads, int repeats = 3);

}  // namespace kiln::runtime
