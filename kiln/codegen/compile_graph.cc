#include "kiln/codegen/compile_graph.h"

#include <fmt/format.h>

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "kiln/codegen/arena_layout.h"
#include "kiln/codegen/compiler.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/codegen/variable_updates.h"
#include "kiln/ir/operand_prologue.h"

namespace kiln::codegen {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;
using Step = runtime::ExecutableStep;

const Node* contraction_of(const Graph& body) {
  for (const auto& n : body.nodes())
    if (n->kind() == NodeKind::kOp && op_info(n->op()).has(kContraction)) return n.get();
  return nullptr;
}

// A graph holding one op node of `n`'s kind and attributes on fresh parameters.
std::unique_ptr<Graph> one_op_body(const Node& n, std::string name) {
  auto g = std::make_unique<Graph>(std::move(name));
  std::vector<Value*> in;
  for (const Value* v : n.inputs()) in.push_back(g->add_parameter(v->type()));
  g->set_outputs({g->add_op(n.op(), in, n.attrs())->output()});
  return g;
}

std::string kernel_name(const Node& n) {
  std::string base = n.name().empty() ? std::string(n.op_name()) : n.name();
  return base;
}

runtime::Array literal_array(const ir::Literal& lit) {
  runtime::Array a = runtime::Array::empty(lit.type());
  if (lit.byte_size() > 0) std::memcpy(a.raw(), lit.data(), lit.byte_size());
  return a;
}

class GraphCompiler {
 public:
  explicit GraphCompiler(const Graph& g) : g_(g), updates_(g) {}

  // Compiles the graph; kernels (with their one-op bodies) are appended to `out` (nested
  // executables of cond / while bodies append theirs too). Fills out.arena when `top`.
  std::shared_ptr<const runtime::Executable> build(CompiledGraph& out, bool top) {
    plan_ = plan_arena_values(g_);
    std::vector<int> params, vars;
    for (const auto& p : g_.parameters()) params.push_back(slot(p.get()));
    for (const auto& v : g_.variables()) vars.push_back(slot(v.entry));
    for (const auto& up : g_.nodes()) add_node(*up, &out);
    std::vector<CompiledKernel> compiled = compile_kernels(requests_);
    for (size_t i = 0; i < compiled.size(); ++i) {
      runtime::KernelCall& call = *calls_[i];
      call.layout = compiled[i].layout;
      call.entry = compiled[i].entry;
      for (const auto& [o, in] : call.layout.overwrites)
        updated_in_variables_.insert(call.outputs[o]);
      out.kernels.push_back({requests_[i], std::move(compiled[i])});
    }
    for (auto& b : bodies_) out.kernel_bodies.push_back(std::move(b));
    std::vector<int> outs;
    for (const Value* v : g_.outputs()) {
      if (!v->shape().is_fully_known())
        throw Error(
            fmt::format("codegen: graph {} returns a value of unknown shape {} (a "
                        "stacked while's stack?); compiled graphs return values of "
                        "known shapes",
                        g_.name(), v->type().to_string()));
      outs.push_back(slot(v));
    }
    ArenaResult arena = lay_out_arena(
        std::move(plan_),
        {slots_, next_slot_, steps_, constants_, updated_in_variables_, products_in_outputs_});
    const size_t arena_bytes = arena.layout.arena_bytes;
    if (top) out.arena = std::move(arena.layout);
    return std::make_shared<runtime::Executable>(
        g_.name(), std::move(arena.storage), arena_bytes, std::move(params), std::move(vars),
        std::move(constants_), std::move(steps_), std::move(outs), std::move(arena.buckets));
  }

  // Only the requests (for dumps); `owned` keeps one-op bodies alive.
  std::vector<KernelRequest> requests(std::vector<std::unique_ptr<Graph>>& owned) {
    plan_ = plan_arena_values(g_);
    for (const auto& up : g_.nodes()) add_node(*up, nullptr);
    for (auto& b : bodies_) owned.push_back(std::move(b));
    return requests_;
  }

 private:
  int slot(const Value* v) {
    auto [it, inserted] = slots_.try_emplace(v, next_slot_);
    if (inserted) ++next_slot_;
    return it->second;
  }
  int fresh_slot() { return next_slot_++; }

