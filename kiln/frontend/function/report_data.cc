// build_report_data: the optimized graph collapsed into boxes, matched to the executable's
// steps and their times; the arena layout's buffers. Layout: report_layout.cc.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "kiln/codegen/arena_layout.h"
#include "kiln/frontend/function/report_data.h"
#include "kiln/ir/value_numbering.h"

namespace kiln::report_detail {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

bool gradient_named(const std::string& name) {
  return name.starts_with("gradient/") || name.find("/gradient/") != std::string::npos;
}

// The layer name scope of a node name: all but its last component.
std::string scope_of(const std::string& name) {
  size_t slash = name.rfind('/');
  return slash == std::string::npos ? std::string() : name.substr(0, slash);
}

std::string location_text(const ir::SourceLocation& loc) {
  return loc.known() ? fmt::format("{}:{}:{}", loc.file, loc.line, loc.column) : std::string();
}

// The node that names a fusion group's box: the first named op of its body that is not a
// reshape, else the first named reshape. A flatten is a view, never a box of its own, so a
// gradient group starting with the flatten's gradient would name a layer with no forward box.
const Node* first_named(const Graph& body) {
  const Node* reshape = nullptr;
  for (const auto& b : body.nodes()) {
    if (b->name().empty()) continue;
    if (!b->is_op(OpKind::Reshape)) return b.get();
    if (reshape == nullptr) reshape = b.get();
  }
  return reshape;
}

// Whether `step_name` is the name the step builder (codegen/compile_graph.cc) gives node n.
bool step_of_node(const std::string& step_name, const Node& n) {
  if (n.kind() == NodeKind::kFusion) return step_name == n.fusion_name();
  if (n.kind() == NodeKind::kOp && !n.name().empty() && step_name == n.name()) return true;
  return step_name == n.op_name();
}

std::string step_kind(const runtime::ExecutableStep& s) {
  using K = runtime::ExecutableStep::Kind;
  switch (s.kind) {
    case K::kKernel:
      return "generated";
    case K::kContraction:
      return s.kernel ? "runtime GEMM + generated epilogue" : "runtime GEMM";
    case K::kOp:
      return "runtime kernel";
    case K::kAssign:
      return "assignment";
    case K::kCond:
    case K::kWhile:
      return "control flow";
  }
  return "step";
}

size_t byte_size(const TensorType& t) {
  return t.shape.is_fully_known() ? size_t(t.shape.num_elements()) * dtype_size(t.dtype) : 0;
}

// The part of each top-level node of `g`. An op is gradient when the tape recorded it (named
// gradient/...), update when it is named in the scope of an assignment whose value depends on a
// gradient (the optimizer's: adam/...; a layer's seed state update depends on none), forward
// otherwise. A node takes the part of most of its ops' elements (a fusion group's named ops);
// assignments, and forward nodes that read an update, are updates.
std::vector<Part> node_parts(const Graph& g, const std::unordered_map<const Node*, int>& index_of) {
  const auto& nodes = g.nodes();
  auto top_of = [](const std::string& name) { return name.substr(0, name.find('/')); };
  std::vector<bool> after_gradient(nodes.size());
  std::set<std::string> update_scopes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    bool depends = false;
    if (n.kind() == NodeKind::kFusion) {
      for (const auto& b : n.subgraph(0).nodes()) depends = depends || gradient_named(b->name());
    } else {
      depends = gradient_named(n.name());
    }
    for (const Value* v : n.inputs())
      if (v->producer()) depends = depends || after_gradient[size_t(index_of.at(v->producer()))];
    after_gradient[i] = depends;
    if (n.is_assignment() && depends && !n.name().empty()) update_scopes.insert(top_of(n.name()));
  }
  auto part_of_name = [&](const std::string& name) {
    if (gradient_named(name)) return Part::kGradient;
    if (!name.empty() && update_scopes.count(top_of(name))) return Part::kUpdate;
    return Part::kForward;
  };
  std::vector<Part> part(nodes.size(), Part::kForward);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    Part p = n.is_assignment() ? Part::kUpdate : part_of_name(n.name());
    if (n.kind() == NodeKind::kFusion) {  // where most of the group's elements are computed
      double weight[3] = {0, 0, 0};
      for (const auto& b : n.subgraph(0).nodes())
        if (!b->name().empty() && b->num_outputs() > 0)
          weight[int(part_of_name(b->name()))] +=
              double(std::max<int64_t>(1, b->output(0)->shape().num_elements()));
      p = Part(std::max_element(weight, weight + 3) - weight);
    }
    if (p == Part::kForward)
      for (const Value* v : n.inputs()) {
        if (!v->producer()) continue;
        const Part in = part[size_t(index_of.at(v->producer()))];
        // An unnamed node (a gradient loop) that reads the gradient is part of it.
        if (in == Part::kUpdate ||
            (in == Part::kGradient && n.name().empty() && n.kind() != NodeKind::kFusion))
          p = std::max(p, in);
      }
    part[i] = p;
  }
  return part;
}

