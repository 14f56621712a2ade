// KernelEmitter (codegen/kernel_emitter.h): values computed at an index (elemental emission)
// and reductions.
#include <algorithm>
#include <optional>

#include "kiln/codegen/accumulator.h"
#include "kiln/codegen/bf16_values.h"
#include "kiln/codegen/kernel_emitter.h"
#include "kiln/codegen/literal_constants.h"
#include "kiln/codegen/scalar_ops.h"
#include "kiln/ir/error.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeKind;
using ir::Value;

void KernelEmitter::emit_reduction_through_memory(const Value* v, const Node& n, Index idx,
                                                  int first) {
  const Value* x = n.input(0);
  const Shape& in = x->shape();
  const std::vector<int> axes = reduction_axes(n);
  const bool keepdims = n.attrs().get_bool("keepdims", op_name(n.op()));
  const DType t = x->dtype();
  llvm::Type* rt = register_type(ctx_, t);
  const std::vector<llvm::Value*>& buffers = out_buffers_.at(v);
  // A bf16 result accumulates in its float32 buffer (KernelPlan::accumulators).
  const auto accumulator = accumulator_.find(v);
  const bool own = accumulator == accumulator_.end();
  llvm::Value* acc = own ? buffers.front() : accumulator->second;
  auto at = [&](const Index& o) { return b_.CreateInBoundsGEP(rt, acc, offset(v, o)); };
  Index out_idx = idx;
  nest(v->shape(), first, out_idx,
       [&](const Index& o) { b_.CreateStore(reduction_identity(n.op(), t, rt), at(o)); });
  Index in_idx = idx;
  nest(in, first, in_idx, [&](const Index& i) {
    Index o;
    for (int d = 0; d < in.rank(); ++d) {
      bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced)
        o.push_back(i[size_t(d)]);
      else if (keepdims)
        o.push_back(b_.getInt64(0));
    }
    llvm::Value* p = at(o);
    b_.CreateStore(emit_reduction_combine(b_, n.op(), t, b_.CreateLoad(rt, p), elem(x, i)), p);
  });
  int64_t count = 1;
  for (int d : axes) count *= in[d];
  if (!n.is_op(OpKind::Mean) && buffers.size() == 1 && own) return;
  out_idx = idx;
  nest(v->shape(), first, out_idx, [&](const Index& o) {
    llvm::Value* r = b_.CreateLoad(rt, at(o));
    if (n.is_op(OpKind::Mean)) r = b_.CreateFDiv(r, llvm::ConstantFP::get(rt, double(count)));
    if (!own) return store_at_offset(v, r, offset(v, o));  // rounded once, into each buffer
    for (llvm::Value* buf : buffers) b_.CreateStore(r, b_.CreateInBoundsGEP(rt, buf, offset(v, o)));
  });
}

llvm::Value* KernelEmitter::offset(const Value* v, const Index& idx) {
  if (plan_.mode == IterationMode::kFlat)
    return (idx.empty() || v->shape().num_elements() == 1) ? b_.getInt64(0) : idx[0];
  return row_major_offset(b_, v->shape(), row_buffer_.count(v) != 0, idx);
}

llvm::Value* KernelEmitter::load(const Value* v, llvm::Value* base, const Index& idx) {
  return load_at_offset(v, base, offset(v, idx));
}

llvm::Value* KernelEmitter::load_at_offset(const Value* v, llvm::Value* base, llvm::Value* off) {
  llvm::Type* st = storage_type(ctx_, v->dtype());
  llvm::Value* x = b_.CreateLoad(st, b_.CreateInBoundsGEP(st, base, off));
  if (v->dtype() == DType::b8) x = b_.CreateICmpNE(x, b_.getInt8(0));
  if (v->dtype() == DType::bf16) x = widen_bf16(b_, x);
  return x;
}

llvm::Value* KernelEmitter::reshape_of_memory(const Node& n, const Value* v, const Index& idx) {
  if (!n.is_op(OpKind::Reshape) || plan_.mode == IterationMode::kFlat) return nullptr;
  const Value* u = n.input(0);
  llvm::Value* base = nullptr;
  if (u->def() != Value::Def::kNodeOutput)
    base = base_.at(u);
  else if (auto it = stored_.find(u); it != stored_.end())
    base = it->second;
  if (base == nullptr || u->shape().num_elements() != v->shape().num_elements()) return nullptr;
  const bool row_only = row_buffer_.count(u) != 0;
  if (row_only &&
      (u->shape().rank() == 0 || v->shape().rank() == 0 || u->shape()[0] != v->shape()[0]))
    return nullptr;
  return load_at_offset(u, base, row_major_offset(b_, v->shape(), row_only, idx));
}

