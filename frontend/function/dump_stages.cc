#include "frontend/function/dump_stages.h"

#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <filesystem>

#include "codegen/compile_graph.h"
#include "frontend/io/file_util.h"
#include "ir/printer.h"
#include "passes/optimize.h"
#include "runtime/knobs.h"
#include "runtime/log.h"

namespace kiln::detail {
namespace {

std::atomic<int> g_dump_counter{0};
std::atomic<int> g_compiled_counter{0};

std::string file_name_for(std::string name) {
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return name.empty() ? std::string("function") : name;
}

}  // namespace

void dump_trace_stages(const ir::Graph& traced) {
  std::optional<std::string> dir = runtime::knobs::dump_ir_dir();
  if (!dir) return;
  std::filesystem::path out =
      std::filesystem::path(*dir) /
      fmt::format("{}.{}", file_name_for(traced.name()), g_dump_counter.fetch_add(1));
  // A debugging aid must not break the program: failures become a warning.
  try {
    passes::PipelineOptions options = passes::PipelineOptions::from_environment();
    options.dump_dir = out.string();
    passes::OptimizedGraph optimized = passes::optimize_copy(traced, options);
    std::string plan = optimized.summary();
    if (optimized.plan) plan += optimized.plan->to_table(*optimized.graph);
    io::write_file_atomically((out / "memory_plan.txt").string(), plan);
  } catch (const Error& e) {
    log_warning(fmt::format("KILN_DUMP_IR: dumping the stages of @{} to {} failed: {}",
                            traced.name(), out.string(), e.what()));
  }
}

std::optional<std::string> compiled_dump_dir(const std::string& function) {
  std::optional<std::string> dir = runtime::knobs::dump_ir_dir();
  if (!dir) return std::nullopt;
  return (std::filesystem::path(*dir) /
          fmt::format("{}.compiled.{}", file_name_for(function), g_compiled_counter.fetch_add(1)))
      .string();
}

void dump_compiled_kernels(const ir::Graph& optimized, const std::string& dir) {
  std::filesystem::path out(dir);
  try {
    std::error_code ec;
    std::filesystem::create_directories(out / "kernels", ec);
    io::write_file_atomically((out / "optimized.kir").string(), ir::print_graph(optimized));
    std::vector<std::unique_ptr<ir::Graph>> owned;
    for (const codegen::KernelRequest& r : codegen::kernel_requests(optimized, owned)) {
      std::filesystem::path base = out / "kernels" / file_name_for(r.name);
      io::write_file_atomically(base.string() + ".ll", codegen::kernel_llvm_ir(r));
      io::write_file_atomically(base.string() + ".s", codegen::kernel_assembly(r));
    }
  } catch (const Error& e) {
    log_warning(fmt::format("KILN_DUMP_IR: dumping the kernels of @{} to {} failed: {}",
                            optimized.name(), out.string(), e.what()));
  }
}

}  // namespace kiln::detail
