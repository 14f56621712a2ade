// The kiln IR: a Graph of Nodes in program order, each defining typed Values (SSA).
//
// A graph has parameters (the function's tensor arguments), captured variables (each with an
// entry value: the variable's value when the function starts), nodes and outputs. Nodes are
// op-table ops, constants, variable assignments (side-effecting, kept in program order) and
// structured control flow (cond, while) whose bodies are closed sub-graphs: a sub-graph sees
// only its own parameters; the tracer passes outer values in as extra operands. Fusion nodes
// (made by passes/fusion.h) are groups of ops that run as one kernel: a closed, named body of
// op and constant nodes only, run on the node's operands.
//
// Variable semantics: `%k = assign_add $v, %d` computes current($v) + %d, stores it in the
// variable and defines %k as the new current value. Every later read of $v uses %k; using an
// older version after an assignment is a verifier error ("stale variable value"), which is
// what lets the runtime update variables in place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/literal.h"
#include "kiln/ir/op_table.h"
#include "kiln/ir/source_location.h"

namespace kiln::ir {

class Graph;
class Node;

// A typed SSA value: a node output, a graph parameter or a variable's entry value.
class Value {
 public:
  enum class Def : uint8_t { kParameter, kVariableEntry, kNodeOutput };

  Value(TensorType type, Def def, int index, Node* producer)
      : type_(std::move(type)), def_(def), index_(index), producer_(producer) {}

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  void set_type(TensorType t) { type_ = std::move(t); }
  Def def() const { return def_; }
  // Parameter index, variable index, or output index within the producer.
  int index() const { return index_; }
  // The producing node (null for parameters and variable entry values).
  Node* producer() const { return producer_; }

 private:
  TensorType type_;
  Def def_;
  int index_;
  Node* producer_;
};

// What a node does: an op of the table or one of the structural kinds.
enum class NodeKind : uint8_t {
  kOp,         // an op of ir/ops.def (`op()` says which)
  kConstant,   // a literal tensor (`literal()`)
  kAssign,     // variable = input 0; output: the new value
  kAssignAdd,  // variable += input 0
  kAssignSub,  // variable -= input 0
  kCond,       // input 0: bool[] predicate; inputs 1..: operands of both branches;
               // sub-graphs: then, else (same signature; outputs = node outputs)
  kWhile,      // inputs: loop variables then invariant captures; sub-graphs: cond (-> bool[]),
               // body (-> new loop variables); outputs: final loop variables. A *stacked*
               // while (attribute stacked=true, printed `stacked`) also outputs, per loop
               // variable, the stack of the values it had at the start of every iteration
               // (type [?, shape...], row k = iteration k) and then the trip count (i64[]):
               // the accumulators a while_loop gradient consumes in reverse
  kFusion,     // inputs: operands; one sub-graph, the body (named after the group, e.g.
               // "fused_matmul_add_relu_0"; parameters = operand types, outputs = node outputs;
               // op and constant nodes only); attrs: kind = "loop" | "reduction" | "contraction"
};

// The IR keyword of a node kind ("assign_add", "cond", ...); kOp nodes use the op's name.
std::string_view node_kind_keyword(NodeKind kind);

class Node {
 public:
  NodeKind kind() const { return kind_; }
  // The table op of a kOp node.
  OpKind op() const { return op_; }
  // The name printed in IR: the op's name or the structural keyword.
  std::string_view op_name() const;
  bool is_op(OpKind k) const { return kind_ == NodeKind::kOp && op_ == k; }
  bool is_assignment() const {
    return kind_ == NodeKind::kAssign || kind_ == NodeKind::kAssignAdd ||
           kind_ == NodeKind::kAssignSub;
  }
  // Assignments must stay, in program order (DCE and scheduling respect this).
  bool side_effecting() const { return is_assignment(); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i) const { return inputs_.at(i); }
  void set_input(size_t i, Value* v) { inputs_.at(i) = v; }
  size_t num_outputs() const { return outputs_.size(); }
  Value* output(size_t i = 0) const { return outputs_.at(i).get(); }

  const Attrs& attrs() const { return attrs_; }
  Attrs& mutable_attrs() { return attrs_; }
  // The layer-scope name ("dense_1/matmul"); may be empty.
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const SourceLocation& location() const { return loc_; }
  void set_location(SourceLocation loc) { loc_ = std::move(loc); }

