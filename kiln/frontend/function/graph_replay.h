// GraphReplay (internal): runs the nodes of a traced graph again through the frontend op API
// (detail::apply, Variable reads and assignments), so that inside an active trace they are
// recorded into the new graph and seen by the recording tapes, exactly as if the callable that
// produced the graph had run again. Used to differentiate a concrete function under a
// GradientTape without re-running the user's callable (frontend/function/function_gradient.h).
//
// Supported nodes: ops, constants, assignments and cond (replayed as kiln::cond over its closed
// branches). while and fusion nodes are not replayed (kiln::Error naming the node); the caller
// checks replayable() first.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/graph.h"

namespace kiln::detail {

class GraphReplay {
 public:
  // `variables` is parallel to graph.variables() (a concrete function's registry).
  GraphReplay(const ir::Graph& graph, std::vector<Variable> variables);
  // A pure replay: no Variable is touched. Every variable entry value the nodes use must be
  // bound (a snapshot), and assignments compute the new value with ops (assign_add: current +
  // delta) instead of assigning the variable.
  static GraphReplay pure(const ir::Graph& graph);

  // Whether every node of `graph` can be replayed; otherwise `why` names the first that can't.
  static bool replayable(const ir::Graph& graph, std::string* why = nullptr);

  // Makes `v` stand for `t` (parameters; values computed elsewhere).
  void bind(const ir::Value* v, Tensor t);
  // Runs the nodes accepted by `include` (all when empty) in program order. An input that is
  // not bound and not computed is read from its variable when it is a variable entry value
  // (Variable::read, so tapes watch trainable variables), else it is an internal error.
  void run(const std::function<bool(const ir::Node&)>& include = nullptr);
  // The tensor of a bound or computed value (variable entries are read on first use).
  Tensor get(const ir::Value* v);

 private:
  const ir::Graph& graph_;
  std::vector<Variable> variables_;
  bool pure_ = false;
  std::unordered_map<const ir::Value*, Tensor> env_;
  std::unordered_map<int, Tensor> current_;  // pure: each variable's latest value
};

}  // namespace kiln::detail
