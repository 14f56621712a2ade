// The emitter of one generated kernel (internal to codegen/: lower_kernel.cc drives it). It
// turns a kernel body graph, its KernelPlan (iteration mode, materialized values, temporaries)
// and RowPlan (a rows kernel's passes) into LLVM IR in a KernelModule: an entry function
// `symbol(frame, begin, end)` that unpacks the frame's buffers and calls the body over
// [begin, end), the body's loop nests, and every value computed elementally at an index
// (the elemental cache shares what an index computes between the values of a nest).
// Definitions: kernel_emitter.cc (functions, control flow, loop nests, stores) and
// kernel_elements.cc (elemental values and reductions).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/codegen/jit.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/one_hot.h"
#include "kiln/codegen/operand_index.h"
#include "kiln/codegen/pool_window.h"
#include "kiln/codegen/row_passes.h"
#include "kiln/codegen/target_machine.h"
#include "kiln/ir/graph.h"

namespace kiln::codegen {

class KernelEmitter {
 public:
  using Node = ir::Node;
  using Value = ir::Value;
  using Overwrites = std::vector<std::pair<size_t, size_t>>;
  KernelEmitter(const ir::Graph& body, const KernelPlan& plan, const RowPlan& rows,
                const Overwrites& overwrites, KernelModule& km)
      : g_(body),
        plan_(plan),
        rows_(rows),
        overwrites_(overwrites),
        km_(km),
        ctx_(*km.context),
        m_(*km.module),
        b_(ctx_) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  // Emits the kernel: `symbol(frame, begin, end)` and the body it calls.
  void emit();

 private:
  // ---- functions: `symbol(frame, begin, end)` unpacks the frame and calls the body, whose
  // buffer parameters carry noalias / align 64 / dereferenceable (inlined at O3, they become
  // alias scopes on every access).
  size_t buffer_count() const;
  TensorType buffer_type(size_t i) const;
  llvm::Function* emit_body_function();
  void emit_entry(llvm::Function* body);

  // ---- control flow helpers
  void if_then(llvm::Value* cond, const std::function<void()>& then);
  // for (iv = lo; iv < hi; ++iv) body(iv)
  void for_range(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& body);
  void for_range(int64_t n, const std::function<void(llvm::Value*)>& body);

  // ---- materialized values
  void emit_materialized();
  // One loop nest over the row for every value of the pass (codegen/row_passes.h): at each
  // index, elementwise values are computed (shared through the elemental cache) and stored,
  // reductions combine into their accumulators, stored when the loop ends.
  void emit_shared_pass(const std::vector<const Value*>& values);
  void emit_nest(const Value* v);
  // nest() over an NHWC shape whose rows and columns are tiled by sh x sw windows (a max-pool
  // gradient's input: pool_window.h, tiling_pool_grad): loops over the windows' rows, columns
  // and the channels, the window's positions unrolled inside the channel loop, so that what
  // every position of a window computes alike (its argmax) is one expression for LLVM to merge.
  void window_nest(const Shape& s, int first, Index& idx, int64_t sh, int64_t sw,
                   const std::function<void(const Index&)>& body);
  // A reshape keeping the row and the element order (a flatten after a conv epilogue): walks
  // its input's shape, from whose index the output's offset is a multiply-add, instead of the
  // output's, from whose index the input's would be divisions per element (scalar code).
  // False (nothing emitted) for other values.
  bool emit_reshape_walk(const Value* v, Index idx, int first);
  // A concat (KernelPlan: always materialized) by one loop nest per operand over its shape.
  void emit_concat_walk(const Value* v, const Index& idx, int first);
  // Operand `piece` of concat `v` at index `i` of the operand, stored into its window of v.
  void store_piece(const Value* v, size_t piece, const Index& i);
  void nest(const Shape& s, int d, Index& idx, const std::function<void(const Index&)>& body);
  void store_value(const Value* v, const Index& idx);
  // `computed`: x is elem()'s value of v (not a reduction's float32 result), which for a bf16
  // v is already a bf16 value: stored without rounding again (narrow_exact_bf16).
  void store_at(const Value* v, llvm::Value* x, const Index& idx, bool computed = false);
  void store_at_offset(const Value* v, llvm::Value* x, llvm::Value* off, bool computed = false);

  // ---- elemental emission
  llvm::Value* offset(const Value* v, const Index& idx);
  llvm::Value* load(const Value* v, llvm::Value* base, const Index& idx);
  llvm::Value* load_at_offset(const Value* v, llvm::Value* base, llvm::Value* off);
  // A reshape of a value in memory (a parameter or a stored value), read at `idx` of the
  // reshape: the same row-major offset in the value, since a reshape keeps the element order.
  // (Through the value's own index, the remainders of the division into its dimensions became
  // freeze + multiply in LLVM, which the vectorizer could not follow: a gather per vector.)
  // Null where the value is computed in the kernel, or the kernel is flat (its index is the
  // offset already).
  llvm::Value* reshape_of_memory(const Node& n, const Value* v, const Index& idx);
  llvm::Value* constant(const Node& n, const Index& idx);
  llvm::Value* compute(const Value* v, const Index& idx);
  // one_hot (codegen/one_hot.h): where its last axis is the counter of the loop being emitted
  // (from 0), a down counter of that loop started at the index (computed before the loop);
  // else a compare.
  llvm::Value* one_hot(const Node& n, const Index& idx, const Value* v);
  llvm::Value* elem(const Value* v, const Index& idx);
  // x, computed by n for v in float32, rounded to bf16 where v is bf16 (codegen/bf16_values.h;
  // only a NaN's quiet bit where n picks or negates bf16 operands: exact_on_bf16).
  llvm::Value* rounded(const Node& n, const Value* v, llvm::Value* x);

  // ---- reductions
  // A reduction computed at an output index, by loops over its reduced axes.
  llvm::Value* emit_reduction(const Node& n, const Index& out_idx);
  // A reduction that keeps its input's last axis (a bias gradient: sum over the batch) would
  // reduce along strided columns; instead it accumulates in its output buffer, walking the
  // input in memory order, so the inner loop is contiguous and vectorizes without
  // reassociation (each output element is combined in input order).
  void emit_reduction_through_memory(const Value* v, const Node& n, Index idx, int first);

  // ---- state
  const ir::Graph& g_;
  const KernelPlan& plan_;
  const RowPlan& rows_;
  const Overwrites& overwrites_;
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
  // KernelPlan::accumulators: the float32 buffer each of those reductions accumulates in.
  std::unordered_map<const Value*, llvm::Value*> accumulator_;
  std::unordered_map<const Value*, llvm::Value*> stored_;
  std::unordered_set<const Value*> row_buffer_;
  std::unordered_set<const llvm::Value*> streaming_;  // output buffers stored non-temporally
  std::unordered_map<const Node*, llvm::GlobalVariable*> constants_;
  std::vector<std::map<std::pair<const Value*, Index>, llvm::Value*>> cache_;
  const WindowTile* window_tile_ = nullptr;  // the window window_nest is walking, if any
  std::vector<CountedLoop> loops_;           // loops being emitted, innermost last
};

}  // namespace kiln::codegen
