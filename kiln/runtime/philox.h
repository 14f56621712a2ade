// Philox-4x32-10, the counter-based random generator of Salmon, Moraes, Dror and Shaw,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11; the Random123 library). It maps a
// 128-bit counter and a 64-bit key to 128 random bits with 10 rounds of a keyed bijection, so
// any block of a stream can be computed on its own: kiln's random kernels key it by the seed
// and count blocks by element index, which makes every value a function of (seed, index)
// only, the same on every machine and for any thread count.
//
// Checked against Random123's published known-answer vectors (tests/runtime/
// random_kernels_test.cc), e.g. counter {0, 0, 0, 0}, key {0, 0} gives
// {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}.
#pragma once

#include <array>
#include <cstdint>

namespace kiln::runtime {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The Philox-4x32 bijection with 10 rounds (the key is bumped by the Weyl constants before
// every round but the first, as in Random123's philox4x32_R).
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
  }
  return ctr;
}

// A kiln seed as a Philox key: its low and high 32-bit halves.
constexpr PhiloxKey philox_key(int64_t seed) {
  const uint64_t u = uint64_t(seed);
  return {uint32_t(u), uint32_t(u >> 32)};
}

// Block `block` of the stream of `key`: the bijection of counter {lo(block), hi(block), 0, 0}.
constexpr PhiloxCounter philox_block(PhiloxKey key, uint64_t block) {
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0u, 0u}, key);
}

// Bits to numbers. [0, 1) from the top 24 bits of a word (every float in the result is
// exactly representable), (0, 1] by adding one ulp step (never 0, so log() is finite), and
// the f64 versions from the top 53 bits of a 64-bit value.
constexpr float uniform_f32(uint32_t x) { return float(x >> 8) * 0x1p-24f; }
constexpr float uniform_f32_open0(uint32_t x) { return float((x >> 8) + 1) * 0x1p-24f; }
constexpr uint64_t join64(uint32_t hi, uint32_t lo) { return uint64_t{hi} << 32 | lo; }
constexpr double uniform_f64(uint64_t x) { return double(x >> 11) * 0x1p-53; }
constexpr double uniform_f64_open0(uint64_t x) { return double((x >> 11) + 1) * 0x1p-53; }

// An integer in [0, range) from 64 random bits by multiply-shift (Lemire, without the
// rejection step): floor(x * range / 2^64). No division and no data-dependent loop; the
// relative bias of any value is below range / 2^64 (< 2.4e-10 for ranges up to 2^32).
inline uint64_t bounded_u64(uint64_t x, uint64_t range) {
  return uint64_t((static_cast<unsigned __int128>(x) * range) >> 64);
}

}  // namespace kiln::runtime
