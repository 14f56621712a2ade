#include "kiln/codegen/lower_kernel.h"

#include <fmt/format.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/codegen/accumulator.h"
#include "kiln/codegen/decompose.h"
#include "kiln/codegen/in_place.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/literal_constants.h"
#include "kiln/codegen/one_hot.h"
#include "kiln/codegen/operand_index.h"
#include "kiln/codegen/pool_window.h"
#include "kiln/codegen/row_passes.h"
#include "kiln/codegen/scalar_ops.h"
#include "kiln/codegen/target_machine.h"
#include "kiln/ir/error.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeKind;
using ir::Value;

class KernelEmitter {
 public:
  using InPlace = std::vector<std::pair<size_t, size_t>>;
  KernelEmitter(const ir::Graph& body, const KernelPlan& plan, const RowPlan& rows,
                const InPlace& in_place, KernelModule& km)
      : g_(body),
        plan_(plan),
        rows_(rows),
        in_place_(in_place),
        km_(km),
        ctx_(*km.context),
        m_(*km.module),
        b_(ctx_) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  void emit() {
    llvm::Function* body = emit_body_function();
    emit_entry(body);
  }

 private:
  // ---- functions: `symbol(frame, begin, end)` unpacks the frame and calls the body, whose
  // buffer parameters carry noalias / align 64 / dereferenceable (inlined at O3, they become
  // alias scopes on every access).
  size_t buffer_count() const {
    return g_.parameters().size() + g_.outputs().size() + plan_.temporaries.size();
  }
  const TensorType& buffer_type(size_t i) const {
    size_t np = g_.parameters().size(), no = g_.outputs().size();
    if (i < np) return g_.parameter(i)->type();
    if (i < np + no) return g_.outputs()[i - np]->type();
    for (const auto& [v, t] : plan_.temporaries)
      if (size_t(t) == i - np - no) return v->type();
    internal_error(__FILE__, __LINE__, "bad kernel buffer index");
  }

