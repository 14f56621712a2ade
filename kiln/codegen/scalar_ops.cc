#include "kiln/codegen/scalar_ops.h"

#include <llvm/IR/Intrinsics.h>

#include <limits>

#include "kiln/codegen/bf16_values.h"
#include "kiln/codegen/vector_math.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {
namespace {

bool is_unsigned(DType t) { return t == DType::u8 || t == DType::b8; }

llvm::Value* call_intrinsic(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id,
                            std::span<llvm::Value* const> args) {
  return b.CreateIntrinsic(id, {args[0]->getType()},
                           llvm::ArrayRef<llvm::Value*>(args.data(), args.size()));
}

llvm::Value* fconst(llvm::IRBuilder<>& b, llvm::Value* like, double v) {
  return llvm::ConstantFP::get(like->getType(), v);
}
llvm::Value* iconst(llvm::Value* like, int64_t v) {
  return llvm::ConstantInt::get(like->getType(), v, true);
}

llvm::Value* math(ScalarOpContext& c, MathFunction f, llvm::Value* x) {
  return c.b.CreateCall(get_math_function(c.module, f, x->getType()), {x});
}

llvm::Value* integer_div(ScalarOpContext& c, llvm::Value* x, llvm::Value* y,
                         bool is_unsigned_type) {
  llvm::IRBuilder<>& b = c.b;
  llvm::Value* zero = b.CreateICmpEQ(y, iconst(y, 0));
  if (c.division_by_zero_flag != nullptr) {
    llvm::Value* seen = b.CreateLoad(b.getInt1Ty(), c.division_by_zero_flag);
    b.CreateStore(b.CreateOr(seen, zero), c.division_by_zero_flag);
  }
  if (is_unsigned_type) return b.CreateUDiv(x, b.CreateSelect(zero, iconst(y, 1), y));
  // x / -1 is a wrapping negation (INT_MIN / -1 = INT_MIN, as numpy); the divisor of the
  // sdiv is never 0 or -1, so the division never traps.
  llvm::Value* minus_one = b.CreateICmpEQ(y, iconst(y, -1));
  llvm::Value* safe = b.CreateSelect(b.CreateOr(zero, minus_one), iconst(y, 1), y);
  return b.CreateSelect(minus_one, b.CreateSub(iconst(x, 0), x), b.CreateSDiv(x, safe));
}

llvm::Value* cast(llvm::IRBuilder<>& b, llvm::Value* x, DType from, DType to) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Type* t = register_type(ctx, to);
  if (from == to) return x;
  if (to == DType::bf16) return convert_to_bf16(b, x, from);
  if (to == DType::b8) {
    if (is_floating(from)) return b.CreateFCmpUNE(x, fconst(b, x, 0.0));
    return b.CreateICmpNE(x, iconst(x, 0));
  }
  if (is_floating(from)) {
    if (is_floating(to)) return b.CreateFPCast(x, t);
    llvm::Intrinsic::ID id =
        is_unsigned(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return b.CreateIntrinsic(id, {t, x->getType()}, {x});
  }
  // from an integer or bool
  if (is_floating(to)) return is_unsigned(from) ? b.CreateUIToFP(x, t) : b.CreateSIToFP(x, t);
  return b.CreateIntCast(x, t, !is_unsigned(from));
}

llvm::Value* float_unary(ScalarOpContext& c, OpKind op, llvm::Value* x, const Attrs& attrs) {
  llvm::IRBuilder<>& b = c.b;
  switch (op) {
    case OpKind::Neg:
      return b.CreateFNeg(x);
    case OpKind::Abs:
      return call_intrinsic(b, llvm::Intrinsic::fabs, {&x, 1});
    case OpKind::Sign: {  // as eager (Eigen): NaN stays NaN, -0.0 and +0.0 give +0.0
      llvm::Value* pos = b.CreateFCmpOGT(x, fconst(b, x, 0.0));
      llvm::Value* neg = b.CreateFCmpOLT(x, fconst(b, x, 0.0));
      llvm::Value* zero_or_nan = b.CreateSelect(b.CreateFCmpUNO(x, x), x, fconst(b, x, 0.0));
      return b.CreateSelect(pos, fconst(b, x, 1.0),
                            b.CreateSelect(neg, fconst(b, x, -1.0), zero_or_nan));
    }
    case OpKind::Square:
      return b.CreateFMul(x, x);
    case OpKind::Sqrt:
      return call_intrinsic(b, llvm::Intrinsic::sqrt, {&x, 1});
    case OpKind::Rsqrt:
      return b.CreateFDiv(fconst(b, x, 1.0), call_intrinsic(b, llvm::Intrinsic::sqrt, {&x, 1}));
    case OpKind::Exp:
      return math(c, MathFunction::kExp, x);
    case OpKind::Log:
      return math(c, MathFunction::kLog, x);
    case OpKind::Log1p:
      return math(c, MathFunction::kLog1p, x);
    case OpKind::Tanh:
      return math(c, MathFunction::kTanh, x);
    case OpKind::Sigmoid:
      return math(c, MathFunction::kSigmoid, x);
    case OpKind::Erf:
      return math(c, MathFunction::kErf, x);
    case OpKind::Softplus:
      return math(c, MathFunction::kSoftplus, x);
    case OpKind::Gelu:
      return math(
          c,
          attrs.get_bool("approximate", "gelu") ? MathFunction::kGeluTanh : MathFunction::kGeluErf,
          x);
    case OpKind::Relu:  // NaN stays NaN, -0 stays -0
      return b.CreateSelect(b.CreateFCmpOLT(x, fconst(b, x, 0.0)), fconst(b, x, 0.0), x);
    case OpKind::LeakyRelu: {
      llvm::Value* alpha = fconst(b, x, attrs.get_double("alpha", "leaky_relu"));
      return b.CreateSelect(b.CreateFCmpOGT(x, fconst(b, x, 0.0)), x, b.CreateFMul(x, alpha));
    }
    default:
      break;
  }
  internal_error(__FILE__, __LINE__, std::string("no float lowering for ") + op_info(op).name);
}

llvm::Value* int_unary(llvm::IRBuilder<>& b, OpKind op, llvm::Value* x, DType t) {
  const bool u = is_unsigned(t);
  switch (op) {
    case OpKind::Neg:
      return b.CreateSub(iconst(x, 0), x);
    case OpKind::Abs:
      return u ? x : b.CreateIntrinsic(llvm::Intrinsic::abs, {x->getType()}, {x, b.getFalse()});
    case OpKind::Sign: {
      llvm::Value* pos = b.CreateZExt(b.CreateICmpSGT(x, iconst(x, 0)), x->getType());
      if (u) return b.CreateZExt(b.CreateICmpNE(x, iconst(x, 0)), x->getType());
      llvm::Value* neg = b.CreateZExt(b.CreateICmpSLT(x, iconst(x, 0)), x->getType());
      return b.CreateSub(pos, neg);
    }
    case OpKind::Square:
      return b.CreateMul(x, x);
    case OpKind::Relu:
      return u ? x : b.CreateSelect(b.CreateICmpSLT(x, iconst(x, 0)), iconst(x, 0), x);
    default:
      break;
  }
  internal_error(__FILE__, __LINE__, std::string("no integer lowering for ") + op_info(op).name);
}

llvm::Value* compare(llvm::IRBuilder<>& b, OpKind op, llvm::Value* x, llvm::Value* y, DType t) {
  if (is_floating(t)) {
    switch (op) {
      case OpKind::Equal:
        return b.CreateFCmpOEQ(x, y);
      case OpKind::NotEqual:
        return b.CreateFCmpUNE(x, y);
      case OpKind::Less:
        return b.CreateFCmpOLT(x, y);
      case OpKind::LessEqual:
        return b.CreateFCmpOLE(x, y);
      case OpKind::Greater:
        return b.CreateFCmpOGT(x, y);
      default:
        return b.CreateFCmpOGE(x, y);
    }
  }
  const bool u = is_unsigned(t);
  switch (op) {
    case OpKind::Equal:
      return b.CreateICmpEQ(x, y);
    case OpKind::NotEqual:
      return b.CreateICmpNE(x, y);
    case OpKind::Less:
      return u ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y);
    case OpKind::LessEqual:
      return u ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y);
    case OpKind::Greater:
      return u ? b.CreateICmpUGT(x, y) : b.CreateICmpSGT(x, y);
    default:
      return u ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y);
  }
}

