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
//   assign       stores a slot in a variable (assign_add / assign_sub add first);
//   cond / while structured control flow over nested executables.
// Constants are made once when the executable is built. run() follows execute_reference's
// contract (runtime/reference_executor.h) for concrete shapes: results agree with it within
// the kernels' documented tolerances (fusion, vector math, reassociated reductions).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/graph.h"
#include "runtime/array.h"
#include "runtime/kernel_abi.h"

namespace kiln::runtime {

struct KernelCall {
  KernelLayout layout;
  KernelEntry entry = nullptr;
  std::vector<int> inputs;   // slots, in frame order
  std::vector<int> outputs;  // slots, in frame order
  std::vector<TensorType> output_types;
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
  // kCond (then, else) / kWhile (cond, body); outputs
  std::vector<std::shared_ptr<const class Executable>> bodies;
  std::vector<int> outputs;
};

class Executable {
 public:
  Executable(std::string name, size_t num_slots, std::vector<int> parameter_slots,
             std::vector<int> variable_slots, std::vector<std::pair<int, Array>> constants,
             std::vector<ExecutableStep> steps, std::vector<int> output_slots);

  const std::string& name() const { return name_; }
  const std::vector<ExecutableStep>& steps() const { return steps_; }

  // args: one per graph parameter, of the compiled shapes; variables: one per graph
  // variable (entry values in, new values out, as in execute_reference). Thread-safe: all
  // per-call state is local.
  std::vector<Array> run(std::span<const Array> args, std::vector<Array>& variables) const;

 private:
  std::string name_;
  size_t num_slots_;
  std::vector<int> parameter_slots_, variable_slots_;
  std::vector<std::pair<int, Array>> constants_;
  std::vector<ExecutableStep> steps_;
  std::vector<int> output_slots_;
};

// Calls a compiled kernel on its buffers across the thread arena; a kernel status is turned
// into a kiln::Error naming the kernel.
void run_kernel_call(const KernelCall& call, std::span<void* const> buffers);

}  // namespace kiln::runtime