llvm::Value* KernelEmitter::constant(const Node& n, const Index& idx) {
  const ir::Literal& lit = *n.literal();
  if (lit.num_elements() == 0 || lit.is_splat()) return literal_element(ctx_, lit, 0);
  auto& global = constants_[&n];
  if (global == nullptr) global = literal_global(m_, lit);
  return load(n.output(), global, idx);
}

namespace {

// Whether op n's float32 result is a bf16 value (or a NaN with a zero lower half) whenever its
// operands are: an elementwise or window op of rounding class Exact that computes from its
// operands alone (max, min, relu, neg, abs, sign, max-pool: an operand's value up to its sign,
// a constant bf16 holds, or a NaN of an operand or the default one), every float operand
// bf16. Its rounding is the identity but for a NaN's quiet bit (quiet_bf16_nan).
bool exact_on_bf16(const Node& n) {
  const OpInfo& info = op_info(n.op());
  if (info.rounding != RoundingClass::Exact || info.has(kRandom) ||
      !(info.has(kElementwise) || info.has(kWindow)))
    return false;
  return std::all_of(n.inputs().begin(), n.inputs().end(), [](const Value* in) {
    return !is_floating(in->dtype()) || in->dtype() == DType::bf16;
  });
}

}  // namespace

llvm::Value* KernelEmitter::compute(const Value* v, const Index& idx) {
  if (v->def() != Value::Def::kNodeOutput) return load(v, base_.at(v), idx);
  const Node& n = *v->producer();
  if (n.kind() == NodeKind::kConstant) return constant(n, idx);
  if (is_reduction(n)) internal_error(__FILE__, __LINE__, "a reduction must be materialized");
  if (n.is_op(OpKind::Concat)) internal_error(__FILE__, __LINE__, "a concat must be materialized");
  if (n.is_op(OpKind::OneHot)) return one_hot(n, idx, v);
  if (llvm::Value* x = reshape_of_memory(n, v, idx)) return x;
  if (op_info(n.op()).has(kWindow))  // max-pool (codegen/pool_window.h)
    return rounded(n, v,
                   emit_pool(
                       b_, n, idx, [&](size_t i, const Index& at) { return elem(n.input(i), at); },
                       window_tile_));
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    if (n.is_op(OpKind::BroadcastLike) && i == 1) break;
    args.push_back(elem(n.input(i), operand_index(b_, plan_.mode, n, i, idx)));
  }
  const OpInfo& info = op_info(n.op());
  if (!info.has(kElementwise)) return args[0];  // layout ops: the index did the work
  ScalarOpContext ctx{b_, m_, flag_};
  DType in = n.is_op(OpKind::Select) ? n.input(1)->dtype() : n.input(0)->dtype();
  llvm::Value* x = emit_scalar_op(ctx, n.op(), args, in, v->dtype(), n.attrs());
  // (A cast rounds itself; copy and select pass bf16 values on.)
  const bool passes_on = n.is_op(OpKind::Cast) || n.is_op(OpKind::Copy) || n.is_op(OpKind::Select);
  return passes_on ? x : rounded(n, v, x);
}

llvm::Value* KernelEmitter::rounded(const Node& n, const Value* v, llvm::Value* x) {
  if (v->dtype() != DType::bf16) return x;
  return exact_on_bf16(n) ? quiet_bf16_nan(b_, x) : round_to_bf16(b_, x);
}

