#include "kiln/ir/verifier.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/value_numbering.h"

namespace kiln::ir {
namespace {

// An enclosing graph of the sub-graph being verified (to name a value it wrongly captures).
struct Scope {
  std::string path;
  const ValueNumbering* numbering;
};

std::string types_to_string(const std::vector<TensorType>& types) {
  std::string s;
  for (const TensorType& t : types) s += (s.empty() ? "" : ", ") + t.to_string();
  return s;
}

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

class GraphVerifier {
 public:
  GraphVerifier(const Graph& g, std::string path, std::vector<Scope>& enclosing, bool subgraph)
      : g_(g), path_(std::move(path)), numbering_(g), enclosing_(enclosing), subgraph_(subgraph) {}

  void run() {
    if (subgraph_) check_subgraph_has_no_state();
    for (const auto& p : g_.parameters()) defined_.insert(p.get());
    current_.resize(g_.variables().size());
    for (size_t i = 0; i < g_.variables().size(); ++i) check_variable(i);
    for (const auto& n : g_.nodes()) check_node(*n);
    for (size_t i = 0; i < g_.outputs().size(); ++i) check_output(i);
  }

 private:
  [[noreturn]] void fail(std::string_view where, const std::string& problem) const {
    throw Error(fmt::format("verifier: {}: {}: {}", path_, where, problem));
  }
  [[noreturn]] void fail(const Node& n, const std::string& problem) const {
    fail("node " + describe_node(n, numbering_), problem);
  }
  std::string ref(const Value* v) const { return numbering_.ref(v); }
  std::string variable_name(int i) const {
    return fmt::format("${} \"{}\"", i, g_.variable(size_t(i)).name);
  }

  // ---- graph-level checks

  void check_subgraph_has_no_state() const {
    for (const auto& n : g_.nodes())
      if (n->is_assignment())
        fail(*n,
             "assignments are not allowed in a sub-graph (sub-graphs capture no variables; "
             "assign in the enclosing graph instead)");
    if (!g_.variables().empty())
      fail(fmt::format("variable {}", variable_name(0)),
           fmt::format("a sub-graph cannot capture variables (it has {}); sub-graphs see only "
                       "their parameters",
                       g_.variables().size()));
  }

  void check_variable(size_t i) {
    const GraphVariable& v = g_.variable(i);
    std::string where = fmt::format("variable {}", variable_name(int(i)));
    if (v.entry == nullptr) fail(where, "the variable has no entry value");
    if (!(v.entry->type() == v.type))
      fail(where, fmt::format("its entry value {} has type {} but the variable is {}", ref(v.entry),
                              v.entry->type().to_string(), v.type.to_string()));
    defined_.insert(v.entry);
    current_[i] = v.entry;
  }

  void check_output(size_t i) const {
    const Value* v = g_.outputs()[i];
    std::string where = fmt::format("output {}", i);
    if (v == nullptr) fail(where, "the output value is null");
    if (numbering_.number(v) < 0)
      fail(where, foreign_problem(v, "the output") + "; a graph returns values it defines");
    if (auto it = stale_.find(v); it != stale_.end())
      fail(where, stale_problem(v, it->second, "the graph returns it"));
    check_read_flag(v, where);
  }

  // ---- use checks

  struct StaleInfo {
    int variable;
    const Node* assigner;  // the first assignment that superseded the value
  };

  std::string stale_problem(const Value* v, const StaleInfo& s, std::string_view when) const {
    return fmt::format(
        "uses {}, a stale value of variable {} (it was assigned by {} before {}); use the "
        "newest value ({})",
        ref(v), variable_name(s.variable), ref(s.assigner->output(0)), when,
        ref(current_[size_t(s.variable)]));
  }

