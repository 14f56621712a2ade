// The pair packers' interleaving copy (pair_interleave_avx2, gemm_microkernel.h), which packs
// the VDPBF16PS sets' panels of operands stored with k along their rows (B, a stored A^T),
// against pairs written out by hand: every column count through its 16-, 8-, 4-wide and
// one-by-one parts, odd and even depths, both half orders, nothing written past the panel's
// columns. Needs AVX2: skipped, saying so, on CPUs without it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

uint32_t pair_bits(uint16_t upper, uint16_t lower) { return uint32_t(upper) << 16 | lower; }

TEST(GemmPairPackTest, InterleavingCopyPairsEachColumnsConsecutiveElements) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2"))
    GTEST_SKIP() << "this CPU has no AVX2: the pair packers' copy is not run here";
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  constexpr float kCanary = 3.0f;
  for (int64_t cols = 1; cols <= 40; ++cols)
    for (int64_t elements : {1, 2, 5, 8})
      for (bool first_high : {true, false}) {
        // ld == cols: the last row ends where the allocation does (a read past it is caught by
        // the sanitizer build); a wider ld leaves values that must not be read into the panel.
        for (int64_t ld : {cols, cols + 3}) {
          std::vector<uint16_t> src(size_t(elements * ld));
          for (uint16_t& x : src) x = uint16_t(bits(rng));
          const int64_t pairs = (elements + 1) / 2, dst_ld = cols + 2;
          std::vector<float> dst(size_t(pairs * dst_ld), kCanary);
          pair_interleave_avx2(src.data(), ld, cols, elements, dst.data(), dst_ld, first_high);
          for (int64_t p = 0; p < pairs; ++p)
            for (int64_t j = 0; j < dst_ld; ++j) {
              const uint32_t got = std::bit_cast<uint32_t>(dst[size_t(p * dst_ld + j)]);
              uint32_t want = std::bit_cast<uint32_t>(kCanary);
              if (j < cols) {
                const uint16_t first = src[size_t(2 * p * ld + j)];
                const uint16_t second =
                    2 * p + 1 < elements ? src[size_t((2 * p + 1) * ld + j)] : uint16_t(0);
                want = first_high ? pair_bits(first, second) : pair_bits(second, first);
              }
              ASSERT_EQ(got, want) << "cols " << cols << " elements " << elements << " ld " << ld
                                   << (first_high ? " first high" : " first low") << ": pair " << p
                                   << " column " << j;
            }
        }
      }
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
