// Transposes folded into matmul flags: the pass "transpose-folding".
//
// matmul(transpose(a, perm), b) {transpose_a=t} -> matmul(a, b) {transpose_a=!t} when perm
// keeps the batch axes where they are and swaps the last two (likewise for b). The matmul then
// reads a in its own layout (the GEMM takes the flag), and the transpose, if nothing else
// uses it, is left to dce. The output type is unchanged. The GEMM reads the operand in
// the other layout, which can change its summation order: results may differ in the last bit
// (tests/passes/transpose_folding_test.cc bounds it), so the exact default pipeline does not
// include this pass.
//
// Never fires when the transpose's input is a variable value that an assignment between the
// transpose and the matmul replaces (the matmul would read a stale value).
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_transpose_folding();

}  // namespace kiln::passes
