// kiln-opt: runs graph-optimization passes over a kiln IR file and prints the result.
//
//   kiln-opt FILE.kir [--passes=a,b,c | --pipeline=default|optimize] [--verify] [--timings]
//
// Parses FILE (`-` reads stdin), verifies it, runs the passes (each once, in the order given)
// or a pipeline (default: passes::default_pipeline; optimize: passes::optimize_pipeline), and
// prints the resulting IR to stdout. Errors go to stderr as `kiln-opt: error: ...` with exit
// code 1. The pipeline knobs of docs/debugging.md (KILN_DISABLE_PASSES, KILN_VERIFY, KILN_DUMP_IR,
// KILN_DUMP_PASSES) apply.
//
// Links ir/, runtime/ and passes/ only (never the frontend), so the pass tests under
// tests/passes/ build without it.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"

namespace {

using kiln::Error;
namespace passes = kiln::passes;

constexpr std::string_view kUsage =
    "usage: kiln-opt FILE.kir [--passes=a,b,c | --pipeline=default|optimize] [--verify] "
    "[--timings]\n"
    "\n"
    "Parses FILE (- for stdin), verifies it, runs the passes and prints the resulting IR.\n"
    "  --passes=a,b,c     run these passes once each, in this order\n"
    "  --pipeline=default run the default pipeline (fixed point of algebraic-simplify,\n"
    "                     constant-fold, cse, dce)\n"
    "  --pipeline=optimize the default pipeline, then lower-assignments and fusion\n"
    "  --verify           verify the graph after every pass that changes it\n"
    "  --timings          print per-pass timings to stderr\n"
    "  --list-passes      print the known passes and exit\n"
    "Knobs: KILN_DISABLE_PASSES=a,b KILN_VERIFY=0|1 KILN_DUMP_IR=DIR KILN_DUMP_PASSES=REGEX\n";

struct Args {
  std::string file;
  std::optional<std::string> passes;
  std::optional<std::string> pipeline;
  bool verify = false;
  bool timings = false;
  bool help = false;
  bool list_passes = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  auto value_of = [](std::string_view arg, std::string_view flag) -> std::optional<std::string> {
    if (arg.substr(0, flag.size()) != flag) return std::nullopt;
    return std::string(arg.substr(flag.size()));
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      a.help = true;
    } else if (arg == "--list-passes") {
      a.list_passes = true;
    } else if (arg == "--verify") {
      a.verify = true;
    } else if (arg == "--timings") {
      a.timings = true;
    } else if (auto v = value_of(arg, "--passes=")) {
      a.passes = *v;
    } else if (auto v = value_of(arg, "--pipeline=")) {
      a.pipeline = *v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw Error(fmt::format("unknown option \"{}\" (see kiln-opt --help)", arg));
    } else if (a.file.empty()) {
      a.file = std::string(arg);
    } else {
      throw Error(fmt::format("more than one input file (\"{}\" and \"{}\")", a.file, arg));
    }
  }
  if (a.help || a.list_passes) return a;
  if (a.file.empty()) throw Error("no input file (use - for stdin; see kiln-opt --help)");
  if (a.passes && a.pipeline) throw Error("give either --passes or --pipeline, not both");
  return a;
}

std::unique_ptr<kiln::ir::Graph> read_graph(const std::string& file) {
  if (file != "-") return kiln::ir::parse_graph_file(file);
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  return kiln::ir::parse_graph(text, "<stdin>");
}

passes::PassPipeline build_pipeline(const Args& a, passes::PipelineOptions options) {
  if (a.pipeline) {
    if (*a.pipeline == "optimize") return passes::optimize_pipeline(options);
    if (*a.pipeline != "default")
      throw Error(
          fmt::format("unknown pipeline \"{}\" (known pipelines: default, optimize)", *a.pipeline));
    return passes::default_pipeline(options);
  }
  passes::PassPipeline p(std::move(options));
  const std::string names = a.passes.value_or("");
  std::string_view list = names;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (name.empty()) continue;
    p.add(passes::create_pass(name));
  }
  return p;
}

int run(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  if (a.help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  if (a.list_passes) {
    for (std::string_view n : passes::registered_pass_names()) fmt::print("{}\n", n);
    return 0;
  }
  passes::PipelineOptions options = passes::PipelineOptions::from_environment();
  if (a.verify) options.verify = true;
  passes::PassPipeline pipeline = build_pipeline(a, std::move(options));
  std::unique_ptr<kiln::ir::Graph> g = read_graph(a.file);
  kiln::ir::verify_graph(*g);
  pipeline.run(*g);
  if (a.verify) kiln::ir::verify_graph(*g);
  std::fputs(kiln::ir::print_graph(*g).c_str(), stdout);
  std::fflush(stdout);
  if (a.timings) std::fputs(pipeline.timings_table().c_str(), stderr);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "kiln-opt: error: {}\n", e.what());
    return 1;
  }
}
