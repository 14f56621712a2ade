// Executable: the steps of one graph compiled for concrete shapes, run without the graph.
//
// Every value of the graph is a numbered slot; a step reads slots and fills slots:
//   kernel       a JIT-compiled kernel (codegen/), called on chunks of its parallel
//                dimension across kiln's TBB arena (chunks of at least kElementwiseGrain
//                elements of work);
//   contraction  matmul / conv through the eager library kernels (Eigen GEMM / conv), then
//                the kernel of its fusion group's epilogue; for a 2-d matmul whose epilogue
//                runs by rows, each block of output rows is multiplied and then finished by
//                the epilogue while it is in cache (the same fixed GEMM split as eager);
//   op           an op with no generated code (gather, pooling, random, ...): its eager kernel;
//                all_reduce, with a communicator of several ranks (runtime/collectives.h),
//                starts its sum on the communication thread and the next steps run meanwhile;
//                the first step that reads the sum (or the end of the call) waits for it;
//                an all_reduce of a gradient bucket (CollectiveBucketLayout) copies its
//                operand into the bucket's region only when the operand lives elsewhere
//                (packed), and the bucket's last all_reduce starts one sum over the region;
//   assign       stores a slot in a variable (assign_add / assign_sub add first);
//   cond / while structured control flow over nested executables (a stacked while's stacks
//                are the one kind of value whose shape is known only at run time).
// Constants are made once when the executable is built. run() follows execute_reference's
// contract (runtime/reference_executor.h) for concrete shapes: results agree with it within
// the kernels' documented tolerances (fusion, vector math, reassociated reductions).
//
// Memory: every slot has a SlotStorage. Intermediate values, kernel temporaries and
// contraction products live in an arena laid out by the memory plan (codegen/memory_plan.h,
// without buffer reuse, so kernel buffers never alias). Arenas are pooled: a call takes a
// free arena (allocating one only when every arena is in use by a concurrent call) and gives
// it back, so repeated calls allocate nothing and concurrent calls never share one. Values
// that outlive the call (graph outputs, new variable values) are "pooled": each such slot
// keeps a few buffers and reuses one that nobody else holds any more (a variable's previous
// value, an output the caller dropped); the first call allocates two per slot, so a training
// step allocates no tensor storage from its second call on.
//
// Variables are updated in place where the compiler found a kernel that reads a variable and
// computes its new value with the variable's last read (codegen/compile_graph.cc; the kernel
// writes that output into the input's buffer, KernelLayout::overwrites): when the caller donated
// the variable's array and nothing took hold of it during the call, the kernel overwrites it;
// otherwise the kernel works on a pooled copy (as TensorFlow copies a shared buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/kernel_abi.h"

namespace kiln::runtime {

struct KernelCall {
  KernelLayout layout;
  KernelEntry entry = nullptr;
  std::vector<int> inputs;   // slots, in frame order
  std::vector<int> outputs;  // slots, in frame order
  std::vector<TensorType> output_types;
  std::vector<size_t> temporary_offsets;  // arena offsets of layout.temporaries
};

// Where a slot's array comes from during a call.
struct SlotStorage {
  enum class Kind : uint8_t {
    kExternal,  // an argument, a variable, a constant, or a value a step returns
    kArena,     // a view of the call's arena at `offset`
    kPooled,    // a buffer of the slot's pool (outlives the call)
  };
  Kind kind = Kind::kExternal;
  size_t offset = 0;
  TensorType type;
};

struct ExecutableStep {
  enum class Kind { kKernel, kContraction, kOp, kAssign, kCond, kWhile };
  Kind kind = Kind::kOp;
  std::string name;  // kernel group name or op name (profiles)
  // kOp / kContraction: the op, its attributes, operand slots, result type and slot
  OpKind op = OpKind::Add;
  Attrs attrs;
  std::vector<int> inputs;
  TensorType type;
  int output = -1;
  // kKernel, and kContraction's epilogue (its last input is the contraction result slot)
  std::shared_ptr<KernelCall> kernel;
  // kAssign
  int variable = -1;
  ir::NodeKind assign_kind = ir::NodeKind::kAssign;
  // kCond (then, else) / kWhile (cond, body); outputs (a stacked while: loop variables,
  // their per-iteration stacks, the trip count; runtime/while_stacks.h)
  std::vector<std::shared_ptr<const class Executable>> bodies;
  std::vector<int> outputs;
  // kOp all_reduce: its bucket (an index into the executable's buckets; -1: summed alone) and
  // whether it is the bucket's last all_reduce (it starts the bucket's sum).
  int bucket = -1;
  bool starts_bucket = false;
  bool stacked = false;
  int64_t stack_trips = -1;  // a stacked while whose stacks declare the trip count (else -1)
  std::vector<bool>
      stacks_kept;  // a stacked while: per loop variable, does anything read its stack
  // For the profiler (runtime/profiler.h): floating-point operations (contractions) and
  // The step runs one op with trait kSelects (slice, gather: set by the step builder): input 0
  // is read only as much as the output, in the byte estimate below.
  bool selects = false;
  // bytes read + written (kernels, ops, contractions; a concat: its pieces not computed in
  // their window of its result); 0 when unknown. Set by the Executable.
  double flops = 0, bytes = 0;
};

// A gradient bucket (codegen/memory_plan.h, CollectiveBucket): the results of several
// all_reduce steps next to each other in one region of the arena, summed by one collective
// when its last all_reduce step runs; a step that reads any of them waits for that sum.
struct CollectiveBucketLayout {
  std::string name;  // "bucket 0 (3 gradients)" (errors, profiles)
  DType dtype = DType::f32;
  size_t offset = 0;       // arena offset of the region
  size_t bytes = 0;        // the region (a multiple of the element size)
  std::vector<int> slots;  // the all_reduce results in it
  // [arena offset, bytes) in the region that belong to no result: zeroed before the sum.
  std::vector<std::pair<size_t, size_t>> padding;
};

class Executable {
 public:
  Executable(std::string name, std::vector<SlotStorage> slots, size_t arena_bytes,
             std::vector<int> parameter_slots, std::vector<int> variable_slots,
             std::vector<std::pair<int, Array>> constants, std::vector<ExecutableStep> steps,
             std::vector<int> output_slots, std::vector<CollectiveBucketLayout> buckets = {});
  ~Executable();

