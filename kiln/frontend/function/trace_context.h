// Tracing state (internal): while kiln::function traces, a TraceContext per graph being
// recorded sits on a thread-local stack. The op dispatcher asks it to record op nodes, Variable
// asks it for captured values and assignment nodes, and cond/while_loop open child contexts
// for their closed sub-graphs (outer values become sub-graph parameters, "lifted captures").
#pragma once

#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/graph.h"

namespace kiln::detail {

class TraceContext;

// What a traced tensor stands for: one value of the graph a context records.
// `context_id` (unique per context, never reused) tells whether the value belongs to a live
// context; the pointer is only followed after that check.
struct TracedValue final : SymbolicInfo {
  TracedValue(uint64_t id, ir::Value* v) : context_id(id), value(v) {}
  bool is_traced() const override { return true; }
  uint64_t context_id;
  ir::Value* value;
};

// Per-function tracing policy shared by the contexts of one trace.
struct TraceOwner {
  std::string function_name;
  bool allow_variable_creation = true;     // false on a function's non-first traces
  Variable rng_state;                      // the function's random-seed state (created lazily)
  bool used_rng = false;                   // a random op was traced in this trace
  bool warned_fixed_seed_in_loop = false;  // said once per function (tracing_random.cc)
};

class TraceContext {
 public:
  // A root context records `graph` for `owner`; a child context (parent != null) records a
  // sub-graph of a cond/while node of the parent's graph.
  TraceContext(ir::Graph& graph, TraceOwner& owner, TraceContext* parent);
  ~TraceContext();
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  ir::Graph& graph() { return graph_; }
  TraceOwner& owner() { return owner_; }
  TraceContext* parent() const { return parent_; }
  uint64_t id() const { return id_; }

  // A new traced tensor standing for `v` (a value of this context's graph).
  Tensor wrap(ir::Value* v);
  // The value of this graph that `t` stands for: its own traced value, a lifted capture
  // (traced in an enclosing context), or a constant node (concrete tensor).
  ir::Value* value_of(const Tensor& t);
  // Records one table op (output typed by the op table), names it and returns its tensor.
  Tensor record_op(OpKind kind, std::span<const Tensor> inputs, const Attrs& attrs);
  // Sets the name and source location of a node from the current scopes.
  void annotate(ir::Node& node, std::string_view op_name);

  // ---- variables
  // The variable's current value in this trace (captured on first use).
  Tensor read_variable(const Variable& var);
  // Records an assignment (kind: kAssign, kAssignAdd, kAssignSub); the result becomes the
  // variable's current value.
  void assign_variable(ir::NodeKind kind, const Variable& var, const Tensor& value);
  // Variables in capture order (root context: parallel to graph().variables()).
  const std::vector<Variable>& captured_variables() const { return variables_; }
  // Child contexts: variables written in the sub-graph, with their new values.
  struct PendingWrite {
    Variable var;
    Tensor value;
  };
  const std::vector<PendingWrite>& pending_writes() const { return pending_writes_; }
  // Child contexts that re-trace a branch for its gradient keep writes local (the forward
  // cond already performs them).
  void set_discard_writes(bool discard) { discard_writes_ = discard; }
  // A sub-graph that runs once per iteration (a while's body or cond), or inside one.
  void set_repeated(bool repeated) { repeated_ = repeated; }
  bool repeated() const { return repeated_ || (parent_ && parent_->repeated()); }
  // Child contexts: makes `value` the variable's current value here (a while body's loop
  // variable for a variable the body assigns; a gradient loop's value of the forward
  // iteration).
  void seed_variable(const Variable& var, const Tensor& value);
  // Child contexts: the variables read from the enclosing context (not seeded), with the
  // enclosing tensor each read returned, in first-read order.
  struct InheritedRead {
    Variable var;
    Tensor value;
  };
  const std::vector<InheritedRead>& inherited_reads() const { return inherited_reads_; }

  // ---- child contexts: lifted captures (outer tensor -> sub-graph parameter)
  const std::vector<Tensor>& captured_outer() const { return captured_outer_; }

  // The innermost context of this thread (null when executing eagerly).
  static TraceContext* current();

 private:
  ir::Value* lift(const Tensor& outer);
  ir::Value* constant(const Tensor& t);
  ir::Value* value_for_variable(const Variable& var);

  uint64_t id_;
  ir::Graph& graph_;
  TraceOwner& owner_;
  TraceContext* parent_;
  std::unordered_map<uint64_t, ir::Value*> constants_;  // tensor id -> constant node value
  std::unordered_map<uint64_t, ir::Value*> lifted_;     // outer tensor id -> parameter
  std::vector<Tensor> captured_outer_;
  // root: variable handle -> index in graph variables; current value tensor per variable
  std::unordered_map<const void*, size_t> variable_index_;
  std::vector<Variable> variables_;
  std::unordered_map<const void*, Tensor> current_;
  std::vector<PendingWrite> pending_writes_;    // child contexts only
  std::vector<InheritedRead> inherited_reads_;  // child contexts only
  bool discard_writes_ = false;
  bool repeated_ = false;
};

// Suspends tracing on this thread (TensorFlow's init_scope): ops run eagerly, e.g. variable
// initializers of a layer built inside a trace.
class InitScope {
 public:
  InitScope();
  ~InitScope();
  InitScope(const InitScope&) = delete;
  InitScope& operator=(const InitScope&) = delete;

 private:
  std::vector<TraceContext*> saved_;
};

// `loc` as the IR keeps it, or unknown where it lies in kiln's own sources (kiln/ and python/src/
// of the tree this library was built from): those are never the user's code, so a layer that
// calls another, or a binding that calls a layer, leaves the enclosing location in place.
ir::SourceLocation user_location(const std::source_location& loc);

// How a scope's location combines with the enclosing scopes' (NameScope).
enum class LocationRule : uint8_t {
  kOverride,   // this location where it is known (a call in the user's code)
  kIfUnknown,  // only where the enclosing scopes give none (a layer's creation site)
};

// Name scope for traced nodes ("sequential/dense_1" -> node "sequential/dense_1/matmul") and
// the user's source location for nodes recorded inside it (unknown locations inherit the
// enclosing scope's). Cheap when not tracing.
class NameScope {
 public:
  explicit NameScope(std::string_view name, const std::source_location* location = nullptr);
  NameScope(std::string_view name, const ir::SourceLocation& location, LocationRule rule);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  bool active_;
};

// True while a trace records on this thread.
inline bool tracing() { return TraceContext::current() != nullptr; }

}  // namespace kiln::detail

namespace kiln {
// False inside kiln::function while it traces (TensorFlow's tf.executing_eagerly()).
inline bool executing_eagerly() { return !detail::tracing(); }
}  // namespace kiln
