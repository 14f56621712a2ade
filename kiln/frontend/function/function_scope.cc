#include "kiln/frontend/function/function_scope.h"

#include <fmt/format.h>

#include "kiln/frontend/function/dump_stages.h"
#include "kiln/frontend/function/keep_old_values.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/function/tracing_random.h"
#include "kiln/ir/verifier.h"

namespace kiln {

struct FunctionScope::State {
  detail::TraceOwner owner;
  std::shared_ptr<ir::Graph> graph;
  std::unique_ptr<detail::TraceContext> ctx;
  std::vector<Tensor> inputs;
};

FunctionScope::FunctionScope(std::string name, const std::vector<TensorSpec>& inputs)
    : state_(std::make_unique<State>()) {
  if (name.empty()) name = "function";
  state_->owner.function_name = name;
  state_->graph = std::make_shared<ir::Graph>(name);
  state_->ctx = std::make_unique<detail::TraceContext>(*state_->graph, state_->owner, nullptr);
  for (const TensorSpec& s : inputs)
    state_->inputs.push_back(state_->ctx->wrap(state_->graph->add_parameter(s.type())));
}

FunctionScope::~FunctionScope() = default;

const std::vector<Tensor>& FunctionScope::inputs() const { return state_->inputs; }

const Tensor& FunctionScope::input(size_t i) const {
  if (i >= state_->inputs.size())
    throw Error(fmt::format("FunctionScope \"{}\": input {} does not exist (it has {})",
                            state_->owner.function_name, i, state_->inputs.size()));
  return state_->inputs[i];
}

ConcreteFunction FunctionScope::finish(const std::vector<Tensor>& outputs) {
  State& s = *state_;
  if (!s.ctx)
    throw Error(
        fmt::format("FunctionScope \"{}\": finish() was already called", s.owner.function_name));
  if (detail::TraceContext::current() != s.ctx.get())
    throw Error(fmt::format(
        "FunctionScope \"{}\": finish() must be called while this scope is the innermost "
        "trace (close inner scopes first)",
        s.owner.function_name));
  detail::finish_random_state(*s.ctx);
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined())
      throw Error(fmt::format("FunctionScope \"{}\": output {} is an undefined tensor",
                              s.owner.function_name, i));
    values.push_back(s.ctx->value_of(outputs[i]));
  }
  s.graph->set_outputs(std::move(values));
  std::vector<Variable> variables = s.ctx->captured_variables();
  s.ctx.reset();
  detail::keep_old_variable_values(*s.graph);
  ir::verify_graph(*s.graph);
  detail::dump_trace_stages(*s.graph);
  return ConcreteFunction(s.graph, std::move(variables));
}

}  // namespace kiln
