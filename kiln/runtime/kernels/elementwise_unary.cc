// Eager kernels of the unary math ops: neg, abs, sign, square, relu, sqrt, rsqrt, exp, log,
// log1p, tanh, sigmoid, erf, softplus, leaky_relu, gelu (elementwise_loops.h).

#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "kiln/runtime/kernels/elementwise_loops.h"
#include "kiln/runtime/kernels/exact_exp.h"

namespace kiln::runtime {
namespace {

using namespace elementwise;

#define KILN_UNARY_NUMERIC(NAME, EXPR)                                     \
  void NAME(std::span<const Array> in, const Attrs& attrs, Array& out) {   \
    visit_dtype(out.dtype, [&](auto tag) {                                 \
      using T = typename decltype(tag)::type;                              \
      if constexpr (!std::is_same_v<T, bool>) {                            \
        unary_loop<T, T>(in[0], out, [&](const auto& x) { return EXPR; }); \
      }                                                                    \
    });                                                                    \
  }
#define KILN_UNARY_FLOAT(NAME, EXPR)                                     \
  void NAME(std::span<const Array> in, const Attrs& attrs, Array& out) { \
    if (out.dtype == DType::f32) {                                       \
      using T = float;                                                   \
      unary_loop<T, T>(in[0], out, [&](const auto& x) { return EXPR; }); \
    } else {                                                             \
      using T = double;                                                  \
      unary_loop<T, T>(in[0], out, [&](const auto& x) { return EXPR; }); \
    }                                                                    \
  }

// Floats: x * -1, not -x: Eigen 3.4 vectorizes -x on AVX as 0 - x, which maps -0.0 to +0.0
// (and +0.0 to +0.0) in the vectorized part of an array but not in its scalar tail, so
// neg(neg(x)) was not x. x * -1 flips the sign exactly (IEEE negation up to NaN payloads).
void neg_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      unary_loop<T, T>(in[0], out, [&](const auto& x) { return x * T(-1); });
    } else if constexpr (!std::is_same_v<T, bool>) {
      unary_loop<T, T>(in[0], out, [&](const auto& x) { return -x; });
    }
  });
}
KILN_UNARY_NUMERIC(abs_kernel, x.abs())
KILN_UNARY_NUMERIC(sign_kernel, x.sign())
KILN_UNARY_NUMERIC(square_kernel, x.square())
KILN_UNARY_NUMERIC(relu_kernel, x.max(T(0)))
// sqrt / rsqrt: IEEE (correctly rounded sqrt, then a division). Eigen's packet versions under
// EIGEN_FAST_MATH use a reciprocal-sqrt estimate: sqrt(+inf) = NaN, sqrt(-0) = +0, 2 ulp off.
KILN_UNARY_FLOAT(sqrt_kernel, x.unaryExpr([](T v) { return std::sqrt(v); }))
KILN_UNARY_FLOAT(rsqrt_kernel, x.unaryExpr([](T v) { return T(1) / std::sqrt(v); }))
KILN_UNARY_FLOAT(log_kernel, x.log())
KILN_UNARY_FLOAT(log1p_kernel, x.log1p())
KILN_UNARY_FLOAT(tanh_kernel, x.tanh())
KILN_UNARY_FLOAT(erf_kernel, x.erf())
KILN_UNARY_FLOAT(leaky_relu_kernel,
                 (x > T(0)).select(x, x* T(attrs.get_double("alpha", "leaky_relu"))))
#undef KILN_UNARY_NUMERIC
#undef KILN_UNARY_FLOAT

// exp, sigmoid and softplus: Eigen's vectorized values, except where their exponential's
// argument is below exact_exp::kExpTail (Eigen's exp is clamped there): those elements take the
// same formula on the C library's exp, found by a vectorized minimum per chunk (Eigen's any()
// of a compare is a scalar loop).
template <typename T, class F, class Arg, class Exact>
void exp_family_loop(const Array& in, Array& out, F&& f, Arg&& arg, Exact&& exact) {
  const T* px = static_cast<const T*>(in.raw());
  T* po = static_cast<T*>(out.raw());
  parallel_for(out.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    CMap<T> x(px + b, e - b);
    MMap<T>(po + b, e - b) = f(x);
    if (arg(x).minCoeff() >= exact_exp::kExpTail<T>) return;  // (a NaN minimum: scan)
    for (int64_t i = b; i < e; ++i)
      if (arg(CMap<T>(px + i, 1)).coeff(0) < exact_exp::kExpTail<T>) po[i] = exact(px[i]);
  });
}

template <typename T>
T exp_exact(T v) {
  return std::exp(v);
}
template <typename T>
T sigmoid_exact(T v) {  // used for v < -87 (float) / -708 (double): no overflow
  const T e = std::exp(v);
  return e / (T(1) + e);
}
template <typename T>
T softplus_exact(T v) {
  return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
}

#define KILN_EXP_FAMILY(NAME, EXPR, ARG, EXACT)                                              \
  void NAME(std::span<const Array> in, const Attrs&, Array& out) {                           \
    auto run = [&](auto tag) {                                                               \
      using T = decltype(tag);                                                               \
      exp_family_loop<T>(                                                                    \
          in[0], out, [](const auto& x) { return EXPR; }, [](const auto& x) { return ARG; }, \
          EXACT<T>);                                                                         \
    };                                                                                       \
    if (out.dtype == DType::f32)                                                             \
      run(float{});                                                                          \
    else                                                                                     \
      run(double{});                                                                         \
  }
KILN_EXP_FAMILY(exp_kernel, x.exp(), x, exp_exact)
KILN_EXP_FAMILY(sigmoid_kernel, x.logistic(), x, sigmoid_exact)
// softplus(x) = max(x, 0) + log1p(exp(-|x|)): exact for large |x|, no overflow.
KILN_EXP_FAMILY(softplus_kernel, x.max(T(0)) + (-x.abs()).exp().log1p(), -x.abs(), softplus_exact)
#undef KILN_EXP_FAMILY

void gelu_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  bool approximate = attrs.get_bool("approximate", "gelu");
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      if (approximate) {
        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        const T c = T(0.7978845608028654), k = T(0.044715);
        unary_loop<T, T>(in[0], out, [&](const auto& x) {
          return T(0.5) * x * (T(1) + (c * (x + k * x.cube())).tanh());
        });
      } else {
        // 0.5 x (1 + erf(x / sqrt(2)))
        const T r = T(0.7071067811865476);
        unary_loop<T, T>(in[0], out,
                         [&](const auto& x) { return T(0.5) * x * (T(1) + (x * r).erf()); });
      }
    }
  });
}

}  // namespace

void register_unary_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Neg, neg_kernel);
  set(OpKind::Abs, abs_kernel);
  set(OpKind::Sign, sign_kernel);
  set(OpKind::Square, square_kernel);
  set(OpKind::Sqrt, sqrt_kernel);
  set(OpKind::Rsqrt, rsqrt_kernel);
  set(OpKind::Exp, exp_kernel);
  set(OpKind::Log, log_kernel);
  set(OpKind::Log1p, log1p_kernel);
  set(OpKind::Tanh, tanh_kernel);
  set(OpKind::Sigmoid, sigmoid_kernel);
  set(OpKind::Relu, relu_kernel);
  set(OpKind::LeakyRelu, leaky_relu_kernel);
  set(OpKind::Gelu, gelu_kernel);
  set(OpKind::Erf, erf_kernel);
  set(OpKind::Softplus, softplus_kernel);
}

}  // namespace kiln::runtime
