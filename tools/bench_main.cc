// The `kiln-bench` program: what `kiln bench` runs (tools/bench_command.cc). It is a program of
// its own so that building `kiln` does not compile the benchmark workloads and their
// hand-written baselines (bench/suite/); `kiln bench ARGS` runs it with ARGS
// (tools/bench_forward.cc), and scripts/test.sh builds it.
#include "tools/cli_conventions.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kiln bench: eager vs compiled vs hand-written C++ on training steps and fused "
      "kernels",
      "kiln bench"};
  kiln::tools::apply_cli_conventions(app);
  kiln::tools::add_bench_options(app);
  return kiln::tools::run_cli(app, "kiln bench", argc, argv);
}
