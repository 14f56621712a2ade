// Rewrites a kernel body into the primitive ops the kernel emitter lowers directly.
//
// The result is a new closed graph with the same parameters (plus, when `as_parameter` is
// given, one more parameter standing for that node's output: the contraction of a
// matmul/conv fusion, whose epilogue is then the kernel) and the same outputs, where
//   softmax(x)     = exp(x - m) / sum(exp(x - m))             m = max(x, axis, keepdims)
//   log_softmax(x) = (x - m) - log(sum(exp(x - m)))
//   logsumexp(x)   = log(sum(exp(x - s))) + s                  s = m if finite, else 0
//   element_count  = its constant (shapes are static in kernels)
// follow the eager kernels' formulas (runtime/kernels/softmax.cc, reduce.cc), and
//   exp(log_softmax(x)) = exp(x - m) * (1 / sum(exp(x - m)))   (the softmax, from the same
//                                                             exponentials and sum)
// so a log_softmax gradient (g - exp(log_softmax(x)) * sum(g)) evaluates exp once per element;
// e * (1 / s) is the same function within 1.5 ulp of e / s plus exp's error, while
// exp(x - m - log s) amplifies the rounding of its argument by |log_softmax| (up to ~100 ulp
// for rows of large logits). Every other node is copied. Shapes must be fully known (kiln::Error
// naming the kernel otherwise).
#pragma once

#include <memory>

#include "kiln/ir/graph.h"

namespace kiln::codegen {

std::unique_ptr<ir::Graph> decompose_for_codegen(const ir::Graph& body,
                                                 const ir::Node* as_parameter = nullptr);

}  // namespace kiln::codegen
