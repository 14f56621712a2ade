// ConcreteFunction: one traced graph for one input signature, with the variables it captures
// (its per-graph variable registry). Calling it runs the graph (now: the reference executor,
// node by node with the eager kernels) on concrete tensors and applies its assignments to the
// captured variables. Copies share the graph.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "frontend/variable.h"
#include "ir/graph.h"

namespace kiln {

// The type of one function argument; -1 dimensions are unknown (any size is accepted).
struct TensorSpec {
  Shape shape{};
  DType dtype = DType::f32;
  static TensorSpec of(const Tensor& t) { return {t.shape(), t.dtype()}; }
  TensorType type() const { return {dtype, shape}; }
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
  ConcreteFunction(std::shared_ptr<const ir::Graph> graph, std::vector<Variable> variables);

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  const ir::Graph& graph() const;
  std::vector<TensorType> input_types() const;
  std::vector<TensorType> output_types() const;
  // The registry, in the graph's variable order ($0, $1, ...).
  std::vector<VariableUse> variables() const;
  // The IR text of the graph (ir/printer.h format).
  std::string ir_text() const;

  // Runs the graph. Arguments must match input_types() (unknown dimensions accept any size);
  // mismatches throw kiln::Error naming the argument. Returns the graph's outputs.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Checks `args` against `types` (count, dtype, rank, known dimensions); kiln::Error naming the
// function and the argument otherwise.
void check_arguments(const std::string& function, const std::vector<TensorType>& types,
                     const std::vector<Tensor>& args);

}  // namespace kiln
