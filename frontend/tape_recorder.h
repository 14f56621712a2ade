// Internal link between the op dispatcher and the active GradientTapes of this thread.
#pragma once

#include <span>

#include "frontend/tensor.h"
#include "ir/op_table.h"

namespace kiln::detail {

// True when at least one tape on this thread is recording (cheap; checked on every op).
bool tapes_recording();
// Offers one executed op to every recording tape; a tape keeps it if an input is watched.
void record_on_tapes(OpKind kind, const Attrs& attrs, std::span<const Tensor> inputs,
                     const Tensor& output);

// Makes every recording tape on this thread watch `t` (a variable read).
void watch_on_tapes(const Tensor& t);

}  // namespace kiln::detail
