// Operand prologues (contract: operand_prologue.h).
#include "kiln/ir/operand_prologue.h"

#include "kiln/ir/op_table.h"

namespace kiln::ir {

bool is_operand_prologue(const Node& cast, const Node& contraction) {
  if (!cast.is_op(OpKind::Cast) || contraction.kind() != NodeKind::kOp ||
      !op_info(contraction.op()).has(kRoundsOperands))
    return false;
  if (contraction.output()->type().dtype != DType::bf16 ||
      cast.output()->type().dtype != DType::bf16 || cast.input(0)->type().dtype != DType::f32)
    return false;
  for (size_t i = 0; i < contraction.inputs().size() && i < 2; ++i)
    if (contraction.input(i) == cast.output()) return true;
  return false;
}

const Value* prologue_source(const Node& contraction, const Value* operand) {
  const Node* p = operand->producer();
  if (p == nullptr || !is_operand_prologue(*p, contraction)) return nullptr;
  return p->input(0);
}

}  // namespace kiln::ir
