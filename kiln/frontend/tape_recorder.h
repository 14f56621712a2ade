// Internal link between the op dispatcher and the active GradientTapes of this thread.
#pragma once

#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/op_table.h"

namespace kiln::detail {

// True when at least one tape on this thread is recording (cheap; checked on every op).
bool tapes_recording();
// Offers one executed op to every recording tape; a tape keeps it if an input is watched.
void record_on_tapes(OpKind kind, const Attrs& attrs, std::span<const Tensor> inputs,
                     const Tensor& output);

// The backward function of a composite op: input gradients (undefined where not needed) from
// the gradients of its outputs (undefined where none flowed).
using CustomGradient = std::function<std::vector<Tensor>(const std::vector<Tensor>& output_grads,
                                                         const std::vector<bool>& needs)>;
// Offers a composite op (several outputs, own backward) to every recording tape.
void record_custom_on_tapes(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                            CustomGradient backward);
// True when a recording tape tracks one of `tensors`.
bool any_watched(std::span<const Tensor> tensors);

// Makes every recording tape on this thread watch `t` (a variable read).
void watch_on_tapes(const Tensor& t);

// Stops every tape of this thread from recording while alive, and restores each one's state
// after (a graph traced on behalf of the tapes must not be recorded on them). Tapes created
// while it is alive record normally.
class PauseTapes {
 public:
  PauseTapes();
  ~PauseTapes();
  PauseTapes(const PauseTapes&) = delete;
  PauseTapes& operator=(const PauseTapes&) = delete;

 private:
  std::vector<std::pair<void*, bool>> saved_;
};

}  // namespace kiln::detail
