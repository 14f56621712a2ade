// The AMX tile kernel of gemm_amx_tile.h on an emulation of the tile registers (scalar float32
// FMAs, for any CPU): a test vehicle for the AMX layout and its place in the engine where the
// CPU has no AMX (KILN_GEMM_BF16=amx-emulated), not a fast path. TDPBF16PS is emulated as its
// documented per-element order: for each pair of a row of A and a column of B, the first
// (lower-half) product then the second added to C, each rounded to nearest even (a product of
// two bf16 is exact in float32); its flushing of denormals is not emulated. Compiled for the
// build's baseline ISA, like gemm_engine.cc, and includes only the kernel headers.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The eight tile registers of the calling thread: 16 rows of 16 32-bit elements each.
struct EmulatedTiles {
  static inline thread_local uint32_t regs[8][16][16];
  template <int T>
  static void load(const float* p, int64_t stride) {
    for (int r = 0; r < 16; ++r)
      std::memcpy(regs[T][r], reinterpret_cast<const char*>(p) + r * stride, 64);
  }
  template <int T>
  static void zero() {
    std::memset(regs[T], 0, sizeof regs[T]);
  }
  static float first(uint32_t pair) { return bits(pair << 16); }
  static float second(uint32_t pair) { return bits(pair & 0xFFFF0000u); }
  static float bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  template <int C, int A, int B>
  static void dot() {
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        float acc = bits(regs[C][m][n]);
        for (int k = 0; k < 16; ++k) {
          acc = std::fma(first(regs[A][m][k]), first(regs[B][k][n]), acc);
          acc = std::fma(second(regs[A][m][k]), second(regs[B][k][n]), acc);
        }
        std::memcpy(&regs[C][m][n], &acc, sizeof acc);
      }
  }
  template <int T>
  static void store(float* p, int64_t stride) {
    for (int r = 0; r < 16; ++r)
      std::memcpy(reinterpret_cast<char*>(p) + r * stride, regs[T][r], 64);
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_amx_tile.h"

namespace kiln::runtime::gemm_detail {
namespace {

TileFn amx_emulated_select(int32_t rows, int32_t cols, bool, bool) {
  return amx_block_for<EmulatedTiles>(rows, cols);
}

float no_peak_loop(int64_t) { return 0; }

}  // namespace

// No peak loop (an emulation has no peak worth measuring: fma_loop_flops 0).
const MicroKernels& amx_emulated_microkernels() {
  static constexpr MicroKernels kernels{
      "amx-emulated",
      16,
      {{"32x32", kAmxRows, kAmxCols, amx_tile<EmulatedTiles>, amx_emulated_select},
       {nullptr, 0, 0, nullptr, nullptr},
       {nullptr, 0, 0, nullptr, nullptr},
       {nullptr, 0, 0, nullptr, nullptr}},
      1,
      no_peak_loop,
      0,
      transpose_avx2,
      widen_transpose_avx2,
      2,
      PairLayout::kTiles,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      amx_row<EmulatedTiles>};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
