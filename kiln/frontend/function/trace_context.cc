#include "kiln/frontend/function/trace_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"

namespace kiln::detail {
namespace {

thread_local std::vector<TraceContext*> t_contexts;
thread_local std::vector<std::string> t_names;
thread_local std::vector<ir::SourceLocation> t_locations;
std::atomic<uint64_t> g_next_context_id{1};

std::string joined_scope() {
  std::string s;
  for (const std::string& n : t_names) {
    if (n.empty()) continue;
    if (!s.empty()) s += '/';
    s += n;
  }
  return s;
}

}  // namespace

TraceContext::TraceContext(ir::Graph& graph, TraceOwner& owner, TraceContext* parent)
    : id_(g_next_context_id.fetch_add(1)), graph_(graph), owner_(owner), parent_(parent) {
  t_contexts.push_back(this);
}

TraceContext::~TraceContext() {
  auto it = std::find(t_contexts.begin(), t_contexts.end(), this);
  if (it != t_contexts.end()) t_contexts.erase(it);
}

TraceContext* TraceContext::current() { return t_contexts.empty() ? nullptr : t_contexts.back(); }

Tensor TraceContext::wrap(ir::Value* v) {
  return Tensor::symbolic(v->type(), std::make_shared<TracedValue>(id_, v));
}

ir::Value* TraceContext::value_of(const Tensor& t) {
  if (!t.defined()) throw Error("kiln::function: an undefined tensor was used in a traced op");
  if (t.is_traced()) {
    const auto* info = static_cast<const TracedValue*>(t.symbolic_info());
    if (info->context_id == id_) return info->value;
    for (TraceContext* c = parent_; c != nullptr; c = c->parent_)
      if (c->id_ == info->context_id) return lift(t);
    throw Error(fmt::format(
        "function \"{}\": a traced tensor of type {} from another trace (an earlier call of a "
        "kiln::function, or a tensor kept from inside one) was used while tracing graph @{}; "
        "traced tensors only live inside their own trace: pass the value as an argument or "
        "return it from the function",
        owner_.function_name, t.type().to_string(), graph_.name()));
  }
  if (t.is_placeholder())
    throw Error(fmt::format(
        "function \"{}\": a functional-model placeholder of type {} (from kiln::Input) was "
        "used inside a trace; call the model on the function's tensor arguments instead",
        owner_.function_name, t.type().to_string()));
  return constant(t);
}

ir::Value* TraceContext::constant(const Tensor& t) {
  auto it = constants_.find(t.id());
  if (it != constants_.end()) return it->second;
  const runtime::Array& a = t.array();
  std::shared_ptr<const void> owner(a.storage, a.raw());
  auto literal = std::make_shared<ir::Literal>(t.type(), owner, a.raw());
  ir::Node* node = graph_.add_constant(std::move(literal));
  annotate(*node, "constant");
  constants_.emplace(t.id(), node->output());
  return node->output();
}

ir::Value* TraceContext::lift(const Tensor& outer) {
  auto it = lifted_.find(outer.id());
  if (it != lifted_.end()) return it->second;
  parent_->value_of(outer);  // makes it available in the parent (lifting further out)
  ir::Value* param = graph_.add_parameter(outer.type());
  captured_outer_.push_back(outer);
  lifted_.emplace(outer.id(), param);
  return param;
}

void TraceContext::annotate(ir::Node& node, std::string_view op_name) {
  std::string scope = joined_scope();
  if (!scope.empty()) node.set_name(scope + "/" + std::string(op_name));
  if (!t_locations.empty() && t_locations.back().known()) node.set_location(t_locations.back());
}

Tensor TraceContext::record_op(OpKind kind, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<ir::Value*> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs) values.push_back(value_of(t));
  ir::Node* node = graph_.add_op(kind, std::move(values), attrs);
  annotate(*node, op_name(kind));
  return wrap(node->output());
}

ir::Value* TraceContext::value_for_variable(const Variable& var) {
  auto it = variable_index_.find(var.handle_id());
  if (it != variable_index_.end()) return graph_.variable(it->second).entry;
  size_t index =
      size_t(graph_.add_variable(var.name(), {var.dtype(), var.shape()}, var.trainable()));
  variable_index_.emplace(var.handle_id(), index);
  variables_.push_back(var);
  ir::Value* entry = graph_.variable(index).entry;
  current_.emplace(var.handle_id(), wrap(entry));
  return entry;
}

