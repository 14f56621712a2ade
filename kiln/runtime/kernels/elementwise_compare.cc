// Eager kernels of comparisons and logic: equal ... greater_equal (bool results, any dtype),
// logical_and / logical_or / logical_not, and select (cond ? a : b, all three broadcast).

#include "kiln/runtime/kernels/elementwise_loops.h"
#include "kiln/runtime/kernels/strided_copy.h"

namespace kiln::runtime {
namespace {

using namespace elementwise;

#define KILN_BINARY(NAME, EXPR)                \
  struct NAME {                                \
    template <typename A, typename B>          \
    static auto eval(const A& a, const B& b) { \
      return EXPR;                             \
    }                                          \
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

void logical_not_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  unary_loop<bool, bool>(in[0], out, [](const auto& x) { return !x; });
}

// ---------------------------------------------------------------- select

void select_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  BroadcastPlan<3> plan(out.shape, {&in[0].shape, &in[1].shape, &in[2].shape});
  const bool* pc = in[0].data<bool>();
  visit_word(dtype_size(out.dtype), [&](auto tag) {  // moves values: any dtype, bf16 too
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

void register_comparison_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Equal, compare_kernel<EqOp>);
  set(OpKind::NotEqual, compare_kernel<NeOp>);
  set(OpKind::Less, compare_kernel<LtOp>);
  set(OpKind::LessEqual, compare_kernel<LeOp>);
  set(OpKind::Greater, compare_kernel<GtOp>);
  set(OpKind::GreaterEqual, compare_kernel<GeOp>);
  set(OpKind::LogicalAnd, logical_kernel<AndOp>);
  set(OpKind::LogicalOr, logical_kernel<OrOp>);
  set(OpKind::LogicalNot, logical_not_kernel);
  set(OpKind::Select, select_kernel);
}

}  // namespace kiln::runtime
