#include "kiln/runtime/reference_executor.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "kiln/ir/value_numbering.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/while_stacks.h"

namespace kiln::runtime {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

// Which dtypes the executor evaluates wider (ReferenceOptions::widen_f32, widen_bf16): bf16 in
// float32, float32 in float64 (both: bf16 in float64).
struct Widening {
  bool f32 = false, bf16 = false;
  bool any() const { return f32 || bf16; }
  DType of(DType d) const {
    if (bf16 && d == DType::bf16) d = DType::f32;
    if (f32 && d == DType::f32) d = DType::f64;
    return d;
  }
  // `a` in its wider dtype (exact), or `a` itself.
  Array array(const Array& a) const {
    const DType to = of(a.dtype);
    if (to == a.dtype) return a;
    Array in[1] = {a};
    return run_op(OpKind::Cast, in, {{"dtype", to}});
  }
  // `attrs` with every dtype attribute widened (cast, one_hot, element_count, random ops).
  Attrs attrs(const Attrs& in) const {
    Attrs out;
    for (const auto& [name, value] : in.items()) {
      const DType* d = std::get_if<DType>(&value);
      out.set(name, d != nullptr ? AttrValue(of(*d)) : value);
    }
    return out;
  }
};

// True if a concrete array of type `got` may stand for a value of static type `declared`:
// same dtype (as widened) and rank, equal dimensions wherever `declared` knows them.
bool conforms(const TensorType& declared, const TensorType& got, const Widening& widening) {
  DType want = widening.of(declared.dtype);
  if (want != got.dtype || declared.shape.rank() != got.shape.rank()) return false;
  for (int i = 0; i < declared.shape.rank(); ++i)
    if (declared.shape[i] != kUnknownDim && declared.shape[i] != got.shape[i]) return false;
  return true;
}

class Executor {
 public:
  // `parent`, `node`, `label`: where a sub-graph sits (for error messages); null at the top.
  Executor(const Graph& g, const ReferenceOptions& options, const Executor* parent,
           const Node* node, std::string_view label)
      : g_(g),
        options_(options),
        widening_{options.widen_f32, options.widen_bf16},
        parent_(parent),
        node_(node),
        label_(label) {}

