#include "kiln/frontend/function/concrete_function.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "kiln/frontend/function/dump_stages.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/reference_executor.h"

namespace kiln {

struct ConcreteFunction::Impl {
  std::shared_ptr<const ir::Graph> graph;
  std::vector<Variable> variables;  // parallel to graph->variables()
  std::optional<ExecutionMode> mode;
  // Compilation results by argument shapes.
  mutable std::mutex mutex;
  mutable std::map<std::vector<std::vector<int64_t>>, CompiledForm> forms;
  mutable CompileStats stats;
  // Held by calls that write variables.
  mutable std::mutex run_mutex;

  CompiledForm form_for(const std::vector<TensorType>& types) const;
};

const char* execution_mode_name(ExecutionMode mode) {
  return mode == ExecutionMode::kCompiled ? "compiled" : "reference";
}

ExecutionMode parse_execution_mode(const std::string& name) {
  if (name == "compiled") return ExecutionMode::kCompiled;
  if (name == "reference") return ExecutionMode::kReference;
  throw Error(
      fmt::format("unknown execution mode \"{}\"; use \"compiled\" or \"reference\"", name));
}

namespace {
std::atomic<int> g_default_mode{-1};  // -1: not read from the environment yet
}  // namespace

ExecutionMode default_execution_mode() {
  int m = g_default_mode.load();
  if (m < 0) {
    std::optional<std::string> knob = runtime::knobs::execution_mode();
    try {
      m = int(knob ? parse_execution_mode(*knob) : ExecutionMode::kCompiled);
    } catch (const Error& e) {
      throw Error(fmt::format("KILN_EXECUTION_MODE: {}", e.what()));
    }
    g_default_mode.store(m);
  }
  return ExecutionMode(m);
}

void set_default_execution_mode(ExecutionMode mode) { g_default_mode.store(int(mode)); }

CompiledForm ConcreteFunction::Impl::form_for(const std::vector<TensorType>& types) const {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorType& t : types)
    shapes.emplace_back(t.shape.dims().begin(), t.shape.dims().end());
  std::lock_guard<std::mutex> lock(mutex);
  auto it = forms.find(shapes);
  if (it != forms.end()) return it->second;
  auto start = std::chrono::steady_clock::now();
  passes::PipelineOptions options = passes::PipelineOptions::from_environment();
  std::optional<std::string> dump_dir = detail::compiled_dump_dir(graph->name());
  options.dump_dir = dump_dir.value_or("");
  CompiledForm form = CompiledForm::compile(graph, types, options);
  if (dump_dir) detail::dump_compiled_form(form, *dump_dir);
  detail::report_compiled_form(form, graph->name());
  stats.compile_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats.executables;
  return forms.emplace(shapes, std::move(form)).first->second;
}

ConcreteFunction::ConcreteFunction(std::shared_ptr<const ir::Graph> graph,
                                   std::vector<Variable> variables,
                                   std::optional<ExecutionMode> mode) {
  KILN_ASSERT(graph && variables.size() == graph->variables().size(),
              "ConcreteFunction: the variable list must match the graph's registry");
  auto impl = std::make_shared<Impl>();
  impl->graph = std::move(graph);
  impl->variables = std::move(variables);
  impl->mode = mode;
  impl_ = std::move(impl);
}

ExecutionMode ConcreteFunction::mode() const {
  if (!impl_) throw Error("ConcreteFunction: the handle is empty (default-constructed)");
  return impl_->mode.value_or(default_execution_mode());
}

