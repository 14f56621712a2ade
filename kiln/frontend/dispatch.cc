#include "kiln/frontend/dispatch.h"

#include <fmt/format.h>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/function/tracing_random.h"
#include "kiln/frontend/tape_recorder.h"
#include "kiln/runtime/kernels.h"

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
  bool symbolic = false, traced = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(fmt::format("{}: input {} is an undefined tensor", op_name(kind), i));
    types[i] = inputs[i].type();
    symbolic = symbolic || inputs[i].is_symbolic();
    traced = traced || inputs[i].is_traced();
  }
  TensorType out_type = infer_type(kind, {types, inputs.size()}, attrs);
  if (TraceContext* ctx = TraceContext::current()) {
    // Inside kiln::function: ops on traced values become graph nodes; random ops with a
    // concrete seed draw it from the function's rng_state so that every call differs, while a
    // traced seed (a SeedGenerator's state) is recorded as it is. Ops on concrete values only
    // run eagerly (folded at trace time).
    if (traced || op_info(kind).has(kRandom)) {
      Tensor out;
      if (op_info(kind).has(kRandom) && !inputs[0].is_traced()) {
        std::vector<Tensor> seeded(inputs.begin(), inputs.end());
        seeded[0] = traced_random_seed(*ctx, inputs[0]);
        out = ctx->record_op(kind, seeded, attrs);
        if (tapes_recording()) record_on_tapes(kind, attrs, seeded, out);
        return out;
      }
      out = ctx->record_op(kind, inputs, attrs);
      if (tapes_recording()) record_on_tapes(kind, attrs, inputs, out);
      return out;
    }
  } else if (traced) {
    throw Error(fmt::format(
        "{}: an input is a traced value of a kiln::function that has finished tracing; traced "
        "tensors have no data outside their function: return them from the function instead",
        op_name(kind)));
  }
  // Symbolic inputs (functional-model construction): only the type rule runs.
  if (symbolic) return Tensor::symbolic(out_type, nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) arrays[i] = inputs[i].array();
  Tensor out(runtime::run_kernel(kind, {arrays, inputs.size()}, attrs, out_type));
  if (tapes_recording()) record_on_tapes(kind, attrs, inputs, out);
  return out;
}

}  // namespace kiln::detail