llvm::Value* KernelEmitter::one_hot(const Node& n, const Index& idx, const Value* v) {
  const int64_t depth = v->shape()[size_t(v->shape().rank() - 1)];
  Index at = operand_index(b_, plan_.mode, n, 0, idx);
  CountedLoop* loop = loops_.empty() ? nullptr : &loops_.back();
  bool counted = loop != nullptr && loop->from_zero && loop->counter == idx.back() &&
                 loop->cache_frame == cache_.size() - 1 && one_hot_fits_i32(depth);
  for (llvm::Value* i : at) {  // the index must not depend on this loop
    bool outer = llvm::isa<llvm::Constant>(i) || i == row_;
    for (size_t k = 0; k + 1 < loops_.size(); ++k) outer = outer || loops_[k].counter == i;
    counted = counted && outer;
  }
  if (!counted)
    return one_hot_value(b_, one_hot_compare(b_, elem(n.input(0), at), idx.back(), depth),
                         v->dtype());
  llvm::Value* start = nullptr;
  {  // at the end of the preheader, caching what it computes for the whole loop
    llvm::IRBuilder<>::InsertPointGuard guard(b_);
    b_.SetInsertPoint(loop->preheader->getTerminator());
    auto in_body = std::move(cache_.back());
    cache_.back().clear();
    start = one_hot_narrow_index(b_, elem(n.input(0), at), depth);
    cache_.back().merge(in_body);
  }
  llvm::Value* hit = b_.CreateICmpEQ(loop->down_counter(start), b_.getInt32(0));
  return one_hot_value(b_, hit, v->dtype());
}

llvm::Value* KernelEmitter::elem(const Value* v, const Index& idx) {
  if (auto it = stored_.find(v); it != stored_.end()) return load(v, it->second, idx);
  auto key = std::make_pair(v, idx);
  for (auto c = cache_.rbegin(); c != cache_.rend(); ++c)
    if (auto it = c->find(key); it != c->end()) return it->second;
  llvm::Value* x = compute(v, idx);
  if (cache_.empty()) cache_.emplace_back();
  cache_.back()[key] = x;
  return x;
}

llvm::Value* KernelEmitter::emit_reduction(const Node& n, const Index& out_idx) {
  const Value* x = n.input(0);
  const Shape& s = x->shape();
  const std::vector<int> axes = reduction_axes(n);
  const bool keepdims = n.attrs().get_bool("keepdims", op_name(n.op()));
  const bool arg = n.is_op(OpKind::ArgMax) || n.is_op(OpKind::ArgMin);
  DType t = x->dtype();
  llvm::Type* rt = register_type(ctx_, t);
  std::optional<Accumulator> acc;  // (arg reductions: the best value and its index)
  llvm::Value* best = arg ? alloca_builder_->CreateAlloca(rt) : nullptr;
  llvm::Value* acc_index = arg ? alloca_builder_->CreateAlloca(b_.getInt64Ty()) : nullptr;
  if (arg) {
    b_.CreateStore(reduction_identity(n.op(), t, rt), best);
    b_.CreateStore(b_.getInt64(0), acc_index);
  } else {
    acc.emplace(b_, *alloca_builder_, n.op(), t);
  }

  Index in_idx(size_t(s.rank()), nullptr);
  int pos = 0;
  for (int d = 0; d < s.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) in_idx[size_t(d)] = out_idx[size_t(keepdims ? d : pos)];
    if (!reduced || keepdims) ++pos;
  }
  std::function<void(size_t)> loops = [&](size_t k) {
    if (k == axes.size()) {
      llvm::Value* v = elem(x, in_idx);
      if (!arg) {
        acc->add(v);
        return;
      }
      llvm::Value* cur = b_.CreateLoad(rt, best);
      llvm::Value* replace = emit_arg_replaces(b_, n.op(), t, v, cur);
      b_.CreateStore(b_.CreateSelect(replace, v, cur), best);
      llvm::Value* ci = b_.CreateLoad(b_.getInt64Ty(), acc_index);
      b_.CreateStore(b_.CreateSelect(replace, in_idx[size_t(axes[0])], ci), acc_index);
      return;
    }
    int d = axes[k];
    if (s[d] == 1) {
      in_idx[size_t(d)] = b_.getInt64(0);
      loops(k + 1);
      return;
    }
    for_range(s[d], [&](llvm::Value* i) {
      in_idx[size_t(d)] = i;
      loops(k + 1);
    });
  };
  loops(0);
  if (arg) return b_.CreateLoad(b_.getInt64Ty(), acc_index);
  llvm::Value* result = acc->result([&] {
    cache_.emplace_back();  // what the exact pass computes stays in its branch
    loops(0);
    cache_.pop_back();
  });
  if (n.is_op(OpKind::Mean)) {
    int64_t count = 1;
    for (int d : axes) count *= s[d];
    result = b_.CreateFDiv(result, llvm::ConstantFP::get(rt, double(count)));
  }
  return result;
}
}  // namespace kiln::codegen
