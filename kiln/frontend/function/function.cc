// FunctionCore: the signature cache, tracing and retrace warnings behind kiln::function.
#include "kiln/frontend/function/function.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <mutex>

#include "kiln/frontend/function/dump_stages.h"
#include "kiln/frontend/function/function_gradient.h"
#include "kiln/frontend/function/keep_old_values.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/function/tracing_random.h"
#include "kiln/frontend/tape_recorder.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/log.h"

namespace kiln::detail {

namespace {

// How many of the last calls traced before the warning, and the window size.
constexpr int kRetraceWarnThreshold = 5;
constexpr size_t kRetraceWindow = 10;

struct Key {
  std::vector<TensorType> types;
  uint64_t hash;
  bool operator<(const Key& o) const {
    if (hash != o.hash) return hash < o.hash;
    if (types.size() != o.types.size()) return types.size() < o.types.size();
    for (size_t i = 0; i < types.size(); ++i) {
      const TensorType &a = types[i], &b = o.types[i];
      if (a.dtype != b.dtype) return a.dtype < b.dtype;
      if (a.shape.rank() != b.shape.rank()) return a.shape.rank() < b.shape.rank();
      for (int d = 0; d < a.shape.rank(); ++d)
        if (a.shape[d] != b.shape[d]) return a.shape[d] < b.shape[d];
    }
    return false;
  }
};

std::string describe_change(const Key& before, const Key& after) {
  if (before.types.size() != after.types.size())
    return fmt::format("number of tensor arguments {} -> {}", before.types.size(),
                       after.types.size());
  for (size_t i = 0; i < after.types.size(); ++i) {
    const TensorType &a = before.types[i], &b = after.types[i];
    if (a.dtype != b.dtype)
      return fmt::format("argument {} dtype {} -> {}", i, dtype_name(a.dtype), dtype_name(b.dtype));
    if (!(a.shape == b.shape))
      return fmt::format("argument {} shape {} -> {}", i, a.shape.to_string(), b.shape.to_string());
  }
  if (before.hash != after.hash) return "a non-tensor argument changed";
  return "the signature is unchanged";
}

}  // namespace

struct FunctionCore::State {
  // Guards everything below but `options`: several threads may call one function (the first
  // call of a signature traces while the others wait, then they find it in the cache).
  // Recursive: a body being traced may ask this function for a concrete function.
  std::recursive_mutex mutex;
  FunctionOptions options;
  TraceOwner owner;
  std::map<Key, ConcreteFunction> cache;
  int tracing_count = 0;
  // Retrace warnings.
  std::deque<bool> recent;  // last calls: did they trace?
  bool warned = false;
  std::optional<Key> previous;
  // reduce_retracing: per argument position, the most general type seen.
  std::optional<std::vector<TensorType>> relaxed;
};

FunctionCore::FunctionCore(FunctionOptions options) : state_(std::make_unique<State>()) {
  if (options.name.empty()) options.name = "function";
  state_->owner.function_name = options.name;
  state_->options = std::move(options);
}

FunctionCore::~FunctionCore() = default;

int FunctionCore::tracing_count() const {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  return state_->tracing_count;
}
const std::string& FunctionCore::name() const { return state_->options.name; }

namespace {

std::vector<TensorType> signature_types(FunctionCore::State& s, const std::vector<Tensor>& args) {
  const FunctionOptions& o = s.options;
  if (o.input_signature) {
    std::vector<TensorType> types;
    for (const TensorSpec& spec : *o.input_signature) types.push_back(spec.type());
    check_arguments(o.name, types, args);
    return types;
  }
  std::vector<TensorType> types;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined())
      throw Error(fmt::format("function \"{}\": argument {} is an undefined tensor", o.name, i));
    types.push_back(args[i].type());
  }
  if (!o.reduce_retracing) return types;
  if (!s.relaxed || s.relaxed->size() != types.size()) {
    s.relaxed = types;
    return types;
  }
  for (size_t i = 0; i < types.size(); ++i) {
    TensorType& r = (*s.relaxed)[i];
    if (r.dtype != types[i].dtype || r.shape.rank() != types[i].shape.rank()) {
      r = types[i];  // a different dtype or rank is a new signature, not a relaxation
      continue;
    }
    for (int d = 0; d < r.shape.rank(); ++d)
      if (r.shape[d] != types[i].shape[d]) r.shape[d] = kUnknownDim;
  }
  return *s.relaxed;
}

}  // namespace

ConcreteFunction FunctionCore::concrete_for_types(const std::vector<TensorType>& types,
                                                  uint64_t static_hash, const Body& body) {
  State& s = *state_;
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  Key key{types, static_hash};
  bool traced = false;
  auto it = s.cache.find(key);
  if (it == s.cache.end()) {
    auto graph = std::make_shared<ir::Graph>(s.options.name);
    s.owner.allow_variable_creation = s.tracing_count == 0;
    s.owner.used_rng = false;
    std::vector<Variable> variables;
    {
      PauseTapes pause;  // a trace is not an eager computation: recording tapes must not see it
      TraceContext ctx(*graph, s.owner, nullptr);
      std::vector<Tensor> params;
      for (const TensorType& t : types) params.push_back(ctx.wrap(graph->add_parameter(t)));
      std::vector<Tensor> results = body(params);
      finish_random_state(ctx);
      std::vector<ir::Value*> outputs;
      for (size_t i = 0; i < results.size(); ++i) {
        if (!results[i].defined())
          throw Error(
              fmt::format("function \"{}\": output {} is an undefined tensor", s.options.name, i));
        outputs.push_back(ctx.value_of(results[i]));
      }
      graph->set_outputs(std::move(outputs));
      variables = ctx.captured_variables();
    }
    ++s.tracing_count;
    keep_old_variable_values(*graph);
    ir::verify_graph(*graph);
    dump_trace_stages(*graph);
    it = s.cache.emplace(key, ConcreteFunction(graph, std::move(variables), s.options.mode)).first;
    traced = true;
  }
  // Retrace bookkeeping.
  s.recent.push_back(traced);
  if (s.recent.size() > kRetraceWindow) s.recent.pop_front();
  int traces = 0;
  for (bool t : s.recent) traces += t;
  if (traces < kRetraceWarnThreshold) s.warned = false;
  if (traced && traces >= kRetraceWarnThreshold && !s.warned && s.previous) {
    s.warned = true;
    log_warning(fmt::format(
        "function \"{}\" retraced {} times in its last {} calls; {}. Retracing is slow: pass "
        "tensors of one shape, give an input_signature with unknown (-1) dimensions, or set "
        "reduce_retracing",
        s.options.name, traces, s.recent.size(), describe_change(*s.previous, key)));
  }
  s.previous = key;
  return it->second;
}

ConcreteFunction FunctionCore::concrete(const std::vector<Tensor>& args, uint64_t static_hash,
                                        const Body& body) {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  return concrete_for_types(signature_types(*state_, args), static_hash, body);
}

std::vector<Tensor> FunctionCore::call(const std::vector<Tensor>& args, uint64_t static_hash,
                                       const Body& body) {
  // Inside another trace: record inline. Under a recording GradientTape: run the graph and
  // record the call on the tapes as one op with the function's gradient graph.
  if (tracing()) return body(args);
  ConcreteFunction f = concrete(args, static_hash, body);
  if (tapes_recording()) return call_recorded(f, args);
  return f(args);
}

}  // namespace kiln::detail