  // Why `v` (of no graph numbered here) may not be used; names it if an enclosing graph has it.
  std::string foreign_problem(const Value* v, std::string_view what) const {
    for (auto it = enclosing_.rbegin(); it != enclosing_.rend(); ++it) {
      int num = it->numbering->number(v);
      if (num >= 0)
        return fmt::format(
            "{} is a value of another graph (%{} of the enclosing {}); sub-graphs are closed: "
            "pass outer values in as operands of the cond / while node",
            what, num, it->path);
    }
    return fmt::format("{} is a value of another graph{}", what,
                       subgraph_ ? " (sub-graphs are closed: they see only their parameters)" : "");
  }

  void check_read_flag(const Value* v, std::string_view where) const {
    if (v->def() != Value::Def::kVariableEntry) return;
    int i = v->index();
    if (!g_.variable(size_t(i)).read)
      fail(where, fmt::format("uses {}, the entry value of variable {}, but the variable's "
                              "registry entry says read = false",
                              ref(v), variable_name(i)));
  }

  void check_inputs(const Node& n) const {
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      const Value* v = n.input(i);
      std::string what = fmt::format("input {}", i);
      if (v == nullptr) fail(n, what + " is null");
      if (numbering_.number(v) < 0) fail(n, foreign_problem(v, what));
      if (!defined_.contains(v)) {
        if (v->producer() == &n)
          fail(n, fmt::format("{} ({}) is the node's own output", what, ref(v)));
        fail(n, fmt::format("{} ({}) is used before it is defined (by node {}, later in the graph)",
                            what, ref(v),
                            v->producer() ? describe_node(*v->producer(), numbering_) : "?"));
      }
      if (auto it = stale_.find(v); it != stale_.end())
        fail(n, stale_problem(v, it->second, "this node"));
      check_read_flag(v, "node " + describe_node(n, numbering_));
    }
  }

  // ---- nodes

  void check_node(const Node& n) {
    check_inputs(n);
    switch (n.kind()) {
      case NodeKind::kOp:
        check_op(n);
        break;
      case NodeKind::kConstant:
        check_constant(n);
        break;
      case NodeKind::kAssign:
      case NodeKind::kAssignAdd:
      case NodeKind::kAssignSub:
        check_assignment(n);
        break;
      case NodeKind::kCond:
        check_cond(n);
        break;
      case NodeKind::kWhile:
        check_while(n);
        break;
      case NodeKind::kFusion:
        check_fusion(n);
        break;
    }
    if (n.kind() != NodeKind::kCond && n.kind() != NodeKind::kWhile &&
        n.kind() != NodeKind::kFusion && !n.subgraphs().empty())
      fail(n, fmt::format("only cond, while and fusion nodes have sub-graphs, this one has {}",
                          n.subgraphs().size()));
    for (size_t i = 0; i < n.num_outputs(); ++i) defined_.insert(n.output(i));
    if (n.is_assignment()) {
      auto v = size_t(n.variable());
      stale_.emplace(current_[v], StaleInfo{n.variable(), &n});
      current_[v] = n.output(0);
    }
  }

  void check_op(const Node& n) const {
    if (n.num_outputs() != 1)
      fail(n, fmt::format("an op node has exactly one output, this one has {}", n.num_outputs()));
    std::vector<TensorType> types;
    for (const Value* v : n.inputs()) types.push_back(v->type());
    TensorType inferred;
    try {
      inferred = infer_type(n.op(), types, n.attrs());
    } catch (const Error& e) {
      fail(n, fmt::format("the op does not type-check: {}", e.what()));
    }
    if (!(inferred == n.output(0)->type()))
      fail(n, fmt::format("the output is declared {} but the op table infers {} from the inputs "
                          "({})",
                          n.output(0)->type().to_string(), inferred.to_string(),
                          types_to_string(types)));
  }

  void check_constant(const Node& n) const {
    if (n.literal() == nullptr) fail(n, "a constant node has no literal");
    if (!n.inputs().empty())
      fail(n, fmt::format("a constant takes no inputs, this one has {}", n.inputs().size()));
    if (n.num_outputs() != 1)
      fail(n, fmt::format("a constant has exactly one output, this one has {}", n.num_outputs()));
    if (!(n.literal()->type() == n.output(0)->type()))
      fail(n, fmt::format("the literal is {} but the output is declared {}",
                          n.literal()->type().to_string(), n.output(0)->type().to_string()));
  }

