// bfloat16: the upper half of an IEEE float32 (1 sign bit, 8 exponent bits, 7 fraction bits).
// A storage type only: it has no implicit conversions and no arithmetic, so every computation
// says where it widens (to_float, exact) and where it rounds (from_float, from_double: round
// to nearest, ties to even, overflow to infinity as IEEE rounding does, NaN kept as a quiet NaN
// with its sign; from_int64 likewise, once).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {

struct bfloat16 {
  uint16_t bits = 0;

  static constexpr bfloat16 from_bits(uint16_t b) { return bfloat16{b}; }

  // Round to nearest even from float32.
  static bfloat16 from_float(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep the sign, make it quiet
      return from_bits(uint16_t((u >> 16) | 0x0040u));
    const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    return from_bits(uint16_t(rounded >> 16));
  }

  // One correct rounding (nearest even) from float64: the double is first rounded to float32
  // by rounding to odd (exact where float32 holds it; otherwise the float32 truncation with its
  // last bit set), which keeps the information the second rounding needs, so the result is
  // the bfloat16 nearest to `d` (float32 has at least two bits more than bfloat16 at every
  // exponent, denormals included).
  static bfloat16 from_double(double d) {
    if (std::isnan(d)) return from_bits(uint16_t((std::signbit(d) ? 0x8000u : 0u) | 0x7FC0u));
    constexpr float kMax = std::numeric_limits<float>::max();  // 0x7F7FFFFF: odd, rounds to inf
    if (std::fabs(d) > double(kMax))  // beyond float32 (no out-of-range conversion): inf
      return from_float(std::isinf(d) ? float(d)
                                      : std::copysign(kMax, float(std::signbit(d) ? -1 : 1)));
    float f = static_cast<float>(d);
    if (static_cast<double>(f) != d) {
      if (std::fabs(static_cast<double>(f)) > std::fabs(d))
        f = std::nextafter(f, 0.0f);  // truncate toward zero (inf becomes FLT_MAX)
      f = std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);  // inexact: odd
    }
    return from_float(f);
  }

  // One correct rounding (nearest even) from int64 (a double cannot hold every int64, so not
  // through from_double(double(v))): the magnitude rounded to odd at 53 bits first (its exact
  // bits where it has at most 53 significant ones, else the truncation with its last bit set),
  // which from_double (itself through round-to-odd) then rounds correctly.
  static bfloat16 from_int64(int64_t v) {
    uint64_t m = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    const int n = std::bit_width(m);
    if (n > 53) {
      const int drop = n - 53;
      uint64_t keep = m >> drop;
      if ((m & ((uint64_t(1) << drop) - 1)) != 0) keep |= 1;
      m = keep << drop;
    }
    const double d = double(m);
    return from_double(v < 0 ? -d : d);
  }

  // Exact.
  float to_float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
};

static_assert(sizeof(bfloat16) == 2);

}  // namespace kiln
