// The one path every frontend op takes: type the call with the op table, run it (eager:
// the runtime kernel), and let active gradient tapes record it.
#pragma once

#include <initializer_list>
#include <span>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/op_table.h"

namespace kiln::detail {

Tensor apply(OpKind kind, std::span<const Tensor> inputs, const Attrs& attrs = {});

inline Tensor apply(OpKind kind, std::initializer_list<Tensor> inputs, const Attrs& attrs = {}) {
  return apply(kind, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

}  // namespace kiln::detail