Tensor TraceContext::read_variable(const Variable& var) {
  if (parent_ == nullptr) {
    value_for_variable(var);
    graph_.variable(variable_index_.at(var.handle_id())).read = true;
    return current_.at(var.handle_id());
  }
  auto it = current_.find(var.handle_id());
  if (it != current_.end()) return it->second;
  // The enclosing graph's tensor itself (lifted when an op uses it): gradient tapes then see
  // the very tensor the cond node takes as operand, so gradients reach the variable.
  Tensor t = parent_->read_variable(var);
  current_.emplace(var.handle_id(), t);
  inherited_reads_.push_back({var, t});
  return t;
}

void TraceContext::seed_variable(const Variable& var, const Tensor& value) {
  KILN_ASSERT(parent_ != nullptr, "seed_variable on a root trace context");
  current_[var.handle_id()] = value;
}

namespace {
// Gradient tapes see a traced assignment as eager code sees one: the variable's new value
// is the assigned tensor (kAssign: a copy of it) or current + / - delta.
void record_assignment_on_tapes(ir::NodeKind kind, const Tensor& before, const Tensor& value,
                                const Tensor& next) {
  if (!tapes_recording()) return;
  if (kind == ir::NodeKind::kAssign) {
    Tensor in[1] = {value};
    record_on_tapes(OpKind::Copy, {}, in, next);
  } else {
    Tensor in[2] = {before, value};
    record_on_tapes(kind == ir::NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub, {}, in, next);
  }
}
}  // namespace

void TraceContext::assign_variable(ir::NodeKind kind, const Variable& var, const Tensor& value) {
  if (parent_ == nullptr) {
    value_for_variable(var);
    size_t index = variable_index_.at(var.handle_id());
    Tensor before = current_.at(var.handle_id());
    ir::Node* node = graph_.add_assignment(kind, int(index), value_of(value));
    annotate(*node, ir::node_kind_keyword(kind));
    Tensor next = wrap(node->output());
    current_[var.handle_id()] = next;
    record_assignment_on_tapes(kind, before, value, next);
    return;
  }
  // In a sub-graph the assignment becomes an extra output of the cond/while node, assigned
  // by the enclosing graph afterwards.
  Tensor next, cur;
  if (kind == ir::NodeKind::kAssign) {
    next = wrap(value_of(value));
  } else {
    cur = read_variable(var);
    Tensor in[2] = {cur, value};
    next = record_op(kind == ir::NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub, in, {});
  }
  record_assignment_on_tapes(kind, cur, value, next);
  current_[var.handle_id()] = next;
  if (discard_writes_) return;
  for (PendingWrite& w : pending_writes_)
    if (w.var == var) {
      w.value = next;
      return;
    }
  pending_writes_.push_back({var, next});
}

InitScope::InitScope() { saved_.swap(t_contexts); }
InitScope::~InitScope() { t_contexts.swap(saved_); }

ir::SourceLocation user_location(const std::source_location& loc) {
  // This file's path as the compiler saw it ends in kiln/frontend/function/trace_context.cc:
  // what comes before is the root of the tree the library was built from.
  static const std::string_view root = [] {
    constexpr std::string_view self = __FILE__, tail = "kiln/frontend/function/trace_context.cc";
    return self.ends_with(tail) ? self.substr(0, self.size() - tail.size()) : std::string_view();
  }();
  const std::string_view file = loc.file_name();
  if (file.empty()) return {};
  if (file.starts_with(root)) {
    const std::string_view rel = file.substr(root.size());
    if (rel.starts_with("kiln/") || rel.starts_with("python/src/")) return {};
  }
  return {std::string(file), uint32_t(loc.line()), uint32_t(loc.column())};
}

NameScope::NameScope(std::string_view name, const std::source_location* location)
    : NameScope(name, location ? user_location(*location) : ir::SourceLocation(),
                LocationRule::kOverride) {}

NameScope::NameScope(std::string_view name, const ir::SourceLocation& location, LocationRule rule)
    : active_(tracing()) {
  if (!active_) return;
  t_names.emplace_back(name);
  const bool enclosing_known = !t_locations.empty() && t_locations.back().known();
  const bool take = location.known() && (rule == LocationRule::kOverride || !enclosing_known);
  t_locations.push_back(take                  ? location
                        : t_locations.empty() ? ir::SourceLocation()
                                              : t_locations.back());
}

NameScope::~NameScope() {
  if (!active_) return;
  t_names.pop_back();
  t_locations.pop_back();
}

}  // namespace kiln::detail
