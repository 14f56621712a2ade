// The bf16 blocks of runtime/kernels/vector_block.h against the scalar conversions of
// ir/bfloat16.h, bit for bit: load_widened over every bf16 bit pattern (NaNs included), and
// store_rounded over the cases of rounding (ties to even either way, just above and below a
// tie, denormals, the largest finite values overflowing to infinity, infinities, quiet and
// signalling NaNs of both signs) and random bit patterns; partial blocks read and write exactly
// their n values.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/runtime/kernels/vector_block.h"

namespace kiln::runtime {
namespace {

using vector_block::kLanes;
using vector_block::V;

std::vector<float> lanes_of(const V<float>& v) {
  std::vector<float> out(kLanes<float>);
  std::memcpy(out.data(), &v, sizeof(float) * out.size());
  return out;
}

V<float> block_of(const std::vector<float>& values) {
  V<float> v;
  std::memcpy(&v, values.data(), sizeof(float) * kLanes<float>);
  return v;
}

TEST(VectorBlock, LoadWidenedIsToFloatOfEveryBf16) {
  std::vector<bfloat16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = bfloat16::from_bits(uint16_t(b));
  for (size_t i = 0; i < all.size(); i += kLanes<float>) {
    const std::vector<float> got =
        lanes_of(vector_block::load_widened<true>(&all[i], kLanes<float>));
    for (int64_t l = 0; l < kLanes<float>; ++l)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[size_t(l)]),
                std::bit_cast<uint32_t>(all[i + size_t(l)].to_float()))
          << "bf16 bits " << std::hex << all[i + size_t(l)].bits;
  }
}

TEST(VectorBlock, PartialLoadReadsNValuesAndZerosTheRest) {
  std::vector<bfloat16> values(kLanes<float>);
  for (size_t i = 0; i < values.size(); ++i) values[i] = bfloat16::from_float(float(i) + 1.5f);
  for (int64_t n = 1; n < kLanes<float>; ++n) {
    // The n values sit at the end of their buffer: a read past them would leave it (ASan).
    std::vector<bfloat16> tail(values.begin(), values.begin() + n);
    const std::vector<float> got = lanes_of(vector_block::load_widened<false>(tail.data(), n));
    for (int64_t l = 0; l < kLanes<float>; ++l)
      EXPECT_EQ(got[size_t(l)], l < n ? values[size_t(l)].to_float() : 0.f) << "n " << n;
  }
}

std::vector<uint32_t> rounding_cases() {
  std::vector<uint32_t> bits = {
      0x00000000, 0x80000000,              // zeros
      0x3F808000, 0x3F818000,              // ties: to the even below, to the even above
      0x3F808001, 0x3F807FFF,              // just above and below a tie
      0xBF808000, 0xBF818000,              // negative ties
      0x00000001, 0x807FFFFF, 0x00008000,  // denormals, a denormal tie
      0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000,  // the largest finite values overflow to infinity
      0x7F800000, 0xFF800000,              // infinities
      0x7FC00000, 0xFFC00001, 0x7F800001,  // quiet NaNs, a signalling NaN
      0xFF80FFFF, 0x7FFFFFFF,              // a negative signalling NaN, all ones
  };
  std::mt19937 rng(17);
  while (bits.size() % size_t(kLanes<float>) != 0 || bits.size() < 4096) bits.push_back(rng());
  return bits;
}

TEST(VectorBlock, StoreRoundedIsFromFloatBitForBit) {
  const std::vector<uint32_t> bits = rounding_cases();
  for (size_t i = 0; i < bits.size(); i += kLanes<float>) {
    std::vector<float> values(kLanes<float>);
    for (size_t l = 0; l < values.size(); ++l) values[l] = std::bit_cast<float>(bits[i + l]);
    std::vector<bfloat16> out(kLanes<float>);
    vector_block::store_rounded<true>(out.data(), block_of(values), kLanes<float>);
    for (size_t l = 0; l < values.size(); ++l)
      ASSERT_EQ(out[l].bits, bfloat16::from_float(values[l]).bits)
          << "float bits " << std::hex << bits[i + l];
  }
}

TEST(VectorBlock, PartialStoreWritesNValues) {
  std::vector<float> values(kLanes<float>);
  for (size_t l = 0; l < values.size(); ++l) values[l] = float(l) * 0.3f - 2.f;
  for (int64_t n = 1; n < kLanes<float>; ++n) {
    std::vector<bfloat16> out(size_t(n) + 1, bfloat16::from_bits(0xABCD));
    vector_block::store_rounded<false>(out.data(), block_of(values), n);
    for (int64_t l = 0; l < n; ++l)
      EXPECT_EQ(out[size_t(l)].bits, bfloat16::from_float(values[size_t(l)]).bits) << "n " << n;
    EXPECT_EQ(out[size_t(n)].bits, 0xABCD) << "n " << n << ": written past the block";
  }
}

}  // namespace
}  // namespace kiln::runtime
