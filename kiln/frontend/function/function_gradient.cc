#include "kiln/frontend/function/function_gradient.h"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <span>
#include <unordered_set>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/graph_replay.h"
#include "kiln/frontend/function/keep_old_values.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"
#include "kiln/ir/verifier.h"

namespace kiln::detail {

namespace {

std::atomic<int> g_forward_calls{0}, g_compiled{0}, g_backward_calls{0};

// The forward variant and backward graph of one concrete function.
struct GradientPair {
  ConcreteFunction forward;   // arguments -> outputs ++ residuals
  ConcreteFunction backward;  // upstream gradients of the floating outputs ++ residuals ->
                              // gradients of arg_sources ++ var_sources
  size_t num_outputs = 0;
  std::vector<size_t> float_outputs;  // outputs that receive an upstream gradient
  std::vector<size_t> arg_sources;    // floating arguments
  std::vector<size_t> var_sources;    // graph variables: trainable, floating, read
  // The forward variant's variables, and where var_sources are among them.
  std::vector<Variable> forward_vars;
  std::vector<size_t> forward_var_sources;
  // Higher order: the vector-Jacobian product of the whole forward variant (outputs and
  // residuals), as a pure function of (arguments, variable entry values, upstream gradients of
  // its floating outputs) -> gradients of arg_sources ++ var_sources. Built on first use.
  mutable std::once_flag second_once;
  mutable ConcreteFunction second;
};

std::vector<Variable> variables_of(const ConcreteFunction& f) {
  std::vector<Variable> out;
  for (const VariableUse& u : f.variables()) out.push_back(u.variable);
  return out;
}

// The tracing policy of the graphs built here: they replay existing graphs, so they create no
// variables.
TraceOwner owner_for(const std::string& name) {
  TraceOwner o;
  o.function_name = name;
  o.allow_variable_creation = false;
  return o;
}

std::shared_ptr<ir::Graph> finish(std::shared_ptr<ir::Graph> g) {
  keep_old_variable_values(*g);
  ir::verify_graph(*g);
  return g;
}

// What a call can be differentiated with respect to: the floating arguments and the trainable
// floating variables the graph reads, in that order.
struct Candidates {
  std::vector<size_t> args, vars;
};
Candidates candidates_of(const ConcreteFunction& f, const std::vector<Variable>& vars) {
  const ir::Graph& g = f.graph();
  Candidates c;
  for (size_t i = 0; i < g.parameters().size(); ++i)
    if (is_floating(g.parameter(i)->dtype())) c.args.push_back(i);
  for (size_t j = 0; j < vars.size(); ++j) {
    const ir::GraphVariable& gv = g.variable(j);
    if (gv.read && vars[j].trainable() && is_floating(gv.type.dtype)) c.vars.push_back(j);
  }
  return c;
}

// Traces `g` again under a tape with the vector-Jacobian product of its floating outputs with
// respect to the sources `wanted` selects (parallel to the candidates: the ones the recording
// tapes watch, so no gradient is computed that no tape asked for). Returns null when nothing is
// differentiable (no floating output or no source).
std::shared_ptr<const GradientPair> build_pair(const ConcreteFunction& f,
                                               const std::vector<bool>& wanted) {
  const ir::Graph& g = f.graph();
  std::string why;
  if (!GraphReplay::replayable(g, &why))
    throw Error(fmt::format(
        "function \"{}\" was called while a GradientTape records, but {}: kiln cannot "
        "differentiate such a call as one op yet. Compute the gradient inside the function "
        "(a GradientTape inside the traced callable), or call it outside the tape",
        f.name(), why));
  const std::vector<Variable> vars = variables_of(f);
  auto pair = std::make_shared<GradientPair>();
  pair->num_outputs = g.outputs().size();

  // 1. The combined graph: replayed forward, then the gradient.
  auto combined = std::make_shared<ir::Graph>(g.name() + ".forward_backward");
  TraceOwner owner = owner_for(combined->name());
  std::vector<Variable> combined_vars;
  std::vector<const ir::Value*> upstream;
  {
    PauseTapes pause;  // the tapes of the call must not record this trace
    TraceContext ctx(*combined, owner, nullptr);
    std::vector<Tensor> params;
    for (const TensorType& t : g.parameter_types())
      params.push_back(ctx.wrap(combined->add_parameter(t)));
    const Candidates candidates = candidates_of(f, vars);
    GradientTape tape;
    std::vector<Tensor> sources;
    for (size_t c = 0; c < candidates.args.size(); ++c) {
      if (!wanted[c]) continue;
      const size_t i = candidates.args[c];
      tape.watch(params[i]);
      pair->arg_sources.push_back(i);
      sources.push_back(params[i]);
    }
    GraphReplay replay(g, vars);
    for (size_t i = 0; i < params.size(); ++i) replay.bind(g.parameter(i), params[i]);
    replay.run();
    std::vector<Tensor> outputs;
    for (const ir::Value* v : g.outputs()) outputs.push_back(replay.get(v));
    for (size_t c = 0; c < candidates.vars.size(); ++c) {
      if (!wanted[candidates.args.size() + c]) continue;
      const size_t j = candidates.vars[c];
      pair->var_sources.push_back(j);
      sources.push_back(replay.get(g.variable(j).entry));  // the value the graph read
    }
    Tensor target;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!is_floating(outputs[i].dtype())) continue;
      pair->float_outputs.push_back(i);
      Tensor u = ctx.wrap(combined->add_parameter(outputs[i].type()));
      upstream.push_back(ctx.value_of(u));
      Tensor term = cast(sum(outputs[i] * u), DType::f64);
      target = target.defined() ? target + term : term;
    }
    if (!target.defined() || sources.empty()) return nullptr;
    std::vector<Tensor> grads = tape.gradient(target, sources, UnconnectedGradients::kZero);
    std::vector<ir::Value*> outs;
    for (const Tensor& t : outputs) outs.push_back(ctx.value_of(t));
    for (const Tensor& t : grads) outs.push_back(ctx.value_of(t));
    combined->set_outputs(std::move(outs));
    combined_vars = ctx.captured_variables();
  }
  finish(combined);