  void check_known(const Node& n) {
    // A stacked while's stacks (outputs after its loop variables, before the trip count) get
    // their length at run time; they live outside the arena (the while step makes them).
    const size_t dynamic_from = n.while_stacked() ? n.while_loop_variables() : n.num_outputs();
    const size_t dynamic_to = n.while_stacked() ? 2 * n.while_loop_variables() : 0;
    for (size_t i = 0; i < n.num_outputs(); ++i)
      if (!(i >= dynamic_from && i < dynamic_to) && !n.output(i)->shape().is_fully_known())
        throw Error(
            fmt::format("codegen: {} in graph {} has unknown shape {}; compiled graphs "
                        "need concrete shapes (specialise the graph to its arguments)",
                        n.op_name(), g_.name(), n.output(i)->shape().to_string()));
  }

  std::shared_ptr<runtime::KernelCall> request(KernelRequest r, std::vector<int> inputs,
                                               std::vector<const Value*> outputs) {
    auto call = std::make_shared<runtime::KernelCall>();
    call->inputs = std::move(inputs);
    for (const Value* v : outputs) {
      call->outputs.push_back(slot(v));
      call->output_types.push_back(v->type());
    }
    requests_.push_back(std::move(r));
    calls_.push_back(call);
    return call;
  }

  std::vector<int> input_slots(const Node& n) {
    std::vector<int> s;
    for (const Value* v : n.inputs()) s.push_back(slot(v));
    return s;
  }
  std::vector<const Value*> outputs_of(const Node& n) {
    std::vector<const Value*> o;
    for (size_t i = 0; i < n.num_outputs(); ++i) o.push_back(n.output(i));
    return o;
  }

