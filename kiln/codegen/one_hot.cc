#include "kiln/codegen/one_hot.h"

#include <limits>

#include "kiln/codegen/scalar_ops.h"

namespace kiln::codegen {

bool one_hot_fits_i32(int64_t depth) { return depth <= std::numeric_limits<int32_t>::max(); }

llvm::Value* one_hot_narrow_index(llvm::IRBuilder<>& b, llvm::Value* index, int64_t depth) {
  llvm::Value* wide = b.CreateSExtOrTrunc(index, b.getInt64Ty());
  llvm::Value* inside = b.CreateICmpULT(wide, b.getInt64(uint64_t(depth)));
  return b.CreateSelect(inside, b.CreateTrunc(wide, b.getInt32Ty()), b.getInt32(-1));
}

llvm::Value* one_hot_compare(llvm::IRBuilder<>& b, llvm::Value* index, llvm::Value* d,
                             int64_t depth) {
  if (one_hot_fits_i32(depth))
    return b.CreateICmpEQ(one_hot_narrow_index(b, index, depth), b.CreateTrunc(d, b.getInt32Ty()));
  return b.CreateICmpEQ(b.CreateSExtOrTrunc(index, b.getInt64Ty()), d);
}

llvm::Value* one_hot_value(llvm::IRBuilder<>& b, llvm::Value* hit, DType t) {
  if (t == DType::b8) return hit;
  llvm::Type* rt = register_type(b.getContext(), t);
  if (is_floating(t))
    return b.CreateSelect(hit, llvm::ConstantFP::get(rt, 1.0), llvm::ConstantFP::get(rt, 0.0));
  return b.CreateZExt(hit, rt);
}

llvm::PHINode* CountedLoop::down_counter(llvm::Value* start) {
  for (const auto& [s, k] : down)
    if (s == start) return k;
  llvm::IRBuilder<> at_top(header, header->getFirstNonPHIIt());  // (it may hold phis only)
  llvm::PHINode* k = at_top.CreatePHI(start->getType(), 2, "one_hot.k");
  k->addIncoming(start, preheader);
  down.emplace_back(start, k);
  return k;
}

void CountedLoop::close(llvm::IRBuilder<>& b) {
  for (const auto& [s, k] : down)
    k->addIncoming(b.CreateSub(k, llvm::ConstantInt::get(k->getType(), 1)), b.GetInsertBlock());
}

}  // namespace kiln::codegen
