#include "kiln/runtime/while_stacks.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::runtime {
namespace {

// A stack of `rows` rows shaped like `row`: buffers[i] when it has that type, else a new one.
Array stack_of(const Array& row, int64_t rows, std::span<const Array> buffers = {}, size_t i = 0) {
  Shape shape{rows};
  for (int64_t d : row.shape) shape.push_back(d);
  if (i < buffers.size() && buffers[i].storage && buffers[i].dtype == row.dtype &&
      buffers[i].shape == shape)
    return buffers[i];
  return Array::empty(row.dtype, shape);
}

// Loop variables keep their type (both executors check every iteration).
void check_row(size_t i, const TensorType& first, const Array& row) {
  KILN_ASSERT(row.dtype == first.dtype && row.shape == first.shape,
              fmt::format("WhileStacks: loop variable {} changed type from {} to {}", i,
                          first.to_string(), row.type().to_string()));
}

}  // namespace

WhileStacks::WhileStacks(std::vector<bool> kept, int64_t declared_trips, std::vector<Array> buffers)
    : kept_(std::move(kept)),
      declared_(declared_trips),
      rows_(kept_.size()),
      buffers_(std::move(buffers)) {}

void WhileStacks::push(std::span<const Array> state) {
  KILN_ASSERT(state.size() >= kept_.size(), "WhileStacks::push: fewer arrays than loop variables");
  if (declared_ < 0) {
    for (size_t i = 0; i < kept_.size(); ++i)
      if (kept_[i]) rows_[i].push_back(state[i]);
  } else if (trips_ < declared_) {
    if (filled_.empty())
      for (size_t i = 0; i < kept_.size(); ++i) {
        Array stack = stack_of(state[i], kept_[i] ? declared_ : 0, buffers_, i);
        filled_.push_back(std::move(stack));
        state_types_.push_back(state[i].type());
      }
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (!kept_[i]) continue;
      const Array& row = state[i];
      check_row(i, state_types_[i], row);
      char* dst = static_cast<char*>(filled_[i].raw()) + size_t(trips_) * row.nbytes();
      if (row.nbytes() > 0 && row.raw() != dst) std::memcpy(dst, row.raw(), row.nbytes());
    }
  }
  ++trips_;
}

Array WhileStacks::next_row(size_t i, int64_t ahead) const {
  const int64_t k = trips_ + ahead;
  if (declared_ < 0 || filled_.empty() || i >= kept_.size() || !kept_[i] || k >= declared_)
    return {};
  const TensorType& t = state_types_[i];
  const size_t bytes = size_t(t.shape.num_elements()) * dtype_size(t.dtype);
  if (bytes == 0 || bytes % kAlignment != 0) return {};
  char* row = static_cast<char*>(filled_[i].raw()) + size_t(k) * bytes;
  return Array{t.dtype, t.shape, Storage::view(row, bytes, filled_[i].storage)};
}

std::vector<Array> WhileStacks::finish(std::span<const Array> initial) {
  KILN_ASSERT(initial.size() >= kept_.size(),
              "WhileStacks::finish: fewer arrays than loop variables");
  std::vector<Array> out;
  out.reserve(kept_.size() + 1);
  for (size_t i = 0; i < kept_.size(); ++i) {
    const Array& first = initial[i];
    if (!filled_.empty()) {  // declared and pushed to: the rows are there
      out.push_back(std::move(filled_[i]));
      continue;
    }
    const int64_t rows = !kept_[i] ? 0 : declared_ >= 0 ? 0 : trips_;
    Array stack = stack_of(first, rows);
    const size_t row_bytes = first.nbytes();
    auto* dst = static_cast<char*>(stack.raw());
    for (const Array& row : rows_[i]) {
      check_row(i, first.type(), row);
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
