#include "kiln/codegen/accumulator.h"

#include <llvm/IR/Intrinsics.h>

#include "kiln/codegen/scalar_ops.h"

namespace kiln::codegen {

bool Accumulator::fast(OpKind op, DType t) {
  return (op == OpKind::Max || op == OpKind::Min) && is_floating(t);
}

Accumulator::Accumulator(llvm::IRBuilder<>& b, llvm::IRBuilder<>& allocas, OpKind op, DType t)
    : b_(b), op_(op), t_(t), type_(register_type(b.getContext(), t)) {
  value_ = allocas.CreateAlloca(type_);
  b_.CreateStore(reduction_identity(op_, t_, type_), value_);
  if (!fast(op, t)) return;
  exact_ = false;
  flag_ = allocas.CreateAlloca(type_);
  b_.CreateStore(llvm::ConstantFP::get(type_, 0.0), flag_);
}

void Accumulator::add(llvm::Value* v) {
  llvm::Value* cur = b_.CreateLoad(type_, value_);
  if (exact_) {
    b_.CreateStore(emit_reduction_combine(b_, op_, t_, cur, v), value_);
    return;
  }
  llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  fmf.setNoNaNs(true);         // the flag below sends every NaN to the exact pass
  fmf.setNoSignedZeros(true);  // a zero result goes to the exact pass
  b_.setFastMathFlags(fmf);
  llvm::Value* better = op_ == OpKind::Max ? b_.CreateFCmpOGT(v, cur) : b_.CreateFCmpOLT(v, cur);
  b_.CreateStore(b_.CreateSelect(better, v, cur), value_);
  // flag += v * 0: NaN once v is NaN or infinite (reassociated: a sum reduction, one fma).
  fmf = llvm::FastMathFlags();
  fmf.setAllowContract(true);
  fmf.setAllowReassoc(true);
  b_.setFastMathFlags(fmf);
  llvm::Value* flag = b_.CreateLoad(type_, flag_);
  b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type_},
                                    {v, llvm::ConstantFP::get(type_, 0.0), flag}),
                 flag_);
}

llvm::Value* Accumulator::result(const std::function<void()>& rescan) {
  if (!exact_) {
    llvm::Value* r = b_.CreateLoad(type_, value_);
    llvm::Value* flag = b_.CreateLoad(type_, flag_);
    // A logical or (select): r is poison when a NaN met the nnan compare, and then the flag
    // alone decides.
    llvm::Value* again = b_.CreateSelect(b_.CreateFCmpUNO(flag, flag), b_.getTrue(),
                                         b_.CreateFCmpOEQ(r, llvm::ConstantFP::get(type_, 0.0)));
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* exact = llvm::BasicBlock::Create(b_.getContext(), "exact_extremum", fn);
    auto* done = llvm::BasicBlock::Create(b_.getContext(), "extremum_done", fn);
    b_.CreateCondBr(again, exact, done);
    b_.SetInsertPoint(exact);
    exact_ = true;
    b_.CreateStore(reduction_identity(op_, t_, type_), value_);
    rescan();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
  return b_.CreateLoad(type_, value_);
}

}  // namespace kiln::codegen
