#include "frontend/dispatch.h"

#include <fmt/format.h>

#include "frontend/tape_recorder.h"
#include "runtime/kernels.h"

namespace kiln::detail {

Tensor apply(OpKind kind, std::span<const Tensor> inputs, const Attrs& attrs) {
  constexpr size_t kInline = 4;
  TensorType types_inline[kInline];
  runtime::Array arrays_inline[kInline];
  std::vector<TensorType> types_heap;
  std::vector<runtime::Array> arrays_heap;
  TensorType* types = types_inline;
  runtime::Array* arrays = arrays_inline;
  if (inputs.size() > kInline) {
    types_heap.resize(inputs.size());
    arrays_heap.resize(inputs.size());
    types = types_heap.data();
    arrays = arrays_heap.data();
  }
  bool symbolic = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(fmt::format("{}: input {} is an undefined tensor", op_name(kind), i));
    types[i] = inputs[i].type();
    symbolic = symbolic || inputs[i].is_symbolic();
  }
  TensorType out_type = infer_type(kind, {types, inputs.size()}, attrs);
  // Symbolic inputs (functional-model construction): only the type rule runs.
  if (symbolic) return Tensor::symbolic(out_type, nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) arrays[i] = inputs[i].array();
  Tensor out(runtime::run_kernel(kind, {arrays, inputs.size()}, attrs, out_type));
  if (tapes_recording()) record_on_tapes(kind, attrs, inputs, out);
  return out;
}

}  // namespace kiln::detail
