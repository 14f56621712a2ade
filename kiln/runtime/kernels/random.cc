// Eager kernels of the random ops. Input 0 is an int64 scalar seed, the Philox-4x32-10 key
// (runtime/philox.h); element i of the output is a function of (seed, i) only, so the values
// are the same on every machine, for every thread count and every chunking. Block b is the
// Philox output for counter {lo(b), hi(b), 0, 0}; its four 32-bit words w0..w3 feed:
//  - random_uniform f32: element 4b+k <- (w_k >> 8) * 2^-24, in [0, 1);
//    f64: element 2b+k <- top 53 bits of (w_2k << 32 | w_2k+1), in [0, 1);
//    then minval + u * (maxval - minval), kept below maxval after rounding.
//  - random_normal (Box-Muller on pairs, in the output's precision): u1 in (0, 1] (never 0,
//    so the log is finite), u2 in [0, 1), r = sqrt(-2 ln u1); the pair is (r cos 2pi u2,
//    r sin 2pi u2), then mean + stddev * z in double. f32: elements 4b+2p, 4b+2p+1 use
//    u1 <- w_2p and u2 <- w_2p+1 (24 bits each, so |z| <= 5.77); f64: elements 2b, 2b+1 use
//    u1 <- (w0, w1), u2 <- (w2, w3) (53 bits each).
//  - random_int: element 2b+k <- minval + floor(x * (maxval - minval) / 2^64) with
//    x = w_2k << 32 | w_2k+1 (multiply-shift, bias < range / 2^64; see bounded_u64).
// Uniform and integer values are pure integer and IEEE arithmetic, bitwise identical
// everywhere; normal values also go through the C library's log, sin and cos.
// The ops share the stream of a seed: the same seed gives related uniform, normal and integer
// values, so callers should derive a fresh seed per op (as TensorFlow's stateless ops do).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/philox.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kBlockGrain = 2048;  // Philox blocks per chunk

int64_t seed_of(const Array& seed) { return seed.data<int64_t>()[0]; }

// Fills out (n elements of T) block by block: make(words, vals) writes the kPerBlock values
// of one block into vals.
template <int kPerBlock, typename T, typename Make>
void generate(int64_t seed, Array& out, Make&& make) {
  const int64_t n = out.size();
  T* y = out.data<T>();
  const PhiloxKey key = philox_key(seed);
  const int64_t blocks = (n + kPerBlock - 1) / kPerBlock;
  parallel_for(blocks, kBlockGrain, [&](int64_t b, int64_t e) {
    T vals[kPerBlock];
    for (int64_t blk = b; blk < e; ++blk) {
      make(philox_block(key, uint64_t(blk)), vals);
      const int64_t i0 = blk * kPerBlock;
      const int64_t m = std::min<int64_t>(kPerBlock, n - i0);
      for (int64_t k = 0; k < m; ++k) y[i0 + k] = vals[k];
    }
  });
}

void require_ordered(double lo, double hi, const char* op, const char* lo_name,
                     const char* hi_name) {
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi))
    throw Error(fmt::format("{}: {} ({}) must be finite and less than {} ({})", op, lo_name, lo,
                            hi_name, hi));
}

// minval + u * (maxval - minval) in double (an explicit fma, so compilers cannot contract it
// differently on different machines), rounded to T and kept inside [minval, maxval).
template <typename T>
T scale_uniform(double u, double lo, double hi) {
  T v = T(std::fma(u, hi - lo, lo));
  const T top = T(hi);
  if (v >= top) v = std::nextafter(top, T(lo));
  return v;
}