// The layer view: one box per layer (the first two components of a box's scope) and part,
// then both views of every part laid out. `preds`: each box's predecessors in its part.
void group_layers_and_lay_out(ReportData& d, const std::vector<std::vector<int>>& preds) {
  auto layer_of = [](std::string scope) {
    // A gradient's scope is "gradient/<forward op's scope>/<op>": its layer is the forward one.
    if (scope.starts_with("gradient/")) {
      scope = scope_of(scope.substr(9));
    }
    size_t slash = scope.find('/');
    if (slash != std::string::npos) slash = scope.find('/', slash + 1);
    return scope.empty() ? std::string("(unnamed)") : scope.substr(0, slash);
  };
  std::map<std::pair<Part, std::string>, int> layer_index;
  for (size_t b = 0; b < d.boxes.size(); ++b) {
    Box& box = d.boxes[b];
    auto [it, fresh] =
        layer_index.try_emplace({box.part, layer_of(box.scope)}, int(d.layers.size()));
    if (fresh) {
      Box layer;
      layer.id = fmt::format("l{}", d.layers.size());
      layer.kind = "layer";
      layer.scope = it->first.second;
      layer.part = box.part;
      layer.first_node = box.first_node;
      d.layers.push_back(std::move(layer));
    }
    Box& layer = d.layers[size_t(it->second)];
    layer.members.push_back(int(b));
    layer.ns += box.ns;
    layer.first_node = std::min(layer.first_node, box.first_node);
    if (layer.location.empty()) layer.location = box.location;
    box.layer_box = it->second;
  }
  for (Box& layer : d.layers) {  // "dense_1" of "sequential/dense_1"
    size_t slash = layer.scope.find('/');
    layer.label = slash == std::string::npos ? layer.scope : layer.scope.substr(slash + 1);
  }
  for (int p = 0; p < 3; ++p) {
    PartLayout pl;
    pl.part = Part(p);
    std::set<std::pair<int, int>> layer_edges;
    for (size_t b = 0; b < d.boxes.size(); ++b)
      if (d.boxes[b].part == pl.part) {
        pl.groups.boxes.push_back(int(b));
        for (int a : preds[b]) {
          pl.groups.edges.push_back({a, int(b)});
          int la = d.boxes[size_t(a)].layer_box, lb = d.boxes[b].layer_box;
          if (la != lb && layer_edges.insert({la, lb}).second) pl.layers.edges.push_back({la, lb});
        }
      }
    for (size_t l = 0; l < d.layers.size(); ++l)
      if (d.layers[l].part == pl.part) pl.layers.boxes.push_back(int(l));
    if (pl.groups.boxes.empty()) continue;
    lay_out(d.boxes, pl.groups);
    lay_out(d.layers, pl.layers);
    d.parts.push_back(std::move(pl));
  }
}