CompileStats ConcreteFunction::compile_stats() const {
  if (!impl_) throw Error("ConcreteFunction: the handle is empty (default-constructed)");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

const std::string& ConcreteFunction::name() const { return graph().name(); }

const ir::Graph& ConcreteFunction::graph() const {
  if (!impl_) throw Error("ConcreteFunction: the handle is empty (default-constructed)");
  return *impl_->graph;
}

std::shared_ptr<const ir::Graph> ConcreteFunction::graph_ptr() const {
  if (!impl_) throw Error("ConcreteFunction: the handle is empty");
  return impl_->graph;
}

std::vector<TensorType> ConcreteFunction::input_types() const { return graph().parameter_types(); }
std::vector<TensorType> ConcreteFunction::output_types() const { return graph().output_types(); }

std::vector<VariableUse> ConcreteFunction::variables() const {
  const ir::Graph& g = graph();
  std::vector<VariableUse> out;
  for (size_t i = 0; i < impl_->variables.size(); ++i)
    out.push_back({impl_->variables[i], g.variable(i).read, g.variable(i).written});
  return out;
}

std::string ConcreteFunction::ir_text(Stage stage) const {
  if (stage == Stage::kTraced) return ir::print_graph(graph());
  return compiled_form().ir_text(stage);
}

CompiledForm ConcreteFunction::compiled_form(const std::vector<Tensor>& args) const {
  check_arguments(name(), input_types(), args);
  std::vector<TensorType> types;
  for (const Tensor& t : args) types.push_back(t.type());
  return impl_->form_for(types);
}

CompiledForm ConcreteFunction::compiled_form(const std::vector<TensorType>& argument_types) const {
  const std::vector<TensorType> want = input_types();
  if (argument_types.size() != want.size())
    throw Error(fmt::format("function \"{}\" takes {} tensor argument(s), got {} type(s)", name(),
                            want.size(), argument_types.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorType& got = argument_types[i];
    bool ok = got.dtype == want[i].dtype && got.shape.rank() == want[i].shape.rank();
    for (int d = 0; ok && d < got.shape.rank(); ++d)
      ok = got.shape[d] != kUnknownDim &&
           (want[i].shape[d] == kUnknownDim || want[i].shape[d] == got.shape[d]);
    if (!ok)
      throw Error(fmt::format(
          "function \"{}\": argument {} must be {} with every dimension known (? = any size), "
          "got {}; give the type the arguments will have",
          name(), i, want[i].to_string(), got.to_string()));
  }
  return impl_->form_for(argument_types);
}

CompiledForm ConcreteFunction::compiled_form() const {
  std::vector<TensorType> types = input_types();
  for (size_t i = 0; i < types.size(); ++i)
    if (!types[i].shape.is_fully_known())
      throw Error(fmt::format(
          "function \"{}\": argument {} is {}; its compiled form depends on the unknown "
          "dimensions: call compiled_form(args) (or with argument types) instead",
          name(), i, types[i].to_string()));
  return impl_->form_for(types);
}

namespace {
bool conforms(const TensorType& want, const TensorType& got) {
  if (want.dtype != got.dtype || want.shape.rank() != got.shape.rank()) return false;
  for (int i = 0; i < want.shape.rank(); ++i)
    if (want.shape[i] != kUnknownDim && want.shape[i] != got.shape[i]) return false;
  return true;
}
}  // namespace

void check_arguments(const std::string& function, const std::vector<TensorType>& types,
                     const std::vector<Tensor>& args) {
  if (args.size() != types.size())
    throw Error(fmt::format("function \"{}\" takes {} tensor argument(s), got {}", function,
                            types.size(), args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined())
      throw Error(fmt::format("function \"{}\": argument {} is an undefined tensor", function, i));
    if (!conforms(types[i], args[i].type()))
      throw Error(fmt::format(
          "function \"{}\": argument {} must be {} (? = any size), got {}; pass a tensor of "
          "that type or trace the function for this signature",
          function, i, types[i].to_string(), args[i].type().to_string()));
  }
}

std::vector<Tensor> ConcreteFunction::operator()(const std::vector<Tensor>& args) const {
  return run(args, mode());
}

std::vector<Tensor> ConcreteFunction::run(const std::vector<Tensor>& args,
                                          ExecutionMode mode) const {
  const ir::Graph& g = graph();
  if (detail::tracing())
    throw Error(fmt::format(
        "concrete function \"{}\" was called inside a trace; call the kiln::function object "
        "instead (inside another function it traces inline)",
        g.name()));
  check_arguments(g.name(), g.parameter_types(), args);
  std::vector<runtime::Array> in;
  in.reserve(args.size());
  for (const Tensor& t : args) in.push_back(t.array());
  // Calls that write variables are serialised (each reads the variables the previous one
  // wrote); a written variable whose value no other tensor shares is donated, so compiled
  // kernels update it in place (runtime/executable.h).
  std::unique_lock<std::mutex> writing(impl_->run_mutex, std::defer_lock);
  std::vector<bool> donate(impl_->variables.size(), false);
  for (size_t i = 0; i < donate.size(); ++i)
    if (g.variable(i).written) {
      if (!writing.owns_lock()) writing.lock();
      donate[i] = detail::value_is_unshared(impl_->variables[i]);
    }
  std::vector<runtime::Array> vars;
  vars.reserve(impl_->variables.size());
  for (const Variable& v : impl_->variables) vars.push_back(v.value().array());
  std::vector<runtime::Array> out;
  if (mode == ExecutionMode::kCompiled) {
    std::vector<TensorType> types;
    for (const Tensor& t : args) types.push_back(t.type());
    out = impl_->form_for(types).executable()->run(in, vars, donate);
  } else {
    out = runtime::execute_reference(g, in, vars);
  }
  for (size_t i = 0; i < vars.size(); ++i)
    if (g.variable(i).written) Variable(impl_->variables[i]).assign(Tensor(vars[i]));
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (runtime::Array& a : out) result.emplace_back(std::move(a));
  return result;
}

}  // namespace kiln