void uniform_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const double lo = attrs.get_double("minval", "random_uniform");
  const double hi = attrs.get_double("maxval", "random_uniform");
  require_ordered(lo, hi, "random_uniform", "minval", "maxval");
  const int64_t seed = seed_of(in[0]);
  if (out.dtype == DType::f32) {
    if (!(float(lo) < float(hi)))
      throw Error(
          fmt::format("random_uniform: minval ({}) and maxval ({}) are the same float32 "
                      "value, so [minval, maxval) is empty in float32",
                      lo, hi));
    generate<4, float>(seed, out, [&](const PhiloxCounter& w, float* v) {
      for (int k = 0; k < 4; ++k) v[k] = scale_uniform<float>(uniform_f32(w[k]), lo, hi);
    });
  } else {
    generate<2, double>(seed, out, [&](const PhiloxCounter& w, double* v) {
      for (int k = 0; k < 2; ++k)
        v[k] = scale_uniform<double>(uniform_f64(join64(w[2 * k], w[2 * k + 1])), lo, hi);
    });
  }
}

// Box-Muller: two independent standard normals from u1 in (0, 1] and u2 in [0, 1), in the
// precision of the output (float libm calls are about twice as fast as double ones).
template <typename T>
inline void box_muller(T u1, T u2, T& z0, T& z1) {
  const T r = std::sqrt(T(-2) * std::log(u1));
  const T t = T(2) * std::numbers::pi_v<T> * u2;
  z0 = r * std::cos(t);
  z1 = r * std::sin(t);
}

void normal_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const double mean = attrs.get_double("mean", "random_normal");
  const double stddev = attrs.get_double("stddev", "random_normal");
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0)
    throw Error(
        fmt::format("random_normal: mean ({}) must be finite and stddev ({}) finite and "
                    ">= 0",
                    mean, stddev));
  const int64_t seed = seed_of(in[0]);
  if (out.dtype == DType::f32) {
    generate<4, float>(seed, out, [&](const PhiloxCounter& w, float* v) {
      for (int p = 0; p < 2; ++p) {
        double z0, z1;
        box_muller(double(uniform_f32_open0(w[2 * p])), double(uniform_f32(w[2 * p + 1])), z0, z1);
        v[2 * p] = float(mean + stddev * z0);
        v[2 * p + 1] = float(mean + stddev * z1);
      }
    });
  } else {
    generate<2, double>(seed, out, [&](const PhiloxCounter& w, double* v) {
      double z0, z1;
      box_muller(uniform_f64_open0(join64(w[0], w[1])), uniform_f64(join64(w[2], w[3])), z0, z1);
      v[0] = std::fma(stddev, z0, mean);
      v[1] = std::fma(stddev, z1, mean);
    });
  }
}

template <typename T>
void int_loop(int64_t seed, int64_t lo, int64_t hi, Array& out) {
  const uint64_t range = uint64_t(hi) - uint64_t(lo);
  generate<2, T>(seed, out, [&](const PhiloxCounter& w, T* v) {
    for (int k = 0; k < 2; ++k)
      v[k] = T(int64_t(uint64_t(lo) + bounded_u64(join64(w[2 * k], w[2 * k + 1]), range)));
  });
}

void int_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const int64_t lo = attrs.get_int("minval", "random_int");
  const int64_t hi = attrs.get_int("maxval", "random_int");  // lo < hi: checked by the rule
  const int64_t seed = seed_of(in[0]);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> || std::is_floating_point_v<T>) {
      internal_error(__FILE__, __LINE__, "random_int with a non-integer dtype reached a kernel");
    } else {
      constexpr int64_t tmin = std::numeric_limits<T>::min();
      constexpr int64_t tmax = std::numeric_limits<T>::max();
      if (lo < tmin || hi - 1 > tmax)
        throw Error(
            fmt::format("random_int: the range [{}, {}) does not fit in {}, whose values "
                        "lie in [{}, {}]",
                        lo, hi, dtype_name(out.dtype), tmin, tmax));
      int_loop<T>(seed, lo, hi, out);
    }
  });
}

}  // namespace

void register_random_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::RandomUniform, uniform_kernel);
  set(OpKind::RandomNormal, normal_kernel);
  set(OpKind::RandomInt, int_kernel);
}

}  // namespace kiln::runtime
