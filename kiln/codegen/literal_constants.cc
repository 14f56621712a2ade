#include "kiln/codegen/literal_constants.h"

#include <vector>

#include "kiln/codegen/scalar_ops.h"
#include "kiln/ir/bfloat16.h"

namespace kiln::codegen {

llvm::Constant* literal_element(llvm::LLVMContext& ctx, const ir::Literal& lit, int64_t i) {
  llvm::Type* rt = register_type(ctx, lit.type().dtype);
  const double d = lit.as_double(i);
  switch (lit.type().dtype) {
    case DType::f32:
    case DType::f64:
    case DType::bf16:  // its float32 register value (exact)
      return llvm::ConstantFP::get(rt, d);
    case DType::i64:
      return llvm::ConstantInt::get(rt, uint64_t(lit.data_as<int64_t>()[i]));
    default:
      return llvm::ConstantInt::get(rt, uint64_t(int64_t(d)), true);
  }
}

llvm::GlobalVariable* literal_global(llvm::Module& m, const ir::Literal& lit) {
  llvm::Type* st = storage_type(m.getContext(), lit.type().dtype);
  std::vector<llvm::Constant*> items;
  for (int64_t i = 0; i < lit.num_elements(); ++i) {
    if (lit.type().dtype == DType::b8)
      items.push_back(llvm::ConstantInt::get(st, lit.as_double(i) != 0.0));
    else if (lit.type().dtype == DType::bf16)  // its bits, as in memory
      items.push_back(llvm::ConstantInt::get(st, lit.data_as<bfloat16>()[i].bits));
    else
      items.push_back(literal_element(m.getContext(), lit, i));
  }
  auto* at = llvm::ArrayType::get(st, items.size());
  auto* gv = new llvm::GlobalVariable(m, at, true, llvm::GlobalValue::PrivateLinkage,
                                      llvm::ConstantArray::get(at, items), "const");
  gv->setAlignment(llvm::Align(64));
  return gv;
}

}  // namespace kiln::codegen
