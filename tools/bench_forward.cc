// `kiln bench ARGS`: replaces this process by the `kiln-bench` program that lies beside the
// running `kiln` (the build's tools/ folder, or the installed bin/), with ARGS. Without it, a
// kiln::Error says how to build it.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

[[noreturn]] void run_kiln_bench(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw Error("kiln bench: cannot find the running kiln program (/proc/self/exe: " +
                ec.message() + "); run the kiln-bench program directly");
  const fs::path program = self.parent_path() / "kiln-bench";
  if (!fs::exists(program))
    throw Error("kiln bench runs the kiln-bench program, which is not built (looked for " +
                program.string() +
                "): build it with `cmake --build build --target kiln_bench_program` "
                "(scripts/test.sh builds it)");
  std::vector<std::string> words = {"kiln-bench"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  ::execv(program.c_str(), argv.data());
  throw Error("kiln bench: cannot run " + program.string() + ": " + std::strerror(errno));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "eager vs compiled vs hand-written C++ on training steps and fused kernels (runs the "
      "kiln-bench program; `kiln bench --help` lists its options)");
  cmd->prefix_command();  // every argument after `bench` goes to kiln-bench, --help included
  cmd->set_help_flag();
  cmd->callback([cmd] { run_kiln_bench(cmd->remaining()); });
}

}  // namespace kiln::tools
