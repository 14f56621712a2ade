// AMX-BF16 GEMM microkernel: the tile kernel of gemm_amx_tile.h on the AMX unit (TDPBF16PS), one
// 32 x 32 block of C per call (layout: gemm_amx_tile.h). This file is compiled with
// -mamx-tile -mamx-bf16 and must include nothing but intrinsics and the kernel headers;
// gemm_engine.cc runs it only on a CPU with AMX-BF16 whose kernel granted this process the tile
// data (arch_prctl ARCH_REQ_XCOMP_PERM).
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The tile configuration (palette 1): tiles 0-7 all 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

struct AmxTiles {
  // Loaded on every call: another library in the process may configure the tiles differently,
  // and a block's work (32 x 32 x kc pairs) outweighs one LDTILECFG by far.
  static void configure() {
    static const TileConfig config;
    _tile_loadconfig(&config);
  }
  template <int T>
  static void load(const float* p, int64_t stride) {
    _tile_loadd(T, p, stride);
  }
  template <int T>
  static void zero() {
    _tile_zero(T);
  }
  template <int C, int A, int B>
  static void dot() {
    _tile_dpbf16ps(C, A, B);
  }
  template <int T>
  static void store(float* p, int64_t stride) {
    _tile_stored(T, p, stride);
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_amx_tile.h"

namespace kiln::runtime::gemm_detail {
namespace {

TileFn amx_select(int32_t, int32_t, bool, bool) { return amx_tile<AmxTiles>; }

// The bf16 peak: 12 independent TDPBF16PS of 16 x 16 x 16 pairs (16 K flops each) per round.
float tdp_loop(int64_t iterations) {
  AmxTiles::configure();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace

const MicroKernels& amx_microkernels() {
  static constexpr MicroKernels kernels{"amx",
                                        16,
                                        {{"32x32", kAmxRows, kAmxCols, amx_tile<AmxTiles>,
                                          amx_select},
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr}},
                                        1,
                                        tdp_loop,
                                        4 * 2 * 16 * 16 * 32,
                                        transpose_avx2,
                                        widen_transpose_avx2,
                                        2,
                                        PairLayout::kTiles};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