  void check_assignment(const Node& n) const {
    std::string_view kw = node_kind_keyword(n.kind());
    if (n.inputs().size() != 1)
      fail(n, fmt::format("{} takes exactly one input, this one has {}", kw, n.inputs().size()));
    if (n.num_outputs() != 1)
      fail(n, fmt::format("{} has exactly one output, this one has {}", kw, n.num_outputs()));
    int vi = n.variable();
    if (vi < 0 || size_t(vi) >= g_.variables().size())
      fail(n, fmt::format("assigns variable ${}, but the graph has {}", vi,
                          plural(g_.variables().size(), "variable")));
    const GraphVariable& var = g_.variable(size_t(vi));
    if (!(n.input(0)->type() == var.type))
      fail(n, fmt::format("the assigned value {} is {} but variable {} is {}", ref(n.input(0)),
                          n.input(0)->type().to_string(), variable_name(vi), var.type.to_string()));
    if (!(n.output(0)->type() == var.type))
      fail(n,
           fmt::format("the output is declared {} but variable {} is {}",
                       n.output(0)->type().to_string(), variable_name(vi), var.type.to_string()));
    if (!var.written)
      fail(n, fmt::format("assigns variable {}, but the variable's registry entry says written "
                          "= false",
                          variable_name(vi)));
    if (n.kind() != NodeKind::kAssign && !var.read)
      fail(n, fmt::format("{} reads variable {}, but the variable's registry entry says read = "
                          "false",
                          kw, variable_name(vi)));
  }

  // Checks that sub-graph `label` of `n` takes `operands` (named by `operand_what(i)`).
  template <typename Describe>
  void check_parameters(const Node& n, const Graph& sub, std::string_view label,
                        const std::vector<const Value*>& operands, Describe&& operand_what) const {
    if (sub.parameters().size() != operands.size())
      fail(n, fmt::format("the {} sub-graph has {} but the {} passes it {}", label,
                          plural(sub.parameters().size(), "parameter"), n.op_name(),
                          plural(operands.size(), "operand")));
    for (size_t i = 0; i < operands.size(); ++i)
      if (!(sub.parameter(i)->type() == operands[i]->type()))
        fail(n, fmt::format("the {} sub-graph's parameter {} is {} but {} is {}", label, i,
                            sub.parameter(i)->type().to_string(), operand_what(i),
                            operands[i]->type().to_string()));
  }

  // Checks that `sub` returns `expected` (the types the node needs), naming them via `what(i)`.
  template <typename Describe>
  void check_results(const Node& n, const Graph& sub, std::string_view label,
                     const std::vector<TensorType>& expected, std::string_view count_what,
                     Describe&& what) const {
    if (sub.outputs().size() != expected.size())
      fail(n, fmt::format("the {} sub-graph returns {} but the {} has {}", label,
                          plural(sub.outputs().size(), "value"), n.op_name(),
                          plural(expected.size(), count_what)));
    for (size_t i = 0; i < expected.size(); ++i) {
      const Value* out = sub.outputs()[i];
      if (out == nullptr) continue;  // reported when the sub-graph is verified
      if (!(out->type() == expected[i]))
        fail(n, fmt::format("the {} sub-graph's output {} is {} but {} is {}", label, i,
                            out->type().to_string(), what(i), expected[i].to_string()));
    }
  }

  void check_subgraph_count(const Node& n, const char* names) const {
    if (n.subgraphs().size() != 2)
      fail(n, fmt::format("a {} has 2 sub-graphs ({}), this one has {}", n.op_name(), names,
                          n.subgraphs().size()));
    for (size_t i = 0; i < 2; ++i)
      if (n.subgraphs()[i] == nullptr)
        fail(n, fmt::format("sub-graph {} ({}) is null", i, subgraph_label(n, i)));
  }

