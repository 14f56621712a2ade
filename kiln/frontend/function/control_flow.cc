#include "kiln/frontend/function/control_flow.h"

#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/control_flow_internal.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"

namespace kiln {

bool detail::predicate_value(const Tensor& pred, const char* what) {
  if (!pred.defined()) throw Error(fmt::format("{}: the predicate is undefined", what));
  if (pred.dtype() != DType::b8 || pred.rank() != 0)
    throw Error(
        fmt::format("{}: the predicate must be a bool scalar, got {}; compare with "
                    "kiln::greater etc. and reduce to a scalar first",
                    what, pred.type().to_string()));
  return pred.item<bool>();
}

namespace {

using detail::SubTrace;
using detail::trace_sub;
using detail::TraceContext;

std::vector<Tensor> traced_cond(TraceContext& ctx, const Tensor& pred, const BranchFn& true_fn,
                                const BranchFn& false_fn, bool discard_writes);

// A variable a branch assigns and its value before the cond.
struct VariableBefore {
  Variable var;
  Tensor value;
};

// The backward of a traced cond: a cond of the branches' vector-Jacobian products. The branches
// run again there, after the cond has assigned its variables; each re-run first sees the values
// from before the cond, so it computes what the forward branch did (a SeedGenerator's draw, for
// one, gives the forward mask again).
detail::CustomGradient cond_gradient(Tensor pred, BranchFn true_fn, BranchFn false_fn,
                                     std::vector<Tensor> inputs,
                                     std::vector<VariableBefore> before) {
  return [=](const std::vector<Tensor>& out_grads, const std::vector<bool>& needs) {
    std::vector<Tensor> sources;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (needs[i]) sources.push_back(inputs[i]);
    // By value: the gradient cond keeps these branches for its own gradient (second order),
    // which runs after this call has returned.
    auto vjp = [&](const BranchFn& fn) {
      return [sources, out_grads, fn, before]() {
        TraceContext* here = TraceContext::current();
        KILN_ASSERT(here != nullptr, "cond gradient branch outside a trace");
        for (const VariableBefore& b : before) here->seed_variable(b.var, b.value);
        GradientTape tape;
        for (const Tensor& s : sources) tape.watch(s);
        std::vector<Tensor> outs = fn();
        Tensor target;
        for (size_t i = 0; i < outs.size() && i < out_grads.size(); ++i) {
          if (!out_grads[i].defined() || !is_floating(outs[i].dtype())) continue;
          Tensor term = sum(outs[i] * out_grads[i]);
          target = target.defined() ? target + term : term;
        }
        if (!target.defined()) {
          std::vector<Tensor> zero;
          for (const Tensor& s : sources) zero.push_back(zeros_like(s));
          return zero;
        }
        return tape.gradient(target, sources, UnconnectedGradients::kZero);
      };
    };
    TraceContext* ctx = TraceContext::current();
    KILN_ASSERT(ctx != nullptr, "cond gradient outside a trace");
    std::vector<Tensor> g =
        traced_cond(*ctx, pred, vjp(true_fn), vjp(false_fn), /*discard_writes=*/true);
    std::vector<Tensor> out(inputs.size());
    size_t k = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (needs[i]) out[i] = g[k++];
    return out;
  };
}

std::vector<Tensor> traced_cond(TraceContext& ctx, const Tensor& pred, const BranchFn& true_fn,
                                const BranchFn& false_fn, bool discard_writes) {
  if (pred.dtype() != DType::b8 || pred.rank() != 0)
    throw Error(
        fmt::format("cond: the predicate must be a bool scalar, got {}", pred.type().to_string()));
  auto call = [](const BranchFn& fn) { return [&fn](const std::vector<Tensor>&) { return fn(); }; };
  detail::SubTraceOptions options;
  options.discard_writes = discard_writes;
  SubTrace then_t = trace_sub(ctx, "then", options, call(true_fn));
  options.pre_captures = then_t.captures;
  SubTrace else_t = trace_sub(ctx, "else", options, call(false_fn));
  detail::align_captures(then_t, else_t.captures);
  if (then_t.results.size() != else_t.results.size())
    throw Error(
        fmt::format("cond: true_fn returns {} tensor(s) but false_fn returns {}; both "
                    "branches must return the same number",
                    then_t.results.size(), else_t.results.size()));
  std::vector<TensorType> types;
  for (size_t i = 0; i < then_t.results.size(); ++i) {
    if (!(then_t.results[i].type() == else_t.results[i].type()))
      throw Error(fmt::format(
          "cond: output {} is {} in true_fn but {} in false_fn; both "
          "branches must return the same types",
          i, then_t.results[i].type().to_string(), else_t.results[i].type().to_string()));
    types.push_back(then_t.results[i].type());
  }
  // Variables written in either branch: both branches output the variable's new value (or,
  // when a branch leaves it alone, its value before the cond), assigned after the node.
  std::vector<Variable> written;
  for (const SubTrace* st : {&then_t, &else_t})
    for (const auto& w : st->writes)
      if (std::find(written.begin(), written.end(), w.var) == written.end())
        written.push_back(w.var);
  std::vector<VariableBefore> written_before;
  for (const Variable& var : written) {
    Tensor before = ctx.read_variable(var);
    written_before.push_back({var, before});
    then_t.graph->add_parameter(before.type());
    else_t.graph->add_parameter(before.type());
    then_t.captures.push_back(before);
    else_t.captures.push_back(before);
    for (SubTrace* st : {&then_t, &else_t}) {
      ir::Value* out = st->graph->parameters().back().get();
      for (const auto& w : st->writes)
        if (w.var == var)
          out = static_cast<const detail::TracedValue*>(w.value.symbolic_info())->value;
      st->outputs.push_back(out);
    }
    types.push_back(before.type());
  }
  then_t.graph->set_outputs(then_t.outputs);
  else_t.graph->set_outputs(else_t.outputs);

  std::vector<ir::Value*> operands{ctx.value_of(pred)};
  for (const Tensor& c : then_t.captures) operands.push_back(ctx.value_of(c));
  std::vector<std::unique_ptr<ir::Graph>> subgraphs;
  subgraphs.push_back(std::move(then_t.graph));
  subgraphs.push_back(std::move(else_t.graph));
  ir::Node* node = ctx.graph().add_control_flow(ir::NodeKind::kCond, std::move(operands),
                                                std::move(subgraphs), types);
  ctx.annotate(*node, "cond");
  std::vector<Tensor> results;
  size_t n_results = then_t.results.size();
  for (size_t i = 0; i < n_results; ++i) results.push_back(ctx.wrap(node->output(i)));
  for (size_t i = 0; i < written.size(); ++i)
    written[i].assign(ctx.wrap(node->output(n_results + i)));

  std::vector<Tensor> inputs = then_t.captures;
  inputs.resize(inputs.size() - written.size());
  if (detail::tapes_recording() && detail::any_watched(inputs))
    detail::record_custom_on_tapes(
        inputs, results, cond_gradient(pred, true_fn, false_fn, inputs, std::move(written_before)));
  return results;
}

}  // namespace

std::vector<Tensor> cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn) {
  TraceContext* ctx = TraceContext::current();
  if (ctx && pred.defined() && pred.is_traced())
    return traced_cond(*ctx, pred, true_fn, false_fn, /*discard_writes=*/false);
  return detail::predicate_value(pred, "cond") ? true_fn() : false_fn();
}

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               const std::vector<Tensor>& loop_vars) {
  for (const Tensor& v : loop_vars)
    if (!v.defined()) throw Error("while_loop: a loop variable is undefined");
  // Traced (even with concrete initial values: the trip count may depend on traced values
  // the callables capture).
  if (TraceContext* ctx = TraceContext::current())
    return detail::traced_while(*ctx, cond_fn, body_fn, loop_vars, detail::WhileRole::kForward);
  std::vector<Tensor> vars = loop_vars;
  while (detail::predicate_value(cond_fn(vars), "while_loop")) {
    std::vector<Tensor> next = body_fn(vars);
    detail::check_loop_types(loop_vars, next);
    vars = std::move(next);
  }
  return vars;
}

}  // namespace kiln
