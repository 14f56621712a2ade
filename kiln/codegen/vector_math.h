// Vector math for generated kernels: exp, log, log1p, tanh, sigmoid, erf, and gelu (tanh and
// erf forms) and softplus built on them, emitted as LLVM IR that the loop vectorizer can
// vectorize (straight-line polynomial / rational approximations: no branches, no calls).
//
// get_math_function(module, fn, type) returns `T kiln.math.<name>.<f32|f64>(T)` in `module`,
// defining it on first use as an internal, always-inline function. float uses the
// approximations; double calls the C library (scalar; documented in docs/codegen.md).
// Maximum errors (float: measured against float64 over dense sweeps, tests/codegen/
// vector_math_test.cc) and special values (inf, -inf, NaN, +-0, denormals, overflow) are
// documented in docs/codegen.md.
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Type.h>

namespace kiln::codegen {

enum class MathFunction {
  kExp,
  kLog,
  kLog1p,
  kTanh,
  kSigmoid,
  kErf,
  kGeluTanh,
  kGeluErf,
  kSoftplus
};

// The name used in symbols and docs ("exp", "gelu_tanh", ...).
const char* math_function_name(MathFunction fn);

// `type` is llvm float or double; anything else is an internal error.
llvm::Function* get_math_function(llvm::Module& module, MathFunction fn, llvm::Type* type);

}  // namespace kiln::codegen