  // The variable index of an assignment node (-1 otherwise).
  int variable() const { return variable_; }
  // The literal of a constant node (null otherwise).
  const std::shared_ptr<const Literal>& literal() const { return literal_; }
  // The group name of a fusion node (its body's name; empty otherwise).
  std::string_view fusion_name() const;
  // The kind attribute of a fusion node ("loop", "reduction", "contraction"; empty otherwise).
  std::string_view fusion_kind() const;
  // A while node that also outputs its per-iteration stacks and trip count (see kWhile).
  bool while_stacked() const;
  // The number of loop variables of a while node (its outputs, or (outputs - 1) / 2 when
  // stacked).
  size_t while_loop_variables() const;
  // cond: {then, else}; while: {cond, body}; fusion: {body}.
  const std::vector<std::unique_ptr<Graph>>& subgraphs() const { return subgraphs_; }
  Graph& subgraph(size_t i) const { return *subgraphs_.at(i); }

 private:
  friend class Graph;
  Node() = default;
  NodeKind kind_ = NodeKind::kOp;
  OpKind op_ = OpKind::Add;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  Attrs attrs_;
  std::string name_;
  SourceLocation loc_;
  int variable_ = -1;
  std::shared_ptr<const Literal> literal_;
  std::vector<std::unique_ptr<Graph>> subgraphs_;
};

// A variable the graph captures, with what the graph does to it (its registry entry).
struct GraphVariable {
  std::string name;  // "dense_1/kernel"
  TensorType type;
  bool trainable = true;
  bool read = false;       // the graph uses the variable's value
  bool written = false;    // the graph assigns the variable
  Value* entry = nullptr;  // the value when the function starts
};

class Graph {
 public:
  explicit Graph(std::string name) : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // A deep copy (ir/graph_clone.cc): same parameters, variables (with their read/write
  // flags), nodes (kinds, attributes, names, locations, types, shared literals), sub-graphs
  // and outputs; print_graph of the copy equals print_graph of the original.
  std::unique_ptr<Graph> clone() const;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // ---- building (types of op nodes come from the op table; errors are kiln::Error)
  Value* add_parameter(TensorType type);
  // Captures a variable; returns its index (its entry value is variables()[i].entry).
  int add_variable(std::string name, TensorType type, bool trainable);
  Node* add_op(OpKind op, std::vector<Value*> inputs, Attrs attrs = {});
  Node* add_constant(std::shared_ptr<const Literal> literal);
  // kind: kAssign, kAssignAdd or kAssignSub. Marks the variable written.
  Node* add_assignment(NodeKind kind, int variable, Value* value);
  // cond / while with their sub-graphs and output types (checked by the verifier).
  Node* add_control_flow(NodeKind kind, std::vector<Value*> inputs,
                         std::vector<std::unique_ptr<Graph>> subgraphs,
                         std::vector<TensorType> output_types);
  // A fusion node: `body` is renamed `name` (the group name), `kind` is stored as the
  // string attribute "kind"; output types are checked by the verifier.
  Node* add_fusion(std::string name, std::string kind, std::vector<Value*> inputs,
                   std::unique_ptr<Graph> body, std::vector<TensorType> output_types);
  void set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

  // ---- reading
  const std::vector<std::unique_ptr<Value>>& parameters() const { return parameters_; }
  Value* parameter(size_t i) const { return parameters_.at(i).get(); }
  const std::vector<GraphVariable>& variables() const { return variables_; }
  GraphVariable& variable(size_t i) { return variables_.at(i); }
  const GraphVariable& variable(size_t i) const { return variables_.at(i); }
  // Nodes in program order.
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<TensorType> parameter_types() const;
  std::vector<TensorType> output_types() const;
  // Number of nodes including those inside sub-graphs.
  size_t total_node_count() const;

  // ---- editing (for passes)
  // Replaces every use of `from` (node inputs and graph outputs) by `to`.
  void replace_all_uses(Value* from, Value* to);
  // Moves `node` (a node of this graph, typically one just built with add_*, which appends)
  // to just before `pos` in program order, keeping every other node's order. The caller
  // guarantees the node's inputs are defined before `pos`. O(number of nodes).
  void move_before(const Node* node, const Node* pos);
  // Puts the nodes in `order`, a permutation of nodes() (kiln::Error otherwise). The caller
  // guarantees it is a valid program order.
  void reorder_nodes(const std::vector<const Node*>& order);
  // Removes nodes for which pred(node) is true; the caller guarantees they have no uses.
  template <typename Pred>
  size_t erase_nodes_if(Pred pred) {
    size_t before = nodes_.size();
    std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return pred(*n); });
    return before - nodes_.size();
  }

 private:
  Node* append(std::unique_ptr<Node> node);
  std::unique_ptr<Node> make_node(NodeKind kind, std::vector<Value*> inputs,
                                  const std::vector<TensorType>& output_types);

  std::string name_;
  std::vector<std::unique_ptr<Value>> parameters_;
  std::vector<GraphVariable> variables_;
  std::vector<std::unique_ptr<Value>> variable_entries_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> outputs_;
};

}  // namespace kiln::ir
