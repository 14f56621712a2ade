// Eager kernels of elementwise ops: Eigen array expressions (vectorised) over contiguous runs,
// with numpy broadcasting through BroadcastPlan and chunks spread over kiln's TBB arena.
#include <fmt/format.h>

#include <Eigen/Core>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "kiln/runtime/kernels/broadcast.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using CMap = Eigen::Map<const Vec<T>>;
template <typename T>
using MMap = Eigen::Map<Vec<T>>;

// ---------------------------------------------------------------- binary

// Runs out = Op(a, b) over broadcast runs; Op::eval takes two Eigen expressions.
template <typename Op, typename T, typename U>
void binary_loop(const Array& a, const Array& b, Array& out) {
  BroadcastPlan<2> plan(out.shape, {&a.shape, &b.shape});
  const T* pa = static_cast<const T*>(a.raw());
  const T* pb = static_cast<const T*>(b.raw());
  U* po = static_cast<U*>(out.raw());
  parallel_for(plan.total, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    plan.for_each_run(begin, end, [&](int64_t o, auto off, auto st, int64_t n) {
      MMap<U> y(po + o, n);
      if (st[0] && st[1])
        y = Op::eval(CMap<T>(pa + off[0], n), CMap<T>(pb + off[1], n));
      else if (st[0])
        y = Op::eval(CMap<T>(pa + off[0], n), Vec<T>::Constant(n, pb[off[1]]));
      else if (st[1])
        y = Op::eval(Vec<T>::Constant(n, pa[off[0]]), CMap<T>(pb + off[1], n));
      else
        y = Op::eval(Vec<T>::Constant(n, pa[off[0]]), Vec<T>::Constant(n, pb[off[1]]));
    });
  });
}

// Integer division truncating toward zero; x / -1 is computed as a wrapping negation, so
// INT_MIN / -1 gives INT_MIN (as numpy does) instead of trapping (SIGFPE on x86).
template <typename T>
struct TruncDiv {
  T operator()(T x, T y) const {
    if constexpr (std::is_signed_v<T>) {
      if (y == T(-1)) return T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(x));
    }
    return T(x / y);
  }
};

// maximum/minimum propagate NaN from either side (numpy, and kiln's max/min reductions);
// Eigen's default max/min keeps one operand's value depending on the argument order.
template <typename T, bool kMax>
using NaNMinMax =
    std::conditional_t<kMax, Eigen::internal::scalar_max_op<T, T, Eigen::PropagateNaN>,
                       Eigen::internal::scalar_min_op<T, T, Eigen::PropagateNaN>>;

#define KILN_BINARY(NAME, EXPR)                \
  struct NAME {                                \
    template <typename A, typename B>          \
    static auto eval(const A& a, const B& b) { \
      return EXPR;                             \
    }                                          \
  };
KILN_BINARY(AddOp, a + b)
KILN_BINARY(SubOp, a - b)
KILN_BINARY(MulOp, a* b)
KILN_BINARY(PowOp, a.pow(b))
struct DivOp {
  template <typename A, typename B>
  static auto eval(const A& a, const B& b) {
    using S = typename A::Scalar;
    if constexpr (std::is_integral_v<S>)
      return a.binaryExpr(b, TruncDiv<S>());
    else
      return a / b;
  }
};
struct MaxOp {
  template <typename A, typename B>
  static auto eval(const A& a, const B& b) {
    return a.binaryExpr(b, NaNMinMax<typename A::Scalar, true>());
  }
};
struct MinOp {
  template <typename A, typename B>
  static auto eval(const A& a, const B& b) {
    return a.binaryExpr(b, NaNMinMax<typename A::Scalar, false>());
  }
};
KILN_BINARY(EqOp, a == b)
KILN_BINARY(NeOp, a != b)
KILN_BINARY(LtOp, a < b)
KILN_BINARY(LeOp, a <= b)
KILN_BINARY(GtOp, a > b)
KILN_BINARY(GeOp, a >= b)
KILN_BINARY(AndOp, a&& b)
KILN_BINARY(OrOp, a || b)
#undef KILN_BINARY

// Same-type arithmetic on numeric dtypes.
template <typename Op>
void arith_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      internal_error(__FILE__, __LINE__, "arithmetic on bool reached a kernel");
    } else {
      binary_loop<Op, T, T>(in[0], in[1], out);
    }
  });
}

