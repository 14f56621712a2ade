// Eager kernel of cast: every dtype to every dtype (to bool: x != 0; elementwise_loops.h).
// bfloat16 (the op's bf16 column is Convert): to bf16 one correct rounding to nearest even
// from every dtype (float64 and int64 directly, never through float32); from bf16 the exact
// float32 value goes through the float32 cast (to integers as float32 converts, to bool
// nonzero).

#include <cstring>

#include "kiln/runtime/kernels/elementwise_loops.h"

namespace kiln::runtime {
namespace {

using namespace elementwise;

template <typename T>
bfloat16 to_bf16(T x) {
  if constexpr (std::is_same_v<T, float>)
    return bfloat16::from_float(x);
  else if constexpr (std::is_same_v<T, bool>)
    return bfloat16::from_float(x ? 1.0f : 0.0f);
  else if constexpr (std::is_same_v<T, int64_t>)
    return bfloat16::from_int64(x);
  else  // double, and int32 / uint8 (exact in double)
    return bfloat16::from_double(double(x));
}

void cast_kernel(std::span<const Array> in, const Attrs& attrs, Array& out);

void cast_bf16(const Array& x, const Attrs& attrs, Array& out) {
  if (x.dtype == out.dtype) {
    if (out.nbytes() != 0) std::memcpy(out.raw(), x.raw(), out.nbytes());
    return;
  }
  if (x.dtype == DType::bf16) {  // the exact float32 value, cast as float32 casts
    Array f = Array::empty(DType::f32, x.shape);
    const auto* src = static_cast<const bfloat16*>(x.raw());
    float* dst = f.data<float>();
    parallel_for(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = src[i].to_float();
    });
    if (out.dtype == DType::f32) {
      if (out.nbytes() != 0) std::memcpy(out.raw(), f.raw(), out.nbytes());
      return;
    }
    Array wide[1] = {f};
    return cast_kernel(wide, attrs, out);
  }
  visit_dtype(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(x.raw());
    auto* dst = static_cast<bfloat16*>(out.raw());
    parallel_for(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = to_bf16<T>(src[i]);
    });
  });
}

void cast_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  if (in[0].dtype == DType::bf16 || out.dtype == DType::bf16) return cast_bf16(in[0], attrs, out);
  visit_dtype(in[0].dtype, [&](auto from_tag) {
    using T = typename decltype(from_tag)::type;
    visit_dtype(out.dtype, [&](auto to_tag) {
      using U = typename decltype(to_tag)::type;
      if constexpr (std::is_same_v<U, bool>) {
        unary_loop<T, U>(in[0], out, [](const auto& x) { return x != T(0); });
      } else {
        unary_loop<T, U>(in[0], out, [](const auto& x) { return x.template cast<U>(); });
      }
    });
  });
}

}  // namespace

void register_cast_kernels(KernelTable& t) { t[size_t(OpKind::Cast)] = cast_kernel; }

}  // namespace kiln::runtime
