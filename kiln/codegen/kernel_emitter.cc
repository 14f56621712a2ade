// KernelEmitter (codegen/kernel_emitter.h): the kernel's functions, control flow, loop nests
// and stores.
#include "kiln/codegen/kernel_emitter.h"

#include <algorithm>

#include "kiln/codegen/accumulator.h"
#include "kiln/codegen/bf16_values.h"
#include "kiln/codegen/scalar_ops.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeKind;
using ir::Value;

void KernelEmitter::emit() {
  llvm::Function* body = emit_body_function();
  emit_entry(body);
}

size_t KernelEmitter::buffer_count() const {
  return g_.parameters().size() + g_.outputs().size() + plan_.temporaries.size() +
         plan_.accumulators.size();
}

TensorType KernelEmitter::buffer_type(size_t i) const {
  size_t np = g_.parameters().size(), no = g_.outputs().size();
  if (i < np) return g_.parameter(i)->type();
  if (i < np + no) return g_.outputs()[i - np]->type();
  for (const auto& [v, t] : plan_.temporaries)
    if (size_t(t) == i - np - no) return v->type();
  for (const auto& [v, t] : plan_.accumulators)
    if (size_t(t) == i - np - no) return TensorType{DType::f32, v->shape()};
  internal_error(__FILE__, __LINE__, "bad kernel buffer index");
}

llvm::Function* KernelEmitter::emit_body_function() {
  llvm::Type* ptr = b_.getPtrTy();
  std::vector<llvm::Type*> params(buffer_count() + 1, ptr);
  params.push_back(b_.getInt64Ty());
  params.push_back(b_.getInt64Ty());
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::InternalLinkage, km_.symbol + ".body", m_);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  apply_target_attributes(*f, *km_.target);
  size_t np = g_.parameters().size(), no = g_.outputs().size();
  std::vector<int> store_into(no, -1);  // overwriting outputs: the input they are stored in
  for (const auto& [o, i] : overwrites_) store_into[o] = int(i);
  for (size_t i = 0; i <= buffer_count(); ++i) {
    if (i >= np && i < np + no && store_into[i - np] >= 0) continue;  // unused buffer
    f->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
    f->addParamAttr(unsigned(i), llvm::Attribute::NoCapture);
    if (i == buffer_count()) break;  // the status word
    f->addParamAttr(unsigned(i), llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
    const TensorType& t = buffer_type(i);
    uint64_t bytes = uint64_t(t.shape.num_elements()) * dtype_size(t.dtype);
    if (bytes > 0)
      f->addParamAttr(unsigned(i), llvm::Attribute::getWithDereferenceableBytes(ctx_, bytes));
  }
  fn_ = f;
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
  b_.SetInsertPoint(entry);
  flag_ = b_.CreateAlloca(b_.getInt1Ty(), nullptr, "div_by_zero");
  // Accumulators are allocated at the top of the entry block (promoted to registers).
  alloca_builder_ = std::make_unique<llvm::IRBuilder<>>(llvm::cast<llvm::Instruction>(flag_));
  b_.CreateStore(b_.getFalse(), flag_);

  for (size_t i = 0; i < np; ++i) base_[g_.parameter(i)] = f->getArg(unsigned(i));
  for (size_t i = 0; i < no; ++i) {
    const Value* o = g_.outputs()[i];
    out_buffers_[o].push_back(
        f->getArg(unsigned(store_into[i] >= 0 ? size_t(store_into[i]) : np + i)));
    // Streaming stores (KernelPlan::streaming_stores) for outputs written in runs of at
    // least 16 elements (a row of a rows kernel), not over an input.
    if (plan_.streaming_stores && store_into[i] < 0 &&
        o->shape().num_elements() / plan_.extent >= (plan_.mode == IterationMode::kFlat ? 1 : 16))
      streaming_.insert(f->getArg(unsigned(np + i)));
  }
  // (The alignment survives inlining into the entry function, so the vectorized stores
  // along a row are known to be aligned: codegen/jit.h streaming_store_tag.)
  for (const llvm::Value* buf : streaming_)
    b_.CreateAlignmentAssumption(m_.getDataLayout(), const_cast<llvm::Value*>(buf), 64);
  for (const auto& [v, t] : plan_.temporaries)
    out_buffers_[v].push_back(f->getArg(unsigned(np + no + t)));
  for (const auto& [v, t] : plan_.accumulators) accumulator_[v] = f->getArg(unsigned(np + no + t));
  for (const Value* v : rows_.row_buffers) {  // one row, reused by every row of the call
    llvm::Type* at = llvm::ArrayType::get(storage_type(ctx_, v->dtype()),
                                          uint64_t(v->shape().num_elements() / plan_.extent));
    auto* a = alloca_builder_->CreateAlloca(at, nullptr, "row");
    a->setAlignment(llvm::Align(64));
    out_buffers_[v].push_back(a);
    row_buffer_.insert(v);
  }
  llvm::Value* status = f->getArg(unsigned(buffer_count()));
  llvm::Value* begin = f->getArg(unsigned(buffer_count() + 1));
  llvm::Value* end = f->getArg(unsigned(buffer_count() + 2));

  if (plan_.mode == IterationMode::kSerial) {
    // One call computes everything (the runtime calls [0, 1)).
    if_then(b_.CreateICmpSLT(begin, end), [&] { emit_materialized(); });
  } else {
    for_range(begin, end, [&](llvm::Value* r) {
      row_ = r;
      // Flat: overwritten inputs are read (and cached for this element) before anything is
      // stored (codegen/overwrites.h).
      if (plan_.mode == IterationMode::kFlat)
        for (const auto& [o, i] : overwrites_) elem(g_.parameter(i), Index{row_});
      emit_materialized();
      stored_.clear();
    });
  }
  // Streaming stores are weakly ordered: fence them before the runtime reads the outputs.
  if (!streaming_.empty()) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  llvm::Value* flag = b_.CreateLoad(b_.getInt1Ty(), flag_);
  if_then(flag, [&] { b_.CreateStore(b_.getInt32(1), status); });
  b_.CreateRetVoid();
  return f;
}

