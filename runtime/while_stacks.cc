#include "kiln/runtime/while_stacks.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::runtime {

void WhileStacks::push(std::span<const Array> state) {
  KILN_ASSERT(state.size() >= rows_.size(), "WhileStacks::push: fewer arrays than loop variables");
  for (size_t i = 0; i < rows_.size(); ++i)
    if (kept_[i]) rows_[i].push_back(state[i]);
  ++trips_;
}

std::vector<Array> WhileStacks::finish(std::span<const Array> initial) const {
  KILN_ASSERT(initial.size() >= rows_.size(),
              "WhileStacks::finish: fewer arrays than loop variables");
  std::vector<Array> out;
  out.reserve(rows_.size() + 1);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Array& first = initial[i];
    Shape shape{kept_[i] ? trips_ : 0};
    for (int64_t d : first.shape) shape.push_back(d);
    Array stack = Array::empty(first.dtype, shape);
    const size_t row_bytes = first.nbytes();
    auto* dst = static_cast<char*>(stack.raw());
    for (const Array& row : rows_[i]) {
      // Loop variables keep their type (both executors check every iteration).
      KILN_ASSERT(row.dtype == first.dtype && row.shape == first.shape,
                  fmt::format("WhileStacks: loop variable {} changed type from {} to {}", i,
                              first.type().to_string(), row.type().to_string()));
      if (row_bytes > 0) std::memcpy(dst, row.raw(), row_bytes);
      dst += row_bytes;
    }
    out.push_back(std::move(stack));
  }
  Array trips = Array::empty(DType::i64, Shape{});
  *trips.data<int64_t>() = trips_;
  out.push_back(std::move(trips));
  return out;
}

}  // namespace kiln::runtime