llvm::Value* binary(ScalarOpContext& c, OpKind op, llvm::Value* x, llvm::Value* y, DType t) {
  llvm::IRBuilder<>& b = c.b;
  const bool f = is_floating(t), u = is_unsigned(t);
  switch (op) {
    case OpKind::Add:
      return f ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
    case OpKind::Sub:
      return f ? b.CreateFSub(x, y) : b.CreateSub(x, y);
    case OpKind::Mul:
      return f ? b.CreateFMul(x, y) : b.CreateMul(x, y);
    case OpKind::Div:
      return f ? b.CreateFDiv(x, y) : integer_div(c, x, y, u);
    case OpKind::Pow: {
      llvm::Value* args[] = {x, y};
      return call_intrinsic(b, llvm::Intrinsic::pow, args);
    }
    case OpKind::Maximum:
    case OpKind::Minimum: {
      const bool max = op == OpKind::Maximum;
      if (f) {
        llvm::Value* args[] = {x, y};
        return call_intrinsic(b, max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, args);
      }
      llvm::Value* pick = max ? (u ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y))
                              : (u ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y));
      return b.CreateSelect(pick, x, y);
    }
    case OpKind::LogicalAnd:
      return b.CreateAnd(x, y);
    case OpKind::LogicalOr:
      return b.CreateOr(x, y);
    default:
      return compare(b, op, x, y, t);
  }
}

}  // namespace