  // 2. Split where the upstream gradients enter.
  std::unordered_set<const ir::Value*> backward_values(upstream.begin(), upstream.end());
  std::unordered_set<const ir::Node*> backward_nodes;
  std::vector<const ir::Value*> residuals;
  std::unordered_set<const ir::Value*> is_residual;
  auto add_residual = [&](const ir::Value* v) {
    if (!backward_values.count(v) && is_residual.insert(v).second) residuals.push_back(v);
  };
  for (const auto& n : combined->nodes()) {
    bool backward = false;
    for (const ir::Value* v : n->inputs()) backward = backward || backward_values.count(v) > 0;
    if (!backward) continue;
    KILN_ASSERT(n->kind() == ir::NodeKind::kOp || n->kind() == ir::NodeKind::kConstant ||
                    n->kind() == ir::NodeKind::kCond,
                "a gradient node that is not an op, a constant or a cond");
    backward_nodes.insert(n.get());
    for (size_t o = 0; o < n->num_outputs(); ++o) backward_values.insert(n->output(o));
  }
  for (const auto& n : combined->nodes())
    if (backward_nodes.count(n.get()))
      for (const ir::Value* v : n->inputs()) add_residual(v);
  const std::vector<ir::Value*>& combined_outputs = combined->outputs();
  for (size_t i = pair->num_outputs; i < combined_outputs.size(); ++i)
    add_residual(combined_outputs[i]);