  llvm::Function* emit_body_function() {
    llvm::Type* ptr = b_.getPtrTy();
    std::vector<llvm::Type*> params(buffer_count() + 1, ptr);
    params.push_back(b_.getInt64Ty());
    params.push_back(b_.getInt64Ty());
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    auto* f =
        llvm::Function::Create(fty, llvm::Function::InternalLinkage, km_.symbol + ".body", m_);
    f->addFnAttr(llvm::Attribute::AlwaysInline);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    apply_target_attributes(*f, *km_.target);
    size_t np = g_.parameters().size(), no = g_.outputs().size();
    std::vector<int> store_into(no, -1);  // in-place outputs: the input they are stored in
    for (const auto& [o, i] : in_place_) store_into[o] = int(i);
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
        // Flat: in-place inputs are read (and cached for this element) before anything is
        // stored (codegen/in_place.h).
        if (plan_.mode == IterationMode::kFlat)
          for (const auto& [o, i] : in_place_) elem(g_.parameter(i), Index{row_});
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

  void emit_entry(llvm::Function* body) {
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

  // ---- control flow helpers

  void if_then(llvm::Value* cond, const std::function<void()>& then) {
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(cond, then_bb, done);
    b_.SetInsertPoint(then_bb);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // for (iv = lo; iv < hi; ++iv) body(iv)
  void for_range(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& body) {
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
  void for_range(int64_t n, const std::function<void(llvm::Value*)>& body) {
    for_range(b_.getInt64(0), b_.getInt64(n), body);
  }

  // ---- materialized values

  void emit_materialized() {
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

  // One loop nest over the row for every value of the pass (codegen/row_passes.h): at each
  // index, elementwise values are computed (shared through the elemental cache) and stored,
  // reductions combine into their accumulators, stored when the loop ends.
  void emit_shared_pass(const std::vector<const Value*>& values) {
    auto reduced = [](const Value* v) -> const Node* {
      const Node* n = v->producer();
      return is_reduction(*n) ? n : nullptr;
    };
    const Value* first = values.front();
    if (values.size() == 1 && !reduced(first) && emit_reshape_walk(first, Index{row_}, 1)) return;
    const Shape& loop = reduced(first) ? first->producer()->input(0)->shape() : first->shape();
    std::vector<std::unique_ptr<Accumulator>> acc(values.size());
    for (size_t k = 0; k < values.size(); ++k)
      if (const Node* n = reduced(values[k]))
        acc[k] = std::make_unique<Accumulator>(b_, *alloca_builder_, n->op(), n->input(0)->dtype());
    Index idx{row_};
    auto each = [&](const Index& i) {
      for (size_t k = 0; k < values.size(); ++k) {
        if (const Node* n = reduced(values[k]))
          acc[k]->add(elem(n->input(0), i));
        else
          store_at(values[k], elem(values[k], i), i);
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
        r = b_.CreateFDiv(
            r, llvm::ConstantFP::get(r->getType(), double(loop.num_elements() / loop[0])));
      Index out(size_t(values[k]->shape().rank()), b_.getInt64(0));
      out[0] = row_;
      store_at(values[k], r, out);
    }
  }

  void emit_nest(const Value* v) {
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
    // (By rows, the row must be the input's leading dimension too: axis 0 not reduced.)
    if (n != nullptr && is_reduction(*n) && keeps_last_axis(*n) &&
        (first == 0 || reduction_axes(*n).front() != 0)) {
      emit_reduction_through_memory(v, *n, idx, first);
      return;
    }
    if (emit_reshape_walk(v, idx, first)) return;
    if (auto strides = tiling_pool_grad(g_, s)) {
      window_nest(s, first, idx, strides->first, strides->second,
                  [&](const Index& full) { store_value(v, full); });
      return;
    }
    nest(s, first, idx, [&](const Index& full) { store_value(v, full); });
  }

  // nest() over an NHWC shape whose rows and columns are tiled by sh x sw windows (a max-pool
  // gradient's input: pool_window.h, tiling_pool_grad): loops over the windows' rows, columns
  // and the channels, the window's positions unrolled inside the channel loop, so that what
  // every position of a window computes alike (its argmax) is one expression for LLVM to merge.
  void window_nest(const Shape& s, int first, Index& idx, int64_t sh, int64_t sw,
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

  // A reshape keeping the row and the element order (a flatten after a conv epilogue): walks
  // its input's shape, from whose index the output's offset is a multiply-add, instead of the
  // output's, from whose index the input's would be divisions per element (scalar code).
  // False (nothing emitted) for other values.
  bool emit_reshape_walk(const Value* v, Index idx, int first) {
    const Node* n = v->producer();
    if (n == nullptr || !n->is_op(OpKind::Reshape) || n->input(0)->shape().rank() == 0 ||
        (first == 1 && n->input(0)->shape()[0] != v->shape()[0]))
      return false;
    const Value* u = n->input(0);
    nest(u->shape(), first, idx, [&](const Index& full) {
      store_at_offset(v, elem(u, full),
                      row_major_offset(b_, u->shape(), row_buffer_.count(v) != 0, full));
    });
    return true;
  }

  // A reduction that keeps its input's last axis (a bias gradient: sum over the batch) would
  // reduce along strided columns; instead it accumulates in its output buffer, walking the
  // input in memory order, so the inner loop is contiguous and vectorizes without
  // reassociation (each output element is combined in input order).
  static bool keeps_last_axis(const Node& n) {
    if (n.is_op(OpKind::ArgMax) || n.is_op(OpKind::ArgMin)) return false;
    const int rank = n.input(0)->shape().rank();
    std::vector<int> axes = reduction_axes(n);
    return rank >= 2 && !axes.empty() && axes.back() != rank - 1;
  }

  void emit_reduction_through_memory(const Value* v, const Node& n, Index idx, int first) {
    const Value* x = n.input(0);
    const Shape& in = x->shape();
    const std::vector<int> axes = reduction_axes(n);
    const bool keepdims = n.attrs().get_bool("keepdims", op_name(n.op()));
    const DType t = x->dtype();
    llvm::Type* rt = register_type(ctx_, t);
    const std::vector<llvm::Value*>& buffers = out_buffers_.at(v);
    llvm::Value* acc = buffers.front();
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
    if (!n.is_op(OpKind::Mean) && buffers.size() == 1) return;
    out_idx = idx;
    nest(v->shape(), first, out_idx, [&](const Index& o) {
      llvm::Value* r = b_.CreateLoad(rt, at(o));
      if (n.is_op(OpKind::Mean)) r = b_.CreateFDiv(r, llvm::ConstantFP::get(rt, double(count)));
      for (llvm::Value* buf : buffers)
        b_.CreateStore(r, b_.CreateInBoundsGEP(rt, buf, offset(v, o)));
    });
  }

  void nest(const Shape& s, int d, Index& idx, const std::function<void(const Index&)>& body) {
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

  void store_value(const Value* v, const Index& idx) {
    const Node* n = v->producer();
    llvm::Value* x = (n != nullptr && is_reduction(*n)) ? emit_reduction(*n, idx) : compute(v, idx);
    store_at(v, x, idx);
  }

  void store_at(const Value* v, llvm::Value* x, const Index& idx) {
    store_at_offset(v, x, offset(v, idx));
  }

  void store_at_offset(const Value* v, llvm::Value* x, llvm::Value* off) {
    llvm::Type* st = storage_type(ctx_, v->dtype());
    if (v->dtype() == DType::b8) x = b_.CreateZExt(x, st);
    for (llvm::Value* buf : out_buffers_.at(v)) {
      llvm::StoreInst* store = b_.CreateStore(x, b_.CreateInBoundsGEP(st, buf, off));
      if (streaming_.count(buf))
        store->setMetadata(llvm::LLVMContext::MD_tbaa, streaming_store_tag(ctx_));
    }
  }

  // ---- elemental emission

  llvm::Value* offset(const Value* v, const Index& idx) {
    if (plan_.mode == IterationMode::kFlat)
      return (idx.empty() || v->shape().num_elements() == 1) ? b_.getInt64(0) : idx[0];
    return row_major_offset(b_, v->shape(), row_buffer_.count(v) != 0, idx);
  }

  llvm::Value* load(const Value* v, llvm::Value* base, const Index& idx) {
    return load_at_offset(v, base, offset(v, idx));
  }
  llvm::Value* load_at_offset(const Value* v, llvm::Value* base, llvm::Value* off) {
    llvm::Type* st = storage_type(ctx_, v->dtype());
    llvm::Value* x = b_.CreateLoad(st, b_.CreateInBoundsGEP(st, base, off));
    if (v->dtype() == DType::b8) x = b_.CreateICmpNE(x, b_.getInt8(0));
    return x;
  }

  // A reshape of a value in memory (a parameter or a stored value), read at `idx` of the
  // reshape: the same row-major offset in the value, since a reshape keeps the element order.
  // (Through the value's own index, the remainders of the division into its dimensions became
  // freeze + multiply in LLVM, which the vectorizer could not follow: a gather per vector.)
  // Null where the value is computed in the kernel, or the kernel is flat (its index is the
  // offset already).
  llvm::Value* reshape_of_memory(const Node& n, const Value* v, const Index& idx) {
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

  llvm::Value* constant(const Node& n, const Index& idx) {
    const ir::Literal& lit = *n.literal();
    if (lit.num_elements() == 0 || lit.is_splat()) return literal_element(ctx_, lit, 0);
    auto& global = constants_[&n];
    if (global == nullptr) global = literal_global(m_, lit);
    return load(n.output(), global, idx);
  }

  llvm::Value* compute(const Value* v, const Index& idx) {
    if (v->def() != Value::Def::kNodeOutput) return load(v, base_.at(v), idx);
    const Node& n = *v->producer();
    if (n.kind() == NodeKind::kConstant) return constant(n, idx);
    if (is_reduction(n)) internal_error(__FILE__, __LINE__, "a reduction must be materialized");
    if (n.is_op(OpKind::OneHot)) return one_hot(n, idx, v);
    if (llvm::Value* x = reshape_of_memory(n, v, idx)) return x;
    if (op_info(n.op()).has(kWindow))  // max-pool (codegen/pool_window.h)
      return emit_pool(
          b_, n, idx, [&](size_t i, const Index& at) { return elem(n.input(i), at); },
          window_tile_);
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      if (n.is_op(OpKind::BroadcastLike) && i == 1) break;
      args.push_back(elem(n.input(i), operand_index(b_, plan_.mode, n, i, idx)));
    }
    const OpInfo& info = op_info(n.op());
    if (!info.has(kElementwise)) return args[0];  // layout ops: the index did the work
    ScalarOpContext ctx{b_, m_, flag_};
    DType in = n.is_op(OpKind::Select) ? n.input(1)->dtype() : n.input(0)->dtype();
    return emit_scalar_op(ctx, n.op(), args, in, v->dtype(), n.attrs());
  }

  // one_hot (codegen/one_hot.h): where its last axis is the counter of the loop being emitted
  // (from 0), a down counter of that loop started at the index (computed before the loop);
  // else a compare.
  llvm::Value* one_hot(const Node& n, const Index& idx, const Value* v) {
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

  llvm::Value* elem(const Value* v, const Index& idx) {
    if (auto it = stored_.find(v); it != stored_.end()) return load(v, it->second, idx);
    auto key = std::make_pair(v, idx);
    for (auto c = cache_.rbegin(); c != cache_.rend(); ++c)
      if (auto it = c->find(key); it != c->end()) return it->second;
    llvm::Value* x = compute(v, idx);
    if (cache_.empty()) cache_.emplace_back();
    cache_.back()[key] = x;
    return x;
  }

  // ---- reductions

  llvm::Value* emit_reduction(const Node& n, const Index& out_idx) {
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

  const ir::Graph& g_;
  const KernelPlan& plan_;
  const RowPlan& rows_;
  const InPlace& in_place_;
  KernelModule& km_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  std::unique_ptr<llvm::IRBuilder<>> alloca_builder_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* flag_ = nullptr;
  llvm::Value* row_ = nullptr;
  std::unordered_map<const Value*, llvm::Value*> base_;
  std::unordered_map<const Value*, std::vector<llvm::Value*>> out_buffers_;
  std::unordered_map<const Value*, llvm::Value*> stored_;
  std::unordered_set<const Value*> row_buffer_;
  std::unordered_set<const llvm::Value*> streaming_;  // output buffers stored non-temporally
  std::unordered_map<const Node*, llvm::GlobalVariable*> constants_;
  std::vector<std::map<std::pair<const Value*, Index>, llvm::Value*>> cache_;
  const WindowTile* window_tile_ = nullptr;  // the window window_nest is walking, if any
  std::vector<CountedLoop> loops_;           // loops being emitted, innermost last
};

}  // namespace

bool can_lower(const Node& n) { return n.kind() == NodeKind::kOp && op_info(n.op()).generated(); }

LoweredKernel lower_kernel(const ir::Graph& body, const std::string& symbol,
                           const ir::Node* as_parameter,
                           const std::vector<std::pair<size_t, size_t>>& in_place) {
  std::unique_ptr<ir::Graph> g = decompose_for_codegen(body, as_parameter);
  for (const auto& n : g->nodes())
    if (n->kind() == NodeKind::kOp && !can_lower(*n))
      throw Error(fmt::format("codegen: kernel {} holds op {}, which has no code generator rule",
                              symbol, n->op_name()));
  KernelPlan plan = plan_kernel(*g);
  LoweredKernel out;
  runtime::KernelLayout& l = out.layout;
  l.in_place = honoured_in_place(*g, plan, in_place);
  out.module = new_kernel_module(symbol, symbol);
  RowPlan rows;
  if (plan.mode == IterationMode::kRows) rows = plan_row_passes(*g, plan, l.in_place);
  KernelEmitter(*g, plan, rows, l.in_place, out.module).emit();
  l.symbol = symbol;
  l.num_inputs = g->parameters().size();
  l.num_outputs = g->outputs().size();
  l.temporaries.resize(plan.temporaries.size());
  for (const auto& [v, t] : plan.temporaries) l.temporaries[size_t(t)] = v->type();
  l.iteration = plan.mode == IterationMode::kFlat   ? "flat"
                : plan.mode == IterationMode::kRows ? "rows"
                                                    : "serial";
  l.extent = plan.extent;
  l.row_elements = plan.row_elements;
  l.inputs_by_row = plan.inputs_by_row;
  return out;
}

}  // namespace kiln::codegen
