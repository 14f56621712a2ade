#include "kiln/frontend/function/compiled_form.h"

#include <fmt/format.h>

#include "kiln/ir/printer.h"
#include "kiln/passes/optimize.h"

namespace kiln {

struct CompiledForm::Impl {
  std::shared_ptr<const ir::Graph> traced;
  std::vector<TensorType> argument_types;
  codegen::CompiledFunction compiled;
  std::vector<KernelForm> kernels;
};

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kTraced:
      return "traced";
    case Stage::kSpecialized:
      return "specialized";
    case Stage::kOptimized:
      return "optimized";
  }
  return "?";
}

Stage parse_stage(const std::string& name) {
  for (Stage s : {Stage::kTraced, Stage::kSpecialized, Stage::kOptimized})
    if (name == stage_name(s)) return s;
  throw Error(fmt::format(
      "unknown IR stage \"{}\"; use \"traced\", \"specialized\" or \"optimized\"", name));
}

CompiledForm CompiledForm::compile(std::shared_ptr<const ir::Graph> traced,
                                   const std::vector<TensorType>& argument_types,
                                   const passes::PipelineOptions& options) {
  KILN_ASSERT(traced != nullptr, "CompiledForm::compile: null graph");
  for (size_t i = 0; i < argument_types.size(); ++i)
    if (!argument_types[i].shape.is_fully_known())
      throw Error(fmt::format(
          "compiling @{}: argument {} is {} with unknown dimensions; compiled code is "
          "specialised to concrete shapes: pass tensors or types with every dimension known",
          traced->name(), i, argument_types[i].to_string()));
  auto impl = std::make_shared<Impl>();
  impl->traced = std::move(traced);
  impl->argument_types = argument_types;
  impl->compiled = codegen::compile_function(*impl->traced, argument_types, options);
  for (const codegen::KernelRecord& k : impl->compiled.code.kernels) {
    const codegen::CompiledKernel& c = k.compiled;
    impl->kernels.push_back({k.request.name, c.jit_symbol, codegen::kernel_source_name(c.source),
                             c.layout.iteration, c.layout.extent, c.lower_seconds,
                             c.optimize_seconds, c.emit_seconds});
  }
  CompiledForm form;
  form.impl_ = std::move(impl);
  return form;
}

const CompiledForm::Impl& CompiledForm::impl() const {
  if (!impl_) throw Error("CompiledForm: the handle is empty (default-constructed)");
  return *impl_;
}

const std::vector<TensorType>& CompiledForm::argument_types() const {
  return impl().argument_types;
}

const ir::Graph& CompiledForm::graph(Stage stage) const {
  const Impl& i = impl();
  switch (stage) {
    case Stage::kTraced:
      return *i.traced;
    case Stage::kSpecialized:
      return *i.compiled.specialized;
    case Stage::kOptimized:
      break;
  }
  return *i.compiled.optimized;
}

std::string CompiledForm::ir_text(Stage stage) const { return ir::print_graph(graph(stage)); }

const std::shared_ptr<const runtime::Executable>& CompiledForm::executable() const {
  return impl().compiled.code.executable;
}

const codegen::ArenaLayout& CompiledForm::arena_layout() const {
  return impl().compiled.code.arena;
}

std::string CompiledForm::memory_plan_text() const {
  return arena_layout().to_text(graph(Stage::kOptimized));
}

const std::vector<KernelForm>& CompiledForm::kernels() const { return impl().kernels; }

namespace {
const codegen::KernelRequest& request_at(const codegen::CompiledFunction& c, size_t i) {
  if (i >= c.code.kernels.size())
    throw Error(fmt::format("CompiledForm: kernel {} does not exist (the executable has {})", i,
                            c.code.kernels.size()));
  return c.code.kernels[i].request;
}
}  // namespace

std::string CompiledForm::kernel_llvm_ir(size_t i) const {
  return codegen::kernel_llvm_ir(request_at(impl().compiled, i));
}

std::string CompiledForm::kernel_assembly(size_t i) const {
  return codegen::kernel_assembly(request_at(impl().compiled, i));
}

std::string CompiledForm::kernels_table() const {
  std::string s = fmt::format("{:<40} {:<12} {:<6} {:>10} {:>10}\n", "kernel", "source", "loop",
                              "extent", "compile ms");
  for (const KernelForm& k : kernels())
    s += fmt::format("{:<40} {:<12} {:<6} {:>10} {:>10.3f}\n", k.name, k.source, k.iteration,
                     k.extent, k.compile_seconds() * 1e3);
  return s;
}

const std::vector<passes::PassTiming>& CompiledForm::pass_timings() const {
  return impl().compiled.pass_timings;
}

double CompiledForm::optimize_seconds() const { return impl().compiled.optimize_seconds; }
double CompiledForm::codegen_seconds() const { return impl().compiled.codegen_seconds; }

std::string CompiledForm::summary() const {
  passes::GraphCounts before = passes::count_graph(graph(Stage::kSpecialized));
  passes::GraphCounts after = passes::count_graph(graph(Stage::kOptimized));
  int compiled = 0;
  for (const KernelForm& k : kernels()) compiled += k.source == std::string("compiled");
  std::string s = fmt::format("# nodes {} -> {}, kernels {} -> {} ({} fusions)\n", before.nodes,
                              after.nodes, before.kernels, after.kernels, after.fusions);
  s += arena_layout().summary();
  s += fmt::format(
      "# compile {:.1f} ms: optimize {:.1f} ms, codegen {:.1f} ms ({} JIT kernels: {} compiled "
      "now, {} from the kernel caches)\n",
      compile_seconds() * 1e3, optimize_seconds() * 1e3, codegen_seconds() * 1e3, kernels().size(),
      compiled, int(kernels().size()) - compiled);
  return s;
}

}  // namespace kiln