  // 3. The forward variant: the other nodes, with the residuals as extra outputs.
  {
    auto fwd = std::make_shared<ir::Graph>(g.name() + ".forward");
    TraceOwner o = owner_for(fwd->name());
    std::vector<Variable> fwd_vars;
    {
      PauseTapes pause;
      TraceContext ctx(*fwd, o, nullptr);
      GraphReplay replay(*combined, combined_vars);
      for (size_t i = 0; i < g.parameter_types().size(); ++i)
        replay.bind(combined->parameter(i),
                    ctx.wrap(fwd->add_parameter(combined->parameter(i)->type())));
      replay.run([&](const ir::Node& n) { return backward_nodes.count(&n) == 0; });
      std::vector<ir::Value*> outs;
      for (size_t i = 0; i < pair->num_outputs; ++i)
        outs.push_back(ctx.value_of(replay.get(combined_outputs[i])));
      for (const ir::Value* r : residuals) outs.push_back(ctx.value_of(replay.get(r)));
      fwd->set_outputs(std::move(outs));
      fwd_vars = ctx.captured_variables();
    }
    for (size_t j : pair->var_sources) {
      size_t k = 0;
      while (k < fwd_vars.size() && !(fwd_vars[k] == vars[j])) ++k;
      KILN_ASSERT(k < fwd_vars.size(),
                  "a variable source is not a variable of the forward variant");
      pair->forward_var_sources.push_back(k);
    }
    pair->forward_vars = fwd_vars;
    pair->forward = ConcreteFunction(finish(fwd), std::move(fwd_vars), f.mode());
  }

  // 4. The backward graph: upstream gradients and residuals in, gradients out.
  {
    auto bwd = std::make_shared<ir::Graph>(g.name() + ".backward");
    TraceOwner o = owner_for(bwd->name());
    {
      PauseTapes pause;
      TraceContext ctx(*bwd, o, nullptr);
      GraphReplay replay(*combined, combined_vars);
      for (const ir::Value* u : upstream) replay.bind(u, ctx.wrap(bwd->add_parameter(u->type())));
      for (const ir::Value* r : residuals) replay.bind(r, ctx.wrap(bwd->add_parameter(r->type())));
      replay.run([&](const ir::Node& n) { return backward_nodes.count(&n) > 0; });
      std::vector<ir::Value*> outs;
      for (size_t i = pair->num_outputs; i < combined_outputs.size(); ++i)
        outs.push_back(ctx.value_of(replay.get(combined_outputs[i])));
      bwd->set_outputs(std::move(outs));
      KILN_ASSERT(ctx.captured_variables().empty(), "the backward graph reads a variable");
    }
    pair->backward = ConcreteFunction(finish(bwd), {}, f.mode());
  }
  return pair;
}

// The forward variant's vector-Jacobian product over all its floating outputs, traced by a pure
// replay (variables are parameters holding the values they had at the call, assignments are
// ops), so it can run long after the call and may itself be differentiated.
ConcreteFunction build_second(const GradientPair& pair) {
  const ir::Graph& g = pair.forward.graph();
  auto graph = std::make_shared<ir::Graph>(g.name() + ".vjp");
  TraceOwner owner = owner_for(graph->name());
  {
    PauseTapes pause;
    TraceContext ctx(*graph, owner, nullptr);
    GraphReplay replay = GraphReplay::pure(g);
    std::vector<Tensor> args, entries;
    for (size_t i = 0; i < g.parameters().size(); ++i) {
      args.push_back(ctx.wrap(graph->add_parameter(g.parameter(i)->type())));
      replay.bind(g.parameter(i), args.back());
    }
    for (size_t k = 0; k < g.variables().size(); ++k) {
      entries.push_back(ctx.wrap(graph->add_parameter(g.variable(k).type)));
      replay.bind(g.variable(k).entry, entries.back());
    }
    GradientTape tape;
    std::vector<Tensor> sources;
    for (size_t i : pair.arg_sources) sources.push_back(args[i]);
    for (size_t k : pair.forward_var_sources) sources.push_back(entries[k]);
    for (const Tensor& t : sources) tape.watch(t);
    replay.run();
    Tensor target;
    for (const ir::Value* v : g.outputs()) {
      if (!is_floating(v->dtype())) continue;
      Tensor y = replay.get(v);
      Tensor u = ctx.wrap(graph->add_parameter(v->type()));
      Tensor term = cast(sum(y * u), DType::f64);
      target = target.defined() ? target + term : term;
    }
    std::vector<Tensor> grads = tape.gradient(target, sources, UnconnectedGradients::kZero);
    std::vector<ir::Value*> outs;
    for (const Tensor& t : grads) outs.push_back(ctx.value_of(t));
    graph->set_outputs(std::move(outs));
    KILN_ASSERT(ctx.captured_variables().empty(), "a pure replay read a variable");
  }
  return ConcreteFunction(finish(graph), {}, pair.forward.mode());
}