// Every planned value with bytes of its own; views and a variable's new values are listed on
// the buffer whose bytes they share.
void collect_buffers(ReportData& d, const Graph& g, const codegen::ArenaLayout& layout,
                     const ir::ValueNumbering& numbering) {
  std::unordered_map<const Value*, std::string> elsewhere;
  for (const auto& [v, where] : layout.elsewhere) elsewhere[v] = where;
  std::unordered_map<const Value*, size_t> buffer_of;
  std::vector<int> variable_buffer(g.variables().size(), -1);
  auto producer_name = [](const Value* v) -> std::string {
    const Node* n = v->producer();
    if (!n) return v->def() == Value::Def::kParameter ? "parameter" : "variable entry";
    if (n->kind() == NodeKind::kFusion) return std::string(n->fusion_name());
    return n->name().empty() ? std::string(n->op_name()) : n->name();
  };
  for (const codegen::ValuePlan& vp : layout.plan.values) {
    if (vp.kind == codegen::BufferKind::kConstant) continue;
    const bool new_value = vp.kind == codegen::BufferKind::kVariable &&
                           vp.value->def() == Value::Def::kNodeOutput && vp.variable >= 0 &&
                           variable_buffer[size_t(vp.variable)] >= 0;
    if (vp.view_of != nullptr || new_value) {
      size_t bi = 0;
      if (vp.view_of != nullptr) {
        auto it = buffer_of.find(vp.view_of);
        if (it == buffer_of.end()) continue;  // a view of a constant's bytes
        bi = it->second;
      } else {
        bi = size_t(variable_buffer[size_t(vp.variable)]);
      }
      Buffer& b = d.buffers[bi];
      b.views.push_back(numbering.ref(vp.value));
      b.last_step = std::max(b.last_step, vp.last_step);
      if (new_value) b.donated = true;
      buffer_of[vp.value] = bi;
      continue;
    }
    Buffer b;
    b.value = numbering.ref(vp.value);
    auto e = elsewhere.find(vp.value);
    b.kind = e != elsewhere.end() ? e->second : std::string(buffer_kind_name(vp.kind));
    b.in_arena = vp.in_arena() && e == elsewhere.end();
    b.type = vp.value->type().to_string();
    b.producer = producer_name(vp.value);
    b.offset = vp.offset;
    b.size = vp.size;
    b.first_step = vp.first_step;
    b.last_step = vp.last_step;
    buffer_of[vp.value] = d.buffers.size();
    if (vp.kind == codegen::BufferKind::kVariable && vp.variable >= 0 &&
        variable_buffer[size_t(vp.variable)] < 0)
      variable_buffer[size_t(vp.variable)] = int(d.buffers.size());
    d.buffers.push_back(std::move(b));
  }
}

}  // namespace

const char* part_name(Part part) {
  switch (part) {
    case Part::kForward:
      return "forward";
    case Part::kGradient:
      return "gradient";
    case Part::kUpdate:
      return "update";
  }
  return "forward";
}