template <typename Op>
void float_binary_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  if (out.dtype == DType::f32)
    binary_loop<Op, float, float>(in[0], in[1], out);
  else
    binary_loop<Op, double, double>(in[0], in[1], out);
}

void div_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  if (is_integer(in[1].dtype)) {
    // Integer division truncates toward zero (C++ and TensorFlow's truncatediv); a zero
    // divisor is bad input, not undefined behaviour.
    visit_dtype(in[1].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* b = in[1].data<T>();
      for (int64_t i = 0, n = in[1].size(); i < n; ++i)
        if (b[i] == T(0))
          throw Error(
              fmt::format("div: integer division by zero (divisor {} {} has a zero at "
                          "flat index {})",
                          dtype_name(in[1].dtype), in[1].shape.to_string(), i));
    });
  }
  arith_kernel<DivOp>(in, attrs, out);
}

template <typename Op>
void compare_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  visit_dtype(in[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<Op, T, bool>(in[0], in[1], out);
  });
}

template <typename Op>
void logical_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  binary_loop<Op, bool, bool>(in[0], in[1], out);
}

// ---------------------------------------------------------------- unary

template <typename T, typename U, typename F>
void unary_loop(const Array& x, Array& out, F&& f) {
  const T* px = static_cast<const T*>(x.raw());
  U* po = static_cast<U*>(out.raw());
  parallel_for(out.size(), kElementwiseGrain,
               [&](int64_t b, int64_t e) { MMap<U>(po + b, e - b) = f(CMap<T>(px + b, e - b)); });
}

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
KILN_UNARY_FLOAT(exp_kernel, x.exp())
KILN_UNARY_FLOAT(log_kernel, x.log())
KILN_UNARY_FLOAT(log1p_kernel, x.log1p())
KILN_UNARY_FLOAT(tanh_kernel, x.tanh())
KILN_UNARY_FLOAT(sigmoid_kernel, x.logistic())
KILN_UNARY_FLOAT(erf_kernel, x.erf())
// softplus(x) = max(x, 0) + log1p(exp(-|x|)): exact for large |x|, no overflow.
KILN_UNARY_FLOAT(softplus_kernel, x.max(T(0)) + (-x.abs()).exp().log1p())
KILN_UNARY_FLOAT(leaky_relu_kernel,
                 (x > T(0)).select(x, x* T(attrs.get_double("alpha", "leaky_relu"))))
#undef KILN_UNARY_NUMERIC
#undef KILN_UNARY_FLOAT

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

void logical_not_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  unary_loop<bool, bool>(in[0], out, [](const auto& x) { return !x; });
}

void cast_kernel(std::span<const Array> in, const Attrs&, Array& out) {
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

// ---------------------------------------------------------------- select

void select_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  BroadcastPlan<3> plan(out.shape, {&in[0].shape, &in[1].shape, &in[2].shape});
  const bool* pc = in[0].data<bool>();
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(in[1].raw());
    const T* pb = static_cast<const T*>(in[2].raw());
    T* po = static_cast<T*>(out.raw());
    parallel_for(plan.total, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      plan.for_each_run(begin, end, [&](int64_t o, auto off, auto st, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          po[o + i] = pc[off[0] + i * st[0]] ? pa[off[1] + i * st[1]] : pb[off[2] + i * st[2]];
      });
    });
  });
}

}  // namespace

void register_elementwise_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Add, arith_kernel<AddOp>);
  set(OpKind::Sub, arith_kernel<SubOp>);
  set(OpKind::Mul, arith_kernel<MulOp>);
  set(OpKind::Div, div_kernel);
  set(OpKind::Pow, float_binary_kernel<PowOp>);
  set(OpKind::Maximum, arith_kernel<MaxOp>);
  set(OpKind::Minimum, arith_kernel<MinOp>);
  set(OpKind::Equal, compare_kernel<EqOp>);
  set(OpKind::NotEqual, compare_kernel<NeOp>);
  set(OpKind::Less, compare_kernel<LtOp>);
  set(OpKind::LessEqual, compare_kernel<LeOp>);
  set(OpKind::Greater, compare_kernel<GtOp>);
  set(OpKind::GreaterEqual, compare_kernel<GeOp>);
  set(OpKind::LogicalAnd, logical_kernel<AndOp>);
  set(OpKind::LogicalOr, logical_kernel<OrOp>);
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
  set(OpKind::LogicalNot, logical_not_kernel);
  set(OpKind::Cast, cast_kernel);
  set(OpKind::Select, select_kernel);
}

}  // namespace kiln::runtime
