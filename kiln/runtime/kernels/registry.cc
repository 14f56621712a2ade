#include <fmt/format.h>

#include "kiln/runtime/kernels/register.h"

namespace kiln::runtime {
namespace {

KernelTable build() {
  KernelTable t{};
  register_arithmetic_kernels(t);
  register_comparison_kernels(t);
  register_unary_kernels(t);
  register_cast_kernels(t);
  register_reduce_kernels(t);
  register_extremum_kernels(t);
  register_softmax_kernels(t);
  register_matmul_kernels(t);
  register_conv_kernels(t);
  register_pool_kernels(t);
  register_layout_kernels(t);
  register_gather_kernels(t);
  register_random_kernels(t);
  register_attention_kernels(t);
  register_collective_kernels(t);
  return t;
}

const KernelTable& table() {
  static const KernelTable t = build();
  return t;
}

}  // namespace

KernelFn kernel_for(OpKind kind) {
  KernelFn fn = table()[size_t(kind)];
  if (!fn)
    throw Error(
        fmt::format("op \"{}\" has no eager kernel (every op in ir/ops.def needs one in "
                    "runtime/kernels/)",
                    op_name(kind)));
  return fn;
}

Array run_kernel(OpKind kind, std::span<const Array> inputs, const Attrs& attrs,
                 const TensorType& out_type) {
  Array out = Array::empty(out_type);
  kernel_for(kind)(inputs, attrs, out);
  return out;
}

Array run_op(OpKind kind, std::span<const Array> inputs, const Attrs& attrs) {
  TensorType types[8];
  std::vector<TensorType> many;
  std::span<const TensorType> span;
  if (inputs.size() <= 8) {
    for (size_t i = 0; i < inputs.size(); ++i) types[i] = inputs[i].type();
    span = {types, inputs.size()};
  } else {
    for (const Array& a : inputs) many.push_back(a.type());
    span = many;
  }
  return run_kernel(kind, inputs, attrs, infer_type(kind, span, attrs));
}

}  // namespace kiln::runtime