  // cond / while: the node's own structure, then the sub-graphs' insides (the root cause of a
  // mismatch is more often there), then the signatures between node and sub-graphs.
  void check_cond(const Node& n) {
    if (n.inputs().empty()) fail(n, "a cond needs a predicate (input 0), this one has no inputs");
    const TensorType& pred = n.input(0)->type();
    if (pred.dtype != DType::b8 || pred.shape.rank() != 0)
      fail(n, fmt::format("the predicate (input 0, {}) must be bool[], got {}", ref(n.input(0)),
                          pred.to_string()));
    check_subgraph_count(n, "then, else");
    verify_subgraphs(n);
    std::vector<const Value*> operands(n.inputs().begin() + 1, n.inputs().end());
    std::vector<TensorType> out_types;
    for (size_t i = 0; i < n.num_outputs(); ++i) out_types.push_back(n.output(i)->type());
    for (size_t k = 0; k < 2; ++k) {
      std::string_view label = subgraph_label(n, k);
      check_parameters(n, n.subgraph(k), label, operands, [&](size_t i) {
        return fmt::format("operand {} (input {}, {})", i, i + 1, ref(operands[i]));
      });
      check_results(n, n.subgraph(k), label, out_types, "output", [&](size_t i) {
        return fmt::format("the cond's output {}", ref(n.output(i)));
      });
    }
  }

  void check_while(const Node& n) {
    check_subgraph_count(n, "cond, body");
    verify_subgraphs(n);
    const bool stacked = n.while_stacked();
    if (!n.attrs().empty() && !(stacked && n.attrs().size() == 1))
      fail(n, "a while has no attributes, or exactly stacked = true");
    if (stacked && n.num_outputs() % 2 == 0)
      fail(n, fmt::format("a stacked while outputs its loop variables, one stack per loop "
                          "variable and the trip count (an odd number), this one has {}",
                          plural(n.num_outputs(), "output")));
    size_t loop_vars = n.while_loop_variables();
    if (loop_vars > n.inputs().size())
      fail(n, fmt::format("a while with {} (its outputs) needs at least as many inputs, this "
                          "one has {}",
                          plural(loop_vars, "loop variable"), n.inputs().size()));
    std::vector<const Value*> operands(n.inputs().begin(), n.inputs().end());
    auto operand_what = [&](size_t i) {
      return i < loop_vars
                 ? fmt::format("loop variable {} (input {}, {})", i, i, ref(operands[i]))
                 : fmt::format("capture {} (input {}, {})", i - loop_vars, i, ref(operands[i]));
    };
    for (size_t k = 0; k < 2; ++k)
      check_parameters(n, n.subgraph(k), subgraph_label(n, k), operands, operand_what);
    check_results(n, n.subgraph(0), "cond", {TensorType{DType::b8, Shape{}}}, "predicate",
                  [](size_t) { return std::string("the loop predicate"); });
    std::vector<TensorType> loop_types;
    for (size_t i = 0; i < loop_vars; ++i) loop_types.push_back(operands[i]->type());
    check_results(n, n.subgraph(1), "body", loop_types, "loop variable", [&](size_t i) {
      return fmt::format("loop variable {} (input {}, {})", i, i, ref(operands[i]));
    });
    for (size_t i = 0; i < loop_vars; ++i)
      if (!(n.output(i)->type() == loop_types[i]))
        fail(n, fmt::format("output {} (loop variable {}) is declared {} but loop variable {} "
                            "(input {}, {}) is {}",
                            ref(n.output(i)), i, n.output(i)->type().to_string(), i, i,
                            ref(operands[i]), loop_types[i].to_string()));
    if (!stacked) return;
    for (size_t i = 0; i < loop_vars; ++i) {
      // The leading dimension (the trip count) is unknown, or known when the loop's trip
      // count is fixed by construction (kiln::scan); the executors check it.
      const TensorType& declared = n.output(loop_vars + i)->type();
      const TensorType& first = n.output(loop_vars)->type();  // every stack: the same rows
      const int64_t trips = first.shape.rank() > 0 ? first.shape[0] : kUnknownDim;
      Shape stack_shape{trips >= 0 ? trips : kUnknownDim};
      for (int64_t d : loop_types[i].shape) stack_shape.push_back(d);
      TensorType want{loop_types[i].dtype, stack_shape};
      if (!(declared == want))
        fail(n,
             fmt::format("output {} (the stack of loop variable {}) is declared {} but must "
                         "be {} (the leading dimension: the trip count, ? or known, the same for "
                         "every stack)",
                         ref(n.output(loop_vars + i)), i, declared.to_string(), want.to_string()));
    }
    const Value* trips = n.output(2 * loop_vars);
    if (!(trips->type() == TensorType{DType::i64, Shape{}}))
      fail(n, fmt::format("output {} (the trip count) is declared {} but must be i64[]", ref(trips),
                          trips->type().to_string()));
  }

