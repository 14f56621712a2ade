// Eager kernels of the arithmetic binary ops: add, sub, mul, div, pow, maximum, minimum
// (same-type operands, numpy broadcasting through elementwise_loops.h).
#include <fmt/format.h>

#include "kiln/runtime/kernels/elementwise_loops.h"

namespace kiln::runtime {
namespace {

using namespace elementwise;

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

}  // namespace

void register_arithmetic_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Add, arith_kernel<AddOp>);
  set(OpKind::Sub, arith_kernel<SubOp>);
  set(OpKind::Mul, arith_kernel<MulOp>);
  set(OpKind::Div, div_kernel);
  set(OpKind::Pow, float_binary_kernel<PowOp>);
  set(OpKind::Maximum, arith_kernel<MaxOp>);
  set(OpKind::Minimum, arith_kernel<MinOp>);
}

}  // namespace kiln::runtime
