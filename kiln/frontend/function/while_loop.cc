// kiln::while_loop inside a trace: one `while` node whose cond and body are sub-graphs traced
// from the callables. Variables the body assigns become extra loop variables (assigned after
// the node). When a recording gradient tape watches one of the loop's inputs, the node is
// *stacked*: it also outputs every loop variable's value at the start of each iteration and
// the trip count, which the gradient loop (while_gradient.cc) consumes in reverse. kiln::scan
// (scan.cc) asks for the stacks itself: stacked always, with the trip count it fixes.
#include <fmt/format.h>

#include <algorithm>

#include "kiln/frontend/function/control_flow_internal.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"

namespace kiln::detail {
namespace {

std::vector<Variable> written_variables(const SubTrace& st) {
  std::vector<Variable> out;
  for (const auto& w : st.writes)
    if (std::find(out.begin(), out.end(), w.var) == out.end()) out.push_back(w.var);
  return out;
}

// The first op of `g` (or of its sub-graphs) that draws random numbers; empty if none.
std::string random_op_in(const ir::Graph& g) {
  for (const auto& n : g.nodes()) {
    if (n->kind() == ir::NodeKind::kOp && op_info(n->op()).has(kRandom))
      return std::string(n->op_name());
    for (const auto& sub : n->subgraphs())
      if (std::string r = random_op_in(*sub); !r.empty()) return r;
  }
  return {};
}

CustomGradient gradient_loop_has_no_gradient() {
  return [](const std::vector<Tensor>&, const std::vector<bool>&) -> std::vector<Tensor> {
    throw Error(
        "GradientTape::gradient: second-order gradients through a kiln::while_loop traced "
        "inside kiln::function are not supported (the gradient loop of a while_loop has no "
        "gradient itself); take higher-order derivatives of the loop eagerly, or unroll it in "
        "C++");
  };
}

// How many times `g`'s nodes and outputs read `v`.
size_t reads_of(const ir::Graph& g, const ir::Value* v) {
  size_t n = size_t(std::count(g.outputs().begin(), g.outputs().end(), v));
  for (const auto& node : g.nodes())
    n += size_t(std::count(node->inputs().begin(), node->inputs().end(), v));
  return n;
}

}  // namespace

void check_loop_types(const std::vector<Tensor>& loop_vars, const std::vector<Tensor>& next) {
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
}

std::vector<Tensor> traced_while(TraceContext& ctx, const LoopCondFn& cond_fn,
                                 const LoopBodyFn& body_fn, const std::vector<Tensor>& loop_vars,
                                 WhileRole role, StacksRequest* want_stacks,
                                 const std::vector<Tensor>& sequences) {
  const size_t m = loop_vars.size();
  KILN_ASSERT(sequences.empty() || (want_stacks != nullptr && m > 0),
              "a while over sequences is a scan: stacked, loop variable 0 its counter");
  // body_fn reads the sequences' rows at the counter (kiln::scan's xs).
  LoopBodyFn body_with_rows = body_fn;
  if (!sequences.empty())
    body_with_rows = [&body_fn, &sequences](const std::vector<Tensor>& v) {
      std::vector<Tensor> args = v;
      for (const Tensor& xs : sequences) args.push_back(gather(xs, v[0], 0));
      return body_fn(args);
    };
  std::vector<TensorType> types;
  for (const Tensor& v : loop_vars) types.push_back(v.type());
  const bool gradient_loop = role == WhileRole::kGradient;
  auto trace_body = [&](const std::vector<Variable>& carried) {
    SubTraceOptions options;
    options.leading = types;
    options.carried = carried;
    options.output_carried = true;
    options.discard_writes = gradient_loop;
    options.repeated = true;
    SubTrace body = trace_sub(ctx, "body", options, body_with_rows);
    check_loop_types(loop_vars, body.results);
    return body;
  };
  // A first trace finds the variables the body assigns; if there are any, a second one makes
  // them loop variables (the body reads each iteration's value, as eagerly).
  SubTrace body = trace_body({});
  std::vector<Variable> carried = written_variables(body);
  if (!carried.empty()) {
    body = trace_body(carried);
    for (const Variable& v : written_variables(body))
      if (std::find(carried.begin(), carried.end(), v) == carried.end())
        throw Error(fmt::format(
            "while_loop: body_fn assigned variable \"{}\" only when traced a second time; "
            "the body must assign the same variables every time it is called",
            v.name()));
  }
  std::vector<TensorType> state_types = types;
  for (const Variable& v : carried) state_types.push_back({v.dtype(), v.shape()});

  SubTraceOptions cond_options;
  cond_options.leading = types;
  cond_options.carried = carried;
  cond_options.pre_captures = body.captures;
  cond_options.repeated = true;
  SubTrace cond_t = trace_sub(ctx, "cond", cond_options, [&](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{cond_fn(v)};
  });
  if (cond_t.results[0].dtype() != DType::b8 || cond_t.results[0].rank() != 0)
    throw Error(fmt::format("while_loop: cond_fn must return a bool scalar, got {}",
                            cond_t.results[0].type().to_string()));
  if (!cond_t.writes.empty())
    throw Error(fmt::format(
        "while_loop: cond_fn assigns variable \"{}\"; assign variables in body_fn instead",
        cond_t.writes[0].var.name()));
  align_captures(body, cond_t.captures);
  body.graph->set_outputs(body.outputs);
  cond_t.graph->set_outputs(cond_t.outputs);

  // The operands: loop variables, the carried variables' values before the loop, captures.
  std::vector<Tensor> inputs = loop_vars;
  for (const Variable& v : carried) {
    Tensor before = ctx.read_variable(v);
    // As eagerly, where the body's first read watches a trainable variable.
    if (v.trainable() && is_floating(v.dtype()) && tapes_recording()) watch_on_tapes(before);
    inputs.push_back(before);
  }
  inputs.insert(inputs.end(), body.captures.begin(), body.captures.end());
  const bool record = tapes_recording() && any_watched(inputs);
  const bool stacked = (record && !gradient_loop) || want_stacks != nullptr;

  std::vector<TensorType> out_types = state_types;
  if (stacked) {
    for (const TensorType& t : state_types) {
      Shape s{want_stacks != nullptr ? want_stacks->trips : kUnknownDim};
      for (int64_t d : t.shape) s.push_back(d);
      out_types.push_back({t.dtype, s});
    }
    out_types.push_back({DType::i64, Shape{}});
  }
  std::string random_op = stacked ? random_op_in(*body.graph) : std::string();
  std::vector<ir::Value*> operands;
  for (const Tensor& t : inputs) operands.push_back(ctx.value_of(t));
  std::vector<std::unique_ptr<ir::Graph>> subgraphs;
  subgraphs.push_back(std::move(cond_t.graph));
  subgraphs.push_back(std::move(body.graph));
  ir::Node* node = ctx.graph().add_control_flow(ir::NodeKind::kWhile, std::move(operands),
                                                std::move(subgraphs), out_types);
  if (stacked) node->mutable_attrs().set("stacked", true);
  ctx.annotate(*node, "while");

  const size_t n_state = state_types.size();
  std::vector<Tensor> state_out;
  for (size_t i = 0; i < n_state; ++i) state_out.push_back(ctx.wrap(node->output(i)));
  std::vector<Tensor> stacks;
  if (stacked)
    for (size_t i = 0; i < n_state; ++i) stacks.push_back(ctx.wrap(node->output(n_state + i)));
  if (want_stacks != nullptr)
    want_stacks->stacks.assign(stacks.begin(), stacks.begin() + std::ptrdiff_t(m));
  if (record) {
    CustomGradient backward = gradient_loop_has_no_gradient();
    if (stacked) {
      auto fwd = std::make_shared<StackedWhile>();
      fwd->body_fn = body_fn;
      fwd->loop_vars = m;
      fwd->carried = carried;
      fwd->inputs = inputs;
      fwd->outputs = state_out;
      fwd->stacks = stacks;
      fwd->trips = ctx.wrap(node->output(2 * n_state));
      for (const auto& r : body.reads)
        if (std::find(carried.begin(), carried.end(), r.var) == carried.end())
          fwd->reads.push_back(r);
      fwd->random_op = random_op;
      fwd->sequences = sequences;
      for (const Tensor& xs : sequences) {
        // Its body parameter (after the loop variables and carried variables) is read by the
        // row gather alone, or also otherwise.
        // (A concrete tensor is a constant of the body, not a capture: no gradient flows to it,
        // as to any constant a traced body uses.)
        auto c = std::find_if(body.captures.begin(), body.captures.end(),
                              [&](const Tensor& t) { return t.id() == xs.id(); });
        if (c == body.captures.end()) {
          fwd->read_only_by_row.push_back(false);
          continue;
        }
        const ir::Graph& g = node->subgraph(1);
        const ir::Value* param =
            g.parameters()[m + carried.size() + size_t(c - body.captures.begin())].get();
        fwd->read_only_by_row.push_back(reads_of(g, param) == 1);
      }
      fwd->trips_known = want_stacks != nullptr ? want_stacks->trips : -1;
      backward = while_gradient(std::move(fwd));
    }
    // With the caller using the stacks, they are outputs of the loop for the tapes too.
    std::vector<Tensor> recorded = state_out;
    if (want_stacks != nullptr) recorded.insert(recorded.end(), stacks.begin(), stacks.end());
    record_custom_on_tapes(inputs, recorded, std::move(backward));
  }
  // After the tape saw the node: each assignment links the variable's new value to it.
  for (size_t k = 0; k < carried.size(); ++k) carried[k].assign(state_out[m + k]);
  state_out.resize(m);
  return state_out;
}

}  // namespace kiln::detail
