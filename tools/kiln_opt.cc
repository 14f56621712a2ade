// kiln-opt: runs graph-optimization passes over a kiln IR file and prints the result.
//
//   kiln-opt FILE.kir [--passes=a,b,c | --pipeline=default|optimize] [--verify] [--timings]
//            [-o OUT.kir]
//   kiln-opt --list-passes
//
// Parses FILE (`-` reads stdin), verifies it, runs the passes (each once, in the order given)
// or a pipeline (default: passes::default_pipeline; optimize: passes::optimize_pipeline), and
// prints the resulting IR to stdout, or writes it to OUT atomically (-o). Options are CLI11's
// (`--passes=a,b` or `--passes a,b`); exit codes and messages follow tools/cli_conventions.h:
// `kiln-opt: error: ...`, 1 for a failure (a missing file, a parse or verifier error, a pass
// error), 2 for a usage error (an unknown option, pass or pipeline; --passes with --pipeline).
// The pipeline knobs of docs/debugging.md (KILN_DISABLE_PASSES, KILN_VERIFY, KILN_DUMP_IR,
// KILN_DUMP_PASSES) apply.
//
// Links ir/, runtime/ and passes/ only (never the frontend), so the pass tests under
// tests/passes/ build without it.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/file_io.h"
#include "kiln/version.h"
#include "tools/cli_conventions.h"

namespace {

namespace passes = kiln::passes;

struct Args {
  std::string file, output = "-", passes, pipeline;
  bool verify = false, timings = false;
};

std::vector<std::string> pass_names(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (comma != 0) names.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return names;
}

// --passes: every name is a registered pass (else the message lists the known ones).
std::string check_pass_names(const std::string& list) {
  for (const std::string& name : pass_names(list)) {
    try {
      passes::create_pass(name);
    } catch (const kiln::Error& e) {
      return e.what();
    }
  }
  return "";
}

std::unique_ptr<kiln::ir::Graph> read_graph(const std::string& file) {
  if (file != "-") return kiln::ir::parse_graph_file(file);
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  return kiln::ir::parse_graph(text, "<stdin>");
}

passes::PassPipeline build_pipeline(const Args& a, passes::PipelineOptions options) {
  if (a.pipeline == "optimize") return passes::optimize_pipeline(options);
  if (a.pipeline == "default") return passes::default_pipeline(options);
  passes::PassPipeline p(std::move(options));
  for (const std::string& name : pass_names(a.passes)) p.add(passes::create_pass(name));
  return p;
}

void run(const Args& a) {
  passes::PipelineOptions options = passes::PipelineOptions::from_environment();
  if (a.verify) options.verify = true;
  passes::PassPipeline pipeline = build_pipeline(a, std::move(options));
  std::unique_ptr<kiln::ir::Graph> g = read_graph(a.file);
  kiln::ir::verify_graph(*g);
  pipeline.run(*g);
  if (a.verify) kiln::ir::verify_graph(*g);
  const std::string text = kiln::ir::print_graph(*g);
  if (a.output == "-") {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  } else {
    kiln::runtime::write_file_atomically(a.output, text);
  }
  if (a.timings) {
    std::fputs(pipeline.timings_table().c_str(), stderr);
    std::fputs(("\nstatistics\n" + pipeline.statistics_table()).c_str(), stderr);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Parses a kiln IR file, verifies it, runs graph passes over it and prints the result.\n"
      "Knobs: KILN_DISABLE_PASSES=a,b KILN_VERIFY=0|1 KILN_DUMP_IR=DIR KILN_DUMP_PASSES=REGEX",
      "kiln-opt"};
  kiln::tools::apply_cli_conventions(app);
  app.set_version_flag("--version", "kiln-opt (kiln " + std::string(kiln::kVersion) + ")",
                       "print the version and exit");
  Args a;
  app.add_option("file", a.file, "the IR file (.kir, docs/ir.md); - reads stdin")->required();
  app.add_option("-o,--output", a.output,
                 "where the resulting IR goes (written atomically); - is stdout");
  CLI::Option* passes_opt =
      app.add_option("--passes", a.passes,
                     "run these passes once each, in this order (comma-separated; "
                     "--list-passes names them)")
          ->check(CLI::Validator(check_pass_names, "PASS,...", "pass names"));
  app.add_option("--pipeline", a.pipeline,
                 "run a pipeline instead: default (fixed point of algebraic-simplify, "
                 "constant-fold, cse, dce) or optimize (default, then hoist-loop-transposes, "
                 "split-reductions, lower-assignments, fusion, schedule-last-uses and "
                 "schedule-collectives)")
      ->check(CLI::IsMember({"default", "optimize"}))
      ->excludes(passes_opt);
  app.add_flag("--verify", a.verify,
               "verify the graph after every pass that changes it (KILN_VERIFY=1 does too)");
  app.add_flag("--timings", a.timings, "print per-pass timings and statistics to stderr");
  app.add_flag_callback(
         "--list-passes",
         [] {
           for (std::string_view n : passes::registered_pass_names()) fmt::print("{}\n", n);
           throw CLI::Success();
         },
         "print the known passes and exit")
      ->trigger_on_parse();
  return kiln::tools::run_cli(app, "kiln-opt", argc, argv, [&a] { run(a); });
}
