#include "kiln/frontend/gradient_tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"

namespace kiln {

namespace {
// One recorded op: a table op (kind, attrs, one output) or, when `custom` is set, a composite
// op with several outputs and its own backward function (kiln::cond in a trace).
struct OpRecord {
  OpKind kind;
  Attrs attrs;
  std::vector<Tensor> inputs;
  Tensor output;
  std::vector<Tensor> outputs{};  // custom records only
  detail::CustomGradient custom{};
  // In a trace: the recorded node's name scope ("sequential/dense") and source location, which
  // its gradient's nodes take ("gradient/sequential/dense/matmul/...").
  std::string scope{};
  std::string op{};  // the node's op name ("matmul", "while"); empty when eager
  ir::SourceLocation location{};
};

// The scope and location of the node `output` was just traced as (nothing when eager).
void note_origin(OpRecord& rec, const Tensor& output) {
  detail::TraceContext* context = detail::TraceContext::current();
  if (context == nullptr || !output.is_traced()) return;
  const auto* info = static_cast<const detail::TracedValue*>(output.symbolic_info());
  if (info->context_id != context->id() || info->value->producer() == nullptr) return;
  const ir::Node& node = *info->value->producer();
  const size_t slash = node.name().rfind('/');
  if (slash != std::string::npos) rec.scope = node.name().substr(0, slash);
  rec.op = node.op_name();
  rec.location = node.location();
}

// The name scope of a record's gradient: "gradient/<forward scope>/<op>".
std::string gradient_scope(const OpRecord& rec) {
  const std::string op = rec.op.empty() ? std::string(op_name(rec.kind)) : rec.op;
  return rec.scope.empty() ? fmt::format("gradient/{}", op)
                           : fmt::format("gradient/{}/{}", rec.scope, op);
}
}  // namespace

struct GradientTape::State {
  bool persistent = false;
  bool recording = true;
  bool used = false;
  std::unordered_set<uint64_t> tracked;  // watched tensors and outputs of recorded ops
  std::vector<Tensor> watched;
  std::vector<OpRecord> records;
};

namespace {

thread_local std::vector<GradientTape::State*> t_tapes;
thread_local int t_recording = 0;  // number of tapes on this thread that are recording

void set_recording(GradientTape::State& s, bool on) {
  if (s.recording == on) return;
  s.recording = on;
  t_recording += on ? 1 : -1;
}

// The gradient of a table op's inputs through its rule.
std::vector<Tensor> standard_gradient(const OpRecord& rec, const Tensor& g,
                                      const std::vector<bool>& needs) {
  detail::GradRule rule = detail::gradient_rule(rec.kind);
  if (!rule)
    throw Error(
        fmt::format("GradientTape::gradient: op \"{}\" has no gradient rule, so kiln "
                    "cannot differentiate through it (for max_pool2d_grad: "
                    "second-order gradients of max pooling are not supported)",
                    op_name(rec.kind)));
  detail::NameScope scope(gradient_scope(rec), rec.location, detail::LocationRule::kOverride);
  return rule(detail::GradContext{rec.kind, rec.attrs, rec.inputs, rec.output, g, needs});
}

// Adds each input's gradient to what other consumers contributed.
void accumulate(const OpRecord& rec, const std::vector<Tensor>& in_grads,
                const std::vector<bool>& needs, std::unordered_map<uint64_t, Tensor>& grads) {
  for (size_t i = 0; i < rec.inputs.size(); ++i) {
    if (!needs[i] || i >= in_grads.size() || !in_grads[i].defined()) continue;
    const Tensor& in = rec.inputs[i];
    KILN_ASSERT(in_grads[i].type() == in.type(),
                fmt::format("gradient of {} returned {} for input {} of type {}",
                            rec.custom ? "a composite op" : op_name(rec.kind),
                            in_grads[i].type().to_string(), i, in.type().to_string()));
    auto [slot, fresh] = grads.try_emplace(in.id(), in_grads[i]);
    if (fresh) continue;
    // The sum over consumers, traced in the scope of the record whose share arrives.
    std::optional<detail::NameScope> scope;
    if (!rec.op.empty())
      scope.emplace(gradient_scope(rec), rec.location, detail::LocationRule::kOverride);
    slot->second = slot->second + in_grads[i];
  }
}

}  // namespace

namespace detail {

bool tapes_recording() { return t_recording > 0; }

void record_on_tapes(OpKind kind, const Attrs& attrs, std::span<const Tensor> inputs,
                     const Tensor& output) {
  if (!is_floating(output.dtype())) return;  // integer and bool values carry no gradient
  if (op_info(kind).has(kNoGradient)) return;
  for (GradientTape::State* tape : t_tapes) {
    if (!tape->recording) continue;
    bool watched = std::any_of(inputs.begin(), inputs.end(),
                               [&](const Tensor& t) { return tape->tracked.count(t.id()) > 0; });
    if (!watched) continue;
    tape->records.push_back(OpRecord{kind, attrs, {inputs.begin(), inputs.end()}, output});
    note_origin(tape->records.back(), output);
    tape->tracked.insert(output.id());
  }
}

void record_custom_on_tapes(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                            CustomGradient backward) {
  for (GradientTape::State* tape : t_tapes) {
    if (!tape->recording) continue;
    bool watched = std::any_of(inputs.begin(), inputs.end(),
                               [&](const Tensor& t) { return tape->tracked.count(t.id()) > 0; });
    if (!watched) continue;
    OpRecord r{OpKind::Add, {}, {inputs.begin(), inputs.end()}, Tensor()};
    r.outputs.assign(outputs.begin(), outputs.end());
    r.custom = backward;
    if (!outputs.empty()) note_origin(r, outputs[0]);
    for (const Tensor& o : outputs)
      if (is_floating(o.dtype())) tape->tracked.insert(o.id());
    tape->records.push_back(std::move(r));
  }
}

bool any_watched(std::span<const Tensor> tensors) {
  for (GradientTape::State* tape : t_tapes) {
    if (!tape->recording) continue;
    for (const Tensor& t : tensors)
      if (tape->tracked.count(t.id())) return true;
  }
  return false;
}

PauseTapes::PauseTapes() {
  for (GradientTape::State* tape : t_tapes) {
    saved_.emplace_back(tape, tape->recording);
    set_recording(*tape, false);
  }
}

PauseTapes::~PauseTapes() {
  for (auto& [tape, was_recording] : saved_)
    set_recording(*static_cast<GradientTape::State*>(tape), was_recording);
}

void watch_on_tapes(const Tensor& t) {
  for (GradientTape::State* tape : t_tapes) {
    if (!tape->recording) continue;
    if (tape->tracked.insert(t.id()).second) tape->watched.push_back(t);
  }
}

}  // namespace detail

GradientTape::GradientTape(bool persistent) : state_(std::make_unique<State>()) {
  state_->persistent = persistent;
  t_tapes.push_back(state_.get());
  ++t_recording;
}

GradientTape::~GradientTape() {
  set_recording(*state_, false);
  auto it = std::find(t_tapes.begin(), t_tapes.end(), state_.get());
  if (it != t_tapes.end()) t_tapes.erase(it);
}

bool GradientTape::persistent() const { return state_->persistent; }

void GradientTape::watch(const Tensor& x) {
  if (!x.defined()) throw Error("GradientTape::watch: the tensor is undefined");
  if (!is_floating(x.dtype()))
    throw Error(
        fmt::format("GradientTape::watch: only floating tensors have gradients; got {} "
                    "{} (cast it to float32 first)",
                    dtype_name(x.dtype()), x.shape().to_string()));
  if (state_->tracked.insert(x.id()).second) state_->watched.push_back(x);
}

void GradientTape::watch(const std::vector<Tensor>& xs) {
  for (const Tensor& x : xs) watch(x);
}

std::vector<Tensor> GradientTape::watched() const { return state_->watched; }

void GradientTape::reset() {
  state_->tracked.clear();
  state_->watched.clear();
  state_->records.clear();
  state_->used = false;
}

GradientTape::StopRecording::StopRecording(GradientTape& tape)
    : tape_(tape), was_recording_(tape.state_->recording) {
  set_recording(*tape_.state_, false);
}

GradientTape::StopRecording::~StopRecording() { set_recording(*tape_.state_, was_recording_); }

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Variable>& sources,
                                           UnconnectedGradients unconnected) {
  std::vector<Tensor> values;
  for (const Variable& v : sources) values.push_back(v.value());
  return gradient(target, values, unconnected);
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source,
                              UnconnectedGradients unconnected) {
  return gradient(target, std::vector<Tensor>{source}, unconnected)[0];
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected,
                                           const Tensor& output_gradient) {
  State& s = *state_;
  if (s.used && !s.persistent)
    throw Error(
        "GradientTape::gradient can only be called once on a non-persistent tape; "
        "create it with GradientTape(/*persistent=*/true) to call it more than once");
  if (!target.defined()) throw Error("GradientTape::gradient: the target is undefined");
  if (!is_floating(target.dtype()))
    throw Error(fmt::format("GradientTape::gradient: the target must be floating, got {} {}",
                            dtype_name(target.dtype()), target.shape().to_string()));
  for (size_t i = 0; i < sources.size(); ++i)
    if (!sources[i].defined())
      throw Error(fmt::format("GradientTape::gradient: source {} is undefined", i));
  Tensor seed = output_gradient.defined() ? output_gradient : ones_like(target);
  if (!(seed.type() == target.type()))
    throw Error(fmt::format("GradientTape::gradient: output_gradient is {}, but the target is {}",
                            seed.type().to_string(), target.type().to_string()));

  // The backward pass is not recorded by this tape (outer tapes do record it).
  StopRecording pause(*this);
  s.used = true;

  // Forward sweep: which recorded ops depend on a source. A source this tape neither watched
  // nor produced gets no gradient, even if recorded ops consumed it (as in TensorFlow).
  std::unordered_set<uint64_t> relevant;
  for (const Tensor& src : sources)
    if (s.tracked.count(src.id())) relevant.insert(src.id());
  std::vector<bool> on_path(s.records.size(), false);
  for (size_t r = 0; r < s.records.size(); ++r) {
    for (const Tensor& in : s.records[r].inputs)
      if (relevant.count(in.id())) on_path[r] = true;
    if (!on_path[r]) continue;
    if (s.records[r].custom)
      for (const Tensor& o : s.records[r].outputs) relevant.insert(o.id());
    else
      relevant.insert(s.records[r].output.id());
  }

  // Backward sweep in reverse recording order (a valid reverse topological order).
  std::unordered_map<uint64_t, Tensor> grads;
  grads[target.id()] = seed;
  std::unordered_set<uint64_t> source_ids;
  for (const Tensor& src : sources) source_ids.insert(src.id());
  for (size_t r = s.records.size(); r-- > 0;) {
    if (!on_path[r]) continue;
    const OpRecord& rec = s.records[r];
    std::vector<bool> needs(rec.inputs.size());
    for (size_t i = 0; i < rec.inputs.size(); ++i)
      needs[i] = is_floating(rec.inputs[i].dtype()) && relevant.count(rec.inputs[i].id()) > 0;
    std::vector<Tensor> in_grads;
    if (rec.custom) {
      std::vector<Tensor> out_grads(rec.outputs.size());
      bool any = false;
      for (size_t i = 0; i < rec.outputs.size(); ++i) {
        auto it = grads.find(rec.outputs[i].id());
        if (it == grads.end()) continue;
        out_grads[i] = it->second;
        any = true;
        if (!source_ids.count(rec.outputs[i].id())) grads.erase(it);
      }
      if (!any) continue;
      // Traced: named and located after the forward node (a composite's own scopes inside).
      std::optional<detail::NameScope> scope;
      if (!rec.op.empty())
        scope.emplace(gradient_scope(rec), rec.location, detail::LocationRule::kOverride);
      in_grads = rec.custom(out_grads, needs);
    } else {
      auto it = grads.find(rec.output.id());
      if (it == grads.end()) continue;
      Tensor g = it->second;
      if (!source_ids.count(rec.output.id())) grads.erase(it);
      in_grads = standard_gradient(rec, g, needs);
    }
    accumulate(rec, in_grads, needs, grads);
  }

  std::vector<Tensor> out;
  for (const Tensor& src : sources) {
    auto it = relevant.count(src.id()) ? grads.find(src.id()) : grads.end();
    if (it != grads.end())
      out.push_back(it->second);
    else if (unconnected == UnconnectedGradients::kZero)
      out.push_back(zeros_like(src));
    else
      out.push_back(Tensor());
  }
  if (!s.persistent) {
    s.records.clear();
    s.records.shrink_to_fit();
  }
  return out;
}

}  // namespace kiln
