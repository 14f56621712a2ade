// The AMX kernel set's AVX-512 packers (MicroKernels::tiles_b_row, tiles_a_from_columns) against
// the portable packers they replace (gemm_pack_bf16.cc), bit for bit. They need AVX-512BW only
// (no AMX): skipped, saying so, on CPUs without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/gemm_pack_bf16.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The AMX set and a copy of it whose AVX-512 packers are off (the portable ones run); runnable()
// where the CPU has AVX-512BW.
struct AmxPackers {
  const MicroKernels& fast = amx_microkernels();
  MicroKernels portable = amx_microkernels();
  AmxPackers() {
    portable.tiles_b_row = nullptr;
    portable.tiles_a_from_columns = nullptr;
  }
  static bool runnable() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
};

std::vector<uint16_t> random_bits(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  std::vector<uint16_t> v(count);
  for (uint16_t& x : v) x = uint16_t(bits(rng));
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// B's pair rows: whole and partial panels, odd depths (a half pair at the end of k) and rows of
// a k block past the end of k, in the rows pack_bf16_b_row packs.
TEST(GemmAmxPackTest, PairRowPackerMatchesThePortableOne) {
  if (!AmxPackers::runnable())
    GTEST_SKIP() << "this CPU has no AVX-512BW: the AMX set's B packer is not run here";
  const AmxPackers sets;
  ASSERT_NE(sets.fast.tiles_b_row, nullptr);
  constexpr int64_t kNr = 32, kPairs = 16;
  uint32_t seed = 17;
  for (int64_t n : {32, 64, 70, 96, 31})
    for (int64_t k : {32, 31, 7, 1}) {
      const int64_t ldb = n + 3;
      const std::vector<uint16_t> b = random_bits(size_t(k * ldb), seed++);
      SgemmArgs g;
      g.n = n;
      g.k = (k + 1) / 2;
      g.k_elements = k;
      g.b16 = b.data();
      g.ldb = ldb;
      const int64_t panels = (n + kNr - 1) / kNr, block_floats = panels * kPairs * kNr;
      std::vector<float> fast(size_t(block_floats), 3.0f), slow(size_t(block_floats), 3.0f);
      for (int64_t p = 0; p < kPairs; ++p) {
        pack_bf16_b_row(sets.fast, g, kNr, 0, p, kPairs, fast.data());
        pack_bf16_b_row(sets.portable, g, kNr, 0, p, kPairs, slow.data());
      }
      EXPECT_TRUE(same_bits(fast, slow)) << "n=" << n << " k=" << k;
    }
}

// A stored A^T's panels: whole and partial panels (rows), odd depths and k blocks reaching past
// the end of k, at a k block's offset.
TEST(GemmAmxPackTest, ColumnPanelPackerMatchesThePortableOne) {
  if (!AmxPackers::runnable())
    GTEST_SKIP() << "this CPU has no AVX-512BW: the AMX set's A packer is not run here";
  const AmxPackers sets;
  ASSERT_NE(sets.fast.tiles_a_from_columns, nullptr);
  constexpr int64_t kRows = 32;
  uint32_t seed = 23;
  for (int64_t m : {32, 45, 7})
    for (int64_t k : {64, 63, 40, 3}) {
      const int64_t lda = m + 5;  // A^T: k rows of m
      const std::vector<uint16_t> at = random_bits(size_t(k * lda), seed++);
      SgemmArgs g;
      g.ta = true;
      g.m = m;
      g.k = (k + 1) / 2;
      g.k_elements = k;
      g.a16 = at.data();
      g.lda = lda;
      // k blocks of 16 and 32 pairs from pair 0 and from pair 16 (past the end of a short k).
      for (auto [k0, kc] : {std::pair<int64_t, int64_t>{0, 32}, {0, 16}, {16, 16}}) {
        if (2 * k0 >= k) continue;
        for (int64_t r0 = 0; r0 < m; r0 += kRows) {
          const int64_t h = std::min(kRows, m - r0);
          std::vector<float> fast(size_t(kc * kRows), 3.0f), slow(size_t(kc * kRows), 3.0f);
          pack_bf16_a_panel(sets.fast, g, r0, h, k0, kc, fast.data());
          pack_bf16_a_panel(sets.portable, g, r0, h, k0, kc, slow.data());
          EXPECT_TRUE(same_bits(fast, slow)) << "m=" << m << " k=" << k << " rows " << r0 << "+"
                                             << h << " pairs " << k0 << "+" << kc;
        }
      }
    }
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
