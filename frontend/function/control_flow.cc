#include "frontend/function/control_flow.h"

#include <fmt/format.h>

#include "frontend/creation.h"
#include "frontend/function/trace_context.h"
#include "frontend/gradient_tape.h"
#include "frontend/ops.h"
#include "frontend/tape_recorder.h"

namespace kiln {
namespace {

using detail::TraceContext;

bool predicate_value(const Tensor& pred, const char* what) {
  if (!pred.defined()) throw Error(fmt::format("{}: the predicate is undefined", what));
  if (pred.dtype() != DType::b8 || pred.rank() != 0)
    throw Error(
        fmt::format("{}: the predicate must be a bool scalar, got {}; compare with "
                    "kiln::greater etc. and reduce to a scalar first",
                    what, pred.type().to_string()));
  return pred.item<bool>();
}

// One traced branch or loop part: its sub-graph, the outer tensors feeding its parameters
// (after any leading loop-variable parameters), its outputs and its variable writes.
struct SubTrace {
  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> captures;
  std::vector<ir::Value*> outputs;
  std::vector<Tensor> results;
  std::vector<TraceContext::PendingWrite> writes;
};

// Traces fn in a child context of `parent`. `pre_captures` are lifted first so parameter
// lists of sibling sub-graphs line up; `leading` parameters (loop variables) come before them.
template <typename Fn>
SubTrace trace_sub(TraceContext& parent, const std::string& name,
                   const std::vector<TensorType>& leading, const std::vector<Tensor>& pre_captures,
                   bool discard_writes, Fn&& fn) {
  SubTrace st;
  st.graph = std::make_unique<ir::Graph>(name);
  TraceContext child(*st.graph, parent.owner(), &parent);
  child.set_discard_writes(discard_writes);
  std::vector<Tensor> params;
  for (const TensorType& t : leading) params.push_back(child.wrap(st.graph->add_parameter(t)));
  for (const Tensor& c : pre_captures) child.value_of(c);
  st.results = fn(params);
  for (size_t i = 0; i < st.results.size(); ++i) {
    if (!st.results[i].defined())
      throw Error(fmt::format("{}: output {} is an undefined tensor", name, i));
    st.outputs.push_back(child.value_of(st.results[i]));
  }
  st.captures = child.captured_outer();
  st.writes = child.pending_writes();
  return st;
}

// Appends parameters to `st` for the captures a sibling added after `st` was traced.
void align_captures(SubTrace& st, const std::vector<Tensor>& all) {
  for (size_t i = st.captures.size(); i < all.size(); ++i) {
    st.graph->add_parameter(all[i].type());
    st.captures.push_back(all[i]);
  }
}

std::vector<Tensor> traced_cond(TraceContext& ctx, const Tensor& pred, const BranchFn& true_fn,
                                const BranchFn& false_fn, bool discard_writes);

// The backward of a traced cond: a cond of the branches' vector-Jacobian products.
detail::CustomGradient cond_gradient(Tensor pred, BranchFn true_fn, BranchFn false_fn,
                                     std::vector<Tensor> inputs) {
  return [=](const std::vector<Tensor>& out_grads, const std::vector<bool>& needs) {
    std::vector<Tensor> sources;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (needs[i]) sources.push_back(inputs[i]);
    // By value: the gradient cond keeps these branches for its own gradient (second order),
    // which runs after this call has returned.
    auto vjp = [&](const BranchFn& fn) {
      return [sources, out_grads, fn]() {
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
  SubTrace then_t = trace_sub(ctx, "then", {}, {}, discard_writes, call(true_fn));
  SubTrace else_t = trace_sub(ctx, "else", {}, then_t.captures, discard_writes, call(false_fn));
  align_captures(then_t, else_t.captures);
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
  for (const Variable& var : written) {
    Tensor before = ctx.read_variable(var);
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
    detail::record_custom_on_tapes(inputs, results, cond_gradient(pred, true_fn, false_fn, inputs));
  return results;
}

}  // namespace

std::vector<Tensor> cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn) {
  TraceContext* ctx = TraceContext::current();
  if (ctx && pred.defined() && pred.is_traced())
    return traced_cond(*ctx, pred, true_fn, false_fn, /*discard_writes=*/false);
  return predicate_value(pred, "cond") ? true_fn() : false_fn();
}

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               const std::vector<Tensor>& loop_vars) {
  auto check_types = [&](const std::vector<Tensor>& next) {
    if (next.size() != loop_vars.size())
      throw Error(fmt::format("while_loop: body_fn returns {} tensor(s) for {} loop variables",
                              next.size(), loop_vars.size()));
    for (size_t i = 0; i < next.size(); ++i)
      if (!next[i].defined() || !(next[i].type() == loop_vars[i].type()))
        throw Error(fmt::format(
            "while_loop: loop variable {} is {} but body_fn returns {}; loop variables keep "
            "their dtype and shape",
            i, loop_vars[i].type().to_string(),
            next[i].defined() ? next[i].type().to_string() : std::string("undefined")));
  };
  TraceContext* ctx = TraceContext::current();
  for (const Tensor& v : loop_vars) {
    if (!v.defined()) throw Error("while_loop: a loop variable is undefined");
  }
  if (!ctx) {
    std::vector<Tensor> vars = loop_vars;
    while (predicate_value(cond_fn(vars), "while_loop")) {
      std::vector<Tensor> next = body_fn(vars);
      check_types(next);
      vars = std::move(next);
    }
    return vars;
  }
  // Traced (even with concrete initial values: the trip count may depend on traced values
  // the callables capture).
  std::vector<TensorType> types;
  for (const Tensor& v : loop_vars) types.push_back(v.type());
  SubTrace body = trace_sub(*ctx, "body", types, {}, false, body_fn);
  check_types(body.results);
  if (!body.writes.empty())
    throw Error(fmt::format(
        "while_loop: the body assigns variable \"{}\" inside kiln::function; carry the value "
        "as a loop variable and assign it after the loop",
        body.writes[0].var.name()));
  SubTrace cond_t =
      trace_sub(*ctx, "cond", types, body.captures, false,
                [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{cond_fn(v)}; });
  if (cond_t.results[0].dtype() != DType::b8 || cond_t.results[0].rank() != 0)
    throw Error(fmt::format("while_loop: cond_fn must return a bool scalar, got {}",
                            cond_t.results[0].type().to_string()));
  if (!cond_t.writes.empty()) throw Error("while_loop: cond_fn must not assign variables");
  align_captures(body, cond_t.captures);
  body.graph->set_outputs(body.outputs);
  cond_t.graph->set_outputs(cond_t.outputs);
  std::vector<ir::Value*> operands;
  for (const Tensor& v : loop_vars) operands.push_back(ctx->value_of(v));
  for (const Tensor& c : body.captures) operands.push_back(ctx->value_of(c));
  std::vector<std::unique_ptr<ir::Graph>> subgraphs;
  subgraphs.push_back(std::move(cond_t.graph));
  subgraphs.push_back(std::move(body.graph));
  ir::Node* node = ctx->graph().add_control_flow(ir::NodeKind::kWhile, std::move(operands),
                                                 std::move(subgraphs), types);
  ctx->annotate(*node, "while");
  std::vector<Tensor> results;
  for (size_t i = 0; i < types.size(); ++i) results.push_back(ctx->wrap(node->output(i)));
  std::vector<Tensor> inputs = loop_vars;
  inputs.insert(inputs.end(), body.captures.begin(), body.captures.end());
  if (detail::tapes_recording() && detail::any_watched(inputs))
    detail::record_custom_on_tapes(
        inputs, results,
        [](const std::vector<Tensor>&, const std::vector<bool>&) -> std::vector<Tensor> {
          throw Error(
              "GradientTape::gradient: kiln::while_loop traced inside kiln::function has no "
              "gradient; differentiate an eager loop, or unroll the loop in C++ (a for loop "
              "over kiln ops) so every step is recorded");
        });
  return results;
}

}  // namespace kiln