void KernelEmitter::emit_entry(llvm::Function* body) {
  llvm::Type* ptr = b_.getPtrTy();
  auto* fty =
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, km_.symbol, m_);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  apply_target_attributes(*f, *km_.target);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
  llvm::Value* frame = f->getArg(0);
  llvm::Value* buffers = b_.CreateLoad(ptr, frame, "buffers");
  llvm::Value* status =
      b_.CreateLoad(ptr, b_.CreateConstGEP1_64(b_.getInt8Ty(), frame, 8), "status");
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < buffer_count(); ++i)
    args.push_back(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, buffers, i)));
  args.push_back(status);
  args.push_back(f->getArg(1));
  args.push_back(f->getArg(2));
  b_.CreateCall(body, args);
  b_.CreateRetVoid();
}

void KernelEmitter::if_then(llvm::Value* cond, const std::function<void()>& then) {
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(cond, then_bb, done);
  b_.SetInsertPoint(then_bb);
  then();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

void KernelEmitter::for_range(llvm::Value* lo, llvm::Value* hi,
                              const std::function<void(llvm::Value*)>& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "loop.end", fn_);
  b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), header, exit);
  b_.SetInsertPoint(header);
  llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
  iv->addIncoming(lo, pre);
  cache_.emplace_back();
  const auto* first = llvm::dyn_cast<llvm::ConstantInt>(lo);
  loops_.push_back({iv, pre, header, first && first->isZero(), cache_.size() - 1, {}});
  body(iv);
  loops_.back().close(b_);
  loops_.pop_back();
  cache_.pop_back();
  llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), "i.next", true, true);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, hi), header, exit);
  b_.SetInsertPoint(exit);
}

void KernelEmitter::for_range(int64_t n, const std::function<void(llvm::Value*)>& body) {
  for_range(b_.getInt64(0), b_.getInt64(n), body);
}

void KernelEmitter::emit_materialized() {
  if (plan_.mode != IterationMode::kRows) {
    for (const Value* v : plan_.materialized) {
      emit_nest(v);
      stored_[v] = out_buffers_.at(v).front();
    }
    return;
  }
  for (const RowPass& pass : rows_.passes) {
    if (pass.shared)
      emit_shared_pass(pass.values);
    else
      for (const Value* v : pass.values) emit_nest(v);
    for (const Value* v : pass.values) stored_[v] = out_buffers_.at(v).front();
  }
}