  // fusion: one closed body of op and constant nodes, a group name, a kind attribute.
  void check_fusion(const Node& n) {
    if (n.subgraphs().size() != 1 || n.subgraphs()[0] == nullptr)
      fail(n, fmt::format("a fusion has exactly one sub-graph (its body), this one has {}",
                          n.subgraphs().size()));
    if (n.fusion_name().empty())
      fail(n, "a fusion needs a group name (its body's name), this one's is empty");
    std::string_view kind = n.fusion_kind();
    if (n.attrs().size() != 1 || (kind != "loop" && kind != "reduction" && kind != "contraction"))
      fail(n,
           "a fusion has exactly one attribute, kind = \"loop\", \"reduction\" or "
           "\"contraction\"");
    if (n.num_outputs() == 0) fail(n, "a fusion has at least one output, this one has none");
    const Graph& body = n.subgraph(0);
    for (const auto& b : body.nodes())
      if (b->kind() != NodeKind::kOp && b->kind() != NodeKind::kConstant)
        fail(n, fmt::format("the body of fusion @{} contains a {} node; fusion bodies hold only "
                            "op and constant nodes",
                            n.fusion_name(), b->op_name()));
    verify_subgraphs(n);
    std::vector<const Value*> operands(n.inputs().begin(), n.inputs().end());
    std::vector<TensorType> out_types;
    for (size_t i = 0; i < n.num_outputs(); ++i) out_types.push_back(n.output(i)->type());
    check_parameters(n, body, "body", operands,
                     [&](size_t i) { return fmt::format("operand {} ({})", i, ref(operands[i])); });
    check_results(n, body, "body", out_types, "output", [&](size_t i) {
      return fmt::format("the fusion's output {}", ref(n.output(i)));
    });
  }

  static std::string_view subgraph_label(const Node& n, size_t k) {
    if (n.kind() == NodeKind::kFusion) return "body";
    static constexpr std::string_view kCond[] = {"then", "else"};
    static constexpr std::string_view kWhile[] = {"cond", "body"};
    if (k >= 2) return "extra";
    return n.kind() == NodeKind::kCond ? kCond[k] : kWhile[k];
  }

  void verify_subgraphs(const Node& n) {
    std::string node_ref = n.num_outputs() > 0 ? ref(n.output(0)) : "(no outputs)";
    enclosing_.push_back(Scope{path_, &numbering_});
    for (size_t k = 0; k < n.subgraphs().size(); ++k) {
      std::string path =
          fmt::format("{} / {} {} {}", path_, n.op_name(), node_ref, subgraph_label(n, k));
      GraphVerifier(n.subgraph(k), std::move(path), enclosing_, /*subgraph=*/true).run();
    }
    enclosing_.pop_back();
  }

  const Graph& g_;
  std::string path_;
  ValueNumbering numbering_;
  std::vector<Scope>& enclosing_;
  bool subgraph_;
  std::unordered_set<const Value*> defined_;
  std::unordered_map<const Value*, StaleInfo> stale_;
  std::vector<const Value*> current_;  // the newest value of each variable
};

}  // namespace

void verify_graph(const Graph& g) {
  std::vector<Scope> enclosing;
  GraphVerifier(g, fmt::format("graph @{}", g.name()), enclosing, /*subgraph=*/false).run();
}

}  // namespace kiln::ir
