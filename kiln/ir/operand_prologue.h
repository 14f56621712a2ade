// Operand prologues: a contraction that reads an operand through a cast inside its fusion
// group. Where the contraction's op-table row has kRoundsOperands (matmul and the three
// convolutions) and its product is bf16, fusion (passes/fusion.cc, rule 5e) lets a cast to bf16
// of a float32 value join the group as the operand's prologue; codegen then hands the runtime
// the float32 value, which rounds each element to bf16 (nearest even, as the cast does) where
// it reads it: a GEMM while packing it (runtime::gemm_bf16's rounded operands), a convolution
// in the pass that widens or copies its operands (runtime/kernels/conv_bf16.cc). The product
// reads the same bf16 values as it would from the cast's output, and the bf16 copy is never
// stored in the arena.
#pragma once

#include "kiln/ir/graph.h"

namespace kiln::ir {

// Whether `cast` may be the prologue of operand `operand` of `contraction`: a cast to bf16 of
// a float32 value, read as input 0 or 1 of a contraction with kRoundsOperands whose result is
// bf16.
bool is_operand_prologue(const Node& cast, const Node& contraction);

// The float32 value that `operand`, an input of `contraction`, is the prologue cast of; null
// where `operand` is not produced by such a cast.
const Value* prologue_source(const Node& contraction, const Value* operand);

}  // namespace kiln::ir