void KernelEmitter::emit_shared_pass(const std::vector<const Value*>& values) {
  auto reduced = [](const Value* v) -> const Node* {
    const Node* n = v->producer();
    return is_reduction(*n) ? n : nullptr;
  };
  auto concat = [](const Value* v) -> const Node* {
    const Node* n = v->producer();
    return n != nullptr && n->is_op(OpKind::Concat) ? n : nullptr;
  };
  const Value* first = values.front();
  if (values.size() == 1 && !reduced(first) && emit_reshape_walk(first, Index{row_}, 1)) return;
  // The pass's space (codegen/row_passes.h): a reduction's input's, a concat's pieces', or the
  // value's own.
  const Shape& loop = reduced(first)  ? first->producer()->input(0)->shape()
                      : concat(first) ? *shared_piece_shape(*concat(first))
                                      : first->shape();
  std::vector<std::unique_ptr<Accumulator>> acc(values.size());
  for (size_t k = 0; k < values.size(); ++k)
    if (const Node* n = reduced(values[k]))
      acc[k] = std::make_unique<Accumulator>(b_, *alloca_builder_, n->op(), n->input(0)->dtype());
  Index idx{row_};
  auto each = [&](const Index& i) {
    for (size_t k = 0; k < values.size(); ++k) {
      if (const Node* n = reduced(values[k]))
        acc[k]->add(elem(n->input(0), i));
      else if (const Node* c = concat(values[k]))
        for (size_t q = 0; q < c->inputs().size(); ++q) store_piece(values[k], q, i);
      else
        store_at(values[k], elem(values[k], i), i, true);
    }
  };
  // Window order only without reductions, whose terms must come in the nest's order.
  auto strides = tiling_pool_grad(g_, loop);
  if (strides && std::none_of(values.begin(), values.end(), reduced))
    window_nest(loop, 1, idx, strides->first, strides->second, each);
  else
    nest(loop, 1, idx, each);
  for (size_t k = 0; k < values.size(); ++k) {
    const Node* n = reduced(values[k]);
    if (n == nullptr) continue;
    llvm::Value* r = acc[k]->result([&] {  // the exact pass of a fast max / min
      Index again{row_};
      cache_.emplace_back();  // what it computes stays in its branch
      nest(loop, 1, again, [&](const Index& i) { acc[k]->add(elem(n->input(0), i)); });
      cache_.pop_back();
    });
    if (n->is_op(OpKind::Mean))
      r = b_.CreateFDiv(r,
                        llvm::ConstantFP::get(r->getType(), double(loop.num_elements() / loop[0])));
    Index out(size_t(values[k]->shape().rank()), b_.getInt64(0));
    out[0] = row_;
    store_at(values[k], r, out);
  }
}

void KernelEmitter::emit_nest(const Value* v) {
  const Shape& s = v->shape();
  Index idx;
  if (plan_.mode == IterationMode::kFlat) {
    idx.push_back(row_);
    store_value(v, idx);
    return;
  }
  int first = 0;
  if (plan_.mode == IterationMode::kRows) {
    idx.push_back(row_);
    first = 1;
  }
  const Node* n = v->producer();
  // (By rows, the row must be the input's leading dimension too: axis 0 not reduced. A bf16
  // result cannot accumulate in its own buffer: serially it accumulates in a float32 one
  // (KernelPlan::accumulators); by rows it is reduced at each output index instead.)
  if (n != nullptr && keeps_last_axis(*n) && (v->dtype() != DType::bf16 || accumulator_.count(v)) &&
      (first == 0 || reduction_axes(*n).front() != 0)) {
    emit_reduction_through_memory(v, *n, idx, first);
    return;
  }
  if (emit_reshape_walk(v, idx, first)) return;
  if (n != nullptr && n->is_op(OpKind::Concat)) return emit_concat_walk(v, idx, first);
  if (auto strides = tiling_pool_grad(g_, s)) {
    window_nest(s, first, idx, strides->first, strides->second,
                [&](const Index& full) { store_value(v, full); });
    return;
  }
  nest(s, first, idx, [&](const Index& full) { store_value(v, full); });
}

