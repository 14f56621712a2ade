// Literals (constant nodes of a kernel body) as LLVM constants: one element in its register
// type (splats and scalars are immediates), or the whole literal as a private global array in
// storage types (bool as i8), 64-byte aligned, which the kernel indexes like a buffer.
#pragma once

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Module.h>

#include <cstdint>

#include "kiln/ir/literal.h"

namespace kiln::codegen {

llvm::Constant* literal_element(llvm::LLVMContext& ctx, const ir::Literal& lit, int64_t i);

llvm::GlobalVariable* literal_global(llvm::Module& m, const ir::Literal& lit);

}  // namespace kiln::codegen
