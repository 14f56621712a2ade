#include "kiln/frontend/function/dump_stages.h"

#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <set>

#include "kiln/frontend/function/report.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/file_io.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"

namespace kiln::detail {
namespace {

std::atomic<int> g_dump_counter{0};
std::atomic<int> g_compiled_counter{0};
std::atomic<int> g_report_counter{0};

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
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    runtime::write_file_atomically((out / "traced.kir").string(), ir::print_graph(traced));
  } catch (const Error& e) {
    log_warning(fmt::format("KILN_DUMP_IR: dumping the traced graph @{} to {} failed: {}",
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

void dump_compiled_form(const CompiledForm& form, const std::string& dir) {
  std::filesystem::path out(dir);
  const ir::Graph& optimized = form.graph(Stage::kOptimized);
  try {
    std::error_code ec;
    std::filesystem::create_directories(out / "kernels", ec);
    runtime::write_file_atomically((out / "optimized.kir").string(),
                                   form.ir_text(Stage::kOptimized));
    runtime::write_file_atomically((out / "memory_plan.txt").string(), form.memory_plan_text());
    runtime::write_file_atomically((out / "kernels.txt").string(),
                                   form.summary() + form.kernels_table());
    std::string timings;
    for (const passes::PassTiming& t : form.pass_timings())
      timings += fmt::format("{:<24} runs {:>3} changed {:>3} {:>8} us\n", t.name, t.runs,
                             t.changed, t.total_us);
    timings += "\nstatistics\n" + passes::statistics_table(form.pass_timings());
    runtime::write_file_atomically((out / "passes.txt").string(), timings);
    std::set<std::string> used;
    for (size_t i = 0; i < form.kernels().size(); ++i) {
      std::string base = file_name_for(form.kernels()[i].name);
      for (int n = 1; !used.insert(base).second; ++n)
        base = fmt::format("{}.{}", file_name_for(form.kernels()[i].name), n);
      std::filesystem::path path = out / "kernels" / base;
      runtime::write_file_atomically(path.string() + ".ll", form.kernel_llvm_ir(i));
      runtime::write_file_atomically(path.string() + ".s", form.kernel_assembly(i));
    }
  } catch (const Error& e) {
    log_warning(fmt::format("KILN_DUMP_IR: dumping the compiled form of @{} to {} failed: {}",
                            optimized.name(), out.string(), e.what()));
  }
}

void report_compiled_form(const CompiledForm& form, const std::string& function) {
  std::optional<std::string> dir = runtime::knobs::report_dir();
  if (!dir) return;
  std::filesystem::path path =
      std::filesystem::path(*dir) /
      fmt::format("{}.{}.html", file_name_for(function), g_report_counter.fetch_add(1));
  try {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    write_report(form, path.string(), {.title = function});
  } catch (const Error& e) {
    log_warning(fmt::format("KILN_REPORT: writing the report of @{} to {} failed: {}", function,
                            path.string(), e.what()));
  }
}

}  // namespace kiln::detail