// One pair per traced graph and set of wanted sources (keyed by the graph, which the entry
// keeps alive so that its address is never reused by another graph).
std::shared_ptr<const GradientPair> pair_for(const ConcreteFunction& f,
                                             const std::vector<bool>& wanted) {
  struct Entry {
    std::shared_ptr<const ir::Graph> graph;
    std::map<std::vector<bool>, std::shared_ptr<const GradientPair>> pairs;
  };
  static std::mutex mutex;
  static std::map<const ir::Graph*, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  Entry& e = cache[&f.graph()];
  if (!e.graph) e.graph = f.graph_ptr();
  auto it = e.pairs.find(wanted);
  if (it != e.pairs.end()) return it->second;
  std::shared_ptr<const GradientPair> pair = build_pair(f, wanted);
  e.pairs.emplace(wanted, pair);
  return pair;
}

}  // namespace

RecordedCallCounts recorded_call_counts() {
  return {g_forward_calls.load(), g_compiled.load(), g_backward_calls.load()};
}

std::vector<Tensor> call_recorded(const ConcreteFunction& f, const std::vector<Tensor>& args) {
  if (!tapes_recording()) return f(args);
  check_arguments(f.name(), f.input_types(), args);
  const std::vector<Variable> vars = variables_of(f);
  // The sources as the tapes see them: the arguments and the variables' values before the
  // call (Variable::read makes tapes watch trainable variables); only the watched ones get
  // gradients.
  const Candidates candidates = candidates_of(f, vars);
  std::vector<Tensor> all_inputs;
  for (size_t i : candidates.args) all_inputs.push_back(args[i]);
  for (size_t j : candidates.vars) all_inputs.push_back(vars[j].read());
  std::vector<bool> wanted;
  std::vector<Tensor> inputs;
  for (const Tensor& t : all_inputs) {
    wanted.push_back(any_watched(std::span<const Tensor>(&t, 1)));
    if (wanted.back()) inputs.push_back(t);
  }
  if (inputs.empty()) return f(args);
  std::shared_ptr<const GradientPair> pair = pair_for(f, wanted);
  if (!pair) return f(args);

  // The variables' values at the call (references: the forward variant then cannot update
  // them, so they stay as they were) for a higher-order gradient.
  std::vector<Tensor> entries;
  {
    InitScope eager;
    for (const Variable& v : pair->forward_vars) entries.push_back(v.value());
  }
  std::vector<Tensor> all = pair->forward(args);
  ++g_forward_calls;
  if (pair->forward.mode() == ExecutionMode::kCompiled) ++g_compiled;
  std::vector<Tensor> outputs(all.begin(), all.begin() + long(pair->num_outputs));
  // The tapes record the residuals as outputs too: a gradient that flows into them (a tape
  // differentiating this call's gradient) reaches the arguments through `second`.
  CustomGradient backward = [pair, args, entries, all](const std::vector<Tensor>& grads,
                                                       const std::vector<bool>&) {
    auto upstream = [&](size_t i) {
      return grads.at(i).defined() ? grads[i] : zeros(all[i].shape(), all[i].dtype());
    };
    bool through_residuals = false;
    for (size_t i = pair->num_outputs; i < all.size(); ++i)
      through_residuals = through_residuals || grads.at(i).defined();
    ++g_backward_calls;
    if (!through_residuals) {
      std::vector<Tensor> b_args;
      for (size_t i : pair->float_outputs) b_args.push_back(upstream(i));
      b_args.insert(b_args.end(), all.begin() + long(pair->num_outputs), all.end());
      return call_recorded(pair->backward, b_args);
    }
    std::call_once(pair->second_once, [&] { pair->second = build_second(*pair); });
    std::vector<Tensor> s_args = args;
    s_args.insert(s_args.end(), entries.begin(), entries.end());
    for (size_t i = 0; i < all.size(); ++i)
      if (is_floating(all[i].dtype())) s_args.push_back(upstream(i));
    return call_recorded(pair->second, s_args);
  };
  record_custom_on_tapes(inputs, all, std::move(backward));
  return outputs;
}

}  // namespace kiln::detail
