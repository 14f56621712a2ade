#include "kiln/ir/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace kiln::ir {

std::string_view node_kind_keyword(NodeKind kind) {
  switch (kind) {
    case NodeKind::kOp:
      return "op";
    case NodeKind::kConstant:
      return "constant";
    case NodeKind::kAssign:
      return "assign";
    case NodeKind::kAssignAdd:
      return "assign_add";
    case NodeKind::kAssignSub:
      return "assign_sub";
    case NodeKind::kCond:
      return "cond";
    case NodeKind::kWhile:
      return "while";
    case NodeKind::kFusion:
      return "fusion";
  }
  return "?";
}

std::string_view Node::op_name() const {
  return kind_ == NodeKind::kOp ? std::string_view(kiln::op_name(op_)) : node_kind_keyword(kind_);
}

std::string_view Node::fusion_name() const {
  if (kind_ != NodeKind::kFusion || subgraphs_.empty() || !subgraphs_[0]) return {};
  return subgraphs_[0]->name();
}

std::string_view Node::fusion_kind() const {
  if (kind_ != NodeKind::kFusion) return {};
  const AttrValue* v = attrs_.find("kind");
  const auto* s = v ? std::get_if<std::string>(v) : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}

bool Node::while_stacked() const {
  if (kind_ != NodeKind::kWhile) return false;
  const AttrValue* v = attrs_.find("stacked");
  const bool* b = v ? std::get_if<bool>(v) : nullptr;
  return b != nullptr && *b;
}

size_t Node::while_loop_variables() const {
  if (!while_stacked()) return outputs_.size();
  return outputs_.empty() ? 0 : (outputs_.size() - 1) / 2;
}

Value* Graph::add_parameter(TensorType type) {
  int index = int(parameters_.size());
  parameters_.push_back(
      std::make_unique<Value>(std::move(type), Value::Def::kParameter, index, nullptr));
  return parameters_.back().get();
}

int Graph::add_variable(std::string name, TensorType type, bool trainable) {
  int index = int(variables_.size());
  variable_entries_.push_back(
      std::make_unique<Value>(type, Value::Def::kVariableEntry, index, nullptr));
  variables_.push_back(GraphVariable{std::move(name), std::move(type), trainable, false, false,
                                     variable_entries_.back().get()});
  return index;
}

std::unique_ptr<Node> Graph::make_node(NodeKind kind, std::vector<Value*> inputs,
                                       const std::vector<TensorType>& output_types) {
  std::unique_ptr<Node> n(new Node());
  n->kind_ = kind;
  n->inputs_ = std::move(inputs);
  for (size_t i = 0; i < output_types.size(); ++i)
    n->outputs_.push_back(
        std::make_unique<Value>(output_types[i], Value::Def::kNodeOutput, int(i), n.get()));
  return n;
}

Node* Graph::append(std::unique_ptr<Node> node) {
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* Graph::add_op(OpKind op, std::vector<Value*> inputs, Attrs attrs) {
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (Value* v : inputs) {
    KILN_ASSERT(v != nullptr, fmt::format("{}: null input value", kiln::op_name(op)));
    types.push_back(v->type());
  }
  TensorType out = infer_type(op, types, attrs);
  auto n = make_node(NodeKind::kOp, std::move(inputs), {out});
  n->op_ = op;
  n->attrs_ = std::move(attrs);
  return append(std::move(n));
}

Node* Graph::add_constant(std::shared_ptr<const Literal> literal) {
  KILN_ASSERT(literal != nullptr, "add_constant: null literal");
  auto n = make_node(NodeKind::kConstant, {}, {literal->type()});
  n->literal_ = std::move(literal);
  return append(std::move(n));
}

Node* Graph::add_assignment(NodeKind kind, int variable, Value* value) {
  KILN_ASSERT(
      kind == NodeKind::kAssign || kind == NodeKind::kAssignAdd || kind == NodeKind::kAssignSub,
      "add_assignment: not an assignment kind");
  KILN_ASSERT(variable >= 0 && size_t(variable) < variables_.size(),
              fmt::format("add_assignment: no variable ${}", variable));
  GraphVariable& v = variables_[size_t(variable)];
  if (!(value->type() == v.type))
    throw Error(fmt::format("{} ${} (\"{}\"): the variable is {} but the value is {}",
                            node_kind_keyword(kind), variable, v.name, v.type.to_string(),
                            value->type().to_string()));
  v.written = true;
  if (kind != NodeKind::kAssign) v.read = true;
  auto n = make_node(kind, {value}, {v.type});
  n->variable_ = variable;
  return append(std::move(n));
}

Node* Graph::add_control_flow(NodeKind kind, std::vector<Value*> inputs,
                              std::vector<std::unique_ptr<Graph>> subgraphs,
                              std::vector<TensorType> output_types) {
  KILN_ASSERT(kind == NodeKind::kCond || kind == NodeKind::kWhile,
              "add_control_flow: not a control-flow kind");
  auto n = make_node(kind, std::move(inputs), output_types);
  n->subgraphs_ = std::move(subgraphs);
  return append(std::move(n));
}

Node* Graph::add_fusion(std::string name, std::string kind, std::vector<Value*> inputs,
                        std::unique_ptr<Graph> body, std::vector<TensorType> output_types) {
  KILN_ASSERT(body != nullptr, "add_fusion: null body");
  body->set_name(std::move(name));
  auto n = make_node(NodeKind::kFusion, std::move(inputs), output_types);
  n->attrs_.set("kind", std::move(kind));
  n->subgraphs_.push_back(std::move(body));
  return append(std::move(n));
}

void Graph::reorder_nodes(const std::vector<const Node*>& order) {
  std::unordered_map<const Node*, size_t> rank;
  for (size_t i = 0; i < order.size(); ++i) rank.emplace(order[i], i);
  bool ok = rank.size() == nodes_.size() && order.size() == nodes_.size();
  for (const auto& n : nodes_) ok = ok && rank.contains(n.get());
  if (!ok) throw Error("reorder_nodes: the order is not a permutation of the graph's nodes");
  std::sort(nodes_.begin(), nodes_.end(),
            [&](const std::unique_ptr<Node>& a, const std::unique_ptr<Node>& b) {
              return rank.at(a.get()) < rank.at(b.get());
            });
}

std::vector<TensorType> Graph::parameter_types() const {
  std::vector<TensorType> out;
  for (const auto& p : parameters_) out.push_back(p->type());
  return out;
}

std::vector<TensorType> Graph::output_types() const {
  std::vector<TensorType> out;
  for (const Value* v : outputs_) out.push_back(v->type());
  return out;
}

size_t Graph::total_node_count() const {
  size_t n = nodes_.size();
  for (const auto& node : nodes_)
    for (const auto& g : node->subgraphs()) n += g->total_node_count();
  return n;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& n : nodes_)
    for (Value*& in : n->inputs_)
      if (in == from) in = to;
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

void Graph::move_before(const Node* node, const Node* pos) {
  auto find = [&](const Node* n) {
    return std::find_if(nodes_.begin(), nodes_.end(),
                        [&](const std::unique_ptr<Node>& p) { return p.get() == n; });
  };
  auto from = find(node);
  auto to = find(pos);
  KILN_ASSERT(from != nodes_.end() && to != nodes_.end(),
              "move_before: both nodes must belong to this graph");
  if (from == to) return;
  if (from > to)
    std::rotate(to, from, from + 1);
  else
    std::rotate(from, from + 1, to);
}

}  // namespace kiln::ir
