// The `kiln` program: prints its version and runs subcommands (see `kiln --help`).
#include <iostream>

#include "kiln/codegen/host_target.h"
#include "kiln/codegen/target.h"
#include "kiln/kiln.h"
#include "tools/commands.h"

namespace {

void print_version() {
  std::string target = kiln::codegen::target_cpu();  // kiln::Error for a bad KILN_TARGET_CPU
  std::cout << "kiln " << kiln::kVersion << " (LLVM " << kiln::codegen::llvm_version()
            << ", host CPU " << kiln::codegen::host_cpu_name() << ", kernels for " << target << ", "
            << kiln::num_threads() << " threads)\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: a C++ deep-learning library and graph compiler"};
  app.set_version_flag("--version", [] {
    print_version();
    return std::string();
  });
  // Set as soon as it is parsed: before --version prints and before any subcommand runs.
  app.add_option_function<std::string>(
         "--target-cpu", [](const std::string& cpu) { kiln::codegen::set_target_cpu(cpu); },
         "the CPU JIT kernels are generated for: native (default), x86-64-v2, x86-64-v3, "
         "x86-64-v4 or an LLVM CPU name; overrides KILN_TARGET_CPU")
      ->trigger_on_parse();
  kiln::tools::add_demo_command(app);
  kiln::tools::add_ops_command(app);
  kiln::tools::add_train_command(app);
  kiln::tools::add_dump_ir_command(app);
  kiln::tools::add_run_command(app);
  kiln::tools::add_predict_command(app);
  kiln::tools::add_generate_command(app);
  kiln::tools::add_bench_command(app);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      // No subcommand: version and the eager demo (the README's main job for now).
      print_version();
      kiln::tools::run_demo();
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