void KernelEmitter::window_nest(const Shape& s, int first, Index& idx, int64_t sh, int64_t sw,
                                const std::function<void(const Index&)>& body) {
  auto emit = [&](llvm::Value* n) {
    for_range(s[1] / sh, [&](llvm::Value* wy) {
      for_range(s[2] / sw, [&](llvm::Value* wx) {
        // The window's rows and columns, one index value each, which the pool gradient also
        // reads its window at (pool_window.h, WindowTile).
        WindowTile tile{wy, wx, {}, {}};
        for (int64_t r = 0; r < sh; ++r)
          tile.rows.push_back(b_.CreateAdd(b_.CreateMul(wy, b_.getInt64(sh), "", true, true),
                                           b_.getInt64(r), "", true, true));
        for (int64_t r = 0; r < sw; ++r)
          tile.cols.push_back(b_.CreateAdd(b_.CreateMul(wx, b_.getInt64(sw), "", true, true),
                                           b_.getInt64(r), "", true, true));
        window_tile_ = &tile;
        auto channel = [&](llvm::Value* c) {
          for (llvm::Value* y : tile.rows)
            for (llvm::Value* x : tile.cols) body(Index{n, y, x, c});
        };
        if (s[3] == 1)
          channel(b_.getInt64(0));
        else
          for_range(s[3], channel);
        window_tile_ = nullptr;
      });
    });
  };
  if (first == 1) return emit(idx[0]);
  if (s[0] == 1) return emit(b_.getInt64(0));
  for_range(s[0], emit);
}

bool KernelEmitter::emit_reshape_walk(const Value* v, Index idx, int first) {
  const Node* n = v->producer();
  if (n == nullptr || !n->is_op(OpKind::Reshape) || n->input(0)->shape().rank() == 0 ||
      (first == 1 && n->input(0)->shape()[0] != v->shape()[0]))
    return false;
  const Value* u = n->input(0);
  nest(u->shape(), first, idx, [&](const Index& full) {
    store_at_offset(v, elem(u, full),
                    row_major_offset(b_, u->shape(), row_buffer_.count(v) != 0, full), true);
  });
  return true;
}

void KernelEmitter::emit_concat_walk(const Value* v, const Index& idx, int first) {
  const Node& n = *v->producer();
  for (size_t q = 0; q < n.inputs().size(); ++q) {
    Index i = idx;
    nest(n.input(q)->shape(), first, i, [&](const Index& full) { store_piece(v, q, full); });
  }
}

void KernelEmitter::store_piece(const Value* v, size_t piece, const Index& i) {
  const Node& n = *v->producer();
  const int axis = concat_axis(n);
  int64_t offset = 0;
  for (size_t q = 0; q < piece; ++q) offset += n.input(q)->shape()[axis];
  Index at = i;
  if (offset != 0)
    at[size_t(axis)] = b_.CreateAdd(i[size_t(axis)], b_.getInt64(offset), "", true, true);
  store_at(v, elem(n.input(piece), i), at, true);
}

void KernelEmitter::nest(const Shape& s, int d, Index& idx,
                         const std::function<void(const Index&)>& body) {
  if (d == s.rank()) {
    body(idx);
    return;
  }
  if (s[d] == 1) {
    idx.push_back(b_.getInt64(0));
    nest(s, d + 1, idx, body);
    idx.pop_back();
    return;
  }
  for_range(s[d], [&](llvm::Value* i) {
    idx.push_back(i);
    nest(s, d + 1, idx, body);
    idx.pop_back();
  });
}

void KernelEmitter::store_value(const Value* v, const Index& idx) {
  const Node* n = v->producer();
  if (n != nullptr && is_reduction(*n)) return store_at(v, emit_reduction(*n, idx), idx);
  store_at(v, compute(v, idx), idx, true);
}

void KernelEmitter::store_at(const Value* v, llvm::Value* x, const Index& idx, bool computed) {
  store_at_offset(v, x, offset(v, idx), computed);
}

void KernelEmitter::store_at_offset(const Value* v, llvm::Value* x, llvm::Value* off,
                                    bool computed) {
  llvm::Type* st = storage_type(ctx_, v->dtype());
  if (v->dtype() == DType::b8) x = b_.CreateZExt(x, st);
  if (v->dtype() == DType::bf16) x = computed ? narrow_exact_bf16(b_, x) : narrow_bf16(b_, x);
  for (llvm::Value* buf : out_buffers_.at(v)) {
    llvm::StoreInst* store = b_.CreateStore(x, b_.CreateInBoundsGEP(st, buf, off));
    if (streaming_.count(buf))
      store->setMetadata(llvm::LLVMContext::MD_tbaa, streaming_store_tag(ctx_));
  }
}
}  // namespace kiln::codegen