llvm::Type* register_type(llvm::LLVMContext& c, DType t) {
  switch (t) {
    case DType::f32:
      return llvm::Type::getFloatTy(c);
    case DType::f64:
      return llvm::Type::getDoubleTy(c);
    case DType::i32:
      return llvm::Type::getInt32Ty(c);
    case DType::i64:
      return llvm::Type::getInt64Ty(c);
    case DType::u8:
      return llvm::Type::getInt8Ty(c);
    case DType::b8:
      return llvm::Type::getInt1Ty(c);
    case DType::bf16:  // computed in float32 (codegen/bf16_values.h)
      return llvm::Type::getFloatTy(c);
  }
  return nullptr;
}

llvm::Type* storage_type(llvm::LLVMContext& c, DType t) {
  if (t == DType::b8) return llvm::Type::getInt8Ty(c);
  if (t == DType::bf16) return llvm::Type::getInt16Ty(c);
  return register_type(c, t);
}

llvm::Value* emit_scalar_op(ScalarOpContext& c, OpKind op, std::span<llvm::Value* const> args,
                            DType in, DType out, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  if (op == OpKind::Cast) return cast(c.b, args[0], in, out);
  if (op == OpKind::Copy) return args[0];
  if (op == OpKind::Select) return c.b.CreateSelect(args[0], args[1], args[2]);
  if (op == OpKind::LogicalNot) return c.b.CreateNot(args[0]);
  KILN_ASSERT(info.has(kElementwise), std::string("not an elementwise op: ") + info.name);
  if (info.arity == 2) return binary(c, op, args[0], args[1], in);
  if (is_floating(in)) return float_unary(c, op, args[0], attrs);
  return int_unary(c.b, op, args[0], in);
}

llvm::Value* reduction_identity(OpKind op, DType t, llvm::Type* rt) {
  const bool f = is_floating(t);
  const double inf = std::numeric_limits<double>::infinity();
  auto int_min = [&]() -> int64_t {
    return t == DType::u8    ? 0
           : t == DType::i32 ? std::numeric_limits<int32_t>::min()
                             : std::numeric_limits<int64_t>::min();
  };
  auto int_max = [&]() -> int64_t {
    return t == DType::u8    ? 255
           : t == DType::i32 ? std::numeric_limits<int32_t>::max()
                             : std::numeric_limits<int64_t>::max();
  };
  switch (op) {
    case OpKind::Prod:
      return f ? llvm::ConstantFP::get(rt, 1.0) : llvm::ConstantInt::get(rt, 1);
    case OpKind::Max:
    case OpKind::ArgMax:
      return f ? llvm::ConstantFP::get(rt, -inf)
               : llvm::ConstantInt::get(rt, uint64_t(int_min()), true);
    case OpKind::Min:
    case OpKind::ArgMin:
      return f ? llvm::ConstantFP::get(rt, inf)
               : llvm::ConstantInt::get(rt, uint64_t(int_max()), true);
    default:
      return f ? llvm::ConstantFP::get(rt, 0.0) : llvm::ConstantInt::get(rt, 0);
  }
}

llvm::Value* emit_reduction_combine(llvm::IRBuilder<>& b, OpKind op, DType t, llvm::Value* acc,
                                    llvm::Value* v) {
  const bool f = is_floating(t), u = t == DType::u8;
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  fmf.setAllowReassoc(true);  // several vector accumulators, order fixed by the code
  b.setFastMathFlags(fmf);
  switch (op) {
    case OpKind::Prod:
      return f ? b.CreateFMul(acc, v) : b.CreateMul(acc, v);
    case OpKind::Max:
      if (f) return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, acc, v);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, acc, v);
    case OpKind::Min:
      if (f) return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, acc, v);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, acc, v);
    default:
      return f ? b.CreateFAdd(acc, v) : b.CreateAdd(acc, v);
  }
}

llvm::Value* emit_arg_replaces(llvm::IRBuilder<>& b, OpKind op, DType t, llvm::Value* v,
                               llvm::Value* best) {
  const bool max = op == OpKind::ArgMax;
  if (is_floating(t)) {
    llvm::Value* better = max ? b.CreateFCmpOGT(v, best) : b.CreateFCmpOLT(v, best);
    llvm::Value* first_nan = b.CreateAnd(b.CreateFCmpUNO(v, v), b.CreateFCmpORD(best, best));
    return b.CreateOr(better, first_nan);
  }
  if (t == DType::u8) return max ? b.CreateICmpUGT(v, best) : b.CreateICmpULT(v, best);
  return max ? b.CreateICmpSGT(v, best) : b.CreateICmpSLT(v, best);
}

}  // namespace kiln::codegen