  // `out`: where nested executables put their kernels (null: collecting requests only).
  void add_node(const Node& n, CompiledGraph* out) {
    check_known(n);
    Step s;
    switch (n.kind()) {
      case NodeKind::kConstant:
        constants_.emplace_back(slot(n.output()), literal_array(*n.literal()));
        return;
      case NodeKind::kAssign:
      case NodeKind::kAssignAdd:
      case NodeKind::kAssignSub:
        s.kind = Step::Kind::kAssign;
        s.name = std::string(n.op_name());
        s.variable = n.variable();
        s.assign_kind = n.kind();
        s.inputs = input_slots(n);
        s.output = slot(n.output());
        steps_.push_back(std::move(s));
        return;
      case NodeKind::kCond:
      case NodeKind::kWhile:
        s.kind = n.kind() == NodeKind::kCond ? Step::Kind::kCond : Step::Kind::kWhile;
        s.name = std::string(n.op_name());
        s.stacked = n.while_stacked();
        if (s.stacked && n.output(n.while_loop_variables())->shape()[0] >= 0)
          s.stack_trips = n.output(n.while_loop_variables())->shape()[0];
        if (s.stacked)  // a stack no step reads (a gradient loop's, say) is not built
          for (size_t i = 0; i < n.while_loop_variables(); ++i)
            s.stacks_kept.push_back(updates_.read(n.output(n.while_loop_variables() + i)));
        s.inputs = input_slots(n);
        if (out != nullptr)
          for (const auto& sub : n.subgraphs())
            s.bodies.push_back(GraphCompiler(*sub).build(*out, /*top=*/false));
        for (const Value* v : outputs_of(n)) s.outputs.push_back(slot(v));
        steps_.push_back(std::move(s));
        return;
      case NodeKind::kFusion:
        add_fusion(n);
        return;
      case NodeKind::kOp:
        break;
    }
    if (is_view(plan_, n)) return;  // its slot views the operand's arena bytes
    s.selects = op_info(n.op()).has(kSelects);
    if (can_lower(n) && !runs_in_library(n)) {
      bodies_.push_back(one_op_body(n, kernel_name(n)));
      s.kind = Step::Kind::kKernel;
      s.name = kernel_name(n);
      s.kernel = request({bodies_.back().get(), s.name, nullptr, updates_.pairs(n, nullptr)},
                         input_slots(n), outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    s.kind = Step::Kind::kOp;
    s.name = std::string(n.op_name());
    s.op = n.op();
    s.attrs = n.attrs();
    s.inputs = input_slots(n);
    s.type = n.output()->type();
    s.output = slot(n.output());
    steps_.push_back(std::move(s));
  }

  void add_fusion(const Node& n) {
    const Graph& body = n.subgraph(0);
    std::string name(n.fusion_name());
    Step s;
    s.name = name;
    const Node* c = contraction_of(body);
    if (c == nullptr) {
      s.kind = Step::Kind::kKernel;
      s.kernel = request({&body, name, nullptr, updates_.pairs(n, nullptr)}, input_slots(n),
                         outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    // The contraction runs in the library; the rest of the group is its epilogue kernel.
    s.kind = Step::Kind::kContraction;
    s.op = c->op();
    s.attrs = c->attrs();
    s.type = c->output()->type();
    for (const Value* v : c->inputs()) {
      // An operand's prologue cast to bf16: the runtime rounds the float32 parameter as it
      // packs it (ir/operand_prologue.h); the cast itself is never stored.
      if (const Value* source = ir::prologue_source(*c, v);
          source != nullptr && source->def() == Value::Def::kParameter)
        v = source;
      if (v->def() == Value::Def::kParameter) {
        s.inputs.push_back(slot(n.input(size_t(v->index()))));
      } else if (v->producer() != nullptr && v->producer()->kind() == NodeKind::kConstant) {
        int cs = fresh_slot();
        constants_.emplace_back(cs, literal_array(*v->producer()->literal()));
        s.inputs.push_back(cs);
      } else {
        throw Error(
            fmt::format("codegen: the contraction of group {} reads a value computed "
                        "inside the group; fusion must not put producers of a "
                        "contraction in its group",
                        name));
      }
    }
    // A group output that is the contraction's result itself (a convolution's product the
    // backward pass reads) receives the product directly, instead of the epilogue copying it
    // there from a scratch buffer; the epilogue kernel is built without that output.
    size_t product_output = n.num_outputs();
    for (size_t j = 0; j < body.outputs().size() && product_output == n.num_outputs(); ++j)
      if (body.outputs()[j] == c->output() && !updates_.assigned(n.output(j))) product_output = j;
    if (product_output == n.num_outputs()) {
      s.output = fresh_slot();
      std::vector<int> in = input_slots(n);
      in.push_back(s.output);
      s.kernel = request({&body, name, c, updates_.pairs(n, c)}, std::move(in), outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    s.output = slot(n.output(product_output));
    products_in_outputs_.insert(s.output);
    std::unique_ptr<Graph> epilogue = body.clone();
    std::vector<Value*> kept;
    std::vector<const Value*> kept_outputs;
    for (size_t j = 0; j < body.outputs().size(); ++j)
      if (j != product_output) {
        kept.push_back(epilogue->outputs()[j]);
        kept_outputs.push_back(n.output(j));
      }
    if (kept.empty()) {  // the group is the contraction alone
      steps_.push_back(std::move(s));
      return;
    }
    epilogue->set_outputs(std::move(kept));
    size_t c_index = 0;
    while (body.nodes()[c_index].get() != c) ++c_index;
    std::vector<std::pair<size_t, size_t>> overwrites;
    for (auto [o, i] : updates_.pairs(n, c))
      if (o != product_output) overwrites.emplace_back(o > product_output ? o - 1 : o, i);
    bodies_.push_back(std::move(epilogue));
    std::vector<int> in = input_slots(n);
    in.push_back(s.output);
    s.kernel = request(
        {bodies_.back().get(), name, bodies_.back()->nodes()[c_index].get(), std::move(overwrites)},
        std::move(in), kept_outputs);
    steps_.push_back(std::move(s));
  }

  const Graph& g_;
  const VariableUpdates updates_;
  MemoryPlan plan_;  // made first; lay_out_arena moves it into the layout
  std::unordered_map<const Value*, int> slots_;
  std::unordered_set<int> updated_in_variables_;  // outputs written into a variable's buffer
  std::unordered_set<int> products_in_outputs_;   // contraction products held by a group output
  int next_slot_ = 0;
  std::vector<std::pair<int, runtime::Array>> constants_;
  std::vector<Step> steps_;
  std::vector<KernelRequest> requests_;
  std::vector<std::shared_ptr<runtime::KernelCall>> calls_;
  std::vector<std::unique_ptr<Graph>> bodies_;
};

}  // namespace

CompiledGraph compile_graph_in_full(const Graph& graph) {
  CompiledGraph out;
  out.executable = GraphCompiler(graph).build(out, /*top=*/true);
  return out;
}

std::shared_ptr<const runtime::Executable> compile_graph(const Graph& graph) {
  return compile_graph_in_full(graph).executable;
}

std::vector<KernelRequest> kernel_requests(const Graph& graph,
                                           std::vector<std::unique_ptr<Graph>>& owned) {
  std::vector<KernelRequest> out = GraphCompiler(graph).requests(owned);
  for (const auto& n : graph.nodes())
    if (n->kind() == NodeKind::kCond || n->kind() == NodeKind::kWhile)
      for (const auto& sub : n->subgraphs()) {
        auto more = kernel_requests(*sub, owned);
        out.insert(out.end(), more.begin(), more.end());
      }
  return out;
}

}  // namespace kiln::codegen
