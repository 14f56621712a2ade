// ConcreteFunction: one traced graph for one input signature, with the variables it captures
// (its per-graph variable registry). Calling it runs the graph on concrete tensors and applies
// its assignments to the captured variables. Copies share the graph and its compiled code.
//
// Execution modes: kCompiled (default) specialises the graph to the arguments' shapes,
// optimizes it (passes::optimize_pipeline, knobs from the environment) and JIT-compiles it on
// the first call with those shapes, keeping the result as a CompiledForm (compiled_form.h),
// whose executable runs; later calls with the same shapes reuse it. compiled_form() returns
// that same object: what it prints is what runs. kReference runs the traced graph node by node
// with the eager kernels (runtime/reference_executor.h): the test oracle. The two agree within
// the kernels' tolerances (docs/codegen.md), not bitwise.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/function/compiled_form.h"
#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/graph.h"

namespace kiln {

// The type of one function argument; -1 dimensions are unknown (any size is accepted).
struct TensorSpec {
  Shape shape{};
  DType dtype = DType::f32;
  static TensorSpec of(const Tensor& t) { return {t.shape(), t.dtype()}; }
  TensorType type() const { return {dtype, shape}; }
};

enum class ExecutionMode { kCompiled, kReference };
const char* execution_mode_name(ExecutionMode mode);  // "compiled" | "reference"
// "compiled" / "reference"; kiln::Error naming the accepted values otherwise.
ExecutionMode parse_execution_mode(const std::string& name);

// The mode of functions that do not choose one (FunctionOptions::mode unset): KILN_EXECUTION_MODE
// (compiled | reference) if set, else compiled. Read when a concrete function runs.
ExecutionMode default_execution_mode();
void set_default_execution_mode(ExecutionMode mode);

// Sets the default execution mode for a scope (tests that compare traced graphs bitwise
// with eager execution use kReference).
class ScopedExecutionMode {
 public:
  explicit ScopedExecutionMode(ExecutionMode mode) : saved_(default_execution_mode()) {
    set_default_execution_mode(mode);
  }
  ~ScopedExecutionMode() { set_default_execution_mode(saved_); }
  ScopedExecutionMode(const ScopedExecutionMode&) = delete;
  ScopedExecutionMode& operator=(const ScopedExecutionMode&) = delete;

 private:
  ExecutionMode saved_;
};

// Compilation counters of one concrete function (all shapes it was called with).
struct CompileStats {
  int executables = 0;         // shape specialisations compiled
  double compile_seconds = 0;  // specialise + optimize + JIT, summed
};

// One registry entry: a variable the graph captures and what the graph does with it.
struct VariableUse {
  Variable variable;
  bool read = false;
  bool written = false;
};

class ConcreteFunction {
 public:
  ConcreteFunction() = default;
  // `mode` unset: default_execution_mode() at each call.
  ConcreteFunction(std::shared_ptr<const ir::Graph> graph, std::vector<Variable> variables,
                   std::optional<ExecutionMode> mode = std::nullopt);

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  const ir::Graph& graph() const;
  std::shared_ptr<const ir::Graph> graph_ptr() const;
  std::vector<TensorType> input_types() const;
  std::vector<TensorType> output_types() const;
  // The registry, in the graph's variable order ($0, $1, ...).
  std::vector<VariableUse> variables() const;
  // The IR text (ir/printer.h format) of the traced graph, or of a later stage of the
  // compiled form for input_types() (kiln::Error when a dimension of the signature is
  // unknown: use compiled_form(args).ir_text(stage)).
  std::string ir_text(Stage stage = Stage::kTraced) const;

  // The compilation result the compiled mode runs for these arguments' shapes (compiled now
  // unless a call or an earlier request already did; counted in compile_stats()). Types must
  // match input_types() with every dimension known; kiln::Error naming the argument otherwise.
  CompiledForm compiled_form(const std::vector<Tensor>& args) const;
  CompiledForm compiled_form(const std::vector<TensorType>& argument_types) const;
  // For input_types() (a signature without unknown dimensions).
  CompiledForm compiled_form() const;

  // Runs the graph. Arguments must match input_types() (unknown dimensions accept any size);
  // mismatches throw kiln::Error naming the argument. Returns the graph's outputs.
  // Runs in mode(); safe to call from several threads (compilation is serialised per
  // function; a run keeps its state local).
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;
  // Runs in the given mode.
  std::vector<Tensor> run(const std::vector<Tensor>& args, ExecutionMode mode) const;
  ExecutionMode mode() const;
  CompileStats compile_stats() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Checks `args` against `types` (count, dtype, rank, known dimensions); kiln::Error naming the
// function and the argument otherwise.
void check_arguments(const std::string& function, const std::vector<TensorType>& types,
                     const std::vector<Tensor>& args);

}  // namespace kiln