  const std::string& name() const { return name_; }
  const std::vector<ExecutableStep>& steps() const { return steps_; }
  const std::vector<CollectiveBucketLayout>& buckets() const { return buckets_; }
  // Whether output i is parameter i itself (a while body passing a loop variable through:
  // its buffer and value stay the same for the whole loop, runtime/loop_invariants.h).
  bool passes_through(size_t i) const { return output_parameter(i) == int(i); }
  // The parameter that output i returns unchanged (the graph passes it on), or -1.
  int output_parameter(size_t i) const {
    return i < output_parameter_.size() ? output_parameter_[i] : -1;
  }
  // Bytes of one arena (planned values, kernel temporaries, contraction products).
  size_t arena_bytes() const { return arena_bytes_; }
  // What the arena pool really allocated so far: arenas and their bytes summed (one arena per
  // concurrent call; sequential calls reuse one).
  struct ArenaAllocations {
    int64_t arenas = 0;
    size_t bytes = 0;
  };
  ArenaAllocations arena_allocations() const;

  // args: one per graph parameter, of the compiled shapes; variables: one per graph
  // variable (entry values in, new values out, as in execute_reference). donate[i] says the
  // caller lets the call overwrite variables[i]'s buffer: nobody but the caller can observe
  // it (kiln::ConcreteFunction donates a variable whose value no other tensor shares). A
  // donated variable may be updated in place (its new value is then the same buffer) unless
  // something took hold of the buffer during the call; the executable never writes into
  // any other array of the caller's (but `into`'s, below). Results never view this call's
  // arena (such a value is copied out); an argument returned as an output is that very array.
  // Thread-safe: all per-call state is local (concurrent calls must not donate the same
  // variable).
  // With profiling on (runtime/profiler.h), records one "call" event named after the
  // executable and one event per step (category kernel, contraction, op, assign, control),
  // named as in the IR dump (fusion group names).
  // `into` (empty, or one array per graph output, each empty or not): an output that would get
  // a buffer of its own (not a parameter, variable, constant or view) is computed in its
  // `into` array when that has the output's type and the output is returned once: a while
  // step hands its body the next rows of its stacks this way (runtime/while_stacks.h). An
  // output computed there is returned as that very array (not detached); every other output is
  // returned as without `into`, so callers compare storages, never assume.
  std::vector<Array> run(std::span<const Array> args, std::vector<Array>& variables,
                         const std::vector<bool>& donate = {},
                         std::span<const Array> into = {}) const;

 private:
  struct Pools;
  std::shared_ptr<Storage> acquire_arena() const;
  void release_arena(std::shared_ptr<Storage> arena) const;
  // `spare`: a pool's first use allocates the next call's buffer too (values the caller
  // usually keeps: outputs, new variable values); else one buffer at a time (while stacks).
  Array acquire_pooled(size_t slot, bool spare = true) const;
  void bind_overwrites(const KernelCall& call, std::vector<Array>& slots,
                       const std::vector<long>& donated) const;
  // A kWhile step (runtime/executable_while.cc): reads its operands from `slots`, writes its
  // results there.
  void run_while(const ExecutableStep& s, std::vector<Array>& slots) const;
  // `a`, or a copy of it when it is a view of some arena (a sub-executable passing an operand
  // through), which must not outlive the call that made it.
  static Array detach(const Array& a);

  std::string name_;
  std::vector<SlotStorage> slot_storage_;
  size_t arena_bytes_ = 0;
  std::unique_ptr<Pools> pools_;
  std::vector<int> parameter_slots_, variable_slots_;
  std::vector<bool> argument_slot_;    // per slot: is it a parameter (the caller's array)
  std::vector<int> variable_of_slot_;  // per slot: the variable whose entry value it is, or -1
  std::vector<std::pair<int, Array>> constants_;
  std::vector<ExecutableStep> steps_;
  std::vector<int> output_slots_;
  std::vector<int> output_parameter_;  // per output: the parameter it returns unchanged, or -1
  std::vector<CollectiveBucketLayout> buckets_;
};

// Calls a compiled kernel on its buffers across the thread arena; a kernel status is turned
// into a kiln::Error naming the kernel.
void run_kernel_call(const KernelCall& call, std::span<void* const> buffers);

}  // namespace kiln::runtime
