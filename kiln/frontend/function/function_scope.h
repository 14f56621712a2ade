// FunctionScope: tracing for code that is not one callable. While the scope is open, ops on
// its input tensors (and on variables) record into a graph instead of running; finish(outputs)
// closes the trace and returns the ConcreteFunction, which runs like one from kiln::function.
//
//   kiln::FunctionScope scope("train_step", {x_spec, y_spec});
//   auto [x, y] = std::pair(scope.input(0), scope.input(1));
//   ... forward, tape, optimizer ...
//   kiln::ConcreteFunction step = scope.finish({loss});
//
// Scopes nest with other traces like ordinary RAII objects (close in reverse order). A scope
// destroyed without finish() discards its trace.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/frontend/function/concrete_function.h"

namespace kiln {

class FunctionScope {
 public:
  FunctionScope(std::string name, const std::vector<TensorSpec>& inputs);
  ~FunctionScope();
  FunctionScope(const FunctionScope&) = delete;
  FunctionScope& operator=(const FunctionScope&) = delete;

  // The symbolic input tensors, one per spec.
  const std::vector<Tensor>& inputs() const;
  const Tensor& input(size_t i) const;
  // Ends the trace with these outputs; throws kiln::Error when called twice.
  ConcreteFunction finish(const std::vector<Tensor>& outputs);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln
