#include "kiln/frontend/function/graph_replay.h"

#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/function/control_flow.h"
#include "kiln/frontend/ops.h"
#include "kiln/ir/literal.h"

namespace kiln::detail {

GraphReplay::GraphReplay(const ir::Graph& graph, std::vector<Variable> variables)
    : graph_(graph), variables_(std::move(variables)) {
  KILN_ASSERT(variables_.size() == graph_.variables().size(),
              "GraphReplay: the variables must be parallel to the graph's registry");
}

GraphReplay GraphReplay::pure(const ir::Graph& graph) {
  GraphReplay r(graph, std::vector<Variable>(graph.variables().size()));
  r.pure_ = true;
  return r;
}

bool GraphReplay::replayable(const ir::Graph& graph, std::string* why) {
  for (const auto& n : graph.nodes()) {
    switch (n->kind()) {
      case ir::NodeKind::kOp:
      case ir::NodeKind::kConstant:
      case ir::NodeKind::kAssign:
      case ir::NodeKind::kAssignAdd:
      case ir::NodeKind::kAssignSub:
        continue;
      case ir::NodeKind::kCond:
        for (const auto& sub : n->subgraphs())
          if (!replayable(*sub, why)) return false;
        continue;
      default:
        if (why)
          *why = fmt::format("its graph @{} contains a {} node{}", graph.name(),
                             ir::node_kind_keyword(n->kind()),
                             n->name().empty() ? "" : fmt::format(" ({})", n->name()));
        return false;
    }
  }
  return true;
}

void GraphReplay::bind(const ir::Value* v, Tensor t) { env_[v] = std::move(t); }

Tensor GraphReplay::get(const ir::Value* v) {
  if (auto it = env_.find(v); it != env_.end()) return it->second;
  if (v->def() == ir::Value::Def::kVariableEntry) {
    KILN_ASSERT(!pure_, fmt::format("GraphReplay: a pure replay of @{} needs variable {}'s entry "
                                    "value bound",
                                    graph_.name(), v->index()));
    Tensor t = variables_.at(size_t(v->index())).read();
    env_[v] = t;
    return t;
  }
  KILN_ASSERT(false, fmt::format("GraphReplay: value of {} in @{} is neither bound nor computed",
                                 v->type().to_string(), graph_.name()));
  return Tensor();
}

void GraphReplay::run(const std::function<bool(const ir::Node&)>& include) {
  for (const auto& node : graph_.nodes()) {
    const ir::Node& n = *node;
    if (include && !include(n)) continue;
    std::vector<Tensor> in;
    in.reserve(n.inputs().size());
    for (const ir::Value* v : n.inputs()) in.push_back(get(v));
    switch (n.kind()) {
      case ir::NodeKind::kOp:
        env_[n.output(0)] = apply(n.op(), in, n.attrs());
        break;
      case ir::NodeKind::kConstant: {
        const ir::Literal& lit = *n.literal();
        env_[n.output(0)] = tensor_from_bytes(lit.type().dtype, lit.type().shape, lit.data(),
                                              size_t(lit.num_elements()));
        break;
      }
      case ir::NodeKind::kAssign:
      case ir::NodeKind::kAssignAdd:
      case ir::NodeKind::kAssignSub: {
        if (pure_) {
          const int j = n.variable();
          auto it = current_.find(j);
          Tensor current =
              it != current_.end() ? it->second : get(graph_.variable(size_t(j)).entry);
          Tensor next = n.kind() == ir::NodeKind::kAssign      ? in[0]
                        : n.kind() == ir::NodeKind::kAssignAdd ? add(current, in[0])
                                                               : sub(current, in[0]);
          current_[j] = next;
          env_[n.output(0)] = next;
          break;
        }
        Variable var = variables_.at(size_t(n.variable()));
        if (n.kind() == ir::NodeKind::kAssign)
          var.assign(in[0]);
        else if (n.kind() == ir::NodeKind::kAssignAdd)
          var.assign_add(in[0]);
        else
          var.assign_sub(in[0]);
        env_[n.output(0)] = var.value();  // the new current value
        break;
      }
      case ir::NodeKind::kCond: {
        // kiln::cond with branches that replay the closed sub-graphs on the operands: in a
        // trace it records a cond node again (and its gradient, if a tape records).
        std::vector<Tensor> operands(in.begin() + 1, in.end());
        auto branch = [operands](const ir::Graph& sub) -> BranchFn {
          return [&sub, operands]() {
            GraphReplay r = GraphReplay::pure(sub);
            for (size_t i = 0; i < operands.size(); ++i) r.bind(sub.parameter(i), operands[i]);
            r.run();
            std::vector<Tensor> out;
            for (const ir::Value* v : sub.outputs()) out.push_back(r.get(v));
            return out;
          };
        };
        std::vector<Tensor> out = cond(in[0], branch(n.subgraph(0)), branch(n.subgraph(1)));
        for (size_t i = 0; i < out.size(); ++i) env_[n.output(i)] = out[i];
        break;
      }
      default:
        throw Error(fmt::format("GraphReplay: cannot replay a {} node of @{}",
                                ir::node_kind_keyword(n.kind()), graph_.name()));
    }
  }
}

}  // namespace kiln::detail