  // Runs the graph; `variables` is updated only if the whole graph succeeds.
  std::vector<Array> run(std::span<const Array> args, std::vector<Array>& variables) {
    if (args.size() != g_.parameters().size())
      fail_graph(fmt::format("expected {} argument{} (one per parameter), got {}",
                             g_.parameters().size(), g_.parameters().size() == 1 ? "" : "s",
                             args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      Array a = widening_.array(args[i]);
      check_array(a, g_.parameter(i)->type(), fmt::format("parameter {}", i));
      env_[g_.parameter(i)] = std::move(a);
    }
    if (variables.size() != g_.variables().size())
      fail_graph(fmt::format("expected {} variable value{} (one per graph variable), got {}",
                             g_.variables().size(), g_.variables().size() == 1 ? "" : "s",
                             variables.size()));
    std::vector<Array> vars = variables;
    for (size_t i = 0; i < vars.size(); ++i) {
      const ir::GraphVariable& v = g_.variable(i);
      vars[i] = widening_.array(vars[i]);
      check_array(vars[i], v.type, fmt::format("variable ${} \"{}\"", i, v.name));
      env_[v.entry] = vars[i];
    }
    for (const auto& n : g_.nodes()) run_node(*n, vars);
    std::vector<Array> outs;
    outs.reserve(g_.outputs().size());
    for (const Value* v : g_.outputs()) outs.push_back(get(v));
    variables = std::move(vars);
    return outs;
  }

 private:
  // ---- naming (computed only when an error is reported)

  const ir::ValueNumbering& numbering() const {
    if (!numbering_) numbering_ = std::make_unique<ir::ValueNumbering>(g_);
    return *numbering_;
  }
  std::string path() const {
    if (parent_ == nullptr) return fmt::format("graph @{}", g_.name());
    std::string node_ref =
        node_->num_outputs() > 0 ? parent_->numbering().ref(node_->output(0)) : "(no outputs)";
    return fmt::format("{} / {} {} {}", parent_->path(), node_->op_name(), node_ref, label_);
  }
  [[noreturn]] void fail_graph(const std::string& problem) const {
    throw Error(fmt::format("reference executor: {}: {}", path(), problem));
  }
  [[noreturn]] void fail(const Node& n, const std::string& problem) const {
    fail_graph(fmt::format("node {}: {}", ir::describe_node(n, numbering()), problem));
  }

  void check_array(const Array& a, const TensorType& expected, const std::string& what) const {
    if (!conforms(expected, a.type(), widening_))
      fail_graph(
          fmt::format("{}: expected {}, got {}", what, expected.to_string(), a.type().to_string()));
    if (a.storage == nullptr || a.storage->bytes() < a.nbytes())
      fail_graph(fmt::format("{}: the {} array has no (or too small a) storage", what,
                             a.type().to_string()));
  }

  // ---- values

  const Array& get(const Value* v) const {
    auto it = env_.find(v);
    KILN_ASSERT(it != env_.end(), "reference executor: a value is used before it is computed");
    return it->second;
  }
  void bind(const Node& n, size_t i, Array a) {
    if (!conforms(n.output(i)->type(), a.type(), widening_))
      fail(n, fmt::format("output {} is declared {} but its value is {}", i,
                          n.output(i)->type().to_string(), a.type().to_string()));
    env_[n.output(i)] = std::move(a);
  }
  std::vector<Array> input_arrays(const Node& n, size_t first = 0) const {
    std::vector<Array> in;
    in.reserve(n.inputs().size() - first);
    for (size_t i = first; i < n.inputs().size(); ++i) in.push_back(get(n.input(i)));
    return in;
  }

  // ---- nodes

  void run_node(const Node& n, std::vector<Array>& vars) {
    switch (n.kind()) {
      case NodeKind::kOp:
        return run_op_node(n);
      case NodeKind::kConstant:
        return run_constant(n);
      case NodeKind::kAssign:
      case NodeKind::kAssignAdd:
      case NodeKind::kAssignSub:
        return run_assignment(n, vars);
      case NodeKind::kCond:
        return run_cond(n);
      case NodeKind::kWhile:
        return run_while(n);
      case NodeKind::kFusion:
        return run_fusion(n);
    }
    fail(n, "unknown node kind");
  }

  void run_op_node(const Node& n) {
    std::vector<Array> in = input_arrays(n);
    std::vector<TensorType> types;
    types.reserve(in.size());
    for (const Array& a : in) types.push_back(a.type());
    Array out;
    try {
      if (!widening_.any()) {
        out = run_kernel(n.op(), in, n.attrs(), infer_type(n.op(), types, n.attrs()));
      } else if (op_info(n.op()).has(kRandom)) {
        // The float32 numbers (a bf16 draw's before its rounding), widened.
        const Attrs attrs = Widening{false, widening_.bf16}.attrs(n.attrs());
        out = widening_.array(run_kernel(n.op(), in, attrs, infer_type(n.op(), types, attrs)));
      } else {
        const Attrs attrs = widening_.attrs(n.attrs());
        out = run_kernel(n.op(), in, attrs, infer_type(n.op(), types, attrs));
      }
      if (options_.after_op) options_.after_op(n.op(), n.attrs(), in, out, n.output(0)->dtype());
    } catch (const Error& e) {
      fail(n, e.what());
    }
    bind(n, 0, std::move(out));
  }

  void run_constant(const Node& n) {
    const ir::Literal& lit = *n.literal();
    Array a = Array::empty(lit.type());
    if (lit.byte_size() > 0) std::memcpy(a.raw(), lit.data(), lit.byte_size());
    bind(n, 0, widening_.array(a));
  }

  void run_assignment(const Node& n, std::vector<Array>& vars) {
    auto vi = size_t(n.variable());
    const Array& current = vars.at(vi);
    Array value;
    try {
      if (n.kind() == NodeKind::kAssign) {
        value = get(n.input(0));
      } else {
        Array in[2] = {current, get(n.input(0))};
        OpKind op = n.kind() == NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub;
        value = run_op(op, in, {});
        if (options_.after_op) options_.after_op(op, {}, in, value, g_.variable(vi).type.dtype);
      }
    } catch (const Error& e) {
      fail(n, e.what());
    }
    if (!(value.type() == current.type()))
      fail(n,
           fmt::format("the new value of variable ${} \"{}\" is {} but the variable holds {}", vi,
                       g_.variable(vi).name, value.type().to_string(), current.type().to_string()));
    vars[vi] = value;
    bind(n, 0, std::move(value));
  }

  // The value of a bool[] predicate (a cond's input 0 or a while's cond result).
  bool predicate(const Node& n, const Array& p, std::string_view what) const {
    if (p.dtype != DType::b8 || p.shape.rank() != 0)
      fail(n, fmt::format("{} must be bool[], got {}", what, p.type().to_string()));
    return *p.data<bool>();
  }

  std::vector<Array> run_subgraph(const Node& n, size_t k, std::string_view label,
                                  std::span<const Array> args) const {
    std::vector<Array> no_variables;
    return Executor(n.subgraph(k), options_, this, &n, label).run(args, no_variables);
  }

  void bind_all(const Node& n, std::vector<Array>& values, std::string_view from) {
    if (values.size() != n.num_outputs())
      fail(n, fmt::format("the {} sub-graph returned {} values for {} outputs", from, values.size(),
                          n.num_outputs()));
    for (size_t i = 0; i < values.size(); ++i) bind(n, i, std::move(values[i]));
  }

  void run_cond(const Node& n) {
    bool taken = predicate(n, get(n.input(0)), "the predicate (input 0)");
    std::vector<Array> operands = input_arrays(n, 1);
    std::vector<Array> outs = run_subgraph(n, taken ? 0 : 1, taken ? "then" : "else", operands);
    bind_all(n, outs, taken ? "then" : "else");
  }

  // A fusion runs its body like a sub-graph: the same kernels in the same order.
  void run_fusion(const Node& n) {
    std::vector<Array> operands = input_arrays(n);
    std::vector<Array> outs = run_subgraph(n, 0, "body", operands);
    bind_all(n, outs, "body");
  }

  void run_while(const Node& n) {
    size_t loop_vars = n.while_loop_variables();
    std::vector<Array> state = input_arrays(n);  // loop variables, then captures
    const std::vector<Array> initial(state.begin(), state.begin() + long(loop_vars));
    WhileStacks stacks(loop_vars);
    for (;;) {
      std::vector<Array> c = run_subgraph(n, 0, "cond", state);
      if (c.size() != 1)
        fail(n,
             fmt::format("the cond sub-graph returned {} values, expected one bool[]", c.size()));
      if (!predicate(n, c[0], "the cond sub-graph's result")) break;
      if (n.while_stacked()) stacks.push(state);
      std::vector<Array> next = run_subgraph(n, 1, "body", state);
      if (next.size() != loop_vars)
        fail(n, fmt::format("the body sub-graph returned {} values for {} loop variables",
                            next.size(), loop_vars));
      for (size_t i = 0; i < loop_vars; ++i) {
        if (!conforms(n.input(i)->type(), next[i].type(), widening_))
          fail(n, fmt::format("the body sub-graph's output {} is {} but loop variable {} is {}", i,
                              next[i].type().to_string(), i, n.input(i)->type().to_string()));
        state[i] = std::move(next[i]);
      }
    }
    state.resize(loop_vars);
    if (n.while_stacked())
      for (Array& a : stacks.finish(initial)) state.push_back(std::move(a));
    bind_all(n, state, "body");
  }

  const Graph& g_;
  const ReferenceOptions& options_;
  Widening widening_;
  const Executor* parent_;
  const Node* node_;
  std::string_view label_;
  mutable std::unique_ptr<ir::ValueNumbering> numbering_;
  std::unordered_map<const Value*, Array> env_;
};

}  // namespace

namespace {
const ReferenceOptions kExact;
thread_local const ReferenceOptions* thread_options = &kExact;
}  // namespace

std::vector<Array> execute_reference(const ir::Graph& graph, std::span<const Array> args,
                                     std::vector<Array>& variables) {
  return Executor(graph, *thread_options, nullptr, nullptr, {}).run(args, variables);
}

ScopedReferenceHook::ScopedReferenceHook(decltype(ReferenceOptions::after_op) after_op)
    : previous_(thread_options) {
  options_.after_op = std::move(after_op);
  thread_options = &options_;
}

ScopedReferenceHook::~ScopedReferenceHook() { thread_options = previous_; }

std::vector<Array> execute_reference(const ir::Graph& graph, std::span<const Array> args,
                                     std::vector<Array>& variables,
                                     const ReferenceOptions& options) {
  return Executor(graph, options, nullptr, nullptr, {}).run(args, variables);
}

}  // namespace kiln::runtime
