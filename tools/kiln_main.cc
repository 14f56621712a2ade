// The `kiln` program: subcommands (see `kiln --help`; `kiln` alone prints the same help), with
// the conventions of tools/cli_conventions.h (exit codes 0, 1 for a failure, 2 for a usage
// error).
#include <iostream>

#include "kiln/codegen/host_target.h"
#include "kiln/codegen/target.h"
#include "kiln/kiln.h"
#include "tools/cli_conventions.h"
#include "tools/commands.h"

namespace {

// One line: "kiln 0.1.0 (LLVM 19.1.7, host CPU znver4, kernels for native, 2 threads)".
std::string version_text() {
  std::string target = kiln::codegen::target_cpu();  // kiln::Error for a bad KILN_TARGET_CPU
  return "kiln " + std::string(kiln::kVersion) + " (LLVM " + kiln::codegen::llvm_version() +
         ", host CPU " + kiln::codegen::host_cpu_name() + ", kernels for " + target + ", " +
         std::to_string(kiln::num_threads()) + " threads)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: a C++ deep-learning library and graph compiler", "kiln"};
  kiln::tools::apply_cli_conventions(app);
  // CLI11 prints what the function returns (it used to print here and return "", hence a
  // blank line after the version).
  app.set_version_flag("--version", version_text,
                       "print kiln's version, LLVM's, the host CPU, the kernels' target CPU and "
                       "the thread count, and exit");
  // Set as soon as it is parsed: before --version prints and before any subcommand runs.
  app.add_option_function<std::string>(
         "--target-cpu",
         [](const std::string& cpu) {
           try {
             kiln::codegen::set_target_cpu(cpu);
           } catch (const kiln::Error& e) {
             throw CLI::ValidationError("--target-cpu", e.what());  // a bad value: exit 2
           }
         },
         "the CPU JIT kernels are generated for: native, x86-64-v2, x86-64-v3, x86-64-v4 or an "
         "LLVM CPU name; overrides KILN_TARGET_CPU")
      ->default_str("native, or KILN_TARGET_CPU")
      ->trigger_on_parse();
  kiln::tools::add_train_command(app);
  kiln::tools::add_predict_command(app);
  kiln::tools::add_generate_command(app);
  kiln::tools::add_dump_ir_command(app);
  kiln::tools::add_report_command(app);
  kiln::tools::add_run_command(app);
  kiln::tools::add_bench_command(app);
  kiln::tools::add_gemm_plan_command(app);
  kiln::tools::add_tune_command(app);
  kiln::tools::add_ops_command(app);
  kiln::tools::add_op_api_command(app);
  kiln::tools::add_demo_command(app);
  return kiln::tools::run_cli(app, "kiln", argc, argv, [&app] {
    if (app.get_subcommands().empty()) std::cout << app.help();  // `kiln` alone: the help
  });
}
