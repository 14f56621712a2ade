// A 64-byte block of values (16 floats, 8 doubles), for eager kernels written with explicit
// vectors where the compiler's loop vectorizer does not keep a block in registers (the direct
// convolutions of conv_shallow.cc, conv.cc's col2im): one AVX-512 register, two AVX ones, four
// SSE ones. A block is an array of this build's registers (GCC vectors of the register's width),
// each operation done register by register: GCC lowers a wider-than-register GCC vector through
// the stack (loads built from scalar moves, the accumulators spilled), which made the shallow
// filter gradient 10x slower than its FMAs on AVX2. load/store copy exactly n values, so a
// partial block never touches memory past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__FMA__)
#include <immintrin.h>
#endif

#include "kiln/ir/bfloat16.h"

namespace kiln::runtime::vector_block {

// The width of this build's vector registers.
#if defined(__AVX512F__)
inline constexpr int kRegisterBytes = 64;
#elif defined(__AVX__)
inline constexpr int kRegisterBytes = 32;
#else
inline constexpr int kRegisterBytes = 16;
#endif
inline constexpr int kBlockBytes = 64;
inline constexpr int kRegistersPerBlock = kBlockBytes / kRegisterBytes;

template <typename T>
struct Register {
  typedef T type __attribute__((vector_size(kRegisterBytes)));
};

// kLanes<T> values as kRegistersPerBlock registers; `V<T> v = {}` is all zeros.
template <typename T>
struct V {
  typename Register<T>::type r[kRegistersPerBlock];

  V& operator+=(const V& b) {
#pragma GCC unroll 4
    for (int i = 0; i < kRegistersPerBlock; ++i) r[i] += b.r[i];
    return *this;
  }
  friend V operator+(V a, const V& b) { return a += b; }
  // this += s * b, each lane (s broadcast): one fused multiply-add per register (rounded once)
  // where this build's ISA has FMA, a multiply and an add otherwise. Explicit, not left to the
  // compiler's contraction, which needs this function inlined into an -ffp-contract=fast caller
  // (a sanitizer build's inlining decisions changed the bits).
  void fma(T s, const V& b) {
#pragma GCC unroll 4
    for (int i = 0; i < kRegistersPerBlock; ++i)
      r[i] = fma_register(typename Register<T>::type{} + s, b.r[i], r[i]);
  }

 private:
  using R = typename Register<T>::type;
  static R fma_register(R a, R b, R c) {
#if defined(__FMA__)
    if constexpr (std::is_same_v<T, float> && kRegisterBytes == 64) return _mm512_fmadd_ps(a, b, c);
    if constexpr (std::is_same_v<T, double> && kRegisterBytes == 64)
      return _mm512_fmadd_pd(a, b, c);
    if constexpr (std::is_same_v<T, float> && kRegisterBytes == 32) return _mm256_fmadd_ps(a, b, c);
    if constexpr (std::is_same_v<T, double> && kRegisterBytes == 32)
      return _mm256_fmadd_pd(a, b, c);
    if constexpr (std::is_same_v<T, float> && kRegisterBytes == 16) return _mm_fmadd_ps(a, b, c);
    if constexpr (std::is_same_v<T, double> && kRegisterBytes == 16) return _mm_fmadd_pd(a, b, c);
#endif
    const R product = a * b;
    return product + c;
  }
};

template <typename T>
constexpr int64_t kLanes = kBlockBytes / int64_t(sizeof(T));

// The first n (<= kLanes) values at p, the rest zeros; kFull: n == kLanes (one load per
// register).
template <bool kFull, typename T>
V<T> load(const T* p, int64_t n) {
  V<T> v = {};
  if constexpr (kFull) {
    constexpr int64_t kRegisterLanes = kRegisterBytes / int64_t(sizeof(T));
#pragma GCC unroll 4
    for (int i = 0; i < kRegistersPerBlock; ++i)
      std::memcpy(&v.r[i], p + i * kRegisterLanes, kRegisterBytes);
  } else {
    std::memcpy(&v.r[0], p, size_t(n) * sizeof(T));
  }
  return v;
}
template <bool kFull, typename T>
void store(T* p, const V<T>& v, int64_t n) {
  if constexpr (kFull) {
    constexpr int64_t kRegisterLanes = kRegisterBytes / int64_t(sizeof(T));
#pragma GCC unroll 4
    for (int i = 0; i < kRegistersPerBlock; ++i)
      std::memcpy(p + i * kRegisterLanes, &v.r[i], kRegisterBytes);
  } else {
    std::memcpy(p, &v.r[0], size_t(n) * sizeof(T));
  }
}

// bf16 blocks of float32 values: 16 bf16 values widened (exact; load_widened, the first n, the
// rest zeros) or 16 floats rounded to bf16 as stored (store_rounded, the first n; round to
// nearest even and NaN kept quiet with its sign, as bfloat16::from_float), register by register.
using Bits32 = uint32_t __attribute__((vector_size(kRegisterBytes)));
using Bits16 = uint16_t __attribute__((vector_size(kRegisterBytes / 2)));
inline constexpr int64_t kFloatRegisterLanes = kRegisterBytes / int64_t(sizeof(float));

template <bool kFull>
V<float> load_widened(const bfloat16* p, int64_t n) {
  bfloat16 part[kLanes<float>] = {};
  if constexpr (!kFull) std::memcpy(static_cast<void*>(part), p, size_t(n) * sizeof(bfloat16));
  const bfloat16* src = kFull ? p : part;
  V<float> v;
#pragma GCC unroll 4
  for (int i = 0; i < kRegistersPerBlock; ++i) {
    Bits16 h;
    std::memcpy(&h, src + i * kFloatRegisterLanes, sizeof(h));
    const Bits32 u = __builtin_convertvector(h, Bits32) << 16;
    std::memcpy(&v.r[i], &u, sizeof(u));
  }
  return v;
}

template <bool kFull>
void store_rounded(bfloat16* p, const V<float>& v, int64_t n) {
  bfloat16 part[kLanes<float>];
  bfloat16* dst = kFull ? p : part;
#pragma GCC unroll 4
  for (int i = 0; i < kRegistersPerBlock; ++i) {
    Bits32 u;
    std::memcpy(&u, &v.r[i], sizeof(u));
    const Bits32 nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const Bits32 rounded = nan ? (u >> 16) | 0x0040u : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const Bits16 h = __builtin_convertvector(rounded, Bits16);
    std::memcpy(static_cast<void*>(dst + i * kFloatRegisterLanes), &h, sizeof(h));
  }
  if constexpr (!kFull) std::memcpy(static_cast<void*>(p), part, size_t(n) * sizeof(bfloat16));
}

}  // namespace kiln::runtime::vector_block