ReportData build_report_data(const CompiledForm& form, const std::string& title,
                             const StepTiming* timing) {
  const Graph& g = form.graph(Stage::kOptimized);
  const runtime::Executable& exe = *form.executable();
  const codegen::ArenaLayout& layout = form.arena_layout();
  const codegen::MemoryPlan& plan = layout.plan;
  const ir::ValueNumbering numbering(g);
  const auto& exe_steps = exe.steps();
  if (timing != nullptr && timing->step_ns_of.size() != exe_steps.size())
    throw Error(fmt::format("report: the timing has {} steps, the executable of {} has {}",
                            timing->step_ns_of.size(), g.name(), exe_steps.size()));

  ReportData d;
  d.title = title.empty() ? g.name() : title;
  d.timed = timing != nullptr;
  if (timing) d.timing = *timing;
  d.num_steps = plan.num_steps;
  d.graph_nodes = int(g.total_node_count());
  d.kernels = int(form.kernels().size());

  // Nodes: their parts, their steps (steps run in program order; constants and views have
  // none), their boxes.
  const auto& nodes = g.nodes();
  std::unordered_map<const Node*, int> index_of;
  for (size_t i = 0; i < nodes.size(); ++i) index_of[nodes[i].get()] = int(i);
  auto root_of = [&](const Value* v) {  // through views: the node whose bytes v shares
    while (v->producer() && codegen::is_view(plan, *v->producer())) v = v->producer()->input(0);
    return v;
  };
  const std::vector<Part> part = node_parts(g, index_of);
  std::vector<int> box_of(nodes.size(), -1);
  std::vector<int> step_node(exe_steps.size(), -1);
  std::map<std::pair<Part, std::string>, int> scope_box;
  size_t next_step = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    if (n.kind() == NodeKind::kConstant || codegen::is_view(plan, n)) continue;
    for (size_t k = next_step; k < exe_steps.size(); ++k)
      if (step_of_node(exe_steps[k].name, n)) {
        step_node[k] = int(i);
        next_step = k + 1;
        break;
      }
    const bool fusion = n.kind() == NodeKind::kFusion;
    const Node* named = fusion ? first_named(n.subgraph(0)) : &n;
    std::string scope = named ? scope_of(named->name()) : std::string();
    int b;
    if (fusion) {
      b = int(d.boxes.size());
      Box box;
      box.group = std::string(n.fusion_name());
      box.kind = std::string(n.fusion_kind());
      box.label = box.group;
      for (const auto& op : n.subgraph(0).nodes())
        if (op->kind() != NodeKind::kConstant)
          box.ops.push_back(
              {"", std::string(op->op_name()), op->output()->type().to_string(), op->name()});
      ++d.fusion_groups;
      d.boxes.push_back(std::move(box));
    } else {
      auto [it, fresh] = scope_box.try_emplace({part[i], scope}, int(d.boxes.size()));
      b = it->second;
      if (fresh) {
        Box box;
        box.kind = "ops";
        d.boxes.push_back(std::move(box));
      }
      const bool out = n.num_outputs() > 0;
      d.boxes[size_t(b)].ops.push_back(
          {out ? numbering.ref(n.output(0)) : std::string(), std::string(n.op_name()),
           out ? n.output(0)->type().to_string() : std::string(), n.name()});
    }
    Box& box = d.boxes[size_t(b)];
    if (fusion || box.ops.size() == 1) box.first_node = int(i);
    box.part = part[i];
    box.scope = scope;
    if (box.location.empty()) {
      box.location = location_text(n.location());
      if (box.location.empty() && named) box.location = location_text(named->location());
    }
    box_of[i] = b;
  }
  for (size_t b = 0; b < d.boxes.size(); ++b) {
    Box& box = d.boxes[b];
    box.id = fmt::format("b{}", b);
    if (box.group.empty())
      box.label = box.ops.size() == 1
                      ? fmt::format("{} {}", box.ops[0].op, box.scope)
                      : fmt::format("{} ({} ops)", box.scope.empty() ? "(unnamed)" : box.scope,
                                    box.ops.size());
  }

  // Steps: table rows, box times.
  for (size_t k = 0; k < exe_steps.size(); ++k) {
    const runtime::ExecutableStep& s = exe_steps[k];
    StepRow r;
    r.index = int(k);
    r.name = s.name;
    r.kind = step_kind(s);
    r.flops = s.flops;
    r.bytes = s.bytes;
    r.ns = timing ? timing->step_ns_of[k] : 0;
    if (timing && k < timing->nested_of.size()) r.nested = timing->nested_of[k];
    if (step_node[k] >= 0) {
      const Node& n = *nodes[size_t(step_node[k])];
      if (n.num_outputs() > 0) r.shape = n.output(0)->type().to_string();
      Box& box = d.boxes[size_t(box_of[size_t(step_node[k])])];
      r.box = box.id;
      box.steps.push_back(int(k));
      box.ns += r.ns;
    }
    d.steps.push_back(std::move(r));
  }

  // Edges between boxes of one part (deduplicated), through views.
  std::vector<std::vector<int>> preds(d.boxes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (box_of[i] < 0) continue;
    for (const Value* v : nodes[i]->inputs()) {
      const Value* r = root_of(v);
      if (!r->producer()) continue;
      int a = box_of[size_t(index_of.at(r->producer()))];
      int b = box_of[i];
      if (a < 0 || a == b || d.boxes[size_t(a)].part != d.boxes[size_t(b)].part) continue;
      if (std::find(preds[size_t(b)].begin(), preds[size_t(b)].end(), a) == preds[size_t(b)].end())
        preds[size_t(b)].push_back(a);
    }
  }
  group_layers_and_lay_out(d, preds);

  collect_buffers(d, g, layout, numbering);
  d.arena_bytes = layout.arena_bytes;
  d.planned_bytes = plan.arena_bytes;
  d.lower_bound_bytes = plan.lower_bound_bytes;
  d.scratch_offset = layout.scratch_offset;
  for (const codegen::ScratchBuffer& s : layout.scratch) {
    Scratch sc{s.step, s.role, s.type.to_string(), s.offset, byte_size(s.type), -1};
    for (size_t i = 0; i < nodes.size() && sc.node_step < 0; ++i)
      if (nodes[i]->kind() != NodeKind::kConstant && step_of_node(s.step, *nodes[i]))
        sc.node_step = int(i);
    d.scratch.push_back(std::move(sc));
  }
  return d;
}

}  // namespace kiln::report_detail
